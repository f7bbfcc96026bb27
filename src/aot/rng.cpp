// RNG functionalization (see rng.h).
#include "aot/rng.h"

#include "aot/expand.h"
#include "graph/interpreter.h"
#include "graph/rewrite.h"
#include "ops/api.h"

namespace kiln::aot {

using graph::Graph;
using graph::Node;
using graph::TensorArg;
using graph::ValueId;

namespace {

// Whether node `n` draws through an op philox_rand can stand for (bit for bit).
bool has_functional_form(const Node& n) {
  switch (n.op) {
    case OpId::rand: case OpId::randn: case OpId::rand_like: case OpId::randn_like: case OpId::bernoulli: return true;
    default: return false;
  }
}

bool is_training_dropout(const Node& n) { return n.kind == graph::NodeKind::Op && n.op == OpId::dropout && graph::is_random_node(n); }

// Writes the functional nodes for random node `n` (its draws start `first` counters after the call's offset).
void rewrite_draw(const Node& n, graph::GraphCloner& c, ValueId seed, ValueId offset, uint64_t first) {
  Graph& g = c.out();
  const TensorMeta& out = c.src().value(n.outputs[0]).meta;
  ValueId at = first == 0 ? offset : g.add_op1(OpId::add, {TensorArg{offset}, Scalar(int64_t(first)), Scalar(1)});
  auto draw = [&](const char* distribution, DType dtype) {
    return g.add_op1(OpId::philox_rand, {IntList(out.sizes), TensorArg{seed}, TensorArg{at}, std::string(distribution), dtype});
  };
  ValueId result;
  if (n.op == OpId::bernoulli) {  // eager: element i is (u < p) with u the 53-bit uniform of draw i
    ValueId u = draw("uniform", DType::F64);
    const auto* p = std::get_if<Scalar>(&n.args.at(1));
    ValueId x = c[std::get<TensorArg>(n.args.at(0)).id];
    ValueId mask = p ? g.add_op1(OpId::lt, {TensorArg{u}, *p})
                     : g.add_op1(OpId::lt, {TensorArg{u}, TensorArg{g.add_op1(OpId::to, {TensorArg{x}, DType::F64})}});
    result = g.add_op1(OpId::to, {TensorArg{mask}, out.dtype});
  } else {
    bool normal = n.op == OpId::randn || n.op == OpId::randn_like;
    result = draw(normal ? "normal" : "uniform", out.dtype);
  }
  g.nodes().back().loc = n.loc;
  c.map(n.outputs[0], result);
}

}  // namespace

RngFunctional functionalize_rng(const Graph& input) {
  RngFunctional r;
  // dropout in training mode draws through its decomposition (bernoulli): expose it.
  Graph g = expand_nodes(input, [](const Graph&) -> NodePick { return is_training_dropout; },
                         "functionalizing its random draws");
  int draws = 0;
  for (const Node& n : g.nodes()) {
    if (!graph::draws_from_generator(n)) continue;
    if (!has_functional_form(n)) {
      r.plan.note = fmt::format("left as it is: {} has no functional (seed, offset) form, so its draws stay with the "
                                "global generator and the partitioner saves what the backward needs of them",
                                graph::node_label(g, n));
      r.graph = std::move(g);
      return r;
    }
    ++draws;
  }
  if (draws == 0) {
    r.plan.note = "no random op";
    r.graph = std::move(g);
    return r;
  }
  graph::GraphCloner c(g);
  for (ValueId id : g.inputs()) c.copy_input(id);
  const TensorMeta word{DType::I64, {}, {}, {}};
  ValueId seed = c.out().add_input("rng_seed", word), offset = c.out().add_input("rng_offset", word);
  uint64_t next = 0;
  for (const Node& n : g.nodes()) {
    if (!graph::draws_from_generator(n)) {
      c.copy_node(n);
      continue;
    }
    rewrite_draw(n, c, seed, offset, next);
    next += uint64_t(shape_numel(g.value(n.outputs[0]).meta.sizes));  // eager's reserve: one counter per element
  }
  c.set_outputs(g.outputs());
  r.graph = c.take();
  r.plan = {true, next, fmt::format("{} random op(s) drawing {} counters from (rng_seed, rng_offset)", draws, next)};
  return r;
}

std::vector<Tensor> rng_inputs(const RngPlan& plan, const GeneratorState& state) {
  if (!plan.used) return {};
  return {Tensor::scalar(Scalar(int64_t(state.seed)), DType::I64), Tensor::scalar(Scalar(int64_t(state.offset)), DType::I64)};
}

std::vector<Tensor> take_rng_inputs(const RngPlan& plan) {
  GeneratorState& g = default_generator();
  std::vector<Tensor> in = rng_inputs(plan, g);
  if (plan.used) g.offset += plan.draws;
  return in;
}

}  // namespace kiln::aot
