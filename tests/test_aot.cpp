// AOT autograd (docs/aot.md): the joint graph's layout, gradients through the aot backends against eager
// autograd for every differentiable op sample, compiled training of an MLP against eager, and the compiled
// backward's place in eager autograd (retain_graph, kiln::grad, gradients flowing into eager code, lazy compile).
#include <algorithm>
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "aot/compiled.h"
#include "aot/joint.h"
#include "aot/partition_impl.h"
#include "api/backends.h"
#include "autograd/autograd.h"
#include "capture/capture.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "op_samples.h"
#include "ops/api.h"
#include "ops/dispatch.h"

using namespace kiln;

namespace {

const char* kMlp = R"(
graph mlp(%x: f64[8, 4], %w1: f64[16, 4] grad, %b1: f64[16] grad, %w2: f64[3, 16] grad, %b2: f64[3] grad, %y: i64[8]) {
  %h = linear(%x, %w1, %b1) : f64[8, 16]
  %a = relu(%h) : f64[8, 16]
  %logits = linear(%a, %w2, %b2) : f64[8, 3]
  %loss = cross_entropy(%logits, %y) : f64[]
  return %loss, %logits
}
)";

// The interpreter as the program of each half, counting compiles.
aot::AotConfig interpreter_config(int* compiles = nullptr) {
  aot::AotConfig c;
  c.compile = [compiles](const graph::Graph& g) -> aot::Program {
    if (compiles) ++*compiles;
    auto keep = std::make_shared<graph::Graph>(g);
    return [keep](const std::vector<Tensor>& in) { return graph::run_graph(*keep, in); };
  };
  return c;
}

Tensor leaf(const Tensor& t) { return clone(t).detach().set_requires_grad(true); }

TEST(AotJoint, LayoutPrimalsTangentsOutputsGradients) {
  graph::Graph g = graph::parse_graph(kMlp, "mlp.kir");
  aot::JointGraph j = aot::build_joint(g);
  EXPECT_EQ(j.layout.num_primals, 6);
  EXPECT_EQ(j.layout.num_forward_outputs, 2);
  EXPECT_EQ(j.grad_primals, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(j.tangent_of, (std::vector<int>{0, 1}));
  ASSERT_EQ(j.graph.inputs().size(), 8u);
  EXPECT_EQ(j.graph.value(j.graph.inputs()[0]).name, "primals_1");
  EXPECT_EQ(j.graph.value(j.graph.inputs()[6]).name, "tangents_1");
  EXPECT_EQ(j.graph.outputs().size(), 6u);
  for (size_t i = 0; i < 4; ++i)  // each gradient has its primal's shape
    EXPECT_EQ(j.graph.value(j.graph.outputs()[2 + i]).meta.sizes, g.value(g.inputs()[1 + i]).meta.sizes);
  graph::verify_graph(j.graph);
  // It round-trips through .kir, so `kiln aot` users can read and replay it.
  EXPECT_EQ(graph::print_graph(graph::parse_graph(graph::print_graph(j.graph))), graph::print_graph(j.graph));
}

TEST(AotJoint, RefusesInPlaceGraphs) {
  graph::Graph g = graph::parse_graph(R"(graph f(%x: f32[3] grad) {
    %y = mul(%x, 2) : f32[3]
    %z = mul_(%y, 3) : f32[3]
    return %z
  })");
  try {
    aot::build_joint(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("functionalize"), std::string::npos) << e.what();
  }
}

TEST(AotPartition, SaveNeededSplitsAndSavesWhatTheBackwardReads) {
  graph::Graph g = graph::parse_graph(R"(graph f(%x: f64[4] grad, %w: f64[4] grad) {
    %y = mul(%x, %w) : f64[4]
    %z = exp(%y) : f64[4]
    %s = sum(%z) : f64[]
    return %s
  })");
  aot::JointGraph j = aot::build_joint(g);
  aot::Partition p = aot::partition_save_needed(j.graph, j.layout);
  // forward: primals -> s, saved...; backward: saved..., tangent -> dx, dw
  EXPECT_EQ(p.forward.inputs().size(), 2u);
  EXPECT_EQ(int(p.forward.outputs().size()), 1 + p.num_saved);
  EXPECT_EQ(int(p.backward.inputs().size()), p.num_saved + 1);
  EXPECT_EQ(p.backward.outputs().size(), 2u);
  // Every saved value records why (the decision log also names values the backward recomputes).
  EXPECT_EQ(std::count_if(p.decisions.begin(), p.decisions.end(), [](const aot::PartitionDecision& d) { return d.saved; }),
            p.num_saved);
  EXPECT_GT(p.saved_bytes, 0);
  // The two halves compute what the joint computes.
  manual_seed(3);
  std::vector<Tensor> in = {randn({4}, DType::F64), randn({4}, DType::F64)};
  Tensor tangent = randn({}, DType::F64);
  std::vector<Tensor> joint_out = graph::run_graph(j.graph, {in[0], in[1], tangent});
  std::vector<Tensor> fwd = graph::run_graph(p.forward, in);
  std::vector<Tensor> bw_in(fwd.begin() + 1, fwd.end());
  bw_in.push_back(tangent);
  std::vector<Tensor> bwd = graph::run_graph(p.backward, bw_in);
  CompareVerdict v = compare_outputs({joint_out[0], joint_out[1], joint_out[2]}, {fwd[0], bwd[0], bwd[1]});
  EXPECT_TRUE(v.ok) << v.str();
}

// ---------------------------------------------------------------- every differentiable op sample
struct OpRow {
  std::string name;
};
std::vector<OpRow> differentiable_rows() {
  std::vector<OpRow> rows;
#define KILN_OP(id, family, kind, flags, schema, ...) \
  if (std::string_view(#flags) == "D") rows.push_back({#id});
#include "ops/ops.def"
#undef KILN_OP
  return rows;
}
std::string row_name(const ::testing::TestParamInfo<OpRow>& info) { return info.param.name; }
void PrintTo(const OpRow& row, std::ostream* os) { *os << row.name; }

// The sample's flat tensors in the order one_node_graph makes graph inputs (schema order, numbers skipped).
std::vector<Tensor> graph_input_tensors(const OpInfo& op, const OpSample& s) {
  std::vector<Tensor> out;
  for (const Tensor& t : bind_args(op, s.args, s.kwargs).flat_tensors())
    if (t.defined() && !t.is_wrapped_number()) out.push_back(t);
  return out;
}

// Fresh copies for the arguments an in-place op writes (a leaf that requires grad cannot be written).
void clone_mutated(const OpInfo& op, OpSample& s) {
  for (size_t i = 0; i < s.args.size() && i < op.schema.args.size(); ++i)
    if (op.schema.args[i].mutated && s.args[i].is_tensor()) s.args[i] = IValue(mul(s.args[i].tensor(), 1.0));
}

// Gradients of the differentiable outputs (weighted by seeded random tangents) w.r.t. the inputs that require
// grad, through kiln::grad.
std::vector<Tensor> gradients(const std::vector<Tensor>& outs, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> roots, tangents, wrt;
  manual_seed(77);
  for (const Tensor& o : outs)
    if (o.requires_grad()) roots.push_back(o), tangents.push_back(randn(o.sizes(), o.dtype()));
  for (const Tensor& in : inputs)
    if (in.requires_grad()) wrt.push_back(in);
  if (roots.empty() || wrt.empty()) return {};
  return kiln::grad(roots, wrt, tangents, false, false);
}

class AotOpGradients : public ::testing::TestWithParam<OpRow> {};

TEST_P(AotOpGradients, MatchEagerAutograd) {
  const OpInfo& op = *find_op(GetParam().name);
  static const auto samples = differentiable_op_samples();
  auto it = samples.find(GetParam().name);
  ASSERT_NE(it, samples.end());
  for (const std::string backend : {"aot_eager", "aot_eager_decomp_partition"}) {
    check_property("AotOpGradients/" + GetParam().name + "/" + backend, [&] {
      const OpSample original = *it->second;
      if (original.shape_depends_on_data) RC_SUCCEED("output shape depends on the data");
      OpSample s = original;
      clone_mutated(op, s);
      std::vector<Tensor> inputs = graph_input_tensors(op, s);
      auto [g, graph_inputs] = one_node_graph(op, s, DType::F64);
      for (size_t i = 0; i < inputs.size(); ++i) g.value(g.inputs()[i]).requires_grad = inputs[i].requires_grad();
      manual_seed(5);
      std::vector<Tensor> eager_outs = call_op_named(op.name, s.args, s.kwargs);
      std::vector<Tensor> expected = gradients(eager_outs, inputs);
      if (op.is_inplace()) s = original, clone_mutated(op, s), inputs = graph_input_tensors(op, s);
      GraphProgram program = compile_for_backend(backend, g, {.repro_stage = "test"});
      manual_seed(5);
      std::vector<Tensor> outs = program(inputs);
      RC_ASSERT(outs.size() == eager_outs.size());
      CompareVerdict fwd = compare_outputs(eager_outs, outs);
      if (!fwd.ok) RC_FAIL(backend + " forward: " + fwd.str());
      for (size_t i = 0; i < outs.size(); ++i) RC_ASSERT(outs[i].requires_grad() == eager_outs[i].requires_grad());
      std::vector<Tensor> actual = gradients(outs, inputs);
      CompareVerdict v = compare_outputs(expected, actual);
      if (!v.ok) RC_FAIL(backend + " gradients: " + v.str() + "\n" + graph::print_graph(g));
    }, 10);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, AotOpGradients, ::testing::ValuesIn(differentiable_rows()), row_name);

// ---------------------------------------------------------------- compiled training
struct Mlp {
  Tensor x, y, w1, b1, w2, b2;
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  std::vector<Tensor> inputs() const { return {x, w1, b1, w2, b2, y}; }
};

Mlp make_mlp() {
  manual_seed(11);
  Mlp m;
  m.x = randn({8, 4}, DType::F64);
  m.y = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 2, 2, 1}, {8});
  m.w1 = leaf(mul(randn({16, 4}, DType::F64), 0.5));
  m.b1 = leaf(zeros({16}, DType::F64));
  m.w2 = leaf(mul(randn({3, 16}, DType::F64), 0.5));
  m.b2 = leaf(zeros({3}, DType::F64));
  return m;
}

// 20 SGD steps, parameters updated in place; returns the losses.
std::vector<double> train(Mlp& m, const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& step) {
  std::vector<double> losses;
  for (int i = 0; i < 20; ++i) {
    Tensor loss = step(m.inputs())[0];
    losses.push_back(loss.item<double>());
    loss.backward();
    NoGradGuard no_grad;
    for (Tensor p : m.params()) {
      add_(p, mul(p.grad(), -0.1));
      p.set_grad(Tensor());
    }
  }
  return losses;
}

TEST(AotTraining, MlpTwentySgdStepsMatchEager) {
  graph::Graph g = graph::parse_graph(kMlp, "mlp.kir");
  Mlp eager = make_mlp(), compiled = make_mlp();
  std::vector<double> expected = train(eager, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{cross_entropy(linear(relu(linear(in[0], in[1], in[2])), in[3], in[4]), in[5])};
  });
  for (const std::string backend : {"aot_eager", "aot_eager_decomp_partition", "inductor"}) {
    SCOPED_TRACE(backend);
    Mlp c = make_mlp();
    std::vector<double> losses = train(c, compile_for_backend(backend, g, {.repro_stage = "test"}));
    ASSERT_EQ(losses.size(), expected.size());
    for (size_t i = 0; i < losses.size(); ++i) EXPECT_NEAR(losses[i], expected[i], 1e-9) << "step " << i;
    CompareVerdict v = compare_outputs(eager.params(), c.params());
    EXPECT_TRUE(v.ok) << v.str();
    EXPECT_LT(losses.back(), losses.front());  // it trains
  }
}

// ---------------------------------------------------------------- the compiled backward in eager autograd
graph::Graph square_sum() {
  return graph::parse_graph(R"(graph f(%x: f64[3] grad) {
    %y = mul(%x, %x) : f64[3]
    %s = sum(%y) : f64[]
    return %s, %y
  })");
}

TEST(AotBackward, CompiledLazilyOnFirstBackward) {
  int compiles = 0;
  aot::Program f = aot::aot_compile(square_sum(), interpreter_config(&compiles));
  EXPECT_EQ(compiles, 1);  // the inference program
  Tensor x = leaf(Tensor::from_vector<double>({1, 2, 3}, {3}));
  Tensor s = f({x})[0];
  EXPECT_EQ(compiles, 2);  // + the forward
  s.backward();
  EXPECT_EQ(compiles, 3);  // + the backward, on the first backward
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{2, 4, 6}));
  Tensor s2 = f({x})[0];
  s2.backward();
  EXPECT_EQ(compiles, 3);  // reused
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{4, 8, 12}));
}

TEST(AotBackward, RetainGraphAndSecondBackwardError) {
  aot::Program f = aot::aot_compile(square_sum(), interpreter_config());
  Tensor x = leaf(Tensor::from_vector<double>({1, 2, 3}, {3}));
  Tensor s = f({x})[0];
  s.backward(Tensor(), /*retain_graph=*/true);
  s.backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{4, 8, 12}));
  try {
    s.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(AotBackward, GradientsFlowThroughEagerCodeOnBothSides) {
  aot::Program f = aot::aot_compile(square_sum(), interpreter_config());
  auto model = [&](const Tensor& w, bool compiled) {
    Tensor x = mul(w, 3.0);  // eager before
    std::vector<Tensor> outs = compiled ? f({x}) : std::vector<Tensor>{sum(mul(x, x)), mul(x, x)};
    return add(mul(outs[0], 2.0), sum(sin(outs[1])));  // eager after, using both outputs
  };
  Tensor w1 = leaf(Tensor::from_vector<double>({0.1, -0.2, 0.3}, {3}));
  Tensor w2 = leaf(Tensor::from_vector<double>({0.1, -0.2, 0.3}, {3}));
  std::vector<Tensor> expected = kiln::grad({model(w1, false)}, {w1});
  std::vector<Tensor> actual = kiln::grad({model(w2, true)}, {w2});
  CompareVerdict v = compare_outputs(expected, actual);
  EXPECT_TRUE(v.ok) << v.str();
}

TEST(AotBackward, NoGradCallsRunTheInferenceProgramWithoutHistory) {
  aot::Program f = aot::aot_compile(square_sum(), interpreter_config());
  Tensor x = leaf(Tensor::from_vector<double>({1, 2, 3}, {3}));
  NoGradGuard no_grad;
  std::vector<Tensor> outs = f({x});
  EXPECT_FALSE(outs[0].requires_grad());
  EXPECT_EQ(outs[0].item<double>(), 14);
}

TEST(AotBackward, SavedInputModifiedInPlaceIsAnError) {
  aot::Program f = aot::aot_compile(square_sum(), interpreter_config());
  Tensor base = Tensor::from_vector<double>({1, 2, 3}, {3});
  Tensor x = mul(leaf(base), 1.0);  // not a leaf: may be written in place
  Tensor s = f({x})[0];
  {
    NoGradGuard no_grad;
    add_(x, 1.0);
  }
  EXPECT_THROW(s.backward(), Error);
}

}  // namespace

namespace {

// Capture (kiln::compile of a C++ function) gives compiled training on the AOT backends: the ops that need
// autograd go into the captured graph, and replayed calls return outputs with the compiled backward's history.
TEST(AotCapture, CompiledTrainingStepMatchesEager) {
  for (const std::string backend : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    Mlp eager = make_mlp(), compiled = make_mlp();
    auto step = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                   const Tensor& y) { return cross_entropy(linear(relu(linear(x, w1, b1)), w2, b2), y); };
    auto f = kiln::compile(step, {.backend = backend, .name = "step"});
    std::vector<double> expected = train(eager, [&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{step(in[0], in[1], in[2], in[3], in[4], in[5])};
    });
    std::vector<double> losses = train(compiled, [&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{f(in[0], in[1], in[2], in[3], in[4], in[5])};
    });
    for (size_t i = 0; i < losses.size(); ++i) EXPECT_NEAR(losses[i], expected[i], 1e-9) << "step " << i;
    CompareVerdict v = compare_outputs(eager.params(), compiled.params());
    EXPECT_TRUE(v.ok) << v.str();
    // Replayed calls return the compiled backward's history (not eager ops' history, not a graph break).
    Tensor loss = f(compiled.x, compiled.w1, compiled.b1, compiled.w2, compiled.b2, compiled.y);
    ASSERT_TRUE(loss.grad_fn());
    EXPECT_EQ(loss.grad_fn()->name().rfind("CompiledFunctionBackward", 0), 0u) << loss.grad_fn()->name();
  }
}

}  // namespace
