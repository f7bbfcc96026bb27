// Tests of the reference interpreter (src/graph/interpreter.h): results against hand-computed values, input
// checking, per-node error reporting, the meta check, fp64 mode, random ops, in-place nodes, recording of
// intermediates, and reuse of a prepared Interpreter.
#include <gtest/gtest.h>

#include <cmath>

#include "eager/philox.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "ops/api.h"

using namespace kiln;
using namespace kiln::graph;

namespace {

TensorMeta meta(DType dt, const Shape& sizes) {
  TensorMeta m;
  m.dtype = dt;
  m.sizes = sizes;
  m.strides = contiguous_strides(sizes);
  return m;
}

Tensor f32(const std::vector<float>& v, const Shape& s) { return Tensor::from_vector<float>(v, s); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// y = (x + 1.5) * x ; s = sum(y)
Graph small_graph() {
  Graph g;
  ValueId x = g.add_input("x", meta(DType::F32, {2, 3}));
  ValueId a = g.add_op1(OpId::add, {TensorArg{x}, Scalar(1.5), Scalar(int64_t(1))}, "a");
  ValueId y = g.add_op1(OpId::mul, {TensorArg{a}, TensorArg{x}}, "y");
  ValueId s = g.add_op1(OpId::sum, {TensorArg{y}, std::monostate{}, Scalar(false), std::monostate{}}, "s");
  g.set_outputs({y, s});
  return g;
}

}  // namespace

TEST(Interpreter, ComputesWhatEagerComputes) {
  Graph g = small_graph();
  Tensor x = f32({1, -2, 0.5f, 3, 0, -1}, {2, 3});
  std::vector<Tensor> out = run_graph(g, {x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dtype(), DType::F32);
  EXPECT_EQ(out[0].sizes(), (Shape{2, 3}));
  std::vector<double> want = {2.5, 1, 1, 13.5, 0, -0.5};
  EXPECT_EQ(out[0].to_double_vector(), want);
  EXPECT_EQ(out[1].sizes(), Shape{});
  EXPECT_DOUBLE_EQ(out[1].item<double>(), 17.5);
}

TEST(Interpreter, RejectsWrongInputs) {
  Graph g = small_graph();
  EXPECT_NE(error_of([&] { run_graph(g, {}); }).find("takes 1 inputs (%x: f32[2, 3]), but 0 were given"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run_graph(g, {f32({1, 2, 3}, {3})}); }).find("input 0 (%x) is f32[3], but the graph declares f32[2, 3]"),
            std::string::npos);
  Tensor i = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_NE(error_of([&] { run_graph(g, {i}); }).find("is i64[2, 3], but the graph declares f32[2, 3]"), std::string::npos);
  EXPECT_NE(error_of([&] { run_graph(g, {Tensor()}); }).find("undefined"), std::string::npos);
}

TEST(Interpreter, AcceptsNonContiguousInputs) {
  Graph g = small_graph();
  Tensor xt = transpose(f32({1, 3, -2, 0, 0.5f, -1}, {3, 2}), 0, 1);  // [[1, -2, 0.5], [3, 0, -1]]
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_DOUBLE_EQ(run_graph(g, {xt})[1].item<double>(), 17.5);
}

TEST(Interpreter, KernelErrorsNameTheNode) {
  Graph g = parse_graph(R"(graph g(%x: f32[3, 2]) {
  %idx = constant i64[2] [0, 7]
  %picked = index_select(%x, 0, %idx) : f32[2, 2]
  return %picked
})", "sel.kir");
  std::string err = error_of([&] { run_graph(g, {f32({1, 2, 3, 4, 5, 6}, {3, 2})}); });
  EXPECT_NE(err.find("%picked = index_select (line 3:3)"), std::string::npos) << err;
}

TEST(Interpreter, ReportsMetaMismatchNamingTheNode) {
  Graph g;
  ValueId x = g.add_input("x", meta(DType::F32, {4}));
  // The graph claims relu gives f64[4]; the kernel gives f32[4].
  ValueId r = g.add_op(OpId::relu, {TensorArg{x}}, {"r"}, std::vector<TensorMeta>{meta(DType::F64, {4})})[0];
  g.set_outputs({r});
  std::string err = error_of([&] { run_graph(g, {f32({1, -1, 2, -2}, {4})}); });
  EXPECT_NE(err.find("%r = relu: result 0 is f32[4], but the graph records f64[4]"), std::string::npos) << err;
  InterpretOptions unchecked;
  unchecked.check_meta = false;
  EXPECT_EQ(run_graph(g, {f32({1, -1, 2, -2}, {4})}, unchecked)[0].to_double_vector(), (std::vector<double>{1, 0, 2, 0}));
}

TEST(Interpreter, Fp64ModeUpcastsInputsConstantsAndDtypeArguments) {
  Graph g = parse_graph(R"(graph g(%x: f32[2]) {
  %third = constant f32[] 0.3333333432674408
  %y = mul(%x, %third) : f32[2]
  %h = to(%y, f16) : f16[2]
  %n = arange(0, 2) : i64[2]
  %z = add(%h, %n) : f16[2]
  return %z, %n
})");
  Tensor x = f32({1.0f, 3.0f}, {2});
  std::vector<Tensor> plain = run_graph(g, {x});
  EXPECT_EQ(plain[0].dtype(), DType::F16);
  InterpretOptions o;
  o.fp64 = true;
  std::vector<Tensor> ref = run_graph(g, {x}, o);
  ASSERT_EQ(ref[0].dtype(), DType::F64);
  EXPECT_EQ(ref[1].dtype(), DType::I64);  // non-floating values keep their dtype
  double third = double(0.3333333432674408f);
  EXPECT_DOUBLE_EQ(ref[0].to_double_vector()[0], third);             // no f16 rounding in the reference
  EXPECT_DOUBLE_EQ(ref[0].to_double_vector()[1], 3 * third + 1);
  EXPECT_NE(plain[0].to_double_vector()[0], third);                  // eager f16 rounds
  EXPECT_NEAR(plain[0].to_double_vector()[0], third, 1e-3);
}

TEST(Interpreter, RandomOpsDrawTheSameNumbersInFp64Mode) {
  Graph g = parse_graph(R"(graph g(%x: f32[5]) {
  %r = rand_like(%x) : f32[5]
  %n = randn([5]) : f32[5]
  %s = add(%r, %n) : f32[5]
  return %s
})");
  Tensor x = f32({0, 0, 0, 0, 0}, {5});
  manual_seed(7);
  std::vector<double> plain = run_graph(g, {x})[0].to_double_vector();
  manual_seed(7);
  InterpretOptions o;
  o.fp64 = true;
  std::vector<double> ref = run_graph(g, {x}, o)[0].to_double_vector();
  ASSERT_EQ(plain.size(), ref.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(plain[i], ref[i], 1e-6) << i;
  manual_seed(7);
  EXPECT_EQ(run_graph(g, {x})[0].to_double_vector(), plain);  // same seed, same numbers
}

TEST(Interpreter, InPlaceNodesMutateLikeEager) {
  Graph g = parse_graph(R"(graph g(%x: f32[3]) {
  %c = clone(%x) : f32[3]
  %d = add_(%c, 1.0) : f32[3]
  %e = mul(%c, 2) : f32[3]
  return %e, %d
})");
  Tensor x = f32({1, 2, 3}, {3});
  std::vector<Tensor> out = run_graph(g, {x});
  EXPECT_EQ(out[0].to_double_vector(), (std::vector<double>{4, 6, 8}));  // reads %c after the mutation
  EXPECT_EQ(out[1].to_double_vector(), (std::vector<double>{2, 3, 4}));
  EXPECT_EQ(x.to_double_vector(), (std::vector<double>{1, 2, 3}));  // the clone was mutated, not x
}

TEST(Interpreter, MultiOutputNodes) {
  Graph g = parse_graph(R"(graph g(%x: f32[4]) {
  %a, %b = split(%x, 2) : f32[2], f32[2]
  %s = sub(%b, %a) : f32[2]
  return %s
})");
  EXPECT_EQ(run_graph(g, {f32({1, 2, 10, 20}, {4})})[0].to_double_vector(), (std::vector<double>{9, 18}));
}

TEST(Interpreter, RecordsEveryIntermediate) {
  Graph g = small_graph();
  Tensor x = f32({1, -2, 0.5f, 3, 0, -1}, {2, 3});
  std::vector<Tensor> values = run_graph_all_values(g, {x});
  ASSERT_EQ(int(values.size()), g.num_values());
  ValueId a = *g.find_value("a");
  EXPECT_EQ(values[size_t(a)].to_double_vector(), (std::vector<double>{2.5, -0.5, 2, 4.5, 1.5, 0.5}));
  std::vector<std::string> order;
  InterpretOptions o;
  o.on_value = [&](ValueId id, const Tensor&) { order.push_back(g.value(id).name); };
  run_graph(g, {x}, o);
  EXPECT_EQ(order, (std::vector<std::string>{"x", "a", "y", "s"}));
}

TEST(Interpreter, PreparedInterpreterRunsRepeatedly) {
  Graph g = small_graph();
  Interpreter interp(g);
  EXPECT_DOUBLE_EQ(interp.run({f32({1, -2, 0.5f, 3, 0, -1}, {2, 3})})[1].item<double>(), 17.5);
  EXPECT_DOUBLE_EQ(interp.run({f32({0, 0, 0, 0, 0, 1}, {2, 3})})[1].item<double>(), 2.5);
  EXPECT_THROW(interp.run({}), Error);
  EXPECT_DOUBLE_EQ(interp.run({f32({0, 0, 0, 0, 0, 1}, {2, 3})})[1].item<double>(), 2.5);  // still usable
}

TEST(Interpreter, RandomNodeClassification) {
  Graph g = parse_graph(R"(graph g(%x: f32[3]) {
  %a = dropout(%x, 0.5, True) : f32[3]
  %b = dropout(%x, 0.5, False) : f32[3]
  %c = rand([3]) : f32[3]
  %d = exp(%x) : f32[3]
  return %a, %b, %c, %d
})");
  std::vector<bool> random;
  for (const graph::Node& n : g.nodes()) random.push_back(is_random_node(n));
  EXPECT_EQ(random, (std::vector<bool>{true, false, true, false}));
}
