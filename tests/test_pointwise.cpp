// Tests of the pointwise family: values (edge values included) against hand-computed or std:: references,
// result dtypes under type promotion, error messages, agreement of shape inference with the kernels, and
// gradients (gradcheck in f64 over broadcasting, size-1, 0-size and non-contiguous inputs).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "autograd/autograd.h"
#include "autograd/gradcheck.h"
#include "ops/api.h"
#include "ops/common.h"

using namespace kiln;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor f32(const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from_vector<float>(f, {int64_t(v.size())});
}
Tensor f64(const std::vector<double>& v) { return Tensor::from_vector<double>(v, {int64_t(v.size())}); }
template <class T>
Tensor ints(const std::vector<T>& v) { return Tensor::from_vector<T>(v, {int64_t(v.size())}); }
Tensor bools(const std::vector<bool>& v) {
  Tensor t = Tensor::empty({int64_t(v.size())}, DType::Bool);
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}
Tensor as(const Tensor& t, DType dt) { return to(t, dt); }

// Element-wise comparison: NaN matches NaN, infinities and the sign of zeros must match exactly.
void expect_values(const Tensor& t, const std::vector<double>& want, double rtol = 0) {
  std::vector<double> got = t.to_double_vector();
  ASSERT_EQ(got.size(), want.size()) << t.str();
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": got " << got[i] << ", want nan";
    } else if (std::isinf(want[i]) || want[i] == 0) {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << "element " << i << ": sign of " << got[i];
    } else {
      EXPECT_NEAR(got[i], want[i], rtol * std::abs(want[i])) << "element " << i;
    }
  }
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
#define EXPECT_ERROR_HAS(expr, text)                                       \
  do {                                                                     \
    std::string msg_ = error_of([&] { (void)(expr); });                    \
    EXPECT_NE(msg_.find(text), std::string::npos) << "message: " << msg_;  \
  } while (0)

// ---------------------------------------------------------------- gradcheck inputs
struct Rand {
  std::mt19937 rng{1234};
  // Uniform in [lo, hi]; with `random_sign` the magnitude is drawn there and the sign is random.
  Tensor uniform(const Shape& shape, double lo, double hi, bool random_sign = false) {
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<double> v(size_t(shape_numel(shape)));
    for (double& x : v) x = u(rng) * (random_sign && (rng() & 1) ? -1 : 1);
    return Tensor::from_vector<double>(v, shape);
  }
};
Tensor leaf(const Tensor& t) {
  Tensor l = t.detach();
  l.set_requires_grad(true);
  return l;
}
// A non-contiguous leaf of `shape` (2-D): the transpose of a contiguous tensor.
Tensor transposed_leaf(Rand& r, const Shape& shape, double lo, double hi, bool random_sign = false) {
  return leaf(transpose(r.uniform({shape[1], shape[0]}, lo, hi, random_sign), 0, 1));
}

void expect_gradcheck(const DiffFn& f, const std::vector<Tensor>& inputs, const std::string& what) {
  GradcheckResult r = gradcheck(f, inputs);
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
}

// Gradchecks a unary op on several shapes (size-1, 0-size, 0-dim, non-contiguous) with inputs in its domain.
void check_unary_grad(const std::string& name, const std::function<Tensor(const Tensor&)>& op, double lo, double hi,
                      bool random_sign = false) {
  Rand r;
  DiffFn f = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{op(in[0])}; };
  for (const Shape& s : std::vector<Shape>{{3, 4}, {1, 5}, {0, 3}, {}})
    expect_gradcheck(f, {leaf(r.uniform(s, lo, hi, random_sign))}, name + " " + shape_str(s));
  expect_gradcheck(f, {transposed_leaf(r, {3, 2}, lo, hi, random_sign)}, name + " transposed");
}

// Gradchecks a binary op over broadcasting pairs, 0-size and non-contiguous inputs.
void check_binary_grad(const std::string& name, const std::function<Tensor(const Tensor&, const Tensor&)>& op,
                       double lo_a, double hi_a, double lo_b, double hi_b, bool random_sign = false) {
  Rand r;
  DiffFn f = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{op(in[0], in[1])}; };
  const std::vector<std::pair<Shape, Shape>> pairs = {{{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 3}},
                                                      {{0, 3}, {3}},    {{4}, {}}};
  for (const auto& [sa, sb] : pairs) {
    expect_gradcheck(f, {leaf(r.uniform(sa, lo_a, hi_a, random_sign)), leaf(r.uniform(sb, lo_b, hi_b, random_sign))},
                     name + " " + shape_str(sa) + " " + shape_str(sb));
  }
  expect_gradcheck(f, {transposed_leaf(r, {3, 2}, lo_a, hi_a, random_sign), leaf(r.uniform({1, 2}, lo_b, hi_b, random_sign))},
                   name + " transposed");
}

}  // namespace

// ================================================================ unary: values and dtypes

TEST(PointwiseUnary, FloatValuedOpsMatchStdIncludingEdgeValues) {
  const std::vector<double> xs = {-2, -0.5, -0.0, 0.0, 0.5, 1, 3, kInf, -kInf, kNaN};
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
    std::function<double(double)> ref;
  };
  const std::vector<Case> cases = {
      {"exp", [](const Tensor& t) { return exp(t); }, [](double x) { return std::exp(x); }},
      {"exp2", [](const Tensor& t) { return exp2(t); }, [](double x) { return std::exp2(x); }},
      {"log", [](const Tensor& t) { return log(t); }, [](double x) { return std::log(x); }},
      {"log2", [](const Tensor& t) { return log2(t); }, [](double x) { return std::log2(x); }},
      {"log1p", [](const Tensor& t) { return log1p(t); }, [](double x) { return std::log1p(x); }},
      {"expm1", [](const Tensor& t) { return expm1(t); }, [](double x) { return std::expm1(x); }},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }, [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); }, [](double x) { return 1 / std::sqrt(x); }},
      {"sin", [](const Tensor& t) { return sin(t); }, [](double x) { return std::sin(x); }},
      {"cos", [](const Tensor& t) { return cos(t); }, [](double x) { return std::cos(x); }},
      {"tan", [](const Tensor& t) { return tan(t); }, [](double x) { return std::tan(x); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](double x) { return std::tanh(x); }},
      {"asin", [](const Tensor& t) { return asin(t); }, [](double x) { return std::asin(x); }},
      {"acos", [](const Tensor& t) { return acos(t); }, [](double x) { return std::acos(x); }},
      {"atan", [](const Tensor& t) { return atan(t); }, [](double x) { return std::atan(x); }},
      {"sinh", [](const Tensor& t) { return sinh(t); }, [](double x) { return std::sinh(x); }},
      {"cosh", [](const Tensor& t) { return cosh(t); }, [](double x) { return std::cosh(x); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"erf", [](const Tensor& t) { return erf(t); }, [](double x) { return std::erf(x); }},
      {"reciprocal", [](const Tensor& t) { return reciprocal(t); }, [](double x) { return 1 / x; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<double> want;
    for (double x : xs) want.push_back(c.ref(x));
    Tensor r64 = c.op(f64(xs));
    EXPECT_EQ(r64.dtype(), DType::F64);
    expect_values(r64, want, 1e-15);
    Tensor r32 = c.op(f32(xs));
    EXPECT_EQ(r32.dtype(), DType::F32);
    expect_values(r32, want, 2e-7);
  }
}

TEST(PointwiseUnary, DomainEdgesGiveNanAndInf) {
  expect_values(log(f32({-1, 0, -0.0})), {kNaN, -kInf, -kInf});
  expect_values(sqrt(f32({-1, -0.0, kInf})), {kNaN, -0.0, kInf});
  expect_values(rsqrt(f32({0, -0.0, -4, kInf})), {kInf, -kInf, kNaN, 0});
  expect_values(log1p(f32({-1, -2})), {-kInf, kNaN});
  expect_values(asin(f32({1.5, -1})), {kNaN, -M_PI / 2}, 1e-7);
  expect_values(reciprocal(f32({0, -0.0})), {kInf, -kInf});
  expect_values(sigmoid(f32({-200, 200})), {0, 1});
}

TEST(PointwiseUnary, FloatValuedOpsPromoteIntegersAndBoolToF32) {
  Tensor i = ints<int32_t>({0, 1, 4});
  Tensor e = exp(i);
  EXPECT_EQ(e.dtype(), DType::F32);
  expect_values(e, {1, std::exp(1.0), std::exp(4.0)}, 1e-7);
  EXPECT_EQ(sqrt(ints<int64_t>({4})).dtype(), DType::F32);
  expect_values(sqrt(ints<int64_t>({4, 9})), {2, 3});
  expect_values(reciprocal(bools({true, false})), {1, kInf});
  EXPECT_EQ(sigmoid(ints<uint8_t>({0})).dtype(), DType::F32);
  // f16/bf16 keep their dtype (computed in f32, rounded once)
  Tensor h = exp(as(f32({0, 1}), DType::F16));
  EXPECT_EQ(h.dtype(), DType::F16);
  expect_values(h, {1, float(Half(float(std::exp(1.0))))});
  EXPECT_EQ(tanh(as(f32({1}), DType::BF16)).dtype(), DType::BF16);
}

TEST(PointwiseUnary, GeluBothFormsAndSilu) {
  const std::vector<double> xs = {-3, -1, -0.0, 0.5, 2, kInf};
  std::vector<double> exact, approx, silu_ref;
  for (double x : xs) {
    exact.push_back(x * 0.5 * (1 + std::erf(x / std::sqrt(2.0))));
    approx.push_back(0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))));
    silu_ref.push_back(x / (1 + std::exp(-x)));
  }
  Tensor g = gelu(f64(xs));
  Tensor a = gelu(f64(xs), "tanh");
  expect_values(g, exact, 1e-14);  // includes gelu(-0) = -0 and gelu(inf) = inf
  expect_values(a, approx, 1e-14);
  expect_values(silu(f64({-3, -1, 0.5, 2})), {silu_ref[0], silu_ref[1], silu_ref[3], silu_ref[4]}, 1e-15);
  EXPECT_EQ(gelu(as(f32({1}), DType::F16)).dtype(), DType::F16);
  // The formula for every dtype, as PyTorch's f64 kernel and its scalar path: gelu(inf) = inf, gelu(-inf) = NaN
  // (PyTorch's vectorised f32 kernel gives NaN at +inf too; docs/inductor.md "Special values and accuracy")
  expect_values(gelu(f32({kInf, -kInf, 1e30, -1e30})), {kInf, kNaN, 1e30, -0.0}, 1e-7);
  expect_values(gelu(as(f32({kInf}), DType::F16)), {kInf});
  expect_values(gelu(f32({kInf}), "tanh"), {kInf});
  EXPECT_ERROR_HAS(gelu(f32({1}), "fast"), "approximate must be \"none\" or \"tanh\", got \"fast\"");
  EXPECT_ERROR_HAS(gelu(ints<int64_t>({1})), "gelu: expected a floating-point tensor");
  EXPECT_ERROR_HAS(silu(ints<int32_t>({1})), "silu: expected a floating-point tensor");
}

TEST(PointwiseUnary, DTypeKeepingOpsOnIntegers) {
  Tensor x = ints<int32_t>({-3, 0, 5});
  for (const Tensor& r : {abs(x), neg(x), sign(x), floor(x), ceil(x), round(x), trunc(x), relu(x)})
    EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(abs(x).to_double_vector(), (std::vector<double>{3, 0, 5}));
  EXPECT_EQ(neg(x).to_double_vector(), (std::vector<double>{3, 0, -5}));
  EXPECT_EQ(sign(x).to_double_vector(), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(relu(x).to_double_vector(), (std::vector<double>{0, 0, 5}));
  EXPECT_EQ(floor(x).to_double_vector(), (std::vector<double>{-3, 0, 5}));
  // floor of an integer tensor is a copy, not the input itself
  Tensor fl = floor(x);
  EXPECT_NE(fl.data_ptr(), x.data_ptr());
  // two's-complement wrap like PyTorch
  EXPECT_EQ(abs(ints<int64_t>({std::numeric_limits<int64_t>::min()})).item<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(neg(ints<int8_t>({-128})).item<int64_t>(), -128);
  EXPECT_EQ(neg(ints<uint8_t>({1})).item<int64_t>(), 255);
  EXPECT_EQ(sign(ints<uint8_t>({0, 7})).to_double_vector(), (std::vector<double>{0, 1}));
}

TEST(PointwiseUnary, DTypeKeepingOpsOnFloatEdges) {
  expect_values(abs(f32({-0.0, -2, kNaN, -kInf})), {0.0, 2, kNaN, kInf});
  expect_values(neg(f32({0.0, kInf})), {-0.0, -kInf});
  expect_values(sign(f32({-2, -0.0, 0.0, 3, kNaN, -kInf})), {-1, 0, 0, 1, 0, -1});  // sign(nan) == 0 in PyTorch
  expect_values(relu(f32({-1, -0.0, 2, kNaN})), {0, -0.0, 2, kNaN});
  expect_values(floor(f32({-0.5, 1.5, -kInf, kNaN})), {-1, 1, -kInf, kNaN});
  expect_values(ceil(f32({-0.5, 1.5})), {-0.0, 2});
  expect_values(trunc(f32({-1.7, 1.7, -0.2})), {-1, 1, -0.0});
  Tensor h = floor(as(f32({2.5}), DType::BF16));
  EXPECT_EQ(h.dtype(), DType::BF16);
  expect_values(h, {2});
}

TEST(PointwiseUnary, RoundIsHalfToEvenWithDecimals) {
  expect_values(round(f32({0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997, kNaN})), {0, 2, 2, -0.0, -2, 0, kNaN});
  expect_values(round(f64({1.2345, -2.675, 0.125}), 2), {1.23, -2.68, 0.12}, 1e-15);
  expect_values(round(f64({1250, 1350, -1749}), -2), {1200, 1400, -1700});
  EXPECT_EQ(round(ints<int64_t>({7})).to_double_vector(), (std::vector<double>{7}));
  EXPECT_ERROR_HAS(round(ints<int64_t>({7}), 1), "round: decimals=1 is only supported for floating-point");
}

TEST(PointwiseUnary, BoolInputErrorsMatchPyTorch) {
  Tensor b = bools({true, false});
  EXPECT_ERROR_HAS(neg(b), "neg: negation of a bool tensor");
  EXPECT_ERROR_HAS(abs(b), "abs: not supported for bool tensors");
  EXPECT_ERROR_HAS(relu(b), "relu: not supported for bool tensors");
  EXPECT_ERROR_HAS(floor(b), "floor: not supported for bool tensors");
  EXPECT_ERROR_HAS(trunc(b), "trunc: not supported for bool tensors");
  Tensor s = sign(b);  // sign of bool is the identity
  EXPECT_EQ(s.dtype(), DType::Bool);
  EXPECT_EQ(s.to_double_vector(), (std::vector<double>{1, 0}));
}

TEST(PointwiseUnary, PredicatesReturnBool) {
  Tensor x = f32({0, -0.0, 1, kNaN, kInf, -kInf});
  Tensor n = logical_not(x), in = isnan(x), ii = isinf(x);
  for (const Tensor& t : {n, in, ii}) EXPECT_EQ(t.dtype(), DType::Bool);
  EXPECT_EQ(n.to_double_vector(), (std::vector<double>{1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(in.to_double_vector(), (std::vector<double>{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(ii.to_double_vector(), (std::vector<double>{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(isnan(ints<int32_t>({1, 2})).to_double_vector(), (std::vector<double>{0, 0}));
  EXPECT_EQ(isinf(as(f32({kInf, 1}), DType::F16)).to_double_vector(), (std::vector<double>{1, 0}));
  EXPECT_EQ(logical_not(ints<int64_t>({0, 3})).to_double_vector(), (std::vector<double>{1, 0}));
}

// ================================================================ binary: promotion, values, errors

TEST(PointwiseBinary, ArithmeticFollowsTypePromotion) {
  Tensor i32 = ints<int32_t>({1, 2}), u8 = ints<uint8_t>({1, 2}), i8 = ints<int8_t>({1, 2});
  EXPECT_EQ(add(i32, 2.5).dtype(), DType::F32);                           // float number: default float
  EXPECT_EQ(add(i32, int64_t(1) << 40).dtype(), DType::I32);              // int number keeps the tensor dtype
  EXPECT_EQ(mul(u8, i8).dtype(), DType::I16);
  EXPECT_EQ(add(as(f32({1}), DType::F16), Tensor::scalar(1.0, DType::F64)).dtype(), DType::F16);  // 0-dim: lower priority
  EXPECT_EQ(add(bools({true}), bools({true})).dtype(), DType::Bool);
  EXPECT_EQ(add(bools({true}), bools({true})).item<bool>(), true);
  EXPECT_EQ(mul(i32, bools({true, false})).to_double_vector(), (std::vector<double>{1, 0}));
  expect_values(sub(f32({1, 2}), f32({0.5}), 2), {0, 1});
  EXPECT_ERROR_HAS(sub(bools({true}), bools({false})), "use logical_xor");
  // u8 arithmetic wraps
  EXPECT_EQ(add(ints<uint8_t>({250}), ints<uint8_t>({10})).item<int64_t>(), 4);
}

TEST(PointwiseBinary, TrueDivision) {
  Tensor q = div(ints<int64_t>({7, -7, 1, 0}), ints<int64_t>({2, 2, 0, 0}));
  EXPECT_EQ(q.dtype(), DType::F32);
  expect_values(q, {3.5, -3.5, kInf, kNaN});
  expect_values(div(f32({1, -1, 1}), f32({0, 0, -0.0})), {kInf, -kInf, -kInf});
  EXPECT_EQ(div(ints<int32_t>({1}), 2).dtype(), DType::F32);
  EXPECT_EQ(div(f64({1}), ints<int32_t>({2})).dtype(), DType::F64);
  EXPECT_EQ(div(bools({true}), bools({true})).dtype(), DType::F32);
}

TEST(PointwiseBinary, DivisionWithRoundingModes) {
  Tensor a = ints<int64_t>({7, -7, 7, -7, 0}), b = ints<int64_t>({2, 2, -2, -2, 3});
  Tensor t = div(a, b, std::string("trunc")), f = div(a, b, std::string("floor"));
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{3, -3, -3, 3, 0}));
  EXPECT_EQ(f.to_double_vector(), (std::vector<double>{3, -4, -4, 3, 0}));
  expect_values(div(f32({7.5, -7.5, -0.0, 1, -1}), f32({2, 2, 1, 0, 0}), std::string("trunc")), {3, -3, -0.0, kInf, -kInf});
  expect_values(div(f32({7.5, -7.5, -0.0, 1, 0.5}), f32({2, 2, 1, 0, -3}), std::string("floor")), {3, -4, -0.0, kInf, -1});
  expect_values(div(f64({-1e-300}), f64({1e10}), std::string("floor")), {-1});
  EXPECT_EQ(div(ints<uint8_t>({200}), ints<uint8_t>({7}), std::string("floor")).item<int64_t>(), 28);
  EXPECT_EQ(div(ints<int32_t>({5}), 2.0, std::string("floor")).dtype(), DType::F32);
  EXPECT_ERROR_HAS(div(a, ints<int64_t>({1, 1, 0, 1, 1}), std::string("floor")), "ZeroDivisionError");
  EXPECT_ERROR_HAS(div(a, 0, std::string("trunc")), "ZeroDivisionError");
  EXPECT_ERROR_HAS(div(f32({1}), f32({1}), std::string("round")), "rounding_mode must be None, \"trunc\" or \"floor\"");
  EXPECT_ERROR_HAS(div(bools({true}), bools({true}), std::string("floor")), "not supported for bool");
  // a wrapped divisor is converted to the integer dtype first: 256 as u8 is 0
  EXPECT_ERROR_HAS(div(ints<uint8_t>({1}), 256, std::string("floor")), "ZeroDivisionError");
}

TEST(PointwiseBinary, RemainderHasTheSignOfTheDivisor) {
  Tensor r = remainder(ints<int32_t>({-7, 7, -7, 7, 0}), ints<int32_t>({3, -3, -3, 3, -3}));
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(r.to_double_vector(), (std::vector<double>{2, -2, -1, 1, 0}));
  expect_values(remainder(f32({-7.5, 7.5, 5, -0.0, 1, kInf}), f32({2, -2, 0, 1, kInf, 2})), {0.5, -0.5, kNaN, -0.0, 1, kNaN});
  expect_values(remainder(f64({-1}), f64({kInf})), {kInf});  // -1 + inf, as Python's math and PyTorch give
  // The exact remainder, also where |a / b| overflows f32 (1e30 % 1e-30, a denormal divisor), as PyTorch's scalar
  // path (its vectorised Sleef fmod gives NaN there)
  expect_values(remainder(f32({1e30, 1e30, -1e-30, 1}), f32({1e-30, 100, -1e30, 1e-45})),
                {double(std::fmod(1e30f, 1e-30f)), 40, -1e-30, 0}, 1e-7);
  EXPECT_EQ(remainder(ints<int64_t>({5}), 2.5).dtype(), DType::F32);
  EXPECT_ERROR_HAS(remainder(ints<int64_t>({5}), 0), "ZeroDivisionError");
  EXPECT_ERROR_HAS(remainder(bools({true}), bools({true})), "remainder: not supported for bool");
}

TEST(PointwiseBinary, PowDTypesAndSpecialCases) {
  Tensor p = pow(ints<int32_t>({2, -3, 0}), 3);
  EXPECT_EQ(p.dtype(), DType::I32);
  EXPECT_EQ(p.to_double_vector(), (std::vector<double>{8, -27, 0}));
  EXPECT_EQ(pow(ints<int64_t>({2}), 62).item<int64_t>(), int64_t(1) << 62);
  EXPECT_ERROR_HAS(pow(ints<int64_t>({2}), -1), "Integers to negative integer powers are not allowed");
  EXPECT_ERROR_HAS(pow(bools({true}), -2), "Integers to negative integer powers are not allowed");
  // a negative exponent *tensor* of integers is allowed: 0 except for bases 1 and -1
  Tensor q = pow(ints<int64_t>({2, 1, -1, -1}), ints<int64_t>({-1, -5, -3, -2}));
  EXPECT_EQ(q.to_double_vector(), (std::vector<double>{0, 1, -1, 1}));
  EXPECT_EQ(pow(ints<int32_t>({4}), 0.5).dtype(), DType::F32);
  expect_values(pow(ints<int32_t>({4}), 0.5), {2});
  EXPECT_EQ(pow(2, ints<int32_t>({3})).dtype(), DType::I32);
  EXPECT_EQ(pow(2, ints<int32_t>({3})).item<int64_t>(), 8);
  EXPECT_EQ(pow(2.0, ints<int32_t>({3})).dtype(), DType::F32);
  expect_values(pow(f32({-8, 0, 0, -2, kNaN}), f32({1.0 / 3, 0, -1, 2, 0})), {kNaN, 1, kInf, 4, 1});
  // pow(x, 0.5) is sqrt: pow(-0, 0.5) = -0 and pow(-inf, 0.5) = nan (std::pow would give +0 and inf)
  expect_values(pow(f32({-0.0, -kInf, 4}), 0.5), {-0.0, kNaN, 2});
  expect_values(pow(f32({kNaN, 3}), 0), {1, 1});
  expect_values(pow(f32({-2, 0, 3}), -2), {0.25, kInf, 1.0 / 9}, 1e-7);
  expect_values(pow(f64({2, -2}), 10.0), {1024, 1024});
  expect_values(pow(1, f32({kNaN, 5})), {1, 1});
  EXPECT_EQ(pow(as(f32({3}), DType::F16), 2).dtype(), DType::F16);
  EXPECT_ERROR_HAS(pow(bools({true}), bools({false})), "pow: not supported for bool");
  EXPECT_ERROR_HAS(pow(as(f32({3}), DType::F16), 1e6), "cannot be converted to f16 without overflow");
}

TEST(PointwiseBinary, MaximumMinimumPropagateNaN) {
  expect_values(maximum(f32({1, kNaN, 3, -kInf}), f32({2, 0, kNaN, 5})), {2, kNaN, kNaN, 5});
  expect_values(minimum(f32({1, kNaN, 3, -kInf}), f32({2, 0, kNaN, 5})), {1, kNaN, kNaN, -kInf});
  EXPECT_EQ(maximum(ints<int32_t>({1, 5}), f32({2, 2})).dtype(), DType::F32);
  EXPECT_EQ(maximum(ints<int32_t>({1, 5}), ints<int64_t>({2, 2})).to_double_vector(), (std::vector<double>{2, 5}));
  EXPECT_EQ(minimum(bools({true, false}), bools({true, true})).to_double_vector(), (std::vector<double>{1, 0}));
  // no number overloads in PyTorch for these
  EXPECT_ERROR_HAS(call_op_named("maximum", {f32({1}), 2.0}), "maximum(): argument 'other' must be a Tensor, not the number");
  EXPECT_ERROR_HAS(call_op_named("atan2", {1, f32({1})}), "atan2(): argument 'self' must be a Tensor");
  EXPECT_ERROR_HAS(call_op_named("logical_or", {f32({1}), true}), "logical_or(): argument 'other' must be a Tensor");
  EXPECT_EQ(maximum(bools({true, false}), bools({false, false})).dtype(), DType::Bool);
}

TEST(PointwiseBinary, Atan2Quadrants) {
  expect_values(atan2(f64({0, -0.0, 0, -0.0, 1, -1}), f64({0, 0, -0.0, -0.0, -1, -1})),
                {0, -0.0, M_PI, -M_PI, 3 * M_PI / 4, -3 * M_PI / 4}, 1e-15);
  EXPECT_EQ(atan2(ints<int32_t>({1}), ints<int32_t>({1})).dtype(), DType::F32);
  expect_values(atan2(ints<int32_t>({1}), ints<int32_t>({1})), {M_PI / 4}, 1e-7);
}

TEST(PointwiseBinary, ComparisonsRunInThePromotedType) {
  Tensor x = ints<int32_t>({1, 2, 3});
  Tensor lt_r = lt(x, 2.5);
  EXPECT_EQ(lt_r.dtype(), DType::Bool);
  EXPECT_EQ(lt_r.to_double_vector(), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(ge(x, 2).to_double_vector(), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(le(x, ints<int64_t>({2})).to_double_vector(), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(gt(x, 1.5).to_double_vector(), (std::vector<double>{0, 1, 1}));
  // 16777217 and 16777216.0f are equal in f32, the promoted type
  EXPECT_TRUE(eq(ints<int64_t>({16777217}), f32({16777216})).item<bool>());
  EXPECT_FALSE(eq(ints<int64_t>({16777217}), f64({16777216})).item<bool>());
  Tensor n = f32({kNaN, 1});
  EXPECT_EQ(eq(n, n).to_double_vector(), (std::vector<double>{0, 1}));
  EXPECT_EQ(ne(n, n).to_double_vector(), (std::vector<double>{1, 0}));
  EXPECT_EQ(eq(f32({-0.0}), f32({0.0})).item<bool>(), true);
  Tensor b = lt(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}), f32({2, 5, 4}));
  EXPECT_EQ(b.sizes(), (Shape{2, 3}));
  EXPECT_EQ(b.to_double_vector(), (std::vector<double>{1, 1, 1, 0, 0, 0}));
  EXPECT_ERROR_HAS(eq(f32({1, 2}), f32({1, 2, 3})), "cannot be broadcast");
}

TEST(PointwiseBinary, LogicalOpsTreatNonzeroAsTrue) {
  Tensor a = f32({0, kNaN, 2, -0.0}), b = ints<int32_t>({1, 1, 0, 0});
  Tensor r = logical_and(a, b);
  EXPECT_EQ(r.dtype(), DType::Bool);
  EXPECT_EQ(r.to_double_vector(), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(logical_or(a, b).to_double_vector(), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_EQ(logical_xor(a, b).to_double_vector(), (std::vector<double>{1, 0, 1, 0}));
  EXPECT_EQ(logical_or(bools({false, true}), bools({false})).to_double_vector(), (std::vector<double>{0, 1}));
}

TEST(PointwiseBinary, BitwiseOpsOnIntegersAndBool) {
  Tensor r = bitwise_and(ints<int32_t>({12, -1}), 10);
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(r.to_double_vector(), (std::vector<double>{8, 10}));
  EXPECT_EQ(bitwise_or(ints<uint8_t>({1}), ints<int8_t>({-128})).dtype(), DType::I16);
  EXPECT_EQ(bitwise_or(ints<uint8_t>({1}), ints<int8_t>({-128})).item<int64_t>(), -127);
  Tensor x = bitwise_xor(bools({true, false}), bools({true, true}));
  EXPECT_EQ(x.dtype(), DType::Bool);
  EXPECT_EQ(x.to_double_vector(), (std::vector<double>{0, 1}));
  EXPECT_ERROR_HAS(bitwise_and(f32({1}), ints<int32_t>({1})), "bitwise_and: only integer and bool tensors");
  EXPECT_ERROR_HAS(bitwise_xor(ints<int32_t>({1}), 1.5), "promote to f32");
}

TEST(PointwiseBinary, LargeTensorsMatchAReferenceLoop) {
  // Big enough to be split across threads: the flat contiguous path, the number-operand path, and the strided
  // (non-contiguous, broadcast) path must all agree with a plain loop.
  const int64_t n = 100003;
  std::vector<float> av(static_cast<size_t>(2 * n)), bv(static_cast<size_t>(n));
  for (int64_t i = 0; i < 2 * n; ++i) av[size_t(i)] = float(std::sin(double(i)));
  for (int64_t i = 0; i < n; ++i) bv[size_t(i)] = float(std::cos(double(i)) + 2);
  Tensor a2 = Tensor::from_vector<float>(av, {2 * n});
  Tensor a = slice(a2, 0, 0, n), strided = slice(a2, 0, 0, 2 * n, 2), b = Tensor::from_vector<float>(bv, {n});
  std::vector<double> sum_ab = add(a, b).to_double_vector(), prod = mul(strided, b).to_double_vector();
  std::vector<double> quot = div(a, b).to_double_vector(), plus = add(a, 1.5).to_double_vector();
  std::vector<double> bigger = gt(strided, a).to_double_vector(), e = exp(strided).to_double_vector();
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = size_t(i);
    ASSERT_EQ(sum_ab[k], double(av[k] + bv[k])) << i;
    ASSERT_EQ(prod[k], double(av[2 * k] * bv[k])) << i;
    ASSERT_EQ(quot[k], double(av[k] / bv[k])) << i;
    ASSERT_EQ(plus[k], double(av[k] + 1.5f)) << i;
    ASSERT_EQ(bigger[k], double(av[2 * k] > av[k])) << i;
    ASSERT_EQ(e[k], double(std::exp(av[2 * k]))) << i;
  }
  Tensor outer = add(view(slice(a, 0, 0, 400), {400, 1}), view(slice(b, 0, 0, 300), {1, 300}));
  std::vector<double> ov = outer.to_double_vector();
  for (int64_t i = 0; i < 400; ++i)
    for (int64_t j = 0; j < 300; ++j) ASSERT_EQ(ov[size_t(i * 300 + j)], double(av[size_t(i)] + bv[size_t(j)]));
}

// ================================================================ ternary

TEST(PointwiseTernary, WhereSelectsAndPromotes) {
  Tensor cond = bools({true, false, true});
  Tensor r = where(cond, ints<int32_t>({1, 2, 3}), 0.5);
  EXPECT_EQ(r.dtype(), DType::F32);
  expect_values(r, {1, 0.5, 3});
  Tensor s = where(cond, 1.0, 2.0);
  EXPECT_EQ(s.dtype(), DType::F32);  // two float numbers give the default float
  EXPECT_EQ(where(cond, 1, 2).dtype(), DType::I64);
  Tensor c2 = Tensor::from_vector<bool>({true, false}, {2, 1});
  Tensor b = where(c2, f64({1, 2, 3}), f64({-1}));
  EXPECT_EQ(b.sizes(), (Shape{2, 3}));
  EXPECT_EQ(b.to_double_vector(), (std::vector<double>{1, 2, 3, -1, -1, -1}));
  EXPECT_EQ(where(ints<uint8_t>({1, 0}), 1, 2).to_double_vector(), (std::vector<double>{1, 2}));  // u8: deprecated but allowed
  EXPECT_ERROR_HAS(where(f32({1}), 1, 2), "where: expected condition to be a bool tensor, but got f32[1]");
}

TEST(PointwiseTernary, ClampBoundsDTypesAndNaN) {
  Tensor x = ints<int32_t>({-5, 0, 5, 10});
  Tensor r = clamp(x, 0, 6);
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(r.to_double_vector(), (std::vector<double>{0, 0, 5, 6}));
  Tensor p = clamp(x, 0.5, std::nullopt);
  EXPECT_EQ(p.dtype(), DType::F32);
  expect_values(p, {0.5, 0.5, 5, 10});
  EXPECT_EQ(clamp(bools({true, false}), 0, std::nullopt).dtype(), DType::I64);
  expect_values(clamp(f32({kNaN, -kInf, 2, -0.0}), -1, 1), {kNaN, -1, 1, -0.0});
  expect_values(clamp(f32({1, 5}), std::nullopt, 3), {1, 3});
  expect_values(clamp(f32({1, 5}), 4, 2), {2, 2});  // min > max: everything becomes max
  expect_values(clamp(f32({1, 5}), kNaN, 2), {kNaN, kNaN});
  expect_values(clamp(f32({1, 5}), kNaN, std::nullopt), {1, 5});
  Tensor h = clamp(as(f32({0.05, 0.5}), DType::F16), 0.1, std::nullopt);
  EXPECT_EQ(h.dtype(), DType::F16);
  expect_values(h, {float(Half(0.1f)), 0.5});
  EXPECT_ERROR_HAS(clamp(f32({1}), std::nullopt, std::nullopt), "at least one of 'min' or 'max'");
  EXPECT_ERROR_HAS(clamp(ints<int8_t>({1}), -1000, std::nullopt), "min -1000 cannot be converted to i8 without overflow");
}

TEST(PointwiseTernary, LerpAndAddcmul) {
  Tensor a = f64({0, 10, -4}), b = f64({10, 20, 4});
  expect_values(lerp(a, b, 0.25), {2.5, 12.5, -2});
  expect_values(lerp(a, b, 0.75), {7.5, 17.5, 2});
  expect_values(lerp(a, b, f64({0, 1, 0.5})), {0, 20, 0});
  expect_values(lerp(f32({1}), f32({2}), Tensor::scalar(0.5, DType::F64)), {1.5});
  // f16 computes in f32 and rounds once (values from PyTorch 2.11)
  Tensor h = lerp(as(f32({1.3349609375}), DType::F16), as(f32({-2.751953125}), DType::F16), 0.3);
  EXPECT_EQ(h.dtype(), DType::F16);
  expect_values(h, {0.10888671875});
  EXPECT_EQ(lerp(Tensor::scalar(1.0, DType::F32), Tensor::scalar(2.0, DType::F32), Tensor::scalar(0.5, DType::F64)).dtype(),
            DType::F64);  // all 0-dim: the weight's dtype takes part in promotion
  EXPECT_EQ(lerp(f32({1}), f32({2}), 0.5).dtype(), DType::F32);
  EXPECT_ERROR_HAS(lerp(f32({1}), f64({2}), 0.5), "lerp: expected dtype f32 for `end` but got dtype f64");
  EXPECT_ERROR_HAS(lerp(f32({1}), f32({2}), f64({0.5})), "for `weight` but got dtype f64");
  Tensor m = addcmul(f32({1, 2}), f32({2, 3}), f32({4, 5}), 0.5);
  EXPECT_EQ(m.dtype(), DType::F32);
  expect_values(m, {5, 9.5});
  Tensor i = addcmul(ints<int32_t>({1}), ints<int32_t>({2}), ints<int64_t>({3}));
  EXPECT_EQ(i.dtype(), DType::I64);
  EXPECT_EQ(i.item<int64_t>(), 7);
  EXPECT_EQ(addcmul(ints<int32_t>({1}), f32({2}), ints<int32_t>({3})).dtype(), DType::F32);
}

// ================================================================ inference agrees with the kernels

TEST(PointwiseInfer, MetaResultsMatchEagerResults) {
  Tensor i32 = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor f = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor h = as(f, DType::F16);
  Tensor b = bools({true, false, true});
  std::vector<std::pair<std::string, std::vector<IValue>>> calls = {
      {"exp", {i32}},       {"sqrt", {h}},          {"abs", {i32}},         {"round", {f}},
      {"sign", {b}},        {"isnan", {f}},         {"logical_not", {i32}}, {"gelu", {h}},
      {"add", {i32, 2.5}},  {"div", {i32, f}},      {"remainder", {i32, 4}}, {"pow", {i32, 2}},
      {"pow", {2.0, i32}},  {"maximum", {i32, f}},  {"atan2", {i32, b}},    {"eq", {i32, f}},
      {"logical_xor", {f, b}}, {"bitwise_or", {i32, b}}, {"where", {b, i32, 1.5}}, {"clamp", {i32, 0, 2.5}},
      {"lerp", {f, f, 0.3}}, {"addcmul", {f, i32, i32}},
  };
  for (const auto& [name, args] : calls) {
    SCOPED_TRACE(name);
    Tensor eager = call_op_named(name, args)[0];
    std::vector<IValue> meta_args;
    for (const IValue& v : args)
      meta_args.push_back(v.is_tensor() && !v.tensor().is_wrapped_number() ? IValue(Tensor::meta(v.tensor().meta())) : v);
    Tensor m = call_op_named(name, meta_args)[0];
    EXPECT_TRUE(m.is_meta());
    EXPECT_EQ(m.dtype(), eager.dtype());
    EXPECT_EQ(m.sizes(), eager.sizes());
  }
  // errors are raised by shape inference too
  EXPECT_ERROR_HAS(neg(Tensor::meta(b.meta())), "neg: negation of a bool tensor");
  EXPECT_ERROR_HAS(bitwise_and(Tensor::meta(f.meta()), 1), "bitwise_and");
}

TEST(PointwiseTernary, LerpKernelAgreesWithItsDecomposition) {
  Rand r;
  const OpInfo& op = op_info(OpId::lerp);
  const std::vector<std::vector<IValue>> calls = {
      {r.uniform({2, 3}, -2, 2), r.uniform({3}, -2, 2), r.uniform({2, 1}, -0.5, 1.5)},
      {r.uniform({4}, -2, 2), r.uniform({4}, -2, 2), 0.25},
      {r.uniform({4}, -2, 2), r.uniform({1}, -2, 2), 0.9},
      {r.uniform({0, 2}, -2, 2), r.uniform({2}, -2, 2), 0.5},
  };
  for (const auto& args : calls) {
    OpCall call = bind_args(op, args);
    Tensor kernel = op.kernel(call)[0], decomposed = op.decomp(call)[0];
    ASSERT_EQ(kernel.sizes(), decomposed.sizes());
    std::vector<double> k = kernel.to_double_vector(), d = decomposed.to_double_vector();
    for (size_t i = 0; i < k.size(); ++i) EXPECT_NEAR(k[i], d[i], 1e-15 * (1 + std::abs(d[i])));
  }
}

// ================================================================ gradients

TEST(PointwiseGrad, UnaryOpsInTheirSmoothDomains) {
  check_unary_grad("exp", [](const Tensor& x) { return exp(x); }, -2, 2);
  check_unary_grad("exp2", [](const Tensor& x) { return exp2(x); }, -2, 2);
  check_unary_grad("log", [](const Tensor& x) { return log(x); }, 0.2, 3);
  check_unary_grad("log2", [](const Tensor& x) { return log2(x); }, 0.2, 3);
  check_unary_grad("log1p", [](const Tensor& x) { return log1p(x); }, -0.5, 3);
  check_unary_grad("expm1", [](const Tensor& x) { return expm1(x); }, -2, 2);
  check_unary_grad("sqrt", [](const Tensor& x) { return sqrt(x); }, 0.2, 3);
  check_unary_grad("rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.2, 3);
  check_unary_grad("sin", [](const Tensor& x) { return sin(x); }, -3, 3);
  check_unary_grad("cos", [](const Tensor& x) { return cos(x); }, -3, 3);
  check_unary_grad("tan", [](const Tensor& x) { return tan(x); }, -1.2, 1.2);
  check_unary_grad("tanh", [](const Tensor& x) { return tanh(x); }, -2, 2);
  check_unary_grad("asin", [](const Tensor& x) { return asin(x); }, -0.9, 0.9);
  check_unary_grad("acos", [](const Tensor& x) { return acos(x); }, -0.9, 0.9);
  check_unary_grad("atan", [](const Tensor& x) { return atan(x); }, -3, 3);
  check_unary_grad("sinh", [](const Tensor& x) { return sinh(x); }, -2, 2);
  check_unary_grad("cosh", [](const Tensor& x) { return cosh(x); }, -2, 2);
  check_unary_grad("sigmoid", [](const Tensor& x) { return sigmoid(x); }, -4, 4);
  check_unary_grad("erf", [](const Tensor& x) { return erf(x); }, -2, 2);
  check_unary_grad("reciprocal", [](const Tensor& x) { return reciprocal(x); }, 0.2, 3, true);
  check_unary_grad("gelu", [](const Tensor& x) { return gelu(x); }, -3, 3);
  check_unary_grad("gelu tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, -3, 3);
  check_unary_grad("silu", [](const Tensor& x) { return silu(x); }, -3, 3);
  check_unary_grad("neg", [](const Tensor& x) { return neg(x); }, -3, 3);
  check_unary_grad("abs", [](const Tensor& x) { return abs(x); }, 0.1, 3, true);
  check_unary_grad("relu", [](const Tensor& x) { return relu(x); }, 0.1, 3, true);
  check_unary_grad("sign", [](const Tensor& x) { return sign(x); }, 0.1, 3, true);
  // rounding ops: keep away from the jumps (integers for floor/ceil/trunc, half-integers for round)
  check_unary_grad("floor", [](const Tensor& x) { return floor(x); }, 0.1, 0.4, true);
  check_unary_grad("ceil", [](const Tensor& x) { return ceil(x); }, 1.1, 1.4, true);
  check_unary_grad("trunc", [](const Tensor& x) { return trunc(x); }, 2.1, 2.4, true);
  check_unary_grad("round", [](const Tensor& x) { return round(x); }, 0.1, 0.4, true);
  check_unary_grad("round decimals", [](const Tensor& x) { return round(x, 1); }, 0.11, 0.14, true);
}

TEST(PointwiseGrad, BinaryOpsWithBroadcasting) {
  check_binary_grad("add", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); }, -2, 2, -2, 2);
  check_binary_grad("sub", [](const Tensor& a, const Tensor& b) { return sub(a, b, 0.5); }, -2, 2, -2, 2);
  check_binary_grad("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, -2, 2, -2, 2);
  check_binary_grad("div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, -2, 2, 0.5, 2, true);
  check_binary_grad("div floor", [](const Tensor& a, const Tensor& b) { return div(a, b, std::string("floor")); },
                    -2, 2, 0.5, 2, true);
  check_binary_grad("div trunc", [](const Tensor& a, const Tensor& b) { return div(a, b, std::string("trunc")); },
                    -2, 2, 0.5, 2, true);
  check_binary_grad("remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); }, -3, 3, 0.7, 2, true);
  check_binary_grad("pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, 0.3, 2, -2, 2);
  check_binary_grad("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, -2, 2, -2, 2);
  check_binary_grad("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, -2, 2, -2, 2);
  check_binary_grad("atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); }, 0.2, 2, 0.2, 2, true);
}

TEST(PointwiseGrad, OpsWithNumberOperandsAndTernaryOps) {
  Rand r;
  auto check = [&](const std::string& name, std::function<Tensor(const std::vector<Tensor>&)> op,
                   std::vector<Tensor> inputs) {
    expect_gradcheck([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{op(in)}; }, inputs, name);
  };
  Tensor pos = leaf(r.uniform({2, 3}, 0.3, 2));
  Tensor any = leaf(r.uniform({2, 3}, -2, 2));
  Tensor t = transposed_leaf(r, {2, 3}, 0.1, 2, true);
  check("pow tensor^2.5", [](const auto& in) { return pow(in[0], 2.5); }, {pos});
  check("pow tensor^3", [](const auto& in) { return pow(in[0], 3); }, {t});
  check("pow tensor^-0.5", [](const auto& in) { return pow(in[0], -0.5); }, {pos});
  check("pow 2^tensor", [](const auto& in) { return pow(2.0, in[0]); }, {t});
  check("div by number", [](const auto& in) { return div(in[0], 3.0); }, {any});
  check("number div", [](const auto& in) { return div(3.0, in[0]); }, {pos});
  check("where", [](const auto& in) { return where(gt(in[0], 0), in[1], in[2]); },
        {any.detach(), leaf(r.uniform({3}, -2, 2)), leaf(r.uniform({2, 1}, -2, 2))});
  check("where number", [](const auto& in) { return where(gt(in[0], 0), in[0], 0.5); }, {t});
  Tensor away = leaf(r.uniform({3, 4}, 0.1, 0.9, true));  // no element within 0.1 of the kinks +-1 and 0
  Tensor straddling = leaf(Tensor::from_vector<double>({-1.9, -1.2, -0.8, -0.1, 0.3, 0.9, 1.1, 1.7}, {2, 4}));
  check("clamp both", [](const auto& in) { return clamp(in[0], -1.0, 1.0); }, {straddling});
  check("clamp min", [](const auto& in) { return clamp(in[0], 0, std::nullopt); }, {away});
  check("clamp max", [](const auto& in) { return clamp(in[0], std::nullopt, 0); }, {t});
  check("lerp scalar low", [](const auto& in) { return lerp(in[0], in[1], 0.3); }, {any, leaf(r.uniform({3}, -2, 2))});
  check("lerp scalar high", [](const auto& in) { return lerp(in[0], in[1], 0.8); }, {t, leaf(r.uniform({1, 3}, -2, 2))});
  check("lerp tensor", [](const auto& in) { return lerp(in[0], in[1], in[2]); },
        {any, leaf(r.uniform({3}, -2, 2)), leaf(r.uniform({2, 1}, 0.1, 0.9))});
  check("addcmul", [](const auto& in) { return addcmul(in[0], in[1], in[2], 0.7); },
        {t, leaf(r.uniform({3}, -2, 2)), leaf(r.uniform({2, 1}, -2, 2))});
  check("addcmul 0-size", [](const auto& in) { return addcmul(in[0], in[1], in[2]); },
        {leaf(r.uniform({0, 3}, -2, 2)), leaf(r.uniform({3}, -2, 2)), leaf(r.uniform({1}, -2, 2))});
}

// Gradients at the points PyTorch defines by convention.
TEST(PointwiseGrad, ConventionsAtKinksAndTies) {
  auto grads = [](const std::vector<Tensor>& inputs, const Tensor& out) {
    sum(out).backward();
    std::vector<std::vector<double>> g;
    for (const Tensor& t : inputs) g.push_back(t.grad().defined() ? t.grad().to_double_vector() : std::vector<double>{});
    return g;
  };
  Tensor x = leaf(f64({-1, 0, 2}));
  EXPECT_EQ(grads({x}, abs(x))[0], (std::vector<double>{-1, 0, 1}));
  x = leaf(f64({-1, 0, 2}));
  EXPECT_EQ(grads({x}, relu(x))[0], (std::vector<double>{0, 0, 1}));
  // maximum/minimum: ties split the gradient in half
  Tensor a = leaf(f64({1, 2, 5})), b = leaf(f64({1, 3, 4}));
  auto g = grads({a, b}, maximum(a, b));
  EXPECT_EQ(g[0], (std::vector<double>{0.5, 0, 1}));
  EXPECT_EQ(g[1], (std::vector<double>{0.5, 1, 0}));
  a = leaf(f64({1, 2, 5})), b = leaf(f64({1, 3, 4}));
  g = grads({a, b}, minimum(a, b));
  EXPECT_EQ(g[0], (std::vector<double>{0.5, 1, 0}));
  EXPECT_EQ(g[1], (std::vector<double>{0.5, 0, 1}));
  // clamp passes the gradient at the bounds themselves
  x = leaf(f64({-1, 0, 0.5, 1, 2}));
  EXPECT_EQ(grads({x}, clamp(x, 0, 1))[0], (std::vector<double>{0, 1, 1, 1, 0}));
  // pow at base 0 and exponent 0: d/dbase is 0 where exponent == 0; d/dexp is 0 where base == 0, exp >= 0
  Tensor base = leaf(f64({0, 0, 0, 2})), e = leaf(f64({0, 2, -1, 0}));
  g = grads({base, e}, pow(base, e));
  EXPECT_EQ(g[0][0], 0);
  EXPECT_EQ(g[0][1], 0);
  EXPECT_EQ(g[0][3], 0);
  EXPECT_EQ(g[1][0], 0);
  EXPECT_EQ(g[1][1], 0);
  EXPECT_EQ(g[1][2], -kInf);  // 0^-1 = inf, times log(0) = -inf
  EXPECT_NEAR(g[1][3], std::log(2.0), 1e-15);
  x = leaf(f64({0, 3}));
  EXPECT_EQ(grads({x}, pow(x, 0))[0], (std::vector<double>{0, 0}));
  // rounded division and rounding ops have zero gradient
  a = leaf(f64({3, 5})), b = leaf(f64({2, 2}));
  g = grads({a, b}, div(a, b, std::string("floor")));
  EXPECT_EQ(g[0], (std::vector<double>{0, 0}));
  EXPECT_EQ(g[1], (std::vector<double>{0, 0}));
  // remainder: d/db = -floor(a/b)
  a = leaf(f64({7, -7})), b = leaf(f64({2, 2}));
  g = grads({a, b}, remainder(a, b));
  EXPECT_EQ(g[0], (std::vector<double>{1, 1}));
  EXPECT_EQ(g[1], (std::vector<double>{-3, 4}));
}

TEST(PointwiseGrad, SecondOrderThroughRecomputedOutputs) {
  // d2/dx2 exp(x) = exp(x), d2/dx2 sigmoid = s(1-s)(1-2s), d2/dx2 sqrt = -1/4 x^-3/2
  Tensor x = leaf(f64({0.5, 1.5}));
  for (int op = 0; op < 3; ++op) {
    Tensor y = op == 0 ? exp(x) : op == 1 ? sigmoid(x) : sqrt(x);
    Tensor g1 = grad({sum(y)}, {x}, {}, true, true)[0];
    Tensor g2 = grad({sum(g1)}, {x})[0];
    std::vector<double> got = g2.to_double_vector();
    for (size_t i = 0; i < 2; ++i) {
      double v = x.to_double_vector()[i], s = 1 / (1 + std::exp(-v));
      double want = op == 0 ? std::exp(v) : op == 1 ? s * (1 - s) * (1 - 2 * s) : -0.25 * std::pow(v, -1.5);
      EXPECT_NEAR(got[i], want, 1e-12) << op;
    }
  }
}

// ================================================================ properties

RC_GTEST_PROP(PointwiseProperty, FloorDivisionAndRemainderRebuildTheDividend, (int32_t a, int32_t b)) {
  RC_PRE(b != 0);
  Tensor ta = ints<int64_t>({a}), tb = ints<int64_t>({b});
  int64_t q = div(ta, tb, std::string("floor")).item<int64_t>();
  int64_t r = remainder(ta, tb).item<int64_t>();
  RC_ASSERT(q * b + r == int64_t(a));
  RC_ASSERT(r == 0 || ((r < 0) == (b < 0)));
  RC_ASSERT(std::abs(r) < std::abs(int64_t(b)));
  RC_ASSERT(div(ta, tb, std::string("trunc")).item<int64_t>() == int64_t(a) / int64_t(b));
}

RC_GTEST_PROP(PointwiseProperty, FloatFloorDivisionMatchesPython, (int16_t a, int16_t b, uint8_t scale)) {
  RC_PRE(b != 0);
  const double x = a / (1.0 + scale), y = b / 8.0;
  const double q = div(f64({x}), f64({y}), std::string("floor")).item<double>();
  const double r = remainder(f64({x}), f64({y})).item<double>();
  RC_ASSERT(q == std::floor(x / y) || std::abs(q - std::floor(x / y)) == 1);  // a/b rounding may cross an integer
  RC_ASSERT(std::abs(q * y + r - x) <= 1e-9 * (1 + std::abs(x)));
}
