// Tests of the nn and conv families: softmax/log_softmax, layer_norm, rms_norm, dropout, the losses,
// batch_norm, conv2d and the pools. Values are checked against reference loops written here (or values worked
// out by hand), every error case is exercised, and every differentiable op is gradchecked in f64.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cfloat>
#include <cmath>
#include <functional>
#include <random>

#include "autograd/autograd.h"
#include "autograd/gradcheck.h"
#include "eager/philox.h"
#include "ops/api.h"
#include "ops/common.h"

using namespace kiln;

namespace {

std::vector<double> random_values(int64_t n, uint64_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

Tensor random_f64(const Shape& shape, uint64_t seed, double lo = -2.0, double hi = 2.0) {
  return Tensor::from_vector<double>(random_values(shape_numel(shape), seed, lo, hi), shape);
}
Tensor random_f32(const Shape& shape, uint64_t seed, double lo = -2.0, double hi = 2.0) {
  std::vector<double> d = random_values(shape_numel(shape), seed, lo, hi);
  return Tensor::from_vector<float>(std::vector<float>(d.begin(), d.end()), shape);
}
Tensor leaf(const Tensor& t) { return t.detach().set_requires_grad(true); }
Tensor i64(const std::vector<int64_t>& v, const Shape& shape) { return Tensor::from_vector<int64_t>(v, shape); }

void expect_close(const Tensor& t, const std::vector<double>& expected, double rtol = 1e-6, double atol = 1e-7) {
  std::vector<double> got = t.to_double_vector();
  ASSERT_EQ(got.size(), expected.size()) << t.str();
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i]) || std::isinf(expected[i])) {
      EXPECT_TRUE(std::isnan(expected[i]) ? std::isnan(got[i]) : got[i] == expected[i])
          << "element " << i << " of " << t.str() << ": got " << got[i] << ", want " << expected[i];
      continue;
    }
    EXPECT_NEAR(got[i], expected[i], atol + rtol * std::abs(expected[i])) << "element " << i << " of " << t.str();
  }
}

// Runs `f`, expecting a kiln::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected a kiln::Error mentioning '" << parts.front() << "'";
  } catch (const Error& e) {
    std::string m = e.what();
    for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

void expect_gradcheck(const DiffFn& f, const std::vector<Tensor>& inputs, GradcheckOptions opts = {}) {
  GradcheckResult r = gradcheck(f, inputs, opts);
  EXPECT_TRUE(r.ok) << r.message;
}

// The op's infer function (on meta tensors) must describe exactly what its kernel returns.
void expect_infer_matches(const Tensor& result, const OpId id, std::vector<IValue> args) {
  for (IValue& a : args)
    if (a.is_tensor() && a.tensor().defined()) a = Tensor::meta(a.tensor().meta());
  TensorMeta m = infer_meta(bind_args(op_info(id), args))[0];
  EXPECT_EQ(m.dtype, result.dtype());
  EXPECT_EQ(m.sizes, result.sizes());
}

// Reference softmax over `dim` of a row-major tensor of `shape`.
std::vector<double> softmax_reference(const std::vector<double>& x, const Shape& shape, int64_t dim, bool log) {
  int64_t n = shape[size_t(dim)], inner = 1;
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  int64_t outer = shape_numel(shape) / (n * inner);
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return size_t((o * n + k) * inner + i); };
      double mx = -INFINITY, total = 0;
      for (int64_t k = 0; k < n; ++k) mx = std::max(mx, x[at(k)]);
      for (int64_t k = 0; k < n; ++k) total += std::exp(x[at(k)] - mx);
      for (int64_t k = 0; k < n; ++k) y[at(k)] = log ? x[at(k)] - mx - std::log(total) : std::exp(x[at(k)] - mx) / total;
    }
  }
  return y;
}

}  // namespace

// ================================================================ softmax / log_softmax

TEST(NnSoftmax, MatchesReferenceOnEveryDim) {
  Shape shape{3, 4, 5};
  Tensor x = random_f32(shape, 1, -5, 5);
  std::vector<double> xv = x.to_double_vector();
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (bool log : {false, true}) {
      Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
      EXPECT_EQ(y.dtype(), DType::F32);
      EXPECT_EQ(y.sizes(), shape);
      expect_close(y, softmax_reference(xv, shape, dim, log), 2e-6, 1e-7);
    }
  }
  // negative dim, f64, a transposed (non-contiguous) input
  Tensor xd = random_f64({4, 6}, 2);
  Tensor t = transpose(xd, 0, 1);
  expect_close(softmax(t, -1), softmax_reference(contiguous(t).to_double_vector(), {6, 4}, 1, false), 1e-14, 1e-16);
  expect_close(log_softmax(t, 0), softmax_reference(contiguous(t).to_double_vector(), {6, 4}, 0, true), 1e-14, 1e-15);
}

TEST(NnSoftmax, LongRowsAreAccurate) {
  // long rows take the vectorised path; f32 rounding of x - max costs up to |x - max| * 2^-24 relative
  const int64_t n = 2000;
  Tensor x = random_f32({3, n}, 3, -20, 10);
  for (bool log : {false, true}) {
    Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
    std::vector<double> want = softmax_reference(x.to_double_vector(), {3, n}, 1, log);
    expect_close(y, want, log ? 1e-6 : 4e-6, log ? 1e-5 : 0);
  }
  // exp(v) / (1 + exp(v)) for v over [-103, 0], down to subnormal results: the second entry of softmax([0, v])
  std::vector<float> pairs;
  std::vector<double> want;
  for (int i = 0; i <= 1030; ++i) {
    double v = -103.0 + 0.1 * i;
    pairs.push_back(0.0f);
    pairs.push_back(float(v));
    want.push_back(1.0 / (1.0 + std::exp(double(float(v)))));
    want.push_back(std::exp(double(float(v))) / (1.0 + std::exp(double(float(v)))));
  }
  expect_close(softmax(Tensor::from_vector<float>(pairs, {1031, 2}), 1), want, 5e-7, 2e-45);
}

TEST(NnSoftmax, EdgeValues) {
  const double inf = INFINITY, nan = NAN;
  // an all -inf row and a row holding +inf are nan, as PyTorch; a NaN poisons its row only
  Tensor x = Tensor::from_vector<float>({-INFINITY, -INFINITY, INFINITY, 1, NAN, 0, 1, 2}, {4, 2});
  expect_close(softmax(x, 1), {nan, nan, nan, nan, nan, nan, 1 / (1 + std::exp(1.0)), 1 / (1 + std::exp(-1.0))});
  expect_close(log_softmax(x, 1), {nan, nan, nan, nan, nan, nan, -std::log1p(std::exp(1.0)), -std::log1p(std::exp(-1.0))});
  // -inf entries among finite ones get probability 0 (log: -inf)
  Tensor y = Tensor::from_vector<double>({-INFINITY, 0.0}, {2});
  expect_close(softmax(y, 0), {0, 1});
  EXPECT_EQ(log_softmax(y, 0).to_double_vector()[0], -inf);
  // 0-dim and empty inputs
  Tensor s = Tensor::scalar(3.5, DType::F32);
  EXPECT_EQ(softmax(s, 0).item<double>(), 1.0);
  EXPECT_EQ(log_softmax(s, -1).item<double>(), 0.0);
  EXPECT_EQ(softmax(s, 0).dim(), 0);
  Tensor e = Tensor::empty({0, 3});
  EXPECT_EQ(softmax(e, 1).sizes(), (Shape{0, 3}));
  EXPECT_EQ(log_softmax(Tensor::empty({3, 0}), 1).sizes(), (Shape{3, 0}));
}

TEST(NnSoftmax, DtypeArgumentAndLowPrecision) {
  Tensor xi = i64({1, 2, 3}, {3});
  Tensor y = softmax(xi, 0, DType::F32);
  EXPECT_EQ(y.dtype(), DType::F32);
  expect_close(y, softmax_reference({1, 2, 3}, {3}, 0, false), 1e-6);
  expect_error([&] { softmax(xi, 0); }, {"softmax", "floating", "i64"});
  expect_error([&] { log_softmax(xi, 0, DType::I32); }, {"log_softmax", "floating"});
  expect_error([&] { softmax(random_f32({2, 3}, 1), 2); }, {"softmax", "out of range"});
  // f32 input with dtype f64 computes in f64
  Tensor x = random_f32({2, 5}, 4);
  EXPECT_EQ(log_softmax(x, 1, DType::F64).dtype(), DType::F64);
  expect_close(log_softmax(x, 1, DType::F64), softmax_reference(x.to_double_vector(), {2, 5}, 1, true), 1e-14, 1e-15);
  // f16 and bf16 compute in f32 and round once
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor h = to(x, dt);
    Tensor r = softmax(h, 1);
    EXPECT_EQ(r.dtype(), dt);
    std::vector<double> ref = softmax_reference(h.to_double_vector(), {2, 5}, 1, false);
    expect_close(r, ref, dt == DType::F16 ? 1e-3 : 8e-3);
    // the dtype argument casts before the softmax
    EXPECT_EQ(softmax(x, 1, dt).dtype(), dt);
  }
}

TEST(NnSoftmax, DecompositionAgreesWithKernel) {
  Tensor x = random_f32({3, 7}, 5, -4, 4);
  for (OpId id : {OpId::softmax, OpId::log_softmax}) {
    for (int64_t dim : {0, 1}) {
      OpCall call = bind_args(op_info(id), {x, dim, std::nullopt});
      Tensor fast = op_info(id).kernel(call)[0];
      Tensor decomposed = op_info(id).decomp(call)[0];
      EXPECT_EQ(fast.dtype(), decomposed.dtype());
      expect_close(fast, decomposed.to_double_vector(), 1e-6, 1e-7);
      expect_infer_matches(fast, id, {x, dim, std::nullopt});
    }
  }
}

TEST(NnSoftmax, Gradcheck) {
  for (bool log : {false, true}) {
    auto f = [log](int64_t dim) {
      return [log, dim](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{log ? log_softmax(in[0], dim) : softmax(in[0], dim)};
      };
    };
    expect_gradcheck(f(1), {leaf(random_f64({3, 4}, 6))});
    expect_gradcheck(f(0), {leaf(random_f64({3, 4}, 7))});
    expect_gradcheck(f(-2), {leaf(random_f64({2, 3, 4}, 8))});
    expect_gradcheck(f(0), {leaf(transpose(random_f64({4, 3}, 9), 0, 1))});  // non-contiguous leaf
    expect_gradcheck(f(0), {leaf(Tensor::scalar(0.7, DType::F64))});
    expect_gradcheck(f(1), {leaf(random_f64({3, 1}, 10))});
    expect_gradcheck(f(1), {leaf(Tensor::empty({0, 3}, DType::F64))});
  }
  // the gradient through the dtype argument comes back in the input's dtype
  Tensor x = leaf(random_f32({2, 3}, 11));
  sum(softmax(x, 1, DType::F64)).backward();
  EXPECT_EQ(x.grad().dtype(), DType::F32);
  expect_close(x.grad(), {0, 0, 0, 0, 0, 0}, 0, 1e-6);  // softmax rows sum to 1: zero gradient
}

RC_GTEST_PROP(NnSoftmax, RowsSumToOneAndLogAgrees, ()) {
  const int64_t rows = *rc::gen::inRange<int64_t>(1, 5), cols = *rc::gen::inRange<int64_t>(1, 40);
  Tensor x = random_f32({rows, cols}, *rc::gen::inRange<uint64_t>(0, 1000), -30, 30);
  Tensor y = softmax(x, 1);
  std::vector<double> s = sum(y, IntList{1}, false, DType::F64).to_double_vector();
  for (double v : s) RC_ASSERT(std::abs(v - 1.0) < 1e-5);
  std::vector<double> a = log(y).to_double_vector(), b = log_softmax(x, 1).to_double_vector();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::isfinite(a[i])) RC_ASSERT(std::abs(a[i] - b[i]) < 1e-4 * (1 + std::abs(b[i])));
}

// ================================================================ layer_norm / rms_norm

TEST(NnNorm, LayerNormMatchesReference) {
  Shape shape{2, 3, 4};
  Tensor x = random_f64(shape, 20);
  Tensor w = random_f64({3, 4}, 21), b = random_f64({3, 4}, 22);
  std::vector<double> xv = x.to_double_vector(), wv = w.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> want(xv.size()), plain(xv.size());
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 12; ++i) m += xv[r * 12 + i] / 12;
    for (int i = 0; i < 12; ++i) v += (xv[r * 12 + i] - m) * (xv[r * 12 + i] - m) / 12;
    for (int i = 0; i < 12; ++i) {
      plain[r * 12 + i] = (xv[r * 12 + i] - m) / std::sqrt(v + 1e-5);
      want[r * 12 + i] = plain[r * 12 + i] * wv[i] + bv[i];
    }
  }
  expect_close(layer_norm(x, {3, 4}, w, b), want, 1e-12, 1e-12);
  expect_close(layer_norm(x, {3, 4}), plain, 1e-12, 1e-12);
  Tensor y = layer_norm(to(x, DType::F16), {4});
  EXPECT_EQ(y.dtype(), DType::F16);
  EXPECT_EQ(y.sizes(), shape);
  EXPECT_EQ(layer_norm(Tensor::empty({0, 4}), {4}).sizes(), (Shape{0, 4}));
}

TEST(NnNorm, LayerNormErrors) {
  Tensor x = random_f32({2, 3}, 23);
  expect_error([&] { layer_norm(x, {}); }, {"layer_norm", "normalized_shape", "at least 1-dimensional"});
  expect_error([&] { layer_norm(x, {2}); }, {"layer_norm", "[*, 2]", "[2, 3]"});
  expect_error([&] { layer_norm(x, {2, 3, 4}); }, {"layer_norm", "[*, 2, 3, 4]"});
  expect_error([&] { layer_norm(x, {3}, Tensor::empty({4})); }, {"layer_norm", "weight", "[4]", "[3]"});
  expect_error([&] { layer_norm(x, {3}, {}, Tensor::empty({2, 3})); }, {"layer_norm", "bias", "[2, 3]"});
  expect_error([&] { layer_norm(i64({1, 2}, {2}), {2}); }, {"layer_norm", "floating", "i64"});
}

TEST(NnNorm, LayerNormGradcheck) {
  auto f = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{layer_norm(in[0], {3}, in[1], in[2], 1e-5)}; };
  expect_gradcheck(f, {leaf(random_f64({4, 3}, 24)), leaf(random_f64({3}, 25)), leaf(random_f64({3}, 26))});
  expect_gradcheck(f, {leaf(transpose(random_f64({3, 4}, 27), 0, 1)), leaf(random_f64({3}, 28)), Tensor()});
  auto g = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{layer_norm(in[0], {2, 3})}; };
  expect_gradcheck(g, {leaf(random_f64({2, 2, 3}, 29))});
}

TEST(NnNorm, RmsNormMatchesReferenceAndDefaultEps) {
  Tensor x = random_f64({3, 5}, 30);
  Tensor w = random_f64({5}, 31);
  std::vector<double> xv = x.to_double_vector(), wv = w.to_double_vector(), want(15);
  for (int r = 0; r < 3; ++r) {
    double ms = 0;
    for (int i = 0; i < 5; ++i) ms += xv[r * 5 + i] * xv[r * 5 + i] / 5;
    for (int i = 0; i < 5; ++i) want[r * 5 + i] = xv[r * 5 + i] / std::sqrt(ms + 1e-6) * wv[i];
  }
  expect_close(rms_norm(x, {5}, w, 1e-6), want, 1e-12, 1e-12);
  // eps None: the epsilon of the compute dtype (f32 for f16/bf16/f32, f64 for f64)
  Tensor tiny = Tensor::from_vector<float>({1e-4f, 1e-4f}, {2});
  expect_close(rms_norm(tiny, {2}), std::vector<double>(2, 1e-4 / std::sqrt(1e-8 + FLT_EPSILON)), 1e-5);
  expect_close(rms_norm(to(tiny, DType::F64), {2}), std::vector<double>(2, 1e-4 / std::sqrt(1e-8 + DBL_EPSILON)), 1e-6);
  EXPECT_EQ(rms_norm(to(x, DType::BF16), {5}, to(w, DType::BF16)).dtype(), DType::BF16);
  expect_error([&] { rms_norm(x, {4}); }, {"rms_norm", "[*, 4]", "[3, 5]"});
  expect_error([&] { rms_norm(x, {5}, Tensor::empty({3})); }, {"rms_norm", "weight", "[3]"});
  expect_error([&] { rms_norm(x, {}); }, {"rms_norm", "at least 1-dimensional"});
}

TEST(NnNorm, RmsNormGradcheck) {
  auto f = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{rms_norm(in[0], {2, 3}, in[1], 1e-3)}; };
  expect_gradcheck(f, {leaf(random_f64({2, 2, 3}, 32)), leaf(random_f64({2, 3}, 33))});
  auto g = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{rms_norm(in[0], {4})}; };
  expect_gradcheck(g, {leaf(transpose(random_f64({4, 3}, 34), 0, 1))});
}

// ================================================================ dropout / mse_loss

TEST(NnDropout, IdentityZerosAndScaling) {
  Tensor x = random_f32({100, 50}, 40, 0.5, 2.0);
  // the identity cases return an alias of the input (PyTorch returns the input itself)
  for (Tensor y : {dropout(x, 0.3, false), dropout(x, 0.0, true)}) {
    EXPECT_EQ(y.storage(), x.storage());
    EXPECT_EQ(y.sizes(), x.sizes());
  }
  Tensor strided = transpose(x, 0, 1);
  EXPECT_EQ(dropout(strided, 0.5, false).strides(), strided.strides());
  Tensor special = Tensor::from_vector<float>({1, NAN, INFINITY}, {3});
  expect_close(dropout(special, 1.0, true), {0, NAN, NAN});  // x * 0, as PyTorch
  expect_error([&] { dropout(x, 1.5, true); }, {"dropout", "between 0 and 1", "1.5"});
  expect_error([&] { dropout(x, -0.1, false); }, {"dropout", "between 0 and 1"});
  manual_seed(7);
  Tensor y = dropout(x, 0.25, true);
  std::vector<double> xv = x.to_double_vector(), yv = y.to_double_vector();
  int64_t dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0) ++dropped;
    else EXPECT_NEAR(yv[i], xv[i] / 0.75, 1e-6 * xv[i]);
  }
  EXPECT_NEAR(double(dropped) / double(xv.size()), 0.25, 0.03);
}

TEST(NnDropout, GradientIsTheScaledMask) {
  Tensor x = leaf(random_f64({6, 7}, 41, 0.5, 2.0));
  manual_seed(3);
  Tensor y = dropout(x, 0.4, true);
  sum(y).backward();
  std::vector<double> g = x.grad().to_double_vector(), yv = y.to_double_vector();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], yv[i] == 0 ? 0.0 : 1 / 0.6, 1e-12);
  auto f = [](const std::vector<Tensor>& in) {
    manual_seed(11);  // the same mask on every evaluation
    return std::vector<Tensor>{dropout(in[0], 0.5, true)};
  };
  expect_gradcheck(f, {leaf(random_f64({3, 4}, 42))});
  for (auto [p, train] : {std::pair{0.0, true}, {0.5, false}, {1.0, true}}) {
    auto identity_or_zero = [p, train](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{dropout(in[0], p, train)};
    };
    expect_gradcheck(identity_or_zero, {leaf(transpose(random_f64({4, 3}, 43), 0, 1))});
  }
}

TEST(NnLoss, MseLossReductionsAndBroadcast) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor t = Tensor::from_vector<float>({0, 2, 5, 1}, {2, 2});
  expect_close(mse_loss(x, t, 0), {1, 0, 4, 9});
  expect_close(mse_loss(x, t), {3.5});
  expect_close(mse_loss(x, t, 2), {14});
  EXPECT_EQ(mse_loss(x, t).dim(), 0);
  expect_close(mse_loss(x, Tensor::from_vector<float>({1, 1}, {2}), 0), {0, 1, 4, 9});  // broadcast target
  EXPECT_TRUE(std::isnan(mse_loss(Tensor::empty({0}), Tensor::empty({0})).item<double>()));  // mean of nothing
  EXPECT_EQ(mse_loss(to(x, DType::F16), to(t, DType::F16)).dtype(), DType::F16);
  expect_error([&] { mse_loss(x, t, 3); }, {"mse_loss", "reduction 3"});
  expect_error([&] { mse_loss(i64({1}, {1}), i64({2}, {1})); }, {"mse_loss", "floating"});
  expect_error([&] { mse_loss(x, Tensor::empty({3})); }, {"[2, 2]", "[3]"});
  for (int64_t reduction : {0, 1, 2}) {
    auto f = [reduction](const std::vector<Tensor>& in) { return std::vector<Tensor>{mse_loss(in[0], in[1], reduction)}; };
    expect_gradcheck(f, {leaf(random_f64({3, 4}, 43)), leaf(random_f64({4}, 44))});
  }
}

// ================================================================ nll_loss / cross_entropy

namespace {

// Reference nll_loss over a [N, C, S] log-probability array (S = product of the spatial dims).
struct NllReference {
  std::vector<double> per_element;  // reduction none
  double total = 0, weight_total = 0;
};
NllReference nll_reference(const std::vector<double>& x, const std::vector<int64_t>& t, const std::vector<double>& w,
                           int64_t N, int64_t C, int64_t S, int64_t ignore) {
  NllReference r;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t s = 0; s < S; ++s) {
      int64_t c = t[size_t(n * S + s)];
      double loss = 0;
      if (c != ignore) {
        double wc = w.empty() ? 1.0 : w[size_t(c)];
        loss = -wc * x[size_t((n * C + c) * S + s)];
        r.weight_total += wc;
      }
      r.per_element.push_back(loss);
      r.total += loss;
    }
  }
  return r;
}

}  // namespace

TEST(NnLoss, NllLossMatchesReference) {
  Tensor x = random_f32({4, 3}, 50);
  Tensor t = i64({0, 2, -100, 1}, {4});
  Tensor w = Tensor::from_vector<float>({0.2f, 1.5f, 0.7f}, {3});
  std::vector<double> wv = w.to_double_vector();
  NllReference r = nll_reference(x.to_double_vector(), {0, 2, -100, 1}, wv, 4, 3, 1, -100);
  expect_close(nll_loss(x, t, w, 0), r.per_element);
  expect_close(nll_loss(x, t, w, 2), {r.total});
  expect_close(nll_loss(x, t, w, 1), {r.total / r.weight_total});
  NllReference u = nll_reference(x.to_double_vector(), {0, 2, -100, 1}, {}, 4, 3, 1, -100);
  expect_close(nll_loss(x, t), {u.total / 3});
  // ignore_index may be a valid class (and then -100 is out of bounds)
  expect_error([&] { nll_loss(x, t, {}, 1, 2); }, {"nll_loss", "-100", "out of bounds"});
  Tensor t2 = i64({0, 2, 2, 1}, {4});
  NllReference v = nll_reference(x.to_double_vector(), {0, 2, 2, 1}, {}, 4, 3, 1, 2);
  expect_close(nll_loss(x, t2, {}, 1, 2), {v.total / v.weight_total});
  // spatial [N, C, d1, d2] and unbatched [C]
  Tensor xs = random_f64({2, 3, 2, 2}, 51);
  std::vector<int64_t> ts{0, 1, 2, 1, 2, -100, 0, 0};
  NllReference s = nll_reference(xs.to_double_vector(), ts, {}, 2, 3, 4, -100);
  Tensor out = nll_loss(xs, i64(ts, {2, 2, 2}), {}, 0);
  EXPECT_EQ(out.sizes(), (Shape{2, 2, 2}));
  expect_close(out, s.per_element, 1e-12);
  expect_close(nll_loss(xs, i64(ts, {2, 2, 2})), {s.total / s.weight_total}, 1e-12);
  Tensor xc = random_f64({5}, 52);
  Tensor one = nll_loss(xc, i64({3}, {}), {}, 0);
  EXPECT_EQ(one.dim(), 0);
  EXPECT_EQ(one.item<double>(), -xc.to_double_vector()[3]);
  EXPECT_EQ(nll_loss(xc, i64({3}, {})).item<double>(), -xc.to_double_vector()[3]);
  // nothing left after ignoring: mean is nan (0/0), sum is 0; u8 targets are accepted
  Tensor all_ignored = i64({-100, -100}, {2});
  EXPECT_TRUE(std::isnan(nll_loss(random_f32({2, 3}, 53), all_ignored).item<double>()));
  EXPECT_EQ(nll_loss(random_f32({2, 3}, 53), all_ignored, {}, 2).item<double>(), 0.0);
  EXPECT_TRUE(std::isnan(nll_loss(Tensor::empty({0, 3}), i64({}, {0})).item<double>()));
  expect_close(nll_loss(x, to(i64({0, 2, 1, 1}, {4}), DType::U8), {}, 2),
               {nll_reference(x.to_double_vector(), {0, 2, 1, 1}, {}, 4, 3, 1, -100).total});
  expect_infer_matches(out, OpId::nll_loss, {xs, i64(ts, {2, 2, 2}), Tensor(), 0, -100});
  expect_infer_matches(one, OpId::nll_loss, {xc, i64({3}, {}), Tensor(), 0, -100});
  expect_infer_matches(nll_loss(to(x, DType::BF16), t), OpId::nll_loss, {to(x, DType::BF16), t, Tensor(), 1, -100});
}

TEST(NnLoss, NllLossErrors) {
  Tensor x = random_f32({2, 3}, 54);
  expect_error([&] { nll_loss(x, i64({0, 3}, {2})); }, {"nll_loss", "target 3", "out of bounds", "0 to 2"});
  expect_error([&] { nll_loss(x, i64({-1, 0}, {2})); }, {"nll_loss", "target -1", "out of bounds"});
  expect_error([&] { nll_loss(x, Tensor::from_vector<float>({0, 1}, {2})); }, {"nll_loss", "i64", "f32"});
  expect_error([&] { nll_loss(x, i64({0, 1, 2}, {3})); }, {"nll_loss", "batch_size (2)", "(3)"});
  expect_error([&] { nll_loss(x, i64({0, 1}, {1, 2})); }, {"nll_loss", "target of 1 dims"});
  expect_error([&] { nll_loss(random_f32({2, 3, 4}, 1), i64({0, 1, 0, 1, 0, 1}, {2, 3})); }, {"nll_loss", "[2, 4]"});
  expect_error([&] { nll_loss(x, i64({0, 1}, {2}), Tensor::empty({4})); }, {"nll_loss", "3 classes", "[4]"});
  expect_error([&] { nll_loss(x, i64({0, 1}, {2}), {}, 5); }, {"nll_loss", "reduction 5"});
  expect_error([&] { nll_loss(random_f32({3}, 1), i64({0}, {1})); }, {"nll_loss", "0-dim target"});
  expect_error([&] { nll_loss(Tensor::scalar(1.0, DType::F32), i64({0}, {})); }, {"nll_loss", "1 or more dimensions"});
  expect_error([&] { nll_loss(x, i64({0, 1}, {2}), Tensor::empty({3}, DType::F64)); }, {"nll_loss", "weight dtype"});
}

TEST(NnLoss, NllLossGradcheck) {
  Tensor w = random_f64({3}, 55, 0.1, 2.0);
  for (int64_t reduction : {0, 1, 2}) {
    auto f = [&, reduction](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{nll_loss(in[0], i64({1, -100, 2, 0}, {4}), w, reduction)};
    };
    expect_gradcheck(f, {leaf(random_f64({4, 3}, 56))});
    auto spatial = [reduction](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{nll_loss(in[0], i64({0, 1, 2, 1, 2, 1}, {2, 3}), {}, reduction, 1)};
    };
    expect_gradcheck(spatial, {leaf(random_f64({2, 3, 3}, 57))});
    auto unbatched = [&, reduction](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{nll_loss(in[0], i64({2}, {}), w, reduction)};
    };
    expect_gradcheck(unbatched, {leaf(random_f64({3}, 58))});
  }
}

namespace {

// PyTorch's cross_entropy for class-index targets, straight from its definition: log_softmax over the class dim,
// nll_loss, and the label-smoothing term with its weight/ignore_index normalisation. Input [N, C] row-major.
double cross_entropy_reference(const std::vector<double>& x, const std::vector<int64_t>& t, const std::vector<double>& w,
                               int64_t N, int64_t C, int64_t reduction, int64_t ignore, double ls,
                               std::vector<double>* per_sample) {
  std::vector<double> logp = softmax_reference(x, {N, C}, 1, true);
  double nll_total = 0, smooth_total = 0, weight_total = 0, count = 0;
  for (int64_t n = 0; n < N; ++n) {
    double nll = 0, smooth = 0;
    int64_t c = t[size_t(n)];
    if (c != ignore) {
      double wc = w.empty() ? 1 : w[size_t(c)];
      nll = -wc * logp[size_t(n * C + c)];
      for (int64_t k = 0; k < C; ++k) smooth -= (w.empty() ? 1 : w[size_t(k)]) * logp[size_t(n * C + k)];
      weight_total += wc;
      count += 1;
    }
    if (per_sample) per_sample->push_back((1 - ls) * nll + ls / double(C) * smooth);
    nll_total += nll;
    smooth_total += smooth;
  }
  if (reduction == 2) return (1 - ls) * nll_total + ls / double(C) * smooth_total;
  double smooth_norm = w.empty() ? count : weight_total;
  return (1 - ls) * nll_total / weight_total + ls / double(C) * smooth_total / smooth_norm;
}

}  // namespace

TEST(NnLoss, CrossEntropyClassIndices) {
  Tensor x = random_f64({5, 4}, 60, -3, 3);
  std::vector<int64_t> tv{3, 0, -100, 2, 1};
  Tensor t = i64(tv, {5});
  std::vector<double> wv{0.5, 2.0, 1.0, 0.25};
  Tensor w = Tensor::from_vector<double>(wv, {4});
  // hand value: two equal logits give log 2
  expect_close(cross_entropy(Tensor::from_vector<float>({0, 0}, {1, 2}), i64({1}, {1})), {std::log(2.0)});
  for (double ls : {0.0, 0.1, 1.0}) {
    for (bool weighted : {false, true}) {
      std::vector<double> none;
      const std::vector<double>& ww = weighted ? wv : std::vector<double>{};
      double mean_ref = cross_entropy_reference(x.to_double_vector(), tv, ww, 5, 4, 1, -100, ls, &none);
      double sum_ref = cross_entropy_reference(x.to_double_vector(), tv, ww, 5, 4, 2, -100, ls, nullptr);
      Tensor wt = weighted ? w : Tensor();
      expect_close(cross_entropy(x, t, wt, 1, -100, ls), {mean_ref}, 1e-12);
      expect_close(cross_entropy(x, t, wt, 2, -100, ls), {sum_ref}, 1e-12);
      expect_close(cross_entropy(x, t, wt, 0, -100, ls), none, 1e-12, 1e-14);
    }
  }
  // unbatched input [C] with a 0-dim target; spatial input [N, C, d]
  Tensor xc = random_f64({4}, 61);
  std::vector<double> lp = softmax_reference(xc.to_double_vector(), {4}, 0, true);
  expect_close(cross_entropy(xc, i64({2}, {})), {-lp[2]}, 1e-12);
  expect_close(cross_entropy(xc, i64({2}, {}), {}, 1, -100, 0.2), {0.8 * -lp[2] + 0.05 * -(lp[0] + lp[1] + lp[2] + lp[3])}, 1e-12);
  Tensor xs = random_f64({2, 3, 2}, 62);
  Tensor ts = i64({0, 2, 1, 1}, {2, 2});
  EXPECT_EQ(cross_entropy(xs, ts, {}, 0, -100, 0.3).sizes(), (Shape{2, 2}));
  // every target ignored: mean is nan
  EXPECT_TRUE(std::isnan(cross_entropy(x, i64({-100, -100, -100, -100, -100}, {5}), w, 1, -100, 0.1).item<double>()));
  expect_error([&] { cross_entropy(x, t, {}, 1, -100, 1.5); }, {"cross_entropy", "label_smoothing", "1.5"});
  expect_error([&] { cross_entropy(x, i64({0, 0, 0, 0, 7}, {5})); }, {"target 7", "out of bounds"});
  expect_error([&] { cross_entropy(x, t, Tensor::empty({3}, DType::F64)); }, {"cross_entropy", "4 classes"});
  expect_error([&] { cross_entropy(x, t, {}, 4); }, {"cross_entropy", "reduction 4"});
}

TEST(NnLoss, CrossEntropyClassProbabilities) {
  Tensor x = random_f64({3, 4}, 63);
  Tensor p = softmax(random_f64({3, 4}, 64), 1);
  std::vector<double> wv{1.0, 0.5, 2.0, 1.5};
  Tensor w = Tensor::from_vector<double>(wv, {4});
  std::vector<double> lp = softmax_reference(x.to_double_vector(), {3, 4}, 1, true), pv = p.to_double_vector();
  for (double ls : {0.0, 0.2}) {
    std::vector<double> none(3, 0.0);
    double total = 0;
    for (int n = 0; n < 3; ++n) {
      for (int c = 0; c < 4; ++c) none[size_t(n)] -= wv[size_t(c)] * lp[size_t(n * 4 + c)] * (pv[size_t(n * 4 + c)] * (1 - ls) + ls / 4);
      total += none[size_t(n)];
    }
    expect_close(cross_entropy(x, p, w, 0, -100, ls), none, 1e-12);
    expect_close(cross_entropy(x, p, w, 2, -100, ls), {total}, 1e-12);
    expect_close(cross_entropy(x, p, w, 1, -100, ls), {total / 3}, 1e-12);  // mean divides by N, not by weights
  }
  EXPECT_TRUE(std::isnan(cross_entropy(Tensor::empty({0, 4}, DType::F64), Tensor::empty({0, 4}, DType::F64)).item<double>()));
  expect_error([&] { cross_entropy(x, p, {}, 1, 0); }, {"cross_entropy", "ignore_index", "floating point target"});
  expect_error([&] { cross_entropy(x, i64(std::vector<int64_t>(12, 0), {3, 4})); }, {"cross_entropy", "floating point type", "class probabilities"});
}

TEST(NnLoss, CrossEntropyGradcheck) {
  Tensor w = random_f64({4}, 65, 0.2, 2.0);
  Tensor t = i64({3, -100, 1, 0, 1}, {5});
  for (int64_t reduction : {0, 1, 2}) {
    for (double ls : {0.0, 0.15}) {
      auto f = [&, reduction, ls](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{cross_entropy(in[0], t, w, reduction, -100, ls)};
      };
      expect_gradcheck(f, {leaf(random_f64({5, 4}, 66))});
      auto ignore_valid_class = [reduction, ls](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{cross_entropy(in[0], i64({0, 1, 2, 1}, {2, 2}), {}, reduction, 1, ls)};
      };
      expect_gradcheck(ignore_valid_class, {leaf(random_f64({2, 3, 2}, 67))});
      auto probs = [&, reduction, ls](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{cross_entropy(in[0], in[1], w, reduction, -100, ls)};
      };
      expect_gradcheck(probs, {leaf(random_f64({3, 4}, 68)), leaf(random_f64({3, 4}, 69, 0, 1))});
    }
  }
  auto unbatched = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{cross_entropy(in[0], i64({1}, {}), w, 1, -100, 0.1)};
  };
  expect_gradcheck(unbatched, {leaf(random_f64({4}, 70))});
}

// ================================================================ batch_norm

TEST(NnBatchNorm, TrainingUsesBatchStatsAndUpdatesRunningStats) {
  const int64_t N = 3, C = 2, S = 4;
  Tensor x = random_f64({N, C, 2, 2}, 80);
  Tensor w = random_f64({C}, 81), b = random_f64({C}, 82);
  Tensor rm = Tensor::from_vector<double>({0.5, -1.0}, {C}), rv = Tensor::from_vector<double>({2.0, 0.5}, {C});
  std::vector<double> xv = x.to_double_vector(), wv = w.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> mean(C, 0), var(C, 0), want(xv.size());
  auto at = [&](int64_t n, int64_t c, int64_t s) { return size_t((n * C + c) * S + s); };
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) mean[size_t(c)] += xv[at(n, c, s)] / (N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) var[size_t(c)] += std::pow(xv[at(n, c, s)] - mean[size_t(c)], 2);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s)
        want[at(n, c, s)] = (xv[at(n, c, s)] - mean[size_t(c)]) / std::sqrt(var[size_t(c)] / (N * S) + 1e-5) * wv[size_t(c)] + bv[size_t(c)];
  }
  expect_close(batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5), want, 1e-12, 1e-12);
  // running stats: momentum-weighted, with the unbiased variance
  expect_close(rm, {0.9 * 0.5 + 0.1 * mean[0], 0.9 * -1.0 + 0.1 * mean[1]}, 1e-12);
  expect_close(rv, {0.9 * 2.0 + 0.1 * var[0] / (N * S - 1), 0.9 * 0.5 + 0.1 * var[1] / (N * S - 1)}, 1e-12);
  // training without running stats, no affine
  EXPECT_EQ(batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-5).sizes(), x.sizes());
  // f16 input with f32 running stats keeps f16
  Tensor rm32 = zeros({C}), rv32 = ones({C});
  EXPECT_EQ(batch_norm(to(x, DType::F16), {}, {}, rm32, rv32, true, 0.1, 1e-5).dtype(), DType::F16);
  EXPECT_NE(rm32.to_double_vector()[0], 0.0);
}

TEST(NnBatchNorm, EvaluationUsesRunningStats) {
  Tensor x = random_f64({2, 3, 4}, 83);
  Tensor rm = random_f64({3}, 84), rv = random_f64({3}, 85, 0.5, 2.0), w = random_f64({3}, 86);
  std::vector<double> xv = x.to_double_vector(), rmv = rm.to_double_vector(), rvv = rv.to_double_vector(),
                      wv = w.to_double_vector(), want;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int s = 0; s < 4; ++s)
        want.push_back((xv[size_t((n * 3 + c) * 4 + s)] - rmv[size_t(c)]) / std::sqrt(rvv[size_t(c)] + 1e-3) * wv[size_t(c)]);
  expect_close(batch_norm(x, w, {}, rm, rv, false, 0.1, 1e-3), want, 1e-12, 1e-12);
  expect_close(rm, rmv, 0, 0);  // untouched
  // a single value per channel is fine in evaluation
  EXPECT_EQ(batch_norm(random_f64({1, 3}, 87), {}, {}, rm, rv, false, 0.1, 1e-5).sizes(), (Shape{1, 3}));
}

TEST(NnBatchNorm, Errors) {
  Tensor x = random_f32({2, 3, 2}, 88);
  expect_error([&] { batch_norm(random_f32({3}, 1), {}, {}, {}, {}, true); }, {"batch_norm", "at least 2 dimensions"});
  expect_error([&] { batch_norm(x, {}, {}, zeros({4}), ones({3}), true); }, {"batch_norm", "running_mean", "3 elements", "not 4"});
  expect_error([&] { batch_norm(x, ones({2}), {}, {}, {}, true); }, {"batch_norm", "weight", "3 elements"});
  expect_error([&] { batch_norm(x, {}, {}, {}, {}, false); }, {"batch_norm", "evaluation mode"});
  expect_error([&] { batch_norm(random_f32({1, 3}, 1), {}, {}, {}, {}, true); }, {"more than 1 value per channel", "[1, 3]"});
  expect_error([&] { batch_norm(i64({1, 2, 3, 4}, {2, 2}), {}, {}, {}, {}, true); }, {"batch_norm", "floating"});
}

TEST(NnBatchNorm, Gradcheck) {
  for (bool training : {true, false}) {
    Tensor rm = random_f64({3}, 89), rv = random_f64({3}, 90, 0.5, 2.0);
    auto f = [&, training](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{batch_norm(in[0], in[1], in[2], rm, rv, training, 0.1, 1e-5)};
    };
    expect_gradcheck(f, {leaf(random_f64({4, 3, 2}, 91)), leaf(random_f64({3}, 92)), leaf(random_f64({3}, 93))});
    expect_gradcheck(f, {leaf(transpose(random_f64({3, 4}, 94), 0, 1)), Tensor(), leaf(random_f64({3}, 95))});
  }
}

// ================================================================ conv2d

namespace {

// Direct definition of a grouped, strided, padded, dilated 2d convolution on [N, C, H, W] row-major data.
std::vector<double> conv2d_reference(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w,
                                     const Shape& ws, const std::vector<double>& bias, int64_t sh, int64_t sw,
                                     int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t groups, Shape* out_shape) {
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], OC = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3];
  const int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  *out_shape = {N, OC, OH, OW};
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = bias.empty() ? 0 : bias[size_t(oc)];
          int64_t g = oc / (OC / groups);
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += x[size_t(((n * C + g * Cg + c) * H + ih) * W + iw)] * w[size_t(((oc * Cg + c) * KH + kh) * KW + kw)];
              }
          out.push_back(acc);
        }
  return out;
}

struct ConvCase {
  Shape x, w;
  int64_t sh, sw, ph, pw, dh, dw, groups;
};

}  // namespace

TEST(NnConv, MatchesReference) {
  std::vector<ConvCase> cases = {
      {{2, 3, 5, 5}, {4, 3, 3, 3}, 1, 1, 0, 0, 1, 1, 1},
      {{1, 4, 7, 6}, {6, 2, 3, 2}, 2, 1, 1, 0, 1, 2, 2},   // groups, stride, padding, dilation
      {{2, 4, 6, 6}, {4, 1, 3, 3}, 1, 2, 2, 1, 2, 1, 4},   // depthwise
      {{2, 3, 4, 5}, {5, 3, 1, 1}, 1, 1, 0, 0, 1, 1, 1},   // 1x1: the direct GEMM path
      {{1, 2, 3, 3}, {2, 2, 3, 3}, 3, 3, 1, 1, 1, 1, 1},   // stride larger than the output
  };
  uint64_t seed = 100;
  for (const ConvCase& k : cases) {
    Tensor x = random_f64(k.x, seed++), w = random_f64(k.w, seed++), b = random_f64({k.w[0]}, seed++);
    Shape out_shape;
    std::vector<double> want = conv2d_reference(x.to_double_vector(), k.x, w.to_double_vector(), k.w,
                                                b.to_double_vector(), k.sh, k.sw, k.ph, k.pw, k.dh, k.dw, k.groups, &out_shape);
    Tensor y = conv2d(x, w, b, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups);
    EXPECT_EQ(y.sizes(), out_shape);
    expect_close(y, want, 1e-12, 1e-12);
    Tensor y32 = conv2d(to(x, DType::F32), to(w, DType::F32), to(b, DType::F32), {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups);
    EXPECT_EQ(y32.dtype(), DType::F32);
    expect_close(y32, want, 1e-5, 1e-5);
    expect_infer_matches(y32, OpId::conv2d, {to(x, DType::F32), to(w, DType::F32), to(b, DType::F32),
                                             IntList{k.sh, k.sw}, IntList{k.ph, k.pw}, IntList{k.dh, k.dw}, k.groups});
  }
}

TEST(NnConv, UnbatchedScalarListsLowPrecisionAndEmptyBatch) {
  Tensor x = random_f64({3, 6, 6}, 120), w = random_f64({2, 3, 3, 3}, 121);
  Tensor y = conv2d(x, w, {}, {2}, {1}, {1});  // one-element lists apply to both dims
  EXPECT_EQ(y.sizes(), (Shape{2, 3, 3}));
  Tensor batched = conv2d(unsqueeze(x, 0), w, {}, {2, 2}, {1, 1});
  expect_close(y, batched.to_double_vector(), 1e-14, 1e-14);
  Tensor xh = to(x, DType::F16), wh = to(w, DType::F16);
  Tensor h = conv2d(xh, wh, {}, {2}, {1});
  EXPECT_EQ(h.dtype(), DType::F16);
  expect_close(h, conv2d(to(xh, DType::F64), to(wh, DType::F64), {}, {2}, {1}).to_double_vector(), 1e-3, 1e-3);
  EXPECT_EQ(conv2d(Tensor::empty({0, 3, 6, 6}, DType::F64), w).sizes(), (Shape{0, 2, 4, 4}));
  // a non-contiguous input
  Tensor xt = transpose(random_f64({1, 3, 6, 6}, 122), 2, 3);
  expect_close(conv2d(xt, w), conv2d(contiguous(xt), w).to_double_vector(), 1e-14, 1e-14);
}

TEST(NnConv, Errors) {
  Tensor x = random_f32({1, 4, 5, 5}, 130), w = random_f32({6, 2, 3, 3}, 131);
  expect_error([&] { conv2d(x, w); }, {"conv2d", "groups=1", "[6, 2, 3, 3]", "expected input[1, 4, 5, 5] to have 2 channels", "got 4"});
  expect_error([&] { conv2d(x, random_f32({6, 1, 3, 3}, 1), {}, {1}, {0}, {1}, 4); }, {"conv2d", "groups=4", "divisible by 4"});
  expect_error([&] { conv2d(x, w, Tensor::empty({5}), {1}, {0}, {1}, 2); }, {"conv2d", "bias", "6 elements", "[5]"});
  expect_error([&] { conv2d(x, random_f32({2, 4, 7, 3}, 1)); }, {"conv2d", "padded input size per channel: (5 x 5)", "Kernel size: (7 x 3)"});
  expect_error([&] { conv2d(x, random_f32({2, 4, 3, 3}, 1), {}, {1}, {0}, {3}); }, {"conv2d", "Kernel size: (7 x 7)"});
  expect_error([&] { conv2d(x, w, {}, {0}, {0}, {1}, 2); }, {"conv2d", "stride"});
  expect_error([&] { conv2d(x, w, {}, {1}, {-1}, {1}, 2); }, {"conv2d", "negative padding"});
  expect_error([&] { conv2d(x, w, {}, {1}, {0}, {0}, 2); }, {"conv2d", "dilation"});
  expect_error([&] { conv2d(x, w, {}, {1}, {0}, {1}, 0); }, {"conv2d", "groups"});
  expect_error([&] { conv2d(x, w, {}, {1, 1, 1}, {0}, {1}, 2); }, {"conv2d", "stride", "[1, 1, 1]"});
  expect_error([&] { conv2d(random_f32({4, 5}, 1), w); }, {"conv2d", "3D (unbatched) or 4D", "[4, 5]"});
  expect_error([&] { conv2d(x, random_f32({6, 4, 3}, 1)); }, {"conv2d", "4-dimensional weight"});
  expect_error([&] { conv2d(x, to(random_f32({6, 4, 3, 3}, 1), DType::F64)); }, {"conv2d", "f32", "f64", "same"});
  expect_error([&] { conv2d(i64(std::vector<int64_t>(16, 1), {1, 1, 4, 4}), i64({1}, {1, 1, 1, 1})); }, {"conv2d", "floating"});
}

TEST(NnConv, Gradcheck) {
  std::vector<ConvCase> cases = {
      {{2, 2, 4, 4}, {3, 2, 2, 2}, 1, 1, 0, 0, 1, 1, 1},
      {{1, 4, 5, 6}, {4, 2, 3, 2}, 2, 1, 1, 2, 1, 2, 2},
      {{2, 3, 3, 3}, {2, 3, 1, 1}, 1, 1, 0, 0, 1, 1, 1},
      {{1, 2, 6, 5}, {2, 1, 2, 3}, 3, 2, 1, 1, 2, 1, 2},
      {{1, 1, 1, 1}, {2, 1, 1, 1}, 1, 1, 0, 0, 1, 1, 1},  // size-1 everything
      {{1, 2, 1, 2}, {1, 2, 3, 3}, 1, 1, 1, 1, 1, 1, 1},  // a 1-row image, padded
      {{0, 2, 3, 3}, {2, 2, 2, 2}, 1, 1, 0, 0, 1, 1, 1},  // an empty batch
  };
  uint64_t seed = 140;
  for (const ConvCase& k : cases) {
    auto f = [&k](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{conv2d(in[0], in[1], in[2], {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups)};
    };
    expect_gradcheck(f, {leaf(random_f64(k.x, seed)), leaf(random_f64(k.w, seed + 1)), leaf(random_f64({k.w[0]}, seed + 2))});
    seed += 3;
  }
  auto unbatched = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{conv2d(in[0], in[1], {}, {2}, {1})}; };
  expect_gradcheck(unbatched, {leaf(transpose(random_f64({2, 5, 4}, 150), 1, 2)), leaf(random_f64({3, 2, 3, 3}, 151))});
}

TEST(NnConv, BackwardHelpersInferTheirShapes) {
  Tensor g = Tensor::meta({DType::F32, {2, 4, 3, 3}, contiguous_strides({2, 4, 3, 3}), {}});
  Tensor w = Tensor::meta({DType::F32, {4, 2, 3, 3}, contiguous_strides({4, 2, 3, 3}), {}});
  Tensor x = Tensor::meta({DType::F32, {2, 4, 5, 5}, contiguous_strides({2, 4, 5, 5}), {}});
  EXPECT_EQ(conv2d_backward_input(g, w, {2, 4, 5, 5}, {1, 1}, {0, 0}, {1, 1}, 2).sizes(), (Shape{2, 4, 5, 5}));
  EXPECT_EQ(conv2d_backward_weight(g, x, {4, 2, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 2).sizes(), (Shape{4, 2, 3, 3}));
  expect_error([&] { conv2d_backward_input(g, w, {2, 4, 6, 6}, {1, 1}, {0, 0}, {1, 1}, 2); },
               {"conv2d_backward_input", "grad_output", "[2, 4, 4, 4]"});
  EXPECT_EQ(conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 1}, 2).sizes(), (Shape{2, 4, 3, 3}));
}

// ================================================================ max_pool2d / avg_pool2d

TEST(NnPool, MaxPoolValues) {
  Tensor x = view(arange(0, 16, 1, DType::F32), {1, 1, 4, 4});
  expect_close(max_pool2d(x, {2}), {5, 7, 13, 15});
  expect_close(max_pool2d(x, {3, 3}, {1, 1}), {10, 11, 14, 15});
  expect_close(max_pool2d(x, {2}, {2}, {1}), {0, 2, 3, 8, 10, 11, 12, 14, 15});  // padding is -inf
  expect_close(max_pool2d(x, {2}, {1}, {0}, {2}), {10, 11, 14, 15});  // dilation 2
  // ceil_mode keeps a partial last window, unless it would start in the right padding
  Tensor y = view(arange(0, 25, 1, DType::F64), {1, 5, 5});
  EXPECT_EQ(max_pool2d(y, {2}, {2}).sizes(), (Shape{1, 2, 2}));
  expect_close(max_pool2d(y, {2}, {2}, {0}, {1}, true), {6, 8, 9, 16, 18, 19, 21, 23, 24});
  EXPECT_EQ(max_pool2d(y, {2}, {2}, {1}, {1}, true).sizes(), (Shape{1, 3, 3}));  // 4 without the correction
  EXPECT_EQ(max_pool2d(Tensor::empty({1, 1, 6, 6}), {3}, {2}, {1}, {1}, true).sizes(), (Shape{1, 1, 4, 4}));
  // NaN wins its window; -inf windows stay -inf; integers pool too
  Tensor z = Tensor::from_vector<float>({1, NAN, 3, 4, -INFINITY, -INFINITY, -INFINITY, -INFINITY}, {2, 2, 2});
  expect_close(max_pool2d(z, {2}), {NAN, -INFINITY});
  Tensor xi = i64({3, -7, 2, 9, -1, 0, 4, 4, 4}, {1, 3, 3});
  Tensor mi = max_pool2d(xi, {2}, {1});
  EXPECT_EQ(mi.dtype(), DType::I64);
  expect_close(mi, {9, 2, 9, 4});
  Tensor h = max_pool2d(to(x, DType::BF16), {2});
  EXPECT_EQ(h.dtype(), DType::BF16);
  expect_close(h, {5, 7, 13, 15});
  EXPECT_EQ(max_pool2d(Tensor::empty({0, 2, 4, 4}), {2}).sizes(), (Shape{0, 2, 2, 2}));
  expect_infer_matches(h, OpId::max_pool2d, {to(x, DType::BF16), IntList{2}, IntList{}, IntList{0}, IntList{1}, false});
}

TEST(NnPool, MaxPoolGradientGoesToFirstMaximum) {
  Tensor x = leaf(Tensor::from_vector<double>({2, 2, 1, 2, 0, 5, 5, 5, 5}, {1, 3, 3}));
  sum(max_pool2d(x, {2}, {1})).backward();
  // windows: {2,2,2,0} -> first 2 (index 0); {2,1,0,5} -> 5 (index 5); {2,0,5,5} -> index 6; {0,5,5,5} -> index 5
  expect_close(x.grad(), {1, 0, 0, 0, 0, 2, 1, 0, 0});
  Tensor n = leaf(Tensor::from_vector<double>({NAN, 1, 7, 2}, {1, 2, 2}));
  sum(max_pool2d(n, {2})).backward();
  expect_close(n.grad(), {1, 0, 0, 0});
}

TEST(NnPool, MaxPoolErrors) {
  Tensor x = random_f32({1, 2, 5, 5}, 160);
  expect_error([&] { max_pool2d(x, {3}, {1}, {2}); }, {"max_pool2d", "pad should be at most half of effective kernel size", "pad=2", "kernel_size=3"});
  expect_error([&] { max_pool2d(x, {2}, {1}, {-1}); }, {"max_pool2d", "pad must be non-negative"});
  expect_error([&] { max_pool2d(x, {0}); }, {"max_pool2d", "kernel size should be greater than zero"});
  expect_error([&] { max_pool2d(x, {2}, {0}); }, {"max_pool2d", "stride should be greater than zero"});
  expect_error([&] { max_pool2d(x, {2}, {}, {0}, {0}); }, {"max_pool2d", "dilation should be greater than zero"});
  expect_error([&] { max_pool2d(x, {6}); }, {"max_pool2d", "Output size is too small", "(2x5x5)", "(2x0x0)"});
  expect_error([&] { max_pool2d(x, {2, 2, 2}); }, {"max_pool2d", "kernel_size", "single int"});
  expect_error([&] { max_pool2d(x, {2}, {1, 1, 1}); }, {"max_pool2d", "stride must either be omitted"});
  expect_error([&] { max_pool2d(random_f32({5, 5}, 1), {2}); }, {"max_pool2d", "3D", "4D", "[5, 5]"});
  expect_error([&] { max_pool2d(Tensor::empty({1, 0, 4, 4}), {2}); }, {"max_pool2d", "optional 0 dim batch size", "[1, 0, 4, 4]"});
  expect_error([&] { max_pool2d(Tensor::empty({1, 1, 4, 4}, DType::Bool), {2}); }, {"max_pool2d", "bool"});
}

TEST(NnPool, MaxPoolGradcheck) {
  struct Case { IntList k, s, p, d; bool ceil; Shape x; };
  std::vector<Case> cases = {
      {{2}, {}, {0}, {1}, false, {2, 2, 4, 4}},
      {{3, 2}, {2, 1}, {1, 1}, {1}, true, {1, 2, 5, 6}},
      {{2}, {2}, {1}, {2}, true, {1, 7, 7}},
      {{3}, {3}, {0}, {1}, true, {1, 1, 7, 8}},
  };
  uint64_t seed = 170;
  for (const Case& k : cases) {
    auto f = [&k](const std::vector<Tensor>& in) { return std::vector<Tensor>{max_pool2d(in[0], k.k, k.s, k.p, k.d, k.ceil)}; };
    expect_gradcheck(f, {leaf(random_f64(k.x, seed++))});
  }
  auto t = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{max_pool2d(in[0], {2}, {1})}; };
  expect_gradcheck(t, {leaf(transpose(random_f64({1, 2, 4, 3}, 180), 2, 3))});
}

namespace {

// ATen's avg_pool2d on one [H, W] plane.
std::vector<double> avg_pool_reference(const std::vector<double>& x, int64_t H, int64_t W, int64_t k, int64_t s,
                                       int64_t p, int64_t OH, int64_t OW, bool include_pad, std::optional<int64_t> divisor) {
  std::vector<double> out;
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) {
      int64_t h0 = oh * s - p, w0 = ow * s - p, h1 = std::min(h0 + k, H + p), w1 = std::min(w0 + k, W + p);
      int64_t pool = (h1 - h0) * (w1 - w0);
      h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0), h1 = std::min(h1, H), w1 = std::min(w1, W);
      double total = 0;
      for (int64_t i = h0; i < h1; ++i)
        for (int64_t j = w0; j < w1; ++j) total += x[size_t(i * W + j)];
      double d = divisor ? double(*divisor) : include_pad ? double(pool) : double((h1 - h0) * (w1 - w0));
      out.push_back(total / d);
    }
  return out;
}

}  // namespace

TEST(NnPool, AvgPoolValues) {
  Tensor x = view(arange(0, 16, 1, DType::F32), {1, 1, 4, 4});
  expect_close(avg_pool2d(x, {2}), {2.5, 4.5, 10.5, 12.5});
  // padding: corners average one real element over 4 (count_include_pad) or over 1
  expect_close(avg_pool2d(x, {2}, {2}, {1}), {0.0, 1.5 / 2, 3.0 / 4, 12.0 / 4, 30.0 / 4, 18.0 / 4, 12.0 / 4, 27.0 / 4, 15.0 / 4});
  expect_close(avg_pool2d(x, {2}, {2}, {1}, false, false), {0, 1.5, 3, 6, 7.5, 9, 12, 13.5, 15});
  expect_close(avg_pool2d(x, {2}, {2}, {0}, false, true, 3), {10.0 / 3, 18.0 / 3, 42.0 / 3, 50.0 / 3});
  // ceil_mode: the partial last window divides by its clipped size (no right padding to count)
  Tensor y = random_f64({2, 5, 5}, 190);
  std::vector<double> yv = y.to_double_vector(), want;
  for (int c = 0; c < 2; ++c) {
    std::vector<double> plane(yv.begin() + c * 25, yv.begin() + (c + 1) * 25);
    for (double v : avg_pool_reference(plane, 5, 5, 2, 2, 1, 3, 3, true, std::nullopt)) want.push_back(v);
  }
  expect_close(avg_pool2d(y, {2}, {2}, {1}, true), want, 1e-14, 1e-14);
  EXPECT_EQ(avg_pool2d(y, {2}, {2}, {0}, true).sizes(), (Shape{2, 3, 3}));
  std::vector<double> p0(yv.begin(), yv.begin() + 25);
  expect_close(select(avg_pool2d(y, {2}, {2}, {0}, true), 0, 0), avg_pool_reference(p0, 5, 5, 2, 2, 0, 3, 3, true, std::nullopt), 1e-14);
  expect_close(select(avg_pool2d(y, {3}, {2}, {1}, true, false), 0, 0), avg_pool_reference(p0, 5, 5, 3, 2, 1, 3, 3, false, std::nullopt), 1e-14);
  // i64 averages truncate; f16 rounds once
  Tensor xi = i64({1, 2, 3, 5}, {1, 1, 2, 2});
  Tensor ai = avg_pool2d(xi, {2});
  EXPECT_EQ(ai.dtype(), DType::I64);
  EXPECT_EQ(ai.item<int64_t>(), 2);
  EXPECT_EQ(avg_pool2d(to(x, DType::F16), {2}).dtype(), DType::F16);
  expect_infer_matches(ai, OpId::avg_pool2d, {xi, IntList{2}, IntList{}, IntList{0}, false, true, std::nullopt});
  expect_error([&] { avg_pool2d(x, {2}, {}, {0}, false, true, 0); }, {"avg_pool2d", "divisor must be not zero"});
  expect_error([&] { avg_pool2d(x, {2}, {}, {2}); }, {"avg_pool2d", "pad should be at most half"});
  expect_error([&] { avg_pool2d(x, {5}); }, {"avg_pool2d", "Output size is too small"});
  expect_error([&] { avg_pool2d(to(x, DType::I32), {2}); }, {"avg_pool2d", "i32"});
  expect_error([&] { avg_pool2d(x, {2}, {2}, {0, 0, 0}); }, {"avg_pool2d", "padding"});
}

TEST(NnPool, AvgPoolGradcheck) {
  struct Case { IntList k, s, p; bool ceil, include_pad; std::optional<int64_t> divisor; Shape x; };
  std::vector<Case> cases = {
      {{2}, {}, {0}, false, true, std::nullopt, {2, 2, 4, 4}},
      {{3, 2}, {2, 1}, {1, 1}, true, true, std::nullopt, {1, 2, 5, 6}},
      {{3}, {2}, {1}, true, false, std::nullopt, {1, 6, 7}},
      {{2}, {3}, {1}, true, true, 5, {1, 1, 7, 8}},
  };
  uint64_t seed = 200;
  for (const Case& k : cases) {
    auto f = [&k](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{avg_pool2d(in[0], k.k, k.s, k.p, k.ceil, k.include_pad, k.divisor)};
    };
    expect_gradcheck(f, {leaf(random_f64(k.x, seed++))});
  }
  auto t = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{avg_pool2d(in[0], {2}, {1}, {1})}; };
  expect_gradcheck(t, {leaf(transpose(random_f64({1, 2, 4, 3}, 210), 2, 3))});
}

// Sizes from a .kir file may be up to 2^40 each; their products must not overflow int64 in shape inference.
TEST(ConvPoolShapes, HugeArgumentsAreErrorsNotOverflow) {
  const int64_t big = int64_t(1) << 40;
  auto meta = [](const Shape& s) { return Tensor::meta(TensorMeta{DType::F32, s, {}, {}}); };
  auto infer_error = [&](OpId id, std::vector<IValue> args, const std::vector<std::string>& parts) {
    expect_error([&] { infer_meta(bind_args(op_info(id), args)); }, parts);
  };
  Tensor x = meta({1, 1, 4, 4});
  // conv2d: 2^40 padding gives a 2^41 x 2^41 output plane, more than 2^63 elements with the channel dims.
  infer_error(OpId::conv2d, {x, meta({2, 1, 1, 1}), IValue(), IntList{1}, IntList{big}},
              {"conv2d: the result would have more than 2^63 elements"});
  // conv2d: dilation * (kernel - 1) with a 2^40 kernel.
  infer_error(OpId::conv2d, {meta({1, 1, big, 1}), meta({1, 1, big, 1}), IValue(), IntList{1}, IntList{0}, IntList{big}},
              {"conv2d: the dilated kernel size", "overflows a 64-bit integer"});
  // max_pool2d: (kernel - 1) * dilation with a 2^40 kernel and dilation.
  infer_error(OpId::max_pool2d, {x, IntList{big}, IntList{}, IntList{0}, IntList{big}},
              {"max_pool2d: the dilated kernel size", "overflows a 64-bit integer"});
  // Large but representable arguments still infer.
  TensorMeta m = infer_meta(bind_args(op_info(OpId::conv2d), {x, meta({2, 1, 1, 1}), IValue(), IntList{1}, IntList{1024}}))[0];
  EXPECT_EQ(m.sizes, (Shape{1, 2, 2052, 2052}));
}
