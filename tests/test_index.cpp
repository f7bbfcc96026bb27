// Tests of the data-movement ops (src/ops/index.cpp): values against hand-computed PyTorch results, error
// messages, shape inference agreeing with the kernels, and gradchecks of every differentiable op.
#include <gtest/gtest.h>

#include <random>

#include "autograd/autograd.h"
#include "autograd/gradcheck.h"
#include "ops/api.h"
#include "ops/common.h"

using namespace kiln;

namespace {

using Vals = std::vector<double>;

Tensor f64(const Vals& v, const Shape& s) { return Tensor::from_vector<double>(v, s); }
Tensor i64(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from_vector<int64_t>(v, s); }
Tensor mask(const std::vector<bool>& v, const Shape& s) {
  Tensor t = Tensor::empty(s, DType::Bool);
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}
Tensor iota(const Shape& s, DType dt = DType::F64) { return reshape(to(arange(0, shape_numel(s)), dt), s); }
Vals vals(const Tensor& t) { return t.to_double_vector(); }

// A random f64 leaf that requires grad.
Tensor leaf(const Shape& s, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd;
  Vals v(size_t(shape_numel(s)));
  for (double& x : v) x = nd(rng);
  return f64(v, s).set_requires_grad(true);
}
// A non-contiguous leaf of shape s (the transpose of a [s1, s0] tensor).
Tensor transposed_leaf(const Shape& s, unsigned seed = 2) {
  Tensor t = leaf({s[1], s[0]}, seed);
  return transpose(t, 0, 1).detach().set_requires_grad(true);
}

void expect_grad_ok(const DiffFn& f, const std::vector<Tensor>& inputs) {
  GradcheckResult r = gradcheck(f, inputs);
  EXPECT_TRUE(r.ok) << r.message;
}

// The error `f` throws contains every one of `parts`.
template <class F>
void expect_error(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected a kiln::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

// Shape inference (with every tensor argument turned into a meta tensor) agrees with the kernel's output.
void expect_meta_matches(OpId id, std::vector<IValue> args) {
  std::vector<IValue> meta_args;
  for (const IValue& a : args) {
    if (a.is_tensor() && !a.tensor().is_wrapped_number()) {
      meta_args.push_back(Tensor::meta(a.tensor().meta()));
    } else if (a.is_tensor_list()) {
      TensorList l;
      for (const Tensor& t : a.tensor_list()) l.push_back(t.defined() ? Tensor::meta(t.meta()) : Tensor());
      meta_args.push_back(l);
    } else {
      meta_args.push_back(a);
    }
  }
  Tensor real = call_op(id, args)[0];
  Tensor meta = call_op(id, meta_args)[0];
  EXPECT_TRUE(meta.is_meta());
  EXPECT_EQ(meta.meta(), real.meta()) << op_info(id).name << ": meta " << meta.str() << " vs kernel " << real.str();
}

}  // namespace

// ---------------------------------------------------------------- cat / stack

TEST(IndexCat, ConcatenatesAndPromotes) {
  Tensor a = f64({1, 2, 3, 4}, {2, 2});
  Tensor b = f64({5, 6}, {2, 1});
  EXPECT_EQ(vals(cat({a, b}, 1)), (Vals{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(vals(cat({a, a}, -2)), (Vals{1, 2, 3, 4, 1, 2, 3, 4}));
  Tensor r = cat({iota({2}, DType::I64), Tensor::from_vector<float>({0.5f}, {1})});
  EXPECT_EQ(r.dtype(), DType::F32);
  EXPECT_EQ(vals(r), (Vals{0, 1, 0.5}));
  EXPECT_EQ(cat({iota({1}, DType::Bool), iota({1}, DType::U8)}).dtype(), DType::U8);
  // non-contiguous input
  EXPECT_EQ(vals(cat({transpose(a, 0, 1), b}, 1)), (Vals{1, 3, 5, 2, 4, 6}));
}

TEST(IndexCat, SkipsLegacyEmptyVectors) {
  Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor empty = Tensor::empty({0}, DType::F64);
  Tensor r = cat({empty, a, empty}, 1);
  EXPECT_EQ(r.sizes(), (Shape{2, 3}));
  EXPECT_EQ(vals(r), vals(a));
  EXPECT_EQ(cat({empty, empty}, 5).sizes(), (Shape{0}));  // every input skipped: dim is not even checked
  // other empty shapes are not skipped
  expect_error([&] { cat({a, Tensor::empty({0, 2}, DType::F64)}, 0); }, {"cat", "tensor number 1", "[2, 3]", "[0, 2]"});
}

TEST(IndexCat, Errors) {
  Tensor a = Tensor::empty({2, 3}), b = Tensor::empty({2, 4});
  expect_error([&] { cat({a, a, b}, 0); }, {"cat", "except in dimension 0", "expected size 3 but got size 4",
                                            "tensor number 2", "[2, 3]", "[2, 4]"});
  expect_error([&] { cat({a, Tensor::empty({})}, 0); }, {"zero-dimensional", "position 1"});
  expect_error([&] { cat({a, Tensor::empty({2, 3, 1})}, 0); }, {"same number of dimensions"});
  expect_error([&] { cat({}, 0); }, {"non-empty"});
  expect_error([&] { cat({a, a}, 2); }, {"cat", "out of range"});
}

TEST(IndexCat, Gradients) {
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{cat({x[0], x[1], x[2]}, 0)}; },
                 {leaf({2, 3}), transposed_leaf({3, 3}), leaf({0, 3})});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{cat({x[0], x[1], x[0]}, -1)}; },
                 {leaf({2, 1}), leaf({0}).detach().set_requires_grad(true)});
  // an integer input gets no gradient but still shifts the others
  Tensor w = leaf({2});
  Tensor y = cat({iota({3}, DType::I64), w});
  sum(mul(y, y)).backward();
  EXPECT_EQ(y.dtype(), DType::F64);
  EXPECT_EQ(vals(w.grad()), vals(mul(w.detach(), 2.0)));
}

TEST(IndexStack, StacksAlongNewDim) {
  Tensor a = f64({1, 2}, {2}), b = f64({3, 4}, {2});
  EXPECT_EQ(stack({a, b}, 0).sizes(), (Shape{2, 2}));
  EXPECT_EQ(vals(stack({a, b}, 1)), (Vals{1, 3, 2, 4}));
  EXPECT_EQ(vals(stack({a, b}, -1)), (Vals{1, 3, 2, 4}));
  EXPECT_EQ(stack({Tensor::scalar(1, DType::I64), Tensor::scalar(2.5, DType::F32)}).dtype(), DType::F32);
  expect_error([&] { stack({a, f64({1, 2, 3}, {3})}); }, {"stack", "equal size", "[2] at entry 0", "[3] at entry 1"});
  expect_error([&] { stack({a, b}, 2); }, {"stack", "out of range"});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{stack({x[0], x[1]}, 1)}; },
                 {leaf({2, 3}), transposed_leaf({2, 3})});
}

// ---------------------------------------------------------------- repeat / flip / roll

TEST(IndexRepeat, TilesAndAddsLeadingDims) {
  Tensor a = f64({1, 2}, {2});
  Tensor r = repeat(a, {2, 2});
  EXPECT_EQ(r.sizes(), (Shape{2, 4}));
  EXPECT_EQ(vals(r), (Vals{1, 2, 1, 2, 1, 2, 1, 2}));
  Tensor m = f64({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(vals(repeat(transpose(m, 0, 1), {1, 2})), (Vals{1, 3, 1, 3, 2, 4, 2, 4}));
  EXPECT_EQ(repeat(m, {3, 0, 1}).sizes(), (Shape{3, 0, 2}));
  EXPECT_EQ(repeat(Tensor::scalar(7, DType::I32), {}).sizes(), (Shape{}));
  expect_error([&] { repeat(m, {2}); }, {"repeat", "can not be smaller"});
  expect_error([&] { repeat(m, {-1, 1}); }, {"repeat", "non-negative"});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{repeat(x[0], {2, 1, 3})}; },
                 {transposed_leaf({2, 3})});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{repeat(x[0], {0, 2})}; }, {leaf({3})});
}

TEST(IndexFlip, ReversesDims) {
  Tensor m = iota({2, 3});
  EXPECT_EQ(vals(flip(m, {0})), (Vals{3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(vals(flip(m, {-1})), (Vals{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(vals(flip(m, {0, 1})), (Vals{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(vals(flip(transpose(m, 0, 1), {0})), (Vals{2, 5, 1, 4, 0, 3}));
  EXPECT_EQ(flip(Tensor::empty({0, 2}), {0}).sizes(), (Shape{0, 2}));
  expect_error([&] { flip(m, {0, -2}); }, {"flip", "dim 0 appears multiple times"});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{flip(x[0], {0, 1})}; },
                 {transposed_leaf({3, 2})});
}

TEST(IndexRoll, RotatesAlongDimsOrFlattened) {
  Tensor v = iota({5});
  EXPECT_EQ(vals(roll(v, {2})), (Vals{3, 4, 0, 1, 2}));
  EXPECT_EQ(vals(roll(v, {-1})), (Vals{1, 2, 3, 4, 0}));
  EXPECT_EQ(vals(roll(v, {12})), (Vals{3, 4, 0, 1, 2}));
  Tensor m = iota({2, 3});
  EXPECT_EQ(vals(roll(m, {1})), (Vals{5, 0, 1, 2, 3, 4}));  // dims=[]: flatten, roll, restore
  EXPECT_EQ(roll(m, {1}).sizes(), (Shape{2, 3}));
  EXPECT_EQ(vals(roll(m, {1}, {1})), (Vals{2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(vals(roll(m, {1, -1}, {0, 1})), (Vals{4, 5, 3, 1, 2, 0}));
  EXPECT_EQ(roll(Tensor::empty({0, 3}), {1}, {0}).sizes(), (Shape{0, 3}));
  expect_error([&] { roll(m, {1, 2}, {0}); }, {"roll", "align", "2 shifts and 1 dims"});
  expect_error([&] { roll(m, {1, 2}); }, {"roll", "align"});
  expect_error([&] { roll(m, {}, {0}); }, {"roll", "shifts"});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{roll(x[0], {1, -2}, {0, 1})}; },
                 {transposed_leaf({3, 4})});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{roll(x[0], {4})}; }, {leaf({2, 3})});
}

// ---------------------------------------------------------------- tril / triu / pad

TEST(IndexTriangle, KeepsTheRequestedTriangle) {
  Tensor m = add(iota({3, 4}), 1.0);  // 1..12
  EXPECT_EQ(vals(tril(m)), (Vals{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}));
  EXPECT_EQ(vals(tril(m, 1)), (Vals{1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12}));
  EXPECT_EQ(vals(tril(m, -1)), (Vals{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}));
  EXPECT_EQ(vals(triu(m)), (Vals{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}));
  EXPECT_EQ(vals(triu(m, 2)), (Vals{0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0}));
  EXPECT_EQ(vals(triu(m, -5)), vals(m));
  EXPECT_EQ(vals(tril(m, -3)), Vals(12, 0.0));
  // batched, non-contiguous, integer
  Tensor b = repeat(unsqueeze(to(transpose(f64({1, 2, 3, 4}, {2, 2}), 0, 1), DType::I32), 0), {2, 1, 1});
  Tensor tb = triu(b);
  EXPECT_EQ(tb.dtype(), DType::I32);
  EXPECT_EQ(vals(tb), (Vals{1, 3, 0, 4, 1, 3, 0, 4}));
  expect_error([&] { tril(f64({1, 2}, {2})); }, {"tril", "at least 2 dimensions"});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{tril(x[0], 1), triu(x[0], -1)}; },
                 {transposed_leaf({3, 4})});
}

TEST(IndexPad, ConstantPadsAndCrops) {
  Tensor m = f64({1, 2, 3, 4}, {2, 2});
  Tensor r = pad(m, {1, 0, 0, 1}, "constant", 5.0);  // last dim: 1 before; first dim: 1 after
  EXPECT_EQ(r.sizes(), (Shape{3, 3}));
  EXPECT_EQ(vals(r), (Vals{5, 1, 2, 5, 3, 4, 5, 5, 5}));
  EXPECT_EQ(vals(pad(m, {-1, 1})), (Vals{2, 0, 4, 0}));
  EXPECT_EQ(vals(pad(transpose(m, 0, 1), {0, 0, -1, 0})), (Vals{2, 4}));
  EXPECT_EQ(vals(pad(to(m, DType::I64), {1, 0}, "constant", 2.7)), (Vals{2, 1, 2, 2, 3, 4}));  // value truncated
  EXPECT_EQ(pad(Tensor::empty({0, 2}), {1, 1, 1, 1}).sizes(), (Shape{2, 4}));
  expect_error([&] { pad(m, {1, 1}, "wrap"); }, {"pad", "unrecognised", "'wrap'"});
  expect_error([&] { pad(m, {1}); }, {"pad", "divisible by 2"});
  expect_error([&] { pad(m, {1, 1, 1, 1, 1, 1}); }, {"pad", "padding length 6", "dimension 2"});
  expect_error([&] { pad(m, {-2, -1}); }, {"pad", "negative output size"});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{pad(x[0], {1, -1, 2, 0})}; },
                 {transposed_leaf({3, 4})});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{pad(x[0], {1, 2})}; }, {leaf({0, 2})});
}

TEST(IndexPad, ReflectReplicateCircular) {
  Tensor row = f64({1, 2, 3}, {1, 3});
  EXPECT_EQ(vals(pad(row, {2, 1}, "reflect")), (Vals{3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(vals(pad(row, {2, 1}, "replicate")), (Vals{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(vals(pad(row, {2, 1}, "circular")), (Vals{2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(vals(pad(row, {-1, 1}, "reflect")), (Vals{2, 3, 2}));
  Tensor r2 = pad(iota({1, 2, 3}), {1, 1, 1, 0}, "reflect");
  EXPECT_EQ(r2.sizes(), (Shape{1, 3, 5}));
  EXPECT_EQ(vals(r2), (Vals{4, 3, 4, 5, 4, 1, 0, 1, 2, 1, 4, 3, 4, 5, 4}));
  expect_error([&] { pad(row, {3, 0}, "reflect"); }, {"pad", "less than", "(3, 0)"});
  expect_error([&] { pad(row, {4, 0}, "circular"); }, {"pad", "wrapping"});
  expect_error([&] { pad(row, {1, 1}, "reflect", 1.0); }, {"pad", "doesn't take in value"});
  expect_error([&] { pad(f64({1, 2}, {2}), {1, 1}, "replicate"); }, {"pad", "'replicate'", "2-D to 5-D"});
  for (const char* mode : {"reflect", "replicate", "circular"}) {
    expect_grad_ok([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{pad(x[0], {2, -1}, mode)}; },
                   {transposed_leaf({2, 4})});
    expect_grad_ok([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{pad(x[0], {1, 2, 2, 1}, mode)}; },
                   {leaf({1, 3, 3})});
  }
  expect_meta_matches(OpId::pad, {iota({2, 3, 4}), IntList{1, 2, 0, 1}, "replicate"});
}

// ---------------------------------------------------------------- index_select / gather / scatter

TEST(IndexSelect, SelectsAlongADim) {
  Tensor m = iota({3, 2});
  EXPECT_EQ(vals(index_select(m, 0, i64({2, 0, 2}, {3}))), (Vals{4, 5, 0, 1, 4, 5}));
  EXPECT_EQ(vals(index_select(m, -1, Tensor::from_vector<int32_t>({1}, {1}))), (Vals{1, 3, 5}));
  Tensor r = index_select(m, 1, Tensor::scalar(0, DType::I64));
  EXPECT_EQ(r.sizes(), (Shape{3, 1}));
  EXPECT_EQ(vals(index_select(transpose(m, 0, 1), 1, i64({1, 1}, {2}))), (Vals{2, 2, 3, 3}));
  EXPECT_EQ(index_select(m, 0, i64({}, {0})).sizes(), (Shape{0, 2}));
  EXPECT_EQ(vals(index_select(Tensor::scalar(4.0, DType::F64), 0, i64({0}, {1}))), (Vals{4}));
  expect_error([&] { index_select(m, 0, i64({1, 3}, {2})); }, {"index_select", "index 3", "size 3", "0 to 2"});
  expect_error([&] { index_select(m, 0, i64({-1}, {1})); }, {"index_select", "index -1", "0 to 2"});
  expect_error([&] { index_select(m, 0, i64({0, 1}, {1, 2})); }, {"index_select", "1-D or 0-D"});
  expect_error([&] { index_select(m, 0, f64({0}, {1})); }, {"index_select", "int64 or int32"});
  expect_grad_ok([](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{index_select(x[0], 1, i64({2, 0, 2, 2}, {4}))};
  }, {transposed_leaf({2, 3})});
  expect_grad_ok([](const std::vector<Tensor>& x) { return std::vector<Tensor>{index_select(x[0], 0, i64({}, {0}))}; },
                 {leaf({3, 2})});
}

TEST(IndexGather, GathersAlongADim) {
  Tensor m = f64({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(vals(gather(m, 1, i64({0, 0, 1, 0}, {2, 2}))), (Vals{1, 1, 4, 3}));
  EXPECT_EQ(vals(gather(m, 0, i64({1, 0}, {1, 2}))), (Vals{3, 2}));  // index smaller than self
  EXPECT_EQ(vals(gather(transpose(m, 0, 1), 0, i64({1, 1}, {1, 2}))), (Vals{2, 4}));
  EXPECT_EQ(gather(m, 0, Tensor::empty({0}, DType::U8)).sizes(), (Shape{0}));  // an empty index is not checked
  expect_error([&] { gather(m, 1, i64({0, 2}, {1, 2})); }, {"gather", "index 2", "dimension 1", "size 2"});
  expect_error([&] { gather(m, 1, i64({-1, 0}, {1, 2})); }, {"gather", "index -1"});
  expect_error([&] { gather(m, 1, i64({0, 0}, {2})); }, {"gather", "same number of dimensions"});
  expect_error([&] { gather(m, 1, i64({0, 0, 0}, {3, 1})); }, {"gather", "no larger than"});
  expect_grad_ok([](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{gather(x[0], 0, i64({2, 0, 2, 1, 1, 1}, {3, 2}))};
  }, {transposed_leaf({3, 2})});
}

TEST(IndexScatter, WritesSourceOrValue) {
  // torch.zeros(3, 5).scatter_(0, tensor([[0, 1, 2, 0]]), arange(1, 11).reshape(2, 5))
  Tensor src = add(iota({2, 5}), 1.0);
  Tensor r = scatter(zeros({3, 5}, DType::F64), 0, i64({0, 1, 2, 0}, {1, 4}), src);
  EXPECT_EQ(vals(r), (Vals{1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0}));
  Tensor v = scatter(zeros({2, 4}, DType::F32), 1, i64({2, 3}, {2, 1}), 1.5);
  EXPECT_EQ(vals(v), (Vals{0, 0, 1.5, 0, 0, 0, 0, 1.5}));
  EXPECT_EQ(v.dtype(), DType::F32);
  // a duplicate along dim: the later element wins, as on PyTorch's CPU
  EXPECT_EQ(vals(scatter(zeros({2}, DType::F64), 0, i64({1, 1}, {2}), f64({7, 8}, {2}))), (Vals{0, 8}));
  Tensor self = zeros({3}, DType::F64);
  scatter(self, 0, i64({0}, {1}), 1.0);
  EXPECT_EQ(vals(self), (Vals{0, 0, 0}));  // not in place
  expect_error([&] { scatter(zeros({3}, DType::F32), 0, i64({0}, {1}), f64({1}, {1})); }, {"scatter", "src.dtype"});
  expect_error([&] { scatter(zeros({3}, DType::F64), 0, i64({3}, {1}), 1.0); }, {"scatter", "index 3", "size 3"});
  expect_error([&] { scatter(zeros({3, 3}, DType::F64), 0, i64({0, 0, 0, 0}, {1, 4}), 1.0); }, {"scatter", "no larger"});
  expect_error([&] { scatter(zeros({3}, DType::F64), 0, f64({0}, {1}), 1.0); }, {"scatter", "int64 or int32"});
  // gradients: unique targets (with duplicates the winner takes the gradient only on one side)
  Tensor index = i64({2, 0, 1, 0}, {1, 4});
  expect_grad_ok([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{scatter(x[0], 0, index, x[1])}; },
                 {transposed_leaf({3, 4}), leaf({2, 5})});
  expect_grad_ok([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{scatter(x[0], 1, i64({1}, {1, 1}), 0.5)}; },
                 {leaf({2, 3})});
}

TEST(IndexScatterAdd, AddsDuplicates) {
  Tensor r = scatter_add(ones({2, 3}, DType::F64), 1, i64({0, 0, 2, 1, 1, 1}, {2, 3}), add(iota({2, 3}), 1.0));
  // row 0: position 0 gets 1 + 2, position 2 gets 3; row 1: position 1 gets 4 + 5 + 6
  EXPECT_EQ(vals(r), (Vals{4, 1, 4, 1, 16, 1}));
  Tensor h = scatter_add(zeros({1}, DType::F16), 0, i64({0, 0, 0}, {3}), Tensor::from_vector<Half>({Half(1.0f), Half(1e-3f), Half(1e-3f)}, {3}));
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_NEAR(vals(h)[0], 1.0019531, 1e-6);  // rounds to f16 after every add
  expect_error([&] { call_op_named("scatter_add", {zeros({3}, DType::F64), 0, i64({0}, {1}), 1.0}); }, {"scatter_add", "must be a tensor"});
  Tensor index = i64({0, 0, 2, 1}, {2, 2});
  expect_grad_ok([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{scatter_add(x[0], 1, index, x[1])}; },
                 {leaf({2, 3}), transposed_leaf({3, 3})});  // src larger than index: the rest gets zero gradient
  Tensor src = leaf({3, 3});
  sum(scatter_add(zeros({2, 3}, DType::F64), 1, index, src)).backward();
  EXPECT_EQ(vals(src.grad()), (Vals{1, 1, 0, 1, 1, 0, 0, 0, 0}));
}

// ---------------------------------------------------------------- index / index_put

TEST(IndexAdvanced, IntegerIndices) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(vals(index(x, {i64({2, 0}, {2})})), (Vals{8, 9, 10, 11, 0, 1, 2, 3}));
  EXPECT_EQ(vals(index(x, {i64({-1}, {1})})), (Vals{8, 9, 10, 11}));
  EXPECT_EQ(vals(index(x, {Tensor(), i64({0, -1}, {2})})), (Vals{0, 3, 4, 7, 8, 11}));
  // index tensors broadcast together: x[[[0], [2]], [1, 3]]
  Tensor b = index(x, {i64({0, 2}, {2, 1}), Tensor::from_vector<int32_t>({1, 3}, {2})});
  EXPECT_EQ(b.sizes(), (Shape{2, 2}));
  EXPECT_EQ(vals(b), (Vals{1, 3, 9, 11}));
  // a 0-dim index removes the dim
  EXPECT_EQ(index(x, {Tensor::scalar(1, DType::I64)}).sizes(), (Shape{4}));
  // non-contiguous self
  EXPECT_EQ(vals(index(transpose(x, 0, 1), {i64({3}, {1})})), (Vals{3, 7, 11}));
}

TEST(IndexAdvanced, PlacementOfIndexedDims) {
  Tensor x = iota({2, 3, 4});  // x[i][j][k] = 12 i + 4 j + k
  // adjacent indexed dims stay in place: x[:, [0, 2], [1, 3]] has shape [2, 2]
  Tensor a = index(x, {Tensor(), i64({0, 2}, {2}), i64({1, 3}, {2})});
  EXPECT_EQ(a.sizes(), (Shape{2, 2}));
  EXPECT_EQ(vals(a), (Vals{1, 11, 13, 23}));
  // a single indexed middle dim: x[:, [2, 1]] has shape [2, 2, 4]
  EXPECT_EQ(index(x, {Tensor(), i64({2, 1}, {2})}).sizes(), (Shape{2, 2, 4}));
  // non-adjacent indexed dims go first: x[[0, 1], :, [1, 2]] has shape [2, 3], r[b][j] = x[i0[b]][j][i2[b]]
  Tensor n = index(x, {i64({0, 1}, {2}), Tensor(), i64({1, 2}, {2})});
  EXPECT_EQ(n.sizes(), (Shape{2, 3}));
  EXPECT_EQ(vals(n), (Vals{1, 5, 9, 14, 18, 22}));
  Tensor n2 = index(x, {i64({1}, {1, 1}), Tensor(), i64({0, 3}, {2})});
  EXPECT_EQ(n2.sizes(), (Shape{1, 2, 3}));
  EXPECT_EQ(vals(n2), (Vals{12, 16, 20, 15, 19, 23}));
}

TEST(IndexAdvanced, BoolMasks) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(vals(index(x, {mask({true, false, true}, {3})})), (Vals{0, 1, 2, 3, 8, 9, 10, 11}));
  Tensor m2 = mask({false, false, false, false, false, false, false, false, false, true, true, true}, {3, 4});
  Tensor r = index(x, {m2});
  EXPECT_EQ(r.sizes(), (Shape{3}));
  EXPECT_EQ(vals(r), (Vals{9, 10, 11}));
  EXPECT_EQ(vals(index(x, {Tensor(), mask({false, true, false, true}, {4})})), (Vals{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(index(x, {mask({false, false, false}, {3})}).sizes(), (Shape{0, 4}));
  expect_error([&] { index(x, {mask({true, false}, {2})}); }, {"index", "mask [2]", "[3, 4]"});
  // shape inference cannot know how many elements a mask selects
  expect_error([&] { infer_meta(bind_args(op_info(OpId::index), {x, TensorList{mask({true, false, true}, {3})}})); },
               {"index", "depends on the data"});
  Tensor xm = Tensor::meta(x.meta());
  expect_error([&] { index(xm, {mask({true, false, true}, {3})}); }, {"depends on the data"});
  expect_grad_ok([](const std::vector<Tensor>& t) {
    return std::vector<Tensor>{index(t[0], {mask({true, false, true}, {3}), Tensor()})};
  }, {transposed_leaf({3, 2})});
}

TEST(IndexAdvanced, Errors) {
  Tensor x = iota({3, 4});
  expect_error([&] { index(x, {i64({3}, {1})}); }, {"index", "index 3", "dimension 0", "size 3", "-3 to 2"});
  expect_error([&] { index(x, {Tensor(), i64({-5}, {1})}); }, {"index", "index -5", "dimension 1", "size 4"});
  expect_error([&] { index(x, {i64({0}, {1}), i64({0}, {1}), i64({0}, {1})}); }, {"too many indices", "dimension 2"});
  expect_error([&] { index(x, {i64({0, 1}, {2}), i64({0, 1, 2}, {3})}); }, {"could not be broadcast", "[2], [3]"});
  expect_error([&] { index(x, {f64({0}, {1})}); }, {"index", "int64, int32, bool or uint8"});
  expect_error([&] { index(x, {Tensor()}); }, {"at least one index"});
}

TEST(IndexAdvanced, Gradients) {
  // duplicates accumulate, negative indices, broadcasting index tensors
  expect_grad_ok([](const std::vector<Tensor>& t) {
    return std::vector<Tensor>{index(t[0], {i64({0, -1, 0}, {3, 1}), i64({1, 1}, {2})})};
  }, {transposed_leaf({3, 4})});
  // non-adjacent indices
  expect_grad_ok([](const std::vector<Tensor>& t) {
    return std::vector<Tensor>{index(t[0], {i64({0, 1}, {2}), Tensor(), i64({2, 2}, {2})})};
  }, {leaf({2, 2, 3})});
  // empty index
  expect_grad_ok([](const std::vector<Tensor>& t) { return std::vector<Tensor>{index(t[0], {i64({}, {0})})}; },
                 {leaf({2, 2})});
  Tensor x = leaf({3});
  sum(index(x, {i64({0, 0, 2, 0}, {4})})).backward();
  EXPECT_EQ(vals(x.grad()), (Vals{3, 0, 1}));
}

TEST(IndexPut, WritesAndAccumulates) {
  Tensor z = zeros({5}, DType::F64);
  Tensor acc = index_put(z, {i64({0, 0, 2}, {3})}, f64({1, 2, 3}, {3}), true);
  EXPECT_EQ(vals(acc), (Vals{3, 0, 3, 0, 0}));
  EXPECT_EQ(vals(z), Vals(5, 0.0));  // a new tensor, not in place
  EXPECT_EQ(vals(index_put(z, {i64({4, -5}, {2})}, f64({1, 2}, {2}))), (Vals{2, 0, 0, 0, 1}));
  // values broadcast to the indexing result [2, 4]
  Tensor x = iota({3, 4});
  EXPECT_EQ(vals(index_put(x, {i64({0, 2}, {2})}, 7.0)), (Vals{7, 7, 7, 7, 4, 5, 6, 7, 7, 7, 7, 7}));
  EXPECT_EQ(vals(index_put(x, {i64({1}, {1})}, f64({-1, -2, -3, -4}, {4}))), (Vals{0, 1, 2, 3, -1, -2, -3, -4, 8, 9, 10, 11}));
  // masks and non-adjacent indices (result dims first: [2, 3] for a [2, 3, 4] tensor)
  EXPECT_EQ(vals(index_put(x, {mask({false, true, false}, {3})}, 0.0)), (Vals{0, 1, 2, 3, 0, 0, 0, 0, 8, 9, 10, 11}));
  Tensor y = index_put(zeros({2, 3, 4}, DType::F64), {i64({0, 1}, {2}), Tensor(), i64({1, 2}, {2})},
                       f64({1, 2}, {2, 1}), false);
  EXPECT_EQ(vals(index(y, {i64({0, 1}, {2}), Tensor(), i64({1, 2}, {2})})), (Vals{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(sum(y).item<double>(), 9.0);
  // bool accumulate and f16 rounding per add
  EXPECT_EQ(vals(index_put(zeros({2}, DType::Bool), {i64({1, 1}, {2})}, mask({true, false}, {2}), true)), (Vals{0, 1}));
  Tensor h = index_put(zeros({1}, DType::BF16), {i64({0, 0}, {2})}, Tensor::from_vector<BFloat16>({BFloat16(256.0f), BFloat16(1.0f)}, {2}), true);
  EXPECT_EQ(vals(h)[0], 256.0);  // 257 is not a bf16
  expect_error([&] { index_put(x, {i64({0}, {1})}, Tensor::from_vector<float>({1}, {1})); }, {"index_put", "f32", "f64"});
  expect_error([&] { index_put(x, {i64({0, 1}, {2})}, f64({1, 2, 3}, {3})); }, {"shape mismatch", "[3]", "[2, 4]"});
  expect_error([&] { index_put(x, {i64({5}, {1})}, 1.0); }, {"index_put", "index 5", "size 3"});
}

TEST(IndexPut, Gradients) {
  Tensor idx = i64({2, 0}, {2});
  for (bool accumulate : {false, true}) {
    expect_grad_ok([&](const std::vector<Tensor>& t) {
      return std::vector<Tensor>{index_put(t[0], {Tensor(), idx}, t[1], accumulate)};
    }, {transposed_leaf({2, 3}), leaf({2})});  // values broadcast over the rows
  }
  Tensor dup = i64({1, 1, 0}, {3});
  expect_grad_ok([&](const std::vector<Tensor>& t) { return std::vector<Tensor>{index_put(t[0], {dup}, t[1], true)}; },
                 {leaf({3}), leaf({3})});
  expect_grad_ok([&](const std::vector<Tensor>& t) {
    return std::vector<Tensor>{index_put(t[0], {mask({true, false}, {2})}, t[1], false)};
  }, {leaf({2, 2}), leaf({1, 2})});
  // as_strided's VJP runs through index/index_put(accumulate) with one 1-D i64 index
  Tensor v = leaf({3});
  sum(as_strided(v, {2, 2}, {1, 1})).backward();
  EXPECT_EQ(vals(v.grad()), (Vals{1, 2, 1}));
  expect_grad_ok([](const std::vector<Tensor>& t) { return std::vector<Tensor>{as_strided(t[0], {3, 2}, {1, 2})}; },
                 {leaf({6})});
}

// ---------------------------------------------------------------- embedding

TEST(IndexEmbedding, LooksUpRowsAndSkipsPaddingGradient) {
  Tensor w = iota({4, 3});
  Tensor r = embedding(w, i64({0, 2, 2, 3}, {2, 2}));
  EXPECT_EQ(r.sizes(), (Shape{2, 2, 3}));
  EXPECT_EQ(vals(r), (Vals{0, 1, 2, 6, 7, 8, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(embedding(w, Tensor::scalar(1, DType::I32)).sizes(), (Shape{3}));
  expect_error([&] { embedding(f64({1, 2}, {2}), i64({0}, {1})); }, {"embedding", "2-D"});
  expect_error([&] { embedding(w, f64({0}, {1})); }, {"embedding", "int64 or int32"});
  expect_error([&] { embedding(w, i64({4}, {1})); }, {"index 4", "size 4"});

  Tensor wl = leaf({4, 3});
  Tensor ids = i64({1, 2, 1, 3}, {4});
  sum(embedding(wl, ids, 1)).backward();
  EXPECT_EQ(vals(wl.grad()), (Vals{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}));  // row 1 is padding
  expect_grad_ok([&](const std::vector<Tensor>& t) { return std::vector<Tensor>{embedding(t[0], ids)}; },
                 {transposed_leaf({4, 3})});

  // the decomposition agrees with the kernel and its VJP (values and gradients)
  Tensor wd = leaf({4, 3}, 7);
  OpCall call = bind_args(op_info(OpId::embedding), {wd, i64({1, 2, 1, 3}, {2, 2}), 1});
  Tensor via_decomp = op_info(OpId::embedding).decomp(call)[0];
  Tensor via_kernel = embedding(wd, i64({1, 2, 1, 3}, {2, 2}), 1);
  EXPECT_EQ(vals(via_decomp), vals(via_kernel));
  Tensor proj = leaf({2, 2, 3}, 9).detach();
  std::vector<Tensor> g_decomp = grad({sum(mul(via_decomp, proj))}, {wd});
  std::vector<Tensor> g_kernel = grad({sum(mul(via_kernel, proj))}, {wd});
  EXPECT_EQ(vals(g_decomp[0]), vals(g_kernel[0]));
  EXPECT_EQ(vals(select(g_kernel[0], 0, 1)), Vals(3, 0.0));
}

// ---------------------------------------------------------------- shape inference

TEST(IndexMeta, InferenceAgreesWithKernels) {
  Tensor x = iota({3, 4});
  Tensor t = transpose(iota({4, 3}, DType::F32), 0, 1);
  expect_meta_matches(OpId::cat, {TensorList{x, to(t, DType::F64)}, 1});
  expect_meta_matches(OpId::cat, {TensorList{Tensor::empty({0}, DType::I32), x}, 0});
  expect_meta_matches(OpId::cat, {TensorList{Tensor::empty({0}, DType::I32)}, 0});
  expect_meta_matches(OpId::stack, {TensorList{x, x}, -1});
  expect_meta_matches(OpId::repeat, {t, IntList{2, 1, 3}});
  expect_meta_matches(OpId::flip, {t, IntList{0}});
  expect_meta_matches(OpId::roll, {t, IntList{1}, IntList{}});
  expect_meta_matches(OpId::tril, {t, 1});
  expect_meta_matches(OpId::triu, {t, -1});
  expect_meta_matches(OpId::pad, {t, IntList{1, -1, 0, 2}, "constant", 1.0});
  expect_meta_matches(OpId::index_select, {x, 1, i64({0, 0}, {2})});
  expect_meta_matches(OpId::index_select, {x, 0, Tensor::scalar(1, DType::I64)});
  expect_meta_matches(OpId::gather, {x, 1, i64({0, 1}, {2, 1})});
  expect_meta_matches(OpId::scatter, {x, 1, i64({0, 1}, {2, 1}), 2.0});
  expect_meta_matches(OpId::scatter_add, {x, 1, i64({0, 1}, {2, 1}), iota({3, 4})});
  expect_meta_matches(OpId::index, {iota({2, 3, 4}), TensorList{i64({0}, {1, 1}), Tensor(), i64({1, 2}, {2})}});
  expect_meta_matches(OpId::index, {iota({2, 3, 4}), TensorList{Tensor(), i64({0}, {1, 1}), i64({1, 2}, {2})}});
  expect_meta_matches(OpId::index_put, {x, TensorList{i64({0}, {1})}, 1.0, true});
  expect_meta_matches(OpId::embedding, {x, i64({0, 2}, {1, 2}), -1});
}

// repeat multiplies each size by its repeat count; 2^40 x 2^40 does not fit in int64 and must be an error.
TEST(Repeat, HugeRepeatsAreErrorsNotOverflow) {
  const int64_t big = int64_t(1) << 40;
  Tensor x = Tensor::meta(TensorMeta{DType::F32, {big}, {}, {}});
  expect_error([&] { infer_meta(bind_args(op_info(OpId::repeat), {x, IntList{big}})); },
               {"repeat: the result would have more than 2^63 elements", "1099511627776 * 1099511627776"});
  Tensor one = Tensor::meta(TensorMeta{DType::F32, {1}, {}, {}});
  expect_error([&] { infer_meta(bind_args(op_info(OpId::repeat), {one, IntList{big, big}})); },
               {"repeat: the result would have more than 2^63 elements", "[1099511627776, 1099511627776]"});
  EXPECT_EQ(infer_meta(bind_args(op_info(OpId::repeat), {one, IntList{big}}))[0].sizes, Shape{big});
}
