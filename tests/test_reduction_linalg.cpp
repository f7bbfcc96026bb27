// Tests of the reductions (sum, mean, prod, amax/amin, argmax/argmin, any/all, var/std, logsumexp) and the
// matrix products (mm, bmm, addmm, matmul, linear): values against reference loops, dtypes, keepdim, empty
// dims, NaN behaviour, error messages, shape inference on meta tensors, and gradchecks in f64.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cblas.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>

#include "autograd/gradcheck.h"
#include "eager/loops.h"
#include "ops/api.h"
#include "ops/blas.h"
#include "ops/common.h"
#include "ops/dispatch.h"

using namespace kiln;

namespace {

std::vector<double> normal_values(int64_t n, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<double> dist;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}
Tensor randn_f64(const Shape& shape, uint64_t seed = 1) {
  return Tensor::from_vector<double>(normal_values(shape_numel(shape), seed), shape);
}
Tensor leaf(const Tensor& t) { return t.detach().set_requires_grad(true); }

// Reference reduction: folds the elements of `x` (row-major values of `shape`) over `dims` with `fold`,
// starting from `init`; returns the values of the reduced (keepdim) result in row-major order.
std::vector<double> ref_reduce(const std::vector<double>& x, const Shape& shape, const std::vector<int64_t>& dims,
                               double init, const std::function<double(double, double)>& fold) {
  Shape out_shape = shape;
  for (int64_t d : dims) out_shape[size_t(d)] = 1;
  std::vector<double> out(size_t(shape_numel(out_shape)), init);
  Shape out_strides = contiguous_strides(out_shape);
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    int64_t rem = i, o = 0;
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      int64_t idx = rem % shape[size_t(d)];
      rem /= shape[size_t(d)];
      if (out_shape[size_t(d)] != 1) o += idx * out_strides[size_t(d)];
    }
    out[size_t(o)] = fold(out[size_t(o)], x[size_t(i)]);
  }
  return out;
}
double add_fold(double a, double b) { return a + b; }

void expect_near_vec(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
    }
  }
}

// Runs `f`, expecting a kiln::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected a kiln::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

void expect_gradcheck(const DiffFn& f, const std::vector<Tensor>& inputs, const std::string& what) {
  GradcheckResult r = gradcheck(f, inputs);
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
}

// The output meta shape inference gives for `name` on meta versions of the tensor arguments.
TensorMeta meta_of_call(std::string_view name, const std::vector<IValue>& args,
                        const std::map<std::string, IValue>& kwargs = {}) {
  std::vector<IValue> meta_args;
  for (const IValue& a : args) meta_args.push_back(a.is_tensor() ? IValue(Tensor::meta(a.tensor().meta())) : a);
  return call_op_named(name, meta_args, kwargs)[0].meta();
}
void expect_infer_matches(std::string_view name, const std::vector<IValue>& args,
                          const std::map<std::string, IValue>& kwargs = {}) {
  Tensor real = call_op_named(name, args, kwargs)[0];
  TensorMeta m = meta_of_call(name, args, kwargs);
  EXPECT_EQ(m.dtype, real.dtype()) << name;
  EXPECT_EQ(m.sizes, real.sizes()) << name;
}

}  // namespace

// ================================================================ reductions

TEST(ReductionSum, MatchesReferenceOverDimsKeepdimAndLayouts) {
  const Shape shape{3, 4, 5};
  Tensor x = randn_f64(shape);
  std::vector<double> xv = x.to_double_vector();
  for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1, 2}}) {
    std::vector<double> want = ref_reduce(xv, shape, dims, 0.0, add_fold);
    for (bool keepdim : {false, true}) {
      Tensor r = sum(x, IntList(dims.begin(), dims.end()), keepdim);
      EXPECT_EQ(r.sizes(), reduced_shape(shape, dims, keepdim));
      expect_near_vec(r.to_double_vector(), want, 1e-12, "sum dims " + shape_str(dims));
    }
    // the same values through a permuted (non-contiguous) layout
    Tensor p = permute(contiguous(permute(x, {2, 0, 1})), {1, 2, 0});
    ASSERT_FALSE(p.is_contiguous());
    expect_near_vec(sum(p, IntList(dims.begin(), dims.end())).to_double_vector(), want, 1e-12, "permuted");
  }
  EXPECT_EQ(sum(x, IntList{-1}).sizes(), (Shape{3, 4}));
  EXPECT_EQ(sum(x, IntList{}).dim(), 0);  // dim=[] reduces everything
  EXPECT_NEAR(sum(x).item<double>(), ref_reduce(xv, shape, {0, 1, 2}, 0.0, add_fold)[0], 1e-12);
}

TEST(ReductionSum, DtypesFollowPyTorch) {
  Tensor b = Tensor::from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(sum(b).dtype(), DType::I64);
  EXPECT_EQ(sum(b).item<int64_t>(), 2);
  Tensor i8 = Tensor::from_vector<int8_t>({100, 100, 100}, {3});
  EXPECT_EQ(sum(i8).dtype(), DType::I64);
  EXPECT_EQ(sum(i8).item<int64_t>(), 300);  // no i8 overflow: accumulated and returned as i64
  Tensor h = to(Tensor::from_vector<float>({1.5f, 2.25f}, {2}), DType::F16);
  EXPECT_EQ(sum(h).dtype(), DType::F16);
  EXPECT_EQ(sum(h).item<double>(), 3.75);
  Tensor f = Tensor::from_vector<float>({1.5f, 1.5f, -2.5f}, {3});
  EXPECT_EQ(sum(f, std::nullopt, false, DType::F64).dtype(), DType::F64);
  // dtype=i64 converts each element first (truncating), like PyTorch
  EXPECT_EQ(sum(f, std::nullopt, false, DType::I64).item<int64_t>(), 0);
  Tensor i32 = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(sum(i32, IntList{0}).to_double_vector(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(sum(i32, IntList{1}, true).sizes(), (Shape{2, 1}));
}

TEST(ReductionSum, EmptyAndZeroDim) {
  Tensor e = zeros({0, 3}, DType::F32);
  EXPECT_EQ(sum(e, IntList{0}).to_double_vector(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(sum(e, IntList{1}).sizes(), (Shape{0}));
  EXPECT_EQ(sum(e).item<double>(), 0.0);
  Tensor s = Tensor::scalar(2.5, DType::F64);
  EXPECT_EQ(sum(s).item<double>(), 2.5);
  EXPECT_EQ(sum(s, IntList{0}).item<double>(), 2.5);   // a 0-dim tensor accepts dim 0 and -1
  EXPECT_EQ(sum(s, IntList{-1}, true).dim(), 0);
}

TEST(ReductionSum, LargeReductionsTakeEveryEnginePath) {
  // vertical (dim 0 of row-major) with a row longer than one block, inner rows, a full reduction split
  // across threads, and few outputs with a long vertical reduction (split reduced range)
  for (Shape shape : {Shape{300, 1500}, Shape{4096, 8}, Shape{100000, 3}, Shape{7, 70000}}) {
    std::vector<double> v(size_t(shape_numel(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t(i * 2654435761u % 1000) - 500) / 8;  // exact in f32
    Tensor x = to(Tensor::from_vector<double>(v, shape), DType::F32);
    for (int64_t d : {0, 1}) {
      std::vector<double> want = ref_reduce(v, shape, {d}, 0.0, add_fold);
      expect_near_vec(sum(x, IntList{d}).to_double_vector(), want, 0, "sum " + shape_str(shape));
      expect_near_vec(sum(transpose(x, 0, 1), IntList{1 - d}).to_double_vector(), want, 0, "transposed");
    }
    expect_near_vec({sum(x).item<double>()}, ref_reduce(v, shape, {0, 1}, 0.0, add_fold), 0, "full");
    std::vector<double> want_max = ref_reduce(v, shape, {0}, -INFINITY, [](double a, double b) { return std::max(a, b); });
    expect_near_vec(amax(x, {0}).to_double_vector(), want_max, 0, "amax");
  }
}

TEST(ReductionMean, ValuesDtypesAndErrors) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(mean(x).item<double>(), 3.5);
  EXPECT_EQ(mean(x, IntList{0}).to_double_vector(), (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(mean(x, IntList{1}, true).sizes(), (Shape{2, 1}));
  EXPECT_EQ(mean(x, IntList{1}, true).to_double_vector(), (std::vector<double>{2, 5}));
  Tensor i = Tensor::from_vector<int64_t>({1, 2}, {2});
  expect_error([&] { mean(i); }, {"mean", "i64", "dtype"});
  expect_error([&] { mean(i, std::nullopt, false, DType::I64); }, {"mean", "floating"});
  Tensor m = mean(i, std::nullopt, false, DType::F32);
  EXPECT_EQ(m.dtype(), DType::F32);
  EXPECT_EQ(m.item<double>(), 1.5);
  EXPECT_TRUE(std::isnan(mean(zeros({0}, DType::F32)).item<double>()));
  EXPECT_EQ(mean(zeros({0, 2}, DType::F64), IntList{1}).sizes(), (Shape{0}));
  EXPECT_EQ(mean(to(x, DType::BF16)).dtype(), DType::BF16);
}

TEST(ReductionProd, ValuesDtypesAndEmpty) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(prod(x).item<double>(), 720);
  EXPECT_EQ(prod(x, 0).to_double_vector(), (std::vector<double>{4, 10, 18}));
  EXPECT_EQ(prod(x, -1, true).sizes(), (Shape{2, 1}));
  EXPECT_EQ(prod(x, -1, true).to_double_vector(), (std::vector<double>{6, 120}));
  Tensor i = Tensor::from_vector<int32_t>({-2, 3, 100000}, {3});
  EXPECT_EQ(prod(i).dtype(), DType::I64);
  EXPECT_EQ(prod(i).item<int64_t>(), -600000);
  EXPECT_EQ(prod(Tensor::from_vector<bool>({true, true}, {2})).dtype(), DType::I64);
  EXPECT_EQ(prod(zeros({2, 0}, DType::F32), 1).to_double_vector(), (std::vector<double>{1, 1}));
  EXPECT_EQ(prod(zeros({0}, DType::I32)).item<int64_t>(), 1);
  EXPECT_EQ(prod(x, std::nullopt, false, DType::F32).dtype(), DType::F32);
  expect_error([&] { prod(x, 2); }, {"prod", "out of range"});
}

TEST(ReductionAmaxAmin, ValuesNaNAndEmptyDims) {
  Tensor x = Tensor::from_vector<float>({1, 7, -3, 4, 7, 0}, {2, 3});
  EXPECT_EQ(amax(x).item<double>(), 7);  // dim=[] reduces everything
  EXPECT_EQ(amin(x).item<double>(), -3);
  EXPECT_EQ(amax(x, {0}).to_double_vector(), (std::vector<double>{4, 7, 0}));
  EXPECT_EQ(amin(x, {1}, true).to_double_vector(), (std::vector<double>{-3, 0}));
  EXPECT_EQ(amin(x, {1}, true).sizes(), (Shape{2, 1}));
  Tensor n = Tensor::from_vector<float>({1, NAN, 3, 4}, {2, 2});
  std::vector<double> mx = amax(n, {1}).to_double_vector();
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_EQ(mx[1], 4);
  EXPECT_TRUE(std::isnan(amin(n).item<double>()));
  // NaN in the middle of a long (vectorised) row still propagates
  std::vector<float> longrow(1000, 1.0f);
  longrow[517] = NAN;
  EXPECT_TRUE(std::isnan(amax(Tensor::from_vector<float>(longrow, {1000})).item<double>()));
  EXPECT_TRUE(std::isnan(amin(Tensor::from_vector<float>(longrow, {1000})).item<double>()));
  Tensor i = Tensor::from_vector<int64_t>({-5, 9, 2}, {3});
  EXPECT_EQ(amax(i).dtype(), DType::I64);
  EXPECT_EQ(amax(i).item<int64_t>(), 9);
  EXPECT_EQ(amin(Tensor::from_vector<bool>({true, false}, {2})).item<bool>(), false);
  EXPECT_EQ(amax(to(x, DType::F16)).dtype(), DType::F16);
  Tensor e = zeros({0, 3}, DType::F32);
  EXPECT_EQ(amax(e, {1}).sizes(), (Shape{0}));
  expect_error([&] { amax(e, {0}); }, {"amax", "dim 0", "size 0", "[0, 3]"});
  expect_error([&] { amin(e); }, {"amin", "size 0"});
}

TEST(ReductionArgmaxArgmin, FirstOccurrenceNaNAndFlattening) {
  Tensor x = Tensor::from_vector<float>({1, 7, -3, 7, 7, -3}, {2, 3});
  EXPECT_EQ(argmax(x).dtype(), DType::I64);
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);  // first of the ties
  EXPECT_EQ(argmin(x).item<int64_t>(), 2);
  EXPECT_EQ(argmax(x, 1).to_double_vector(), (std::vector<double>{1, 0}));
  EXPECT_EQ(argmax(x, 0).to_double_vector(), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(argmin(x, -1, true).sizes(), (Shape{2, 1}));
  EXPECT_EQ(argmax(x, std::nullopt, true).sizes(), (Shape{1, 1}));
  // dim=None indexes the row-major flattening of the logical tensor, whatever its layout
  Tensor t = transpose(x, 0, 1);  // [[1, 7], [7, 7], [-3, -3]]
  EXPECT_EQ(argmax(t).item<int64_t>(), 1);
  EXPECT_EQ(argmin(t).item<int64_t>(), 4);
  // NaN counts as the maximum (and the minimum), first NaN wins
  Tensor n = Tensor::from_vector<double>({1, NAN, 5, NAN}, {4});
  EXPECT_EQ(argmax(n).item<int64_t>(), 1);
  EXPECT_EQ(argmin(n).item<int64_t>(), 1);
  // ties across the chunks a long reduction is split into keep the first
  std::vector<float> big(200000, 2.0f);
  big[150000] = 3.0f;
  big[190000] = 3.0f;
  EXPECT_EQ(argmax(Tensor::from_vector<float>(big, {200000})).item<int64_t>(), 150000);
  EXPECT_EQ(argmin(Tensor::from_vector<float>(big, {200000})).item<int64_t>(), 0);
  EXPECT_EQ(argmax(Tensor::from_vector<int32_t>({3, 9, 9}, {3})).item<int64_t>(), 1);
  EXPECT_EQ(argmax(zeros({1, 3}, DType::F32), 0).to_double_vector(), (std::vector<double>{0, 0, 0}));
  expect_error([&] { argmax(zeros({0, 3}, DType::F32)); }, {"argmax", "no elements"});
  expect_error([&] { argmin(zeros({0, 3}, DType::F32), 0); }, {"argmin", "size 0"});
  EXPECT_EQ(argmax(zeros({0, 3}, DType::F32), 1).sizes(), (Shape{0}));
  expect_error([&] { argmax(Tensor::from_vector<bool>({true}, {1})); }, {"argmax", "bool"});
}

TEST(ReductionAnyAll, BoolResultsForAnyDtype) {
  Tensor f = Tensor::from_vector<float>({0, 0.5f, 0, 0}, {2, 2});
  EXPECT_EQ(any(f).dtype(), DType::Bool);
  EXPECT_TRUE(any(f).item<bool>());
  EXPECT_FALSE(all(f).item<bool>());
  EXPECT_EQ(any(f, IntList{1}).to_double_vector(), (std::vector<double>{1, 0}));
  EXPECT_EQ(all(f, IntList{0}, true).sizes(), (Shape{1, 2}));
  EXPECT_TRUE(all(Tensor::from_vector<double>({NAN, -1}, {2})).item<bool>());  // NaN is truthy
  Tensor u8 = Tensor::from_vector<uint8_t>({0, 7}, {2});
  EXPECT_EQ(any(u8).dtype(), DType::U8);  // PyTorch keeps u8 for u8 inputs
  EXPECT_EQ(any(u8).item<int64_t>(), 1);
  EXPECT_EQ(all(u8).item<int64_t>(), 0);
  EXPECT_FALSE(any(zeros({0}, DType::I32)).item<bool>());
  EXPECT_TRUE(all(zeros({0}, DType::I32)).item<bool>());
  // dim=[] reduces nothing for any/all (unlike sum)
  Tensor r = any(f, IntList{});
  EXPECT_EQ(r.sizes(), (Shape{2, 2}));
  EXPECT_EQ(r.to_double_vector(), (std::vector<double>{0, 1, 0, 0}));
  std::vector<int16_t> big(100000, 1);
  big[99999] = 0;
  EXPECT_FALSE(all(Tensor::from_vector<int16_t>(big, {100000})).item<bool>());
}

TEST(ReductionVarStd, MatchReferenceAndEdgeCases) {
  const Shape shape{4, 5};
  Tensor x = randn_f64(shape, 3);
  std::vector<double> xv = x.to_double_vector();
  for (double correction : {0.0, 1.0, 2.5}) {
    std::vector<double> s = ref_reduce(xv, shape, {1}, 0.0, add_fold);
    std::vector<double> want(4);
    for (int r = 0; r < 4; ++r) {
      double m = s[size_t(r)] / 5, acc = 0;
      for (int c = 0; c < 5; ++c) acc += (xv[size_t(r * 5 + c)] - m) * (xv[size_t(r * 5 + c)] - m);
      want[size_t(r)] = acc / (5 - correction);
    }
    expect_near_vec(var(x, IntList{1}, correction).to_double_vector(), want, 1e-12, "var");
    std::vector<double> want_std = want;
    for (double& w : want_std) w = std::sqrt(w);
    expect_near_vec(std_(x, IntList{-1}, correction, true).to_double_vector(), want_std, 1e-12, "std");
    EXPECT_EQ(std_(x, IntList{-1}, correction, true).sizes(), (Shape{4, 1}));
  }
  double m = 0, acc = 0;
  for (double v : xv) m += v / 20;
  for (double v : xv) acc += (v - m) * (v - m);
  EXPECT_NEAR(var(x).item<double>(), acc / 19, 1e-12);  // dim None = all, correction 1
  EXPECT_TRUE(std::isnan(var(Tensor::from_vector<double>({3}, {1})).item<double>()));
  EXPECT_EQ(var(Tensor::from_vector<double>({3}, {1}), std::nullopt, 0).item<double>(), 0);
  EXPECT_TRUE(std::isnan(var(zeros({0}, DType::F64)).item<double>()));
  EXPECT_EQ(var(to(x, DType::F16)).dtype(), DType::F16);
  expect_error([&] { var(Tensor::from_vector<int64_t>({1, 2}, {2})); }, {"var", "floating", "i64"});
}

TEST(ReductionLogsumexp, StableAndInfinite) {
  Tensor x = Tensor::from_vector<double>({1000, 1000, -INFINITY, -INFINITY, 0, std::log(3.0)}, {3, 2});
  std::vector<double> r = logsumexp(x, {1}).to_double_vector();
  EXPECT_NEAR(r[0], 1000 + std::log(2.0), 1e-12);
  EXPECT_EQ(r[1], -INFINITY);
  EXPECT_NEAR(r[2], std::log(4.0), 1e-12);
  Tensor p = Tensor::from_vector<double>({INFINITY, 1}, {2});
  EXPECT_EQ(logsumexp(p, {0}).item<double>(), INFINITY);
  EXPECT_TRUE(std::isnan(logsumexp(Tensor::from_vector<double>({NAN, 1}, {2}), {0}).item<double>()));
  EXPECT_EQ(logsumexp(x, {1}, true).sizes(), (Shape{3, 1}));
  EXPECT_NEAR(logsumexp(x, {}).item<double>(), 1000 + std::log(2.0), 1e-12);  // dim=[] reduces everything
  Tensor i = Tensor::from_vector<int64_t>({0, 0}, {2});
  EXPECT_EQ(logsumexp(i, {0}).dtype(), DType::F32);
  EXPECT_NEAR(logsumexp(i, {0}).item<double>(), std::log(2.0), 1e-6);
  EXPECT_EQ(logsumexp(zeros({0}, DType::F32), {0}).item<double>(), -INFINITY);
  EXPECT_EQ(logsumexp(zeros({2, 0}, DType::F32), {1}).to_double_vector(), (std::vector<double>{-INFINITY, -INFINITY}));
}

TEST(ReductionErrors, DimsOutOfRangeAndRepeated) {
  Tensor x = zeros({2, 3}, DType::F32);
  expect_error([&] { sum(x, IntList{2}); }, {"sum", "dimension 2", "out of range", "-2 to 1"});
  expect_error([&] { mean(x, IntList{-3}); }, {"mean", "out of range"});
  expect_error([&] { amax(x, {0, 0}); }, {"amax", "more than once"});
  expect_error([&] { argmax(x, 5); }, {"argmax", "out of range"});
  expect_error([&] { any(x, IntList{4}); }, {"any", "out of range"});
  expect_error([&] { var(x, IntList{1, -1}); }, {"var", "more than once"});
}

TEST(ReductionInfer, MetaShapesMatchKernels) {
  Tensor x = randn_f64({2, 3, 4});
  Tensor i = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_infer_matches("sum", {x, IntList{0, 2}, true});
  expect_infer_matches("sum", {i}, {{"dtype", DType::F32}});
  expect_infer_matches("mean", {x, IntList{-1}});
  expect_infer_matches("prod", {i, 1, true});
  expect_infer_matches("amax", {x, IntList{1}});
  expect_infer_matches("amin", {i});
  expect_infer_matches("argmax", {x, 2, true});
  expect_infer_matches("argmin", {x});
  expect_infer_matches("any", {i, IntList{1}});
  expect_infer_matches("all", {Tensor::from_vector<uint8_t>({1, 0}, {2})});
  expect_infer_matches("var", {x, IntList{1}}, {{"correction", 0}, {"keepdim", true}});
  expect_infer_matches("std", {x});
  expect_infer_matches("logsumexp", {i, IntList{0}});
  EXPECT_THROW(meta_of_call("mean", {i}), Error);
  EXPECT_THROW(meta_of_call("amax", {zeros({0, 2}, DType::F32), IntList{0}}), Error);
  EXPECT_THROW(meta_of_call("argmax", {zeros({0}, DType::F32)}), Error);
}

TEST(ReductionGrad, SumMeanAcrossShapesAndLayouts) {
  Tensor a = leaf(randn_f64({3, 4}, 5));
  Tensor t = leaf(transpose(randn_f64({4, 3}, 6), 0, 1));  // non-contiguous leaf
  Tensor e = leaf(randn_f64({0, 3}, 7));
  Tensor s1 = leaf(randn_f64({1, 3, 1}, 8));
  for (const Tensor& x : {a, t, e, s1}) {
    expect_gradcheck([](auto in) { return std::vector<Tensor>{sum(in[0], IntList{0})}; }, {x}, "sum dim0 " + x.str());
    expect_gradcheck([](auto in) { return std::vector<Tensor>{sum(in[0], IntList{-1}, true)}; }, {x}, "sum keepdim");
    expect_gradcheck([](auto in) { return std::vector<Tensor>{sum(in[0])}; }, {x}, "sum all");
    expect_gradcheck([](auto in) { return std::vector<Tensor>{mean(in[0], IntList{1})}; }, {x}, "mean dim1");
    if (x.numel() > 0)
      expect_gradcheck([](auto in) { return std::vector<Tensor>{mean(in[0])}; }, {x}, "mean all " + x.str());
  }
  Tensor f = leaf(randn_f64({2, 3}, 9));
  expect_gradcheck([](auto in) { return std::vector<Tensor>{sum(in[0], std::nullopt, false, DType::F64)}; }, {f}, "sum dtype");
}

TEST(ReductionGrad, ProdWithAndWithoutZeros) {
  std::vector<std::vector<double>> cases{{1.5, -2, 0.5, 3, 1.25, -0.75},   // no zeros
                                         {1.5, 0, 0.5, 3, 1.25, -0.75},    // one zero
                                         {0, 0, 0.5, 3, 0, -0.75}};        // several zeros
  for (const auto& v : cases) {
    Tensor x = leaf(Tensor::from_vector<double>(v, {2, 3}));
    expect_gradcheck([](auto in) { return std::vector<Tensor>{prod(in[0])}; }, {x}, "prod all");
    expect_gradcheck([](auto in) { return std::vector<Tensor>{prod(in[0], 1)}; }, {x}, "prod dim1");
    expect_gradcheck([](auto in) { return std::vector<Tensor>{prod(in[0], 0, true)}; }, {x}, "prod dim0 keepdim");
  }
  // one zero: the gradient at the zero is the product of the others, 0 elsewhere
  Tensor x = leaf(Tensor::from_vector<double>({2, 0, 3}, {3}));
  prod(x).backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{0, 6, 0}));
  Tensor t = leaf(transpose(randn_f64({3, 2}, 10), 0, 1));
  expect_gradcheck([](auto in) { return std::vector<Tensor>{prod(in[0], -1)}; }, {t}, "prod transposed");
  Tensor e = leaf(randn_f64({2, 0}, 11));
  expect_gradcheck([](auto in) { return std::vector<Tensor>{prod(in[0], 1)}; }, {e}, "prod empty");
  Tensor s = leaf(Tensor::from_vector<double>({1.5}, {}));
  expect_gradcheck([](auto in) { return std::vector<Tensor>{prod(in[0])}; }, {s}, "prod 0-dim");
}

TEST(ReductionGrad, AmaxAminSplitTiesEvenly) {
  Tensor x = leaf(Tensor::from_vector<double>({1, 5, 5, 2, 0, -1}, {2, 3}));
  amax(x, {1}).backward(Tensor::from_vector<double>({1, 1}, {2}));
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{0, 0.5, 0.5, 1, 0, 0}));
  Tensor y = leaf(Tensor::from_vector<double>({3, 3, 3, 3}, {4}));
  amin(y).backward();
  EXPECT_EQ(y.grad().to_double_vector(), (std::vector<double>{0.25, 0.25, 0.25, 0.25}));
  Tensor r = leaf(randn_f64({3, 4}, 12));
  Tensor t = leaf(transpose(randn_f64({4, 3}, 13), 0, 1));
  for (const Tensor& in : {r, t}) {
    expect_gradcheck([](auto v) { return std::vector<Tensor>{amax(v[0], {0})}; }, {in}, "amax dim0");
    expect_gradcheck([](auto v) { return std::vector<Tensor>{amin(v[0], {1}, true)}; }, {in}, "amin keepdim");
    expect_gradcheck([](auto v) { return std::vector<Tensor>{amax(v[0])}; }, {in}, "amax all");
  }
  Tensor e = leaf(randn_f64({0, 3}, 14));
  expect_gradcheck([](auto v) { return std::vector<Tensor>{amax(v[0], {1})}; }, {e}, "amax empty outputs");
}

TEST(ReductionGrad, VarStdLogsumexp) {
  Tensor r = leaf(randn_f64({3, 4}, 15));
  Tensor t = leaf(transpose(randn_f64({4, 3}, 16), 0, 1));
  Tensor s1 = leaf(randn_f64({1, 4}, 17));
  for (const Tensor& x : {r, t, s1}) {
    expect_gradcheck([](auto v) { return std::vector<Tensor>{var(v[0], IntList{1})}; }, {x}, "var " + x.str());
    expect_gradcheck([](auto v) { return std::vector<Tensor>{var(v[0], std::nullopt, 0, true)}; }, {x}, "var all");
    expect_gradcheck([](auto v) { return std::vector<Tensor>{std_(v[0], IntList{-1})}; }, {x}, "std");
    expect_gradcheck([](auto v) { return std::vector<Tensor>{logsumexp(v[0], {1})}; }, {x}, "logsumexp");
    expect_gradcheck([](auto v) { return std::vector<Tensor>{logsumexp(v[0], {0, 1}, true)}; }, {x}, "lse all");
  }
  Tensor big = leaf(Tensor::from_vector<double>({1000, 999, -1000, 1}, {2, 2}));
  expect_gradcheck([](auto v) { return std::vector<Tensor>{logsumexp(v[0], {1})}; }, {big}, "logsumexp large");
}

RC_GTEST_PROP(ReductionProperty, SumAndArgmaxAgreeWithReference, ()) {
  const int64_t ndim = *rc::gen::inRange<int64_t>(1, 4);
  Shape shape;
  for (int64_t d = 0; d < ndim; ++d) shape.push_back(*rc::gen::inRange<int64_t>(0, 5));
  const int64_t dim = *rc::gen::inRange<int64_t>(0, ndim);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = double(*rc::gen::inRange(-4, 5));  // small integers: ties and exact sums
  Tensor x = Tensor::from_vector<double>(v, shape);
  std::vector<double> want = ref_reduce(v, shape, {dim}, 0.0, add_fold);
  RC_ASSERT(sum(x, IntList{dim}).to_double_vector() == want);
  if (shape[size_t(dim)] > 0) {
    // the value at argmax is the max, and no earlier element along the dim equals it
    Tensor idx = argmax(x, dim, true);
    Tensor mx = amax(x, {dim}, true);
    std::vector<double> iv = idx.to_double_vector(), mv = mx.to_double_vector();
    Shape out_shape = idx.sizes();
    Shape strides = contiguous_strides(shape);
    for (int64_t o = 0; o < int64_t(iv.size()); ++o) {
      int64_t rem = o, base = 0;
      for (int64_t d = ndim - 1; d >= 0; --d) {
        base += (rem % out_shape[size_t(d)]) * strides[size_t(d)];
        rem /= out_shape[size_t(d)];
      }
      const int64_t at = int64_t(iv[size_t(o)]);
      RC_ASSERT(v[size_t(base + at * strides[size_t(dim)])] == mv[size_t(o)]);
      for (int64_t j = 0; j < at; ++j) RC_ASSERT(v[size_t(base + j * strides[size_t(dim)])] < mv[size_t(o)]);
    }
  }
}

// ================================================================ matrix products

namespace {

// Reference batched product with torch.matmul semantics (for operands of >= 1 dims), in f64.
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  Shape as = a.sizes(), bs = b.sizes();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "ref");
  std::vector<double> av = a.to_double_vector(), bv = b.to_double_vector();
  const int64_t B = shape_numel(batch);
  std::vector<double> out(size_t(B * m * n));
  auto batch_offset = [&](const Shape& own, int64_t bi, int64_t mat) {
    int64_t off = 0, stride = mat, rem = bi;
    for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
      int64_t idx = rem % batch[size_t(d)];
      rem /= batch[size_t(d)];
      int64_t od = d - (int64_t(batch.size()) - int64_t(own.size()));
      if (od < 0) continue;
      if (own[size_t(od)] != 1) off += idx * stride;
      stride *= own[size_t(od)];
    }
    return off;
  };
  for (int64_t bi = 0; bi < B; ++bi) {
    int64_t ao = batch_offset(ba, bi, m * k), bo = batch_offset(bb, bi, k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += av[size_t(ao + i * k + p)] * bv[size_t(bo + p * n + j)];
        out[size_t((bi * m + i) * n + j)] = acc;
      }
  }
  Shape out_shape = batch;
  if (!a1) out_shape.push_back(m);
  if (!b1) out_shape.push_back(n);
  return Tensor::from_vector<double>(out, out_shape);
}

}  // namespace

TEST(LinalgMm, MatchesReferenceAcrossDtypesAndLayouts) {
  Tensor a = randn_f64({5, 7}, 20), b = randn_f64({7, 3}, 21);
  std::vector<double> want = ref_matmul(a, b).to_double_vector();
  expect_near_vec(mm(a, b).to_double_vector(), want, 1e-12, "f64");
  expect_near_vec(mm(to(a, DType::F32), to(b, DType::F32)).to_double_vector(), want, 1e-5, "f32");
  EXPECT_EQ(mm(to(a, DType::F16), to(b, DType::F16)).dtype(), DType::F16);
  expect_near_vec(mm(to(a, DType::F16), to(b, DType::F16)).to_double_vector(), want, 1e-2, "f16");
  expect_near_vec(mm(to(a, DType::BF16), to(b, DType::BF16)).to_double_vector(), want, 5e-2, "bf16");
  // transposed operands (passed to BLAS by flag), a strided slice (copied), an expanded operand
  Tensor at = transpose(randn_f64({7, 5}, 22), 0, 1), bt = transpose(randn_f64({3, 7}, 23), 0, 1);
  expect_near_vec(mm(at, bt).to_double_vector(), ref_matmul(at, bt).to_double_vector(), 1e-12, "transposed");
  Tensor sl = slice(randn_f64({5, 14}, 24), 1, 0, 14, 2);
  expect_near_vec(mm(sl, b).to_double_vector(), ref_matmul(sl, b).to_double_vector(), 1e-12, "strided");
  Tensor ex = expand(randn_f64({1, 7}, 25), {4, 7});
  expect_near_vec(mm(ex, b).to_double_vector(), ref_matmul(ex, b).to_double_vector(), 1e-12, "expanded");
  Tensor col = randn_f64({7, 1}, 26);
  expect_near_vec(mm(a, col).to_double_vector(), ref_matmul(a, col).to_double_vector(), 1e-12, "column");
  // integers: exact, i64 accumulation, wrapping in the stored dtype
  Tensor ia = Tensor::from_vector<int32_t>({1, -2, 3, 4, 5, -6}, {2, 3});
  Tensor ib = Tensor::from_vector<int32_t>({7, 8, 9, 10, 11, 12}, {3, 2});
  EXPECT_EQ(mm(ia, ib).dtype(), DType::I32);
  EXPECT_EQ(mm(ia, ib).to_double_vector(), (std::vector<double>{22, 24, 7, 10}));
  Tensor u = Tensor::from_vector<uint8_t>({200, 100}, {1, 2});
  Tensor v = Tensor::from_vector<uint8_t>({1, 1}, {2, 1});
  EXPECT_EQ(mm(u, v).item<int64_t>(), 44);  // 300 mod 256
  EXPECT_EQ(mm(transpose(ib, 0, 1), transpose(ia, 0, 1)).to_double_vector(), (std::vector<double>{22, 7, 24, 10}));
  // empty dims
  EXPECT_EQ(mm(zeros({2, 0}, DType::F32), zeros({0, 3}, DType::F32)).to_double_vector(), std::vector<double>(6, 0.0));
  EXPECT_EQ(mm(zeros({0, 4}, DType::F32), zeros({4, 3}, DType::F32)).sizes(), (Shape{0, 3}));
  EXPECT_EQ(mm(zeros({2, 0}, DType::I64), zeros({0, 2}, DType::I64)).to_double_vector(), std::vector<double>(4, 0.0));
}

TEST(LinalgMm, ErrorsNameBothShapes) {
  Tensor a = zeros({2, 3}, DType::F32), b = zeros({4, 5}, DType::F32);
  expect_error([&] { mm(a, b); }, {"mm", "2x3", "4x5"});
  expect_error([&] { mm(a, zeros({3}, DType::F32)); }, {"mm", "[2, 3]", "[3]", "2-D"});
  expect_error([&] { mm(a, zeros({3, 2}, DType::F64)); }, {"mm", "f32", "f64"});
  expect_error([&] { mm(zeros({2, 2}, DType::Bool), zeros({2, 2}, DType::Bool)); }, {"mm", "bool"});
  expect_error([&] { bmm(zeros({2, 2, 3}, DType::F32), zeros({3, 3, 2}, DType::F32)); }, {"bmm", "[2, 2, 3]", "[3, 3, 2]"});
  expect_error([&] { bmm(zeros({2, 2, 3}, DType::F32), zeros({2, 4, 2}, DType::F32)); }, {"bmm", "[2, 2, 3]", "[2, 4, 2]"});
  expect_error([&] { bmm(a, a); }, {"bmm", "3-D"});
  expect_error([&] { addmm(zeros({3, 3}, DType::F32), a, zeros({3, 2}, DType::F32)); }, {"addmm", "[3, 3]", "[2, 2]"});
  expect_error([&] { matmul(a, b); }, {"matmul", "[2, 3]", "[4, 5]"});
  expect_error([&] { matmul(Tensor::scalar(1.0, DType::F32), a); }, {"matmul", "0-D"});
  expect_error([&] { matmul(zeros({3}, DType::F32), zeros({4}, DType::F32)); }, {"matmul", "[3]", "[4]"});
  expect_error([&] { linear(a, zeros({4, 5}, DType::F32)); }, {"linear", "[2, 3]", "[4, 5]"});
}

// Matrix products run on kiln's OpenMP team: the OpenMP build of OpenBLAS (CMakeLists.txt), not the pthread
// build, whose own pool of one thread a core spins after each call and takes the cores of the kernels that
// follow (a compiled MLP on 16 cores: 40-64 ms instead of about 10). A process that has run parallel OpenMP loops
// and then large GEMMs holds no more threads than before them.
// One OpenMP runtime in the process: GNU's libgomp, which OpenBLAS links. LLVM's libomp beside it was started by
// OpenBLAS's constructor before main and crashed about one process start in 1500 (CMakeLists.txt).
TEST(LinalgMm, OneOpenMPRuntimeIsLoaded) {
  std::ifstream maps("/proc/self/maps");
  std::string line, runtimes;
  bool gomp = false, omp = false;
  while (std::getline(maps, line)) {
    if (line.find("libgomp.so") != std::string::npos) gomp = true;
    if (line.find("libomp.so") != std::string::npos || line.find("libiomp5") != std::string::npos) omp = true;
  }
  EXPECT_TRUE(gomp) << "libgomp is not loaded";
  EXPECT_FALSE(omp) << "LLVM's or Intel's OpenMP runtime is loaded beside libgomp";
}

TEST(LinalgMm, RunsOnTheOpenMPTeamWithNoThreadPoolOfItsOwn) {
  EXPECT_EQ(openblas_get_parallel(), 2) << "OpenBLAS build: " << openblas_get_config();
  EXPECT_NE(blas_description().find("USE_OPENMP"), std::string::npos) << blas_description();
  auto threads = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/task"), std::filesystem::directory_iterator());
  };
  // A parallel loop and a first product: the OpenMP team exists from here on (in the sanitized tree kiln's own
  // loops are serial, CMakeLists.txt, and the first GEMM starts the team).
  (void)sum(randn_f64({1024, 1024}, 31));
  Tensor a = randn_f64({256, 256}, 30), a32 = to(a, DType::F32), c = mm(a32, a32);
  const auto before = threads();
  for (int i = 0; i < 3; ++i) c = mm(c, a32);
  (void)mm(a, a);
  EXPECT_EQ(threads(), before) << "a matrix product started threads of its own";
}

// GEMMs run the kernels of this CPU's widest vectors: OpenBLAS 0.3.21 takes CPUs newer than itself (Emerald
// Rapids) for a Prescott and would run SSE3 kernels; kiln then chooses by the CPU's features (ops/blas.cpp), and
// says so in `kiln --version`. The values are those of the reference product either way.
TEST(LinalgMm, RunsTheKernelsOfThisCpusWidestVectors) {
  Tensor a = randn_f64({300, 200}, 32), b = randn_f64({200, 100}, 33);
  expect_near_vec(mm(to(a, DType::F32), to(b, DType::F32)).to_double_vector(), ref_matmul(a, b).to_double_vector(),
                  1e-4, "f32 after the kernel choice");
  const std::string core = openblas_get_corename(), description = blas_description();
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (std::getenv("OPENBLAS_CORETYPE") && description.find("chosen by kiln") == std::string::npos)
    GTEST_SKIP() << "the user chose the kernels with OPENBLAS_CORETYPE: " << core;
  const std::set<std::string> avx512_cores = {"SkylakeX", "Cooperlake", "SapphireRapids"},
                              sse_cores = {"Unknown", "Prescott", "Core2", "Penryn", "Dunnington", "Nehalem"};
  if (avx512) {
    EXPECT_TRUE(avx512_cores.count(core)) << description;
  }
  if (__builtin_cpu_supports("avx2")) {
    EXPECT_FALSE(sse_cores.count(core)) << description;
  }
  EXPECT_NE(description.find(core), std::string::npos) << description;
}

TEST(LinalgBmmAddmm, Values) {
  Tensor a = randn_f64({3, 2, 4}, 30), b = randn_f64({3, 4, 5}, 31);
  expect_near_vec(bmm(a, b).to_double_vector(), ref_matmul(a, b).to_double_vector(), 1e-12, "bmm");
  Tensor bt = transpose(randn_f64({3, 5, 4}, 32), 1, 2);
  expect_near_vec(bmm(a, bt).to_double_vector(), ref_matmul(a, bt).to_double_vector(), 1e-12, "bmm transposed");
  Tensor shared = expand(randn_f64({1, 4, 5}, 33), {3, 4, 5});  // batch stride 0
  expect_near_vec(bmm(a, shared).to_double_vector(), ref_matmul(a, shared).to_double_vector(), 1e-12, "bmm shared");
  Tensor ia = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 1, 2}), ib = Tensor::from_vector<int64_t>({1, 1, 2, 2}, {2, 2, 1});
  EXPECT_EQ(bmm(ia, ib).to_double_vector(), (std::vector<double>{3, 14}));
  EXPECT_EQ(bmm(zeros({0, 2, 3}, DType::F32), zeros({0, 3, 4}, DType::F32)).sizes(), (Shape{0, 2, 4}));

  Tensor m1 = randn_f64({2, 3}, 34), m2 = randn_f64({3, 4}, 35);
  std::vector<double> prod_v = ref_matmul(m1, m2).to_double_vector();
  Tensor row = randn_f64({4}, 36);
  std::vector<double> rv = row.to_double_vector(), want(8);
  for (int i = 0; i < 8; ++i) want[size_t(i)] = 0.5 * rv[size_t(i % 4)] + 2 * prod_v[size_t(i)];
  expect_near_vec(addmm(row, m1, m2, 0.5, 2).to_double_vector(), want, 1e-12, "addmm row");
  expect_near_vec(addmm(unsqueeze(row, 0), m1, m2, 0.5, 2).to_double_vector(), want, 1e-12, "addmm [1, n]");
  Tensor full_self = randn_f64({2, 4}, 37);
  std::vector<double> fv = full_self.to_double_vector();
  for (int i = 0; i < 8; ++i) want[size_t(i)] = fv[size_t(i)] + prod_v[size_t(i)];
  expect_near_vec(addmm(full_self, m1, m2).to_double_vector(), want, 1e-12, "addmm");
  // beta = 0 ignores self, NaNs included
  Tensor nan_self = full({2, 4}, NAN, DType::F64);
  expect_near_vec(addmm(nan_self, m1, m2, 0).to_double_vector(), prod_v, 1e-12, "beta 0");
  expect_near_vec(addmm(zeros({1}, DType::F64), zeros({2, 0}, DType::F64), zeros({0, 4}, DType::F64), 1).to_double_vector(),
                  std::vector<double>(8, 0.0), 0, "addmm k=0");
  Tensor s = full({2, 2}, 3, DType::F32);
  EXPECT_EQ(addmm(s, zeros({2, 0}, DType::F32), zeros({0, 2}, DType::F32), 2).to_double_vector(), std::vector<double>(4, 6.0));
  Tensor i_self = Tensor::from_vector<int32_t>({10, 20}, {2});
  Tensor i1 = Tensor::from_vector<int32_t>({1, 2}, {1, 2}), i2 = Tensor::from_vector<int32_t>({3, 4, 5, 6}, {2, 2});
  EXPECT_EQ(addmm(i_self, i1, i2, 2, 3).to_double_vector(), (std::vector<double>{2 * 10 + 3 * 13, 2 * 20 + 3 * 16}));
  expect_error([&] { addmm(i_self, i1, i2, 0.5); }, {"addmm", "integers"});
  EXPECT_EQ(addmm(to(full_self, DType::BF16), to(m1, DType::BF16), to(m2, DType::BF16)).dtype(), DType::BF16);
}

TEST(LinalgMatmul, AllRankCombinationsAndBroadcasting) {
  const std::vector<std::pair<Shape, Shape>> cases{
      {{4}, {4}},          {{3, 4}, {4}},       {{4}, {4, 2}},        {{3, 4}, {4, 2}},
      {{2, 3, 4}, {4}},    {{2, 3, 4}, {4, 5}}, {{4}, {2, 4, 5}},     {{3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {3, 4, 5}}, {{1, 3, 4}, {2, 1, 4, 2}}, {{2, 0, 4}, {4, 3}},
      {{2, 3, 0}, {0, 2}}};
  uint64_t seed = 40;
  for (const auto& [sa, sb] : cases) {
    Tensor a = randn_f64(sa, seed++), b = randn_f64(sb, seed++);
    Tensor r = matmul(a, b), want = ref_matmul(a, b);
    EXPECT_EQ(r.sizes(), want.sizes()) << shape_str(sa) << " @ " << shape_str(sb);
    expect_near_vec(r.to_double_vector(), want.to_double_vector(), 1e-12, shape_str(sa) + " @ " + shape_str(sb));
    TensorMeta m = meta_of_call("matmul", {a, b});
    EXPECT_EQ(m.sizes, want.sizes());
  }
  EXPECT_EQ(matmul(randn_f64({4}), randn_f64({4})).dim(), 0);
  Tensor i = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  EXPECT_EQ(matmul(i, i).item<int64_t>(), 14);
}

TEST(LinalgLinear, ValuesWithAndWithoutBias) {
  Tensor x = randn_f64({2, 3, 4}, 60), w = randn_f64({5, 4}, 61), bias = randn_f64({5}, 62);
  Tensor xw = ref_matmul(x, transpose(w, 0, 1));
  expect_near_vec(linear(x, w).to_double_vector(), xw.to_double_vector(), 1e-12, "linear 3-D");
  std::vector<double> want = xw.to_double_vector(), bv = bias.to_double_vector();
  for (size_t k = 0; k < want.size(); ++k) want[k] += bv[k % 5];
  expect_near_vec(linear(x, w, bias).to_double_vector(), want, 1e-12, "linear 3-D bias");
  Tensor x2 = reshape(x, {6, 4});
  expect_near_vec(linear(x2, w, bias).to_double_vector(), want, 1e-12, "linear 2-D bias");
  EXPECT_EQ(linear(x2, w, bias).sizes(), (Shape{6, 5}));
  EXPECT_EQ(linear(randn_f64({4}), w).sizes(), (Shape{5}));
}

TEST(LinalgGrad, ProductsGradcheck) {
  Tensor a = leaf(randn_f64({3, 4}, 70)), b = leaf(randn_f64({4, 2}, 71));
  Tensor at = leaf(transpose(randn_f64({4, 3}, 72), 0, 1)), bt = leaf(transpose(randn_f64({2, 4}, 73), 0, 1));
  auto mm_f = [](auto v) { return std::vector<Tensor>{mm(v[0], v[1])}; };
  expect_gradcheck(mm_f, {a, b}, "mm");
  expect_gradcheck(mm_f, {at, bt}, "mm transposed");
  expect_gradcheck(mm_f, {leaf(randn_f64({1, 4}, 74)), leaf(randn_f64({4, 1}, 75))}, "mm size-1");
  expect_gradcheck(mm_f, {leaf(randn_f64({2, 0}, 76)), leaf(randn_f64({0, 3}, 77))}, "mm k=0");
  expect_gradcheck([](auto v) { return std::vector<Tensor>{bmm(v[0], v[1])}; },
                   {leaf(randn_f64({2, 3, 4}, 78)), leaf(transpose(randn_f64({2, 2, 4}, 79), 1, 2))}, "bmm");
  Tensor self_row = leaf(randn_f64({2}, 80));
  expect_gradcheck([](auto v) { return std::vector<Tensor>{addmm(v[0], v[1], v[2], 0.5, -2)}; },
                   {self_row, a, b}, "addmm broadcast self");
  expect_gradcheck([](auto v) { return std::vector<Tensor>{addmm(v[0], v[1], v[2])}; },
                   {leaf(randn_f64({3, 2}, 81)), at, bt}, "addmm");
  const std::vector<std::pair<Shape, Shape>> cases{{{4}, {4}}, {{3, 4}, {4}}, {{4}, {4, 2}}, {{2, 3, 4}, {4}},
                                                   {{2, 3, 4}, {4, 2}}, {{3, 4}, {2, 4, 2}}, {{2, 1, 3, 4}, {3, 4, 2}},
                                                   {{1, 3, 4}, {2, 1, 4, 1}}, {{2, 0, 4}, {4, 3}}};
  uint64_t seed = 90;
  for (const auto& [sa, sb] : cases) {
    expect_gradcheck([](auto v) { return std::vector<Tensor>{matmul(v[0], v[1])}; },
                     {leaf(randn_f64(sa, seed)), leaf(randn_f64(sb, seed + 1))}, "matmul " + shape_str(sa) + " @ " + shape_str(sb));
    seed += 2;
  }
  expect_gradcheck([](auto v) { return std::vector<Tensor>{matmul(v[0], v[1])}; },
                   {leaf(transpose(randn_f64({2, 4, 3}, 120), 1, 2)), leaf(randn_f64({2, 1, 4, 2}, 121))}, "matmul nc");
  Tensor x = leaf(randn_f64({2, 3, 4}, 130)), w = leaf(randn_f64({5, 4}, 131)), bias = leaf(randn_f64({5}, 132));
  expect_gradcheck([](auto v) { return std::vector<Tensor>{linear(v[0], v[1], v[2])}; }, {x, w, bias}, "linear 3-D");
  expect_gradcheck([](auto v) { return std::vector<Tensor>{linear(v[0], v[1], v[2])}; },
                   {leaf(randn_f64({3, 4}, 133)), w, bias}, "linear 2-D");
  expect_gradcheck([](auto v) { return std::vector<Tensor>{linear(v[0], v[1])}; }, {x, w}, "linear no bias");
}
