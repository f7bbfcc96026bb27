// Tests of the core: dtypes and promotion, half conversions, tensors and views, the dispatcher's argument
// binding and errors, and the schema parser.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "autograd/autograd.h"
#include "ops/api.h"
#include "ops/common.h"

using namespace kiln;

TEST(DType, PromotionMatchesTorch) {
  EXPECT_EQ(promote_types(DType::U8, DType::I8), DType::I16);
  EXPECT_EQ(promote_types(DType::F16, DType::BF16), DType::F32);
  EXPECT_EQ(promote_types(DType::I64, DType::F16), DType::F16);
  EXPECT_EQ(promote_types(DType::Bool, DType::U8), DType::U8);
  EXPECT_EQ(promote_types(DType::I32, DType::I64), DType::I64);
  EXPECT_EQ(promote_types(DType::F32, DType::F64), DType::F64);
}

TEST(DType, ResultTypeGivesScalarsLowerPriority) {
  Tensor i32 = Tensor::empty({3}, DType::I32);
  Tensor f16 = Tensor::empty({3}, DType::F16);
  // a float number promotes an int tensor to the default float, but does not widen an f16 tensor
  EXPECT_EQ(result_type({i32, Tensor::wrapped_number(2.5)}), DType::F32);
  EXPECT_EQ(result_type({f16, Tensor::wrapped_number(2.5)}), DType::F16);
  // an int number does not widen an i32 tensor
  EXPECT_EQ(result_type({i32, Tensor::wrapped_number(int64_t(7))}), DType::I32);
  // a 0-dim f64 tensor does not widen an f32 tensor of dims, but a 0-dim float widens an int tensor
  Tensor f32 = Tensor::empty({3}, DType::F32);
  EXPECT_EQ(result_type({f32, Tensor::empty({}, DType::F64)}), DType::F32);
  EXPECT_EQ(result_type({i32, Tensor::empty({}, DType::F64)}), DType::F64);
  EXPECT_EQ(result_type({Tensor::empty({}, DType::Bool), Tensor::wrapped_number(int64_t(1))}), DType::I64);
}

TEST(Half, RoundTripsAndRounds) {
  EXPECT_EQ(float(Half(1.0f)), 1.0f);
  EXPECT_EQ(float(Half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(float(Half(65520.0f))));
  EXPECT_EQ(float(Half(1.0f + 1.0f / 4096)), 1.0f);  // ties to even
  EXPECT_EQ(float(Half(5.96046448e-08f)), 5.96046448e-08f);  // smallest subnormal
  EXPECT_TRUE(std::isnan(float(Half(NAN))));
  EXPECT_EQ(float(BFloat16(1.0f)), 1.0f);
  EXPECT_EQ(float(BFloat16(1.00390625f)), 1.0f);  // ties to even
  EXPECT_TRUE(std::isnan(float(BFloat16(NAN))));
}

TEST(Schema, ParsesAtenSchemas) {
  Schema s = parse_schema("div(Tensor self, Tensor other, *, str? rounding_mode=None) -> Tensor");
  ASSERT_EQ(s.args.size(), 3u);
  EXPECT_EQ(s.args[2].name, "rounding_mode");
  EXPECT_TRUE(s.args[2].optional);
  EXPECT_TRUE(s.args[2].kwarg_only);
  EXPECT_TRUE(s.args[2].default_value->is_none());
  Schema t = parse_schema("split(Tensor self, int split_size, int dim=0) -> Tensor[]");
  EXPECT_TRUE(t.returns_list);
  Schema u = parse_schema("add_(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)");
  EXPECT_TRUE(u.args[0].mutated);
  EXPECT_THROW(parse_schema("add(Tensor self, Bogus x) -> Tensor"), Error);
  for (const OpInfo& op : all_ops()) EXPECT_EQ(parse_schema(op.schema.str()).str(), op.schema.str()) << op.name;
}

TEST(Dispatch, BindsKeywordsDefaultsAndNumbers) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor r = call_op_named("add", {a, 2}, {{"alpha", 3}})[0];
  EXPECT_EQ(r.to_double_vector(), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(r.dtype(), DType::F32);
}

TEST(Dispatch, ErrorsNameTheOpAndTheProblem) {
  Tensor a = Tensor::empty({2, 3});
  Tensor b = Tensor::empty({4});
  try {
    add(a, b);
    FAIL() << "expected a broadcast error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  }
  EXPECT_THROW(call_op_named("add", {a}), Error);                      // missing argument
  EXPECT_THROW(call_op_named("add", {a, a}, {{"beta", 1}}), Error);    // unknown keyword
  EXPECT_THROW(call_op_named("nope", {a}), Error);                     // unknown op
  EXPECT_THROW(call_op_named("add", {a, a}, {{"alpha", "x"}}), Error);  // wrong type
  EXPECT_THROW(transpose(a, 0, 5), Error);                             // bad dim
}

TEST(Views, ShareStorageAndComposeStrides) {
  Tensor a = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor t = transpose(a, 0, 1);
  EXPECT_EQ(t.sizes(), (Shape{3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(contiguous(t).to_double_vector(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  Tensor s = slice(a, 1, 0, 3, 2);
  EXPECT_EQ(s.to_double_vector(), (std::vector<double>{0, 2, 3, 5}));
  fill_(select(a, 0, 1), 9.0);
  EXPECT_EQ(a.to_double_vector(), (std::vector<double>{0, 1, 2, 9, 9, 9}));
  EXPECT_THROW(view(t, {6}), Error);  // not viewable without a copy
  EXPECT_EQ(reshape(t, {6}).to_double_vector(), (std::vector<double>{0, 9, 1, 9, 2, 9}));
  Tensor d = diagonal(a);
  EXPECT_EQ(d.to_double_vector(), (std::vector<double>{0, 9}));
}

TEST(Autograd, AccumulatesThroughBroadcastAndViews) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3}).set_requires_grad(true);
  Tensor w = Tensor::from_vector<double>({2}, {1}).set_requires_grad(true);
  Tensor y = sum(mul(exp(x), w));  // d/dx = w e^x, d/dw = sum e^x
  y.backward();
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(x.grad().to_double_vector()[i], 2 * std::exp(i + 1.0), 1e-12);
  EXPECT_NEAR(w.grad().item<double>(), std::exp(1.0) + std::exp(2.0) + std::exp(3.0), 1e-12);
  // a second backward through a fresh graph accumulates
  sum(mul(x, 1.0)).backward();
  EXPECT_NEAR(x.grad().to_double_vector()[0], 2 * std::exp(1.0) + 1, 1e-12);
}

TEST(Autograd, SecondBackwardWithoutRetainGraphIsAnError) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad(true);
  Tensor y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_THROW(y.backward(), Error);
}

TEST(Autograd, InPlaceThroughViewReachesBase) {
  Tensor w = Tensor::from_vector<double>({3}, {1}).set_requires_grad(true);
  Tensor base = zeros({2, 2}, DType::F64);
  Tensor row = select(base, 0, 1);
  add_(row, w);  // base[1, :] += w
  Tensor loss = sum(mul(base, base));
  loss.backward();
  EXPECT_NEAR(w.grad().item<double>(), 2 * 3 * 2, 1e-12);  // d/dw sum((w)^2 over 2 elements) = 2*2*w
}

TEST(Autograd, InPlaceOnLeafRequiringGradIsAnError) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad(true);
  EXPECT_THROW(mul_(x, 2.0), Error);
  NoGradGuard g;
  mul_(x, 2.0);  // fine without recording
  EXPECT_EQ(x.to_double_vector(), (std::vector<double>{2, 4}));
}

TEST(Autograd, HooksSeeAndReplaceGradients) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad(true);
  Tensor y = mul(x, 3.0);
  double seen = 0;
  y.register_hook([&](const Tensor& g) { seen = sum(g).item<double>(); return mul(g, 10.0); });
  y.retain_grad();
  sum(y).backward();
  EXPECT_EQ(seen, 2.0);
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{30, 30}));
  EXPECT_EQ(y.grad().to_double_vector(), (std::vector<double>{10, 10}));
}

TEST(Autograd, ModifiedSavedTensorIsDetected) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad(true);
  Tensor a = mul(x, 1.0);
  Tensor y = mul(a, a);
  mul_(a, 2.0);
  EXPECT_THROW(sum(y).backward(), Error);
}

TEST(Autograd, GradOfALeafWithRespectToItselfIsTheProjection) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).set_requires_grad(true);
  Tensor v = Tensor::from_vector<double>({3, 4}, {2});
  std::vector<Tensor> g = grad({x}, {x}, {v});
  ASSERT_TRUE(g[0].defined());
  EXPECT_EQ(g[0].to_double_vector(), (std::vector<double>{3, 4}));
}

// ---------------------------------------------------------------- overflow-checked shape inference
// A .kir file (or an API call) can hold any int64, so shape inference must turn sizes that do not fit in 64 bits
// into a kiln::Error naming the op, never into signed-overflow UB (which the UBSan fuzz build reports).

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Tensor meta_f32(const Shape& sizes) { return Tensor::meta(TensorMeta{DType::F32, sizes, {}, {}}); }

std::vector<TensorMeta> infer(OpId id, std::vector<IValue> args, const std::map<std::string, IValue>& kwargs = {}) {
  return infer_meta(bind_args(op_info(id), std::move(args), kwargs));
}

void expect_infer_error(OpId id, std::vector<IValue> args, const std::map<std::string, IValue>& kwargs,
                        std::initializer_list<std::string> parts) {
  try {
    infer(id, std::move(args), kwargs);
    ADD_FAILURE() << "expected a kiln::Error from " << op_info(id).name;
  } catch (const Error& e) {
    std::string m = e.what();
    for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

}  // namespace

TEST(SizeOverflow, ArangeLengthIsExactOrAnError) {
  EXPECT_EQ(infer(OpId::arange, {0, kMax})[0].sizes, Shape{kMax});  // (end - start + step - 1) overflowed here
  EXPECT_EQ(infer(OpId::arange, {0, kMin, kMin})[0].sizes, Shape{1});
  EXPECT_EQ(infer(OpId::arange, {kMax, 0, kMin})[0].sizes, Shape{1});  // |step| = 2^63
  expect_infer_error(OpId::arange, {kMax, kMin, -1}, {}, {"arange: the result would have more than 2^63 elements"});
  expect_infer_error(OpId::arange, {kMin, kMax}, {}, {"arange: the result would have more than 2^63 elements"});
  expect_infer_error(OpId::arange, {0.0, 1e308, 1e-308}, {},
                     {"arange: the result would have more than 2^63 elements", "1e+308", "1e-308"});
}

TEST(SizeOverflow, EyeAndFullSizes) {
  expect_infer_error(OpId::eye, {kMax}, {}, {"eye: the result would have more than 2^63 elements"});
  expect_infer_error(OpId::zeros, {IntList{1 << 30, 1 << 30, 1 << 30}}, {},
                     {"zeros: the result would have more than 2^63 elements", "[1073741824, 1073741824, 1073741824]"});
  EXPECT_EQ(infer(OpId::eye, {3, 4})[0].strides, (Shape{4, 1}));
}

TEST(SizeOverflow, FullValueMustFitTheDtype) {
  // PyTorch: "value cannot be converted to type int64_t without overflow" (Scalar::to<int64_t> is checked).
  expect_infer_error(OpId::full, {IntList{2}, 1e308}, {{"dtype", DType::I64}},
                     {"full: value 1e+308 cannot be converted to type i64 without overflow"});
  expect_infer_error(OpId::full, {IntList{2}, 300}, {{"dtype", DType::U8}}, {"cannot be converted to type u8"});
  expect_infer_error(OpId::full_like, {meta_f32({2}), 1e300}, {{"dtype", DType::I64}},
                     {"full_like: value 1e+300 cannot be converted to type i64"});
  EXPECT_THROW(full({2}, 1e308, DType::I64), Error);  // the kernel checks too
  EXPECT_EQ(infer(OpId::full, {IntList{2}, -9.2e18}, {{"dtype", DType::I64}})[0].dtype, DType::I64);
  expect_infer_error(OpId::full, {IntList{2}, 1e308}, {}, {"cannot be converted to type f32"});  // the default f32
  EXPECT_EQ(infer(OpId::full, {IntList{2}, INFINITY}, {{"dtype", DType::F16}})[0].dtype, DType::F16);  // inf is kept
}

TEST(SizeOverflow, ViewsWithExtremeArguments) {
  Tensor x = meta_f32({5, 3});
  // chunk: (n + chunks - 1) / chunks overflowed; PyTorch gives 5 chunks of one row.
  std::vector<TensorMeta> chunks = infer(OpId::chunk, {x, kMax});
  ASSERT_EQ(chunks.size(), 5u);
  EXPECT_EQ(chunks[0].sizes, (Shape{1, 3}));
  // slice: the length (end - start + step - 1) / step overflowed; the stride is stride * step.
  TensorMeta s = infer(OpId::slice, {meta_f32({5}), 0, kMin, kMax, kMax})[0];
  EXPECT_EQ(s.sizes, Shape{1});
  EXPECT_EQ(s.strides, Shape{kMax});
  EXPECT_EQ(infer(OpId::slice, {x, 0, kMin, kMax, 2})[0].sizes, (Shape{3, 3}));
  expect_infer_error(OpId::slice, {x, 0, kMin, kMax, kMax}, {}, {"slice: the stride of the result"});
  // as_strided: offset + (size - 1) * stride.
  expect_infer_error(OpId::as_strided, {x, IntList{2}, IntList{1}, kMax}, {},
                     {"as_strided: the last element's storage offset", "overflows a 64-bit integer"});
  expect_infer_error(OpId::as_strided, {x, IntList{int64_t(1) << 40, 2}, IntList{int64_t(1) << 40, 1}, 0}, {},
                     {"as_strided"});
  // narrow: start + length.
  expect_infer_error(OpId::narrow, {x, 0, 1, kMax}, {}, {"narrow: start 1 + length 9223372036854775807 exceeds"});
  EXPECT_EQ(infer(OpId::narrow, {x, 0, 1, 4})[0].sizes, (Shape{4, 3}));
}
