// Tests of the core: dtypes and promotion, half conversions, tensors and views, the dispatcher's argument
// binding and errors, and the schema parser.
#include <gtest/gtest.h>

#include <cmath>

#include "eager/autograd.h"
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
