// Functional random numbers (aot/rng.h, docs/partitioners.md): philox_rand draws exactly what rand / randn /
// bernoulli draw at the same generator state and leaves the generator alone; AOT autograd rewrites a training
// graph's random ops into it, so a compiled training step draws what eager draws and advances the generator
// as eager does; and the min-cut partitioner redraws a dropout mask in the backward from the saved (seed,
// offset) instead of saving it, with the same mask and eager's gradients.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>

#include "aot/compiled.h"
#include "aot/rng.h"
#include "autograd/autograd.h"
#include "capture/capture.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "ops/api.h"
#include "ops/dispatch.h"

using namespace kiln;

namespace {

Tensor word(uint64_t v) { return Tensor::scalar(Scalar(int64_t(v)), DType::I64); }

RC_GTEST_PROP(PhiloxRand, DrawsWhatTheStatefulOpDrawsAtTheSameState, ()) {
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  const uint64_t offset = *rc::gen::inRange<uint64_t>(0, uint64_t(1) << 40);
  const Shape size = *rc::gen::container<std::vector<int64_t>>(*rc::gen::inRange<size_t>(0, 3), rc::gen::inRange<int64_t>(0, 6));
  const DType dtype = *rc::gen::element(DType::F32, DType::F64, DType::F16, DType::BF16);
  const bool normal = *rc::gen::arbitrary<bool>();
  default_generator() = {seed, offset};
  Tensor stateful = normal ? randn(size, dtype) : rand(size, dtype);
  RC_ASSERT(default_generator().offset == offset + uint64_t(shape_numel(size)));
  Tensor functional = call_op_named("philox_rand", {IntList(size), word(seed), word(offset),
                                                    std::string(normal ? "normal" : "uniform")}, {{"dtype", dtype}})[0];
  RC_ASSERT(default_generator().offset == offset + uint64_t(shape_numel(size)));  // philox_rand draws no state
  RC_ASSERT(same_bits(stateful, functional));
}

TEST(PhiloxRand, BadArgumentsAreClearErrors) {
  EXPECT_THROW(call_op_named("philox_rand", {IntList{2}, word(1), word(2), std::string("gamma")}), Error);
  EXPECT_THROW(call_op_named("philox_rand", {IntList{2}, ones({2}), word(2)}), Error);
  try {
    call_op_named("philox_rand", {IntList{2}, word(1), word(2), std::string("gamma")});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("distribution must be \"uniform\" or \"normal\""), std::string::npos) << e.what();
  }
}

// Every random op with a functional form, in one graph: the functionalized graph at state S draws what the
// original draws at S (which advances the generator by exactly plan.draws).
TEST(RngFunctionalization, FunctionalGraphDrawsWhatEagerDraws) {
  graph::Graph g = graph::parse_graph(R"(graph draws(%x: f32[4, 8], %p: f64[5]) {
  %a = rand_like(%x)
  %b = bernoulli(%x, 0.3)
  %c = randn_like(%x, dtype=f64)
  %d = bernoulli(%p)
  %e = rand([3, 2], dtype=bf16)
  %f = dropout(%x, 0.25, True)
  return %a, %b, %c, %d, %e, %f
})", "draws.kir");
  aot::RngFunctional r = aot::functionalize_rng(g);
  ASSERT_TRUE(r.plan.used) << r.plan.note;
  EXPECT_EQ(r.plan.draws, 32u + 32 + 32 + 5 + 6 + 32);
  Tensor x = rand({4, 8}), p = rand({5}, DType::F64);
  const GeneratorState state{1234, 77};
  default_generator() = state;
  std::vector<Tensor> eager = graph::run_graph(g, {x, p});
  EXPECT_EQ(default_generator().offset, state.offset + r.plan.draws);
  std::vector<Tensor> inputs = {x, p};
  for (Tensor& t : aot::rng_inputs(r.plan, state)) inputs.push_back(t);
  std::vector<Tensor> functional = graph::run_graph(r.graph, inputs);
  EXPECT_EQ(default_generator().offset, state.offset + r.plan.draws);  // untouched by the functional graph
  ASSERT_EQ(eager.size(), functional.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(same_bits(eager[i], functional[i])) << "output " << i;
}

TEST(RngFunctionalization, AnOpWithoutAFunctionalFormLeavesTheGraphAlone) {
  graph::Graph g = graph::parse_graph(R"(graph draws(%x: f32[4]) {
  %a = rand_like(%x)
  %b = randint(0, 5, [4])
  return %a, %b
})", "draws.kir");
  aot::RngFunctional r = aot::functionalize_rng(g);
  EXPECT_FALSE(r.plan.used);
  EXPECT_NE(r.plan.note.find("%b = randint (line 3:3) has no functional (seed, offset) form"), std::string::npos)
      << r.plan.note;
  EXPECT_EQ(r.graph.inputs().size(), 1u);
}

Tensor dropout_loss(const Tensor& x, const Tensor& w) { return sum(mul(dropout(mul(x, w), 0.5, true), w)); }

// A compiled training step with dropout draws eager's mask, advances the generator as eager does, and a random
// op the user runs between forward and backward changes nothing in the backward (min-cut redraws the mask from
// the saved (seed, offset), never from the generator). Bit for bit where the same kernels run (the interpreter
// backends); the inductor's fused reductions add in another order, so there the comparator judges.
TEST(RngFunctionalization, CompiledDropoutStepMatchesEagerBitForBit) {
  for (const std::string backend : {"aot_eager", "aot_eager_decomp_partition", "inductor"}) {
    SCOPED_TRACE(backend);
    auto f = kiln::compile(dropout_loss, {.backend = backend, .name = "dropout_step"});
    for (int call = 1; call <= 3; ++call) {
      Tensor x = rand({64}), w_eager = add(rand({64}), 0.5).set_requires_grad(true);
      Tensor w = history_free_alias(clone(w_eager)).set_requires_grad(true);
      manual_seed(uint64_t(100 + call));
      Tensor loss_eager = dropout_loss(x, w_eager);
      Tensor between_eager = rand({5});
      loss_eager.backward();
      const uint64_t eager_offset = default_generator().offset;
      manual_seed(uint64_t(100 + call));
      Tensor loss = f(x, w);
      Tensor between = rand({5});
      loss.backward();
      EXPECT_EQ(default_generator().offset, eager_offset) << "call " << call;
      EXPECT_TRUE(same_bits(between, between_eager)) << "call " << call;
      ASSERT_TRUE(w.grad().defined());
      if (backend == "inductor") {  // fused kernels sum in another order: equal by the comparator
        CompareVerdict v = compare_outputs({loss_eager, w_eager.grad()}, {loss, w.grad()});
        EXPECT_TRUE(v.ok) << "call " << call << ": " << v.str();
        continue;
      }
      EXPECT_TRUE(same_bits(loss, loss_eager)) << "call " << call << ": " << loss.item().to_double() << " vs "
                                               << loss_eager.item().to_double();
      EXPECT_TRUE(same_bits(w.grad(), w_eager.grad())) << "call " << call;
    }
  }
}

constexpr std::string_view kDropoutGraph = R"(graph drop(%x: f32[4, 8], %w: f32[4, 8] grad) {
  %h = mul(%x, %w)
  %d = dropout(%h, 0.5, True)
  %y = mul(%d, %w)
  %s = sum(%y)
  return %s
})";

std::vector<Tensor> values_of_op(const graph::Graph& g, const std::vector<Tensor>& all, OpId op) {
  std::vector<Tensor> out;
  for (const graph::Node& n : g.nodes())
    if (n.kind == graph::NodeKind::Op && n.op == op) out.push_back(all[size_t(n.outputs[0])]);
  return out;
}

// Min-cut saves (seed, offset) instead of the mask and redraws it in the backward: the mask the forward applied
// equals the one the backward draws, and the decision says why.
TEST(RngFunctionalization, MinCutRedrawsTheMaskFromTheSavedSeedAndOffset) {
  graph::Graph g = graph::parse_graph(kDropoutGraph, "drop.kir");
  aot::AotConfig config;
  config.policy = aot::PartitionPolicy::MinCut;
  aot::AotGraphs gs = aot::aot_graphs(g, {false, true}, config);
  ASSERT_TRUE(gs.rng.used) << gs.rng.note;
  const aot::Partition& p = gs.partition;
  std::string backward = graph::print_graph(p.backward);
  EXPECT_NE(backward.find("philox_rand"), std::string::npos) << backward;
  bool logged = false;
  for (const aot::PartitionDecision& d : p.decisions)
    logged = logged || (!d.saved && d.reason.find("functional random") != std::string::npos);
  EXPECT_TRUE(logged);
  // Nothing of the mask's size is saved: x and w (needed by the gradient), seed and offset.
  for (size_t k = p.forward.outputs().size() - size_t(p.num_saved); k < p.forward.outputs().size(); ++k) {
    const std::string& name = p.forward.value(p.forward.outputs()[k]).name;
    EXPECT_TRUE(name != "d" && p.forward.value(p.forward.outputs()[k]).meta.dtype != DType::Bool) << name;
  }
  EXPECT_LT(p.saved_bytes, aot::partition_joint(gs.joint.graph, gs.joint.layout, aot::PartitionPolicy::SaveNeeded).saved_bytes);

  std::vector<Tensor> primals = {rand({4, 8}), rand({4, 8})};
  for (Tensor& t : aot::rng_inputs(gs.rng, {9, 1000})) primals.push_back(t);
  std::vector<Tensor> fwd = graph::run_graph_all_values(p.forward, primals);
  std::vector<Tensor> bwd_inputs;
  for (size_t k = p.forward.outputs().size() - size_t(p.num_saved); k < p.forward.outputs().size(); ++k)
    bwd_inputs.push_back(fwd[size_t(p.forward.outputs()[k])]);
  bwd_inputs.push_back(ones({}));
  std::vector<Tensor> bwd = graph::run_graph_all_values(p.backward, bwd_inputs);
  std::vector<Tensor> drawn_fwd = values_of_op(p.forward, fwd, OpId::philox_rand);
  std::vector<Tensor> drawn_bwd = values_of_op(p.backward, bwd, OpId::philox_rand);
  ASSERT_EQ(drawn_fwd.size(), 1u);
  ASSERT_EQ(drawn_bwd.size(), 1u);
  EXPECT_TRUE(same_bits(drawn_fwd[0], drawn_bwd[0]));
}

}  // namespace
