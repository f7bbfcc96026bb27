// The joint graph (joint.h): the forward nodes copied, then each node's VJP rule recorded in reverse order on
// meta tensors bound to the joint graph's values, gradients summed where a value has several users.
#include "aot/joint.h"

#include <fmt/format.h>

#include <algorithm>

#include "aot/expand.h"
#include "aot/functionalize.h"
#include "core/fired.h"
#include "graph/interpreter.h"
#include "graph/meta_trace.h"
#include "graph/passes.h"
#include "graph/rewrite.h"
#include "ops/api.h"

namespace kiln::aot {

using graph::Graph;
using graph::Node;
using graph::NodeKind;
using graph::ValueId;

std::vector<bool> values_requiring_grad(const Graph& g, const std::vector<bool>& requires_grad) {
  std::vector<bool> rg(size_t(g.num_values()), false);
  for (size_t i = 0; i < g.inputs().size(); ++i)
    rg[size_t(g.inputs()[i])] = requires_grad.at(i) && is_floating(g.value(g.inputs()[i]).meta.dtype);
  for (const Node& n : g.nodes()) {
    if (n.kind != NodeKind::Op || !n.info().differentiable) continue;
    bool reads = false;
    for (ValueId id : Graph::node_inputs(n)) reads = reads || rg[size_t(id)];
    if (!reads) continue;
    for (ValueId o : n.outputs) rg[size_t(o)] = is_floating(g.value(o).meta.dtype);
  }
  return rg;
}

namespace {

std::string first_name(const Graph& g, const Node& n) { return g.value(n.outputs.at(0)).name; }

// The forward value each flat tensor argument of `n` reads (kNoValue for None and numbers), in
// OpCall::flat_tensors() order.
std::vector<ValueId> flat_value_ids(const Node& n) {
  std::vector<ValueId> ids;
  const Schema& s = n.info().schema;
  for (size_t i = 0; i < s.args.size(); ++i) {
    if (s.args[i].type == ArgType::Tensor) {
      const auto* t = std::get_if<graph::TensorArg>(&n.args[i]);
      ids.push_back(t ? t->id : graph::kNoValue);
    } else if (s.args[i].type == ArgType::TensorList || s.args[i].type == ArgType::OptTensorList) {
      for (ValueId id : std::get<graph::TensorListArg>(n.args[i]).ids) ids.push_back(id);
    }
  }
  return ids;
}

// Builds the joint graph: state shared by the steps below.
class JointBuilder {
 public:
  JointBuilder(const Graph& fwd, const std::vector<bool>& requires_grad, const JointOptions& options)
      : fwd_(fwd), requires_grad_(requires_grad), options_(options), needs_(values_requiring_grad(fwd, requires_grad)),
        map_(size_t(fwd.num_values()), graph::kNoValue), grads_(size_t(fwd.num_values())), rec_(j_.graph, "bw") {
    // A VJP rule may make a fresh tensor (zeros(sizes)) and write the gradient into a view of it: recorded whole,
    // the in-place writes are then functionalized (build_joint).
    rec_.set_records_all_calls(true);
    j_.graph.name = fwd.name;
    j_.layout.num_primals = int(fwd.inputs().size());
    j_.layout.num_forward_outputs = int(fwd.outputs().size());
  }

  JointGraph build() {
    copy_forward();
    add_tangents();
    for (auto it = fwd_.nodes().rbegin(); it != fwd_.nodes().rend(); ++it) record_vjp(*it);
    std::vector<ValueId> outs;
    for (ValueId o : fwd_.outputs()) outs.push_back(map_[size_t(o)]);
    for (size_t i = 0; i < fwd_.inputs().size(); ++i) {
      if (!needs_[size_t(fwd_.inputs()[i])]) continue;
      outs.push_back(gradient_of_input(i));
      j_.grad_primals.push_back(int(i));
    }
    j_.graph.set_outputs(outs);
    graph::eliminate_dead_code(j_.graph);
    return std::move(j_);
  }

 private:
  void copy_forward() {
    Graph& j = j_.graph;
    for (size_t i = 0; i < fwd_.inputs().size(); ++i) {
      ValueId in = fwd_.inputs()[i];
      map_[size_t(in)] = j.add_input(fmt::format("primals_{}", i + 1), fwd_.value(in).meta, requires_grad_[i]);
    }
    for (const Node& n : fwd_.nodes()) {
      if (n.kind == NodeKind::Constant) {
        ValueId id = j.add_constant(j.fresh_name(first_name(fwd_, n)), n.constant);
        j.value(id).wrapped_number = fwd_.value(n.outputs[0]).wrapped_number;
        map_[size_t(n.outputs[0])] = id;
        continue;
      }
      std::vector<graph::Arg> args = n.args;
      graph::remap_args(args, [&](ValueId id) { return map_[size_t(id)]; });
      std::vector<std::string> names;
      std::vector<TensorMeta> metas;
      for (ValueId o : n.outputs) names.push_back(j.fresh_name(fwd_.value(o).name)), metas.push_back(fwd_.value(o).meta);
      std::vector<ValueId> outs = j.add_op(n.op, std::move(args), names, metas);
      j.nodes().back().loc = n.loc;
      for (size_t k = 0; k < outs.size(); ++k) map_[size_t(n.outputs[k])] = outs[k];
    }
  }

  // One tangent per differentiable forward output (contiguous, like PyTorch's tangents).
  void add_tangents() {
    for (size_t k = 0; k < fwd_.outputs().size(); ++k) {
      ValueId o = fwd_.outputs()[k];
      if (!needs_[size_t(o)]) continue;
      TensorMeta m = fwd_.value(o).meta;
      m.strides = contiguous_strides(m.sizes);
      ValueId t = j_.graph.add_input(fmt::format("tangents_{}", j_.tangent_of.size() + 1), m);
      j_.tangent_of.push_back(int(k));
      accumulate(o, rec_.bind(t));
    }
  }

  void accumulate(ValueId forward_value, const Tensor& g) {
    Tensor& acc = grads_[size_t(forward_value)];
    if (!acc.defined()) {
      acc = g;
      return;
    }
    ScopedMetaCallRecorder on(&rec_);
    acc = add(acc, g);
  }

  void record_vjp(const Node& n) {
    if (n.kind != NodeKind::Op) return;
    bool any_grad = false;
    for (ValueId o : n.outputs) any_grad = any_grad || grads_[size_t(o)].defined();
    if (!any_grad) return;
    const std::vector<ValueId> flat = flat_value_ids(n);
    std::vector<bool> needs(flat.size());
    bool any_need = false;
    for (size_t k = 0; k < flat.size(); ++k) any_need |= needs[k] = flat[k] != graph::kNoValue && needs_[size_t(flat[k])];
    if (!any_need || !n.info().differentiable) return;
    const OpInfo& op = n.info();
    KILN_CHECK(op.vjp, "aot: {}: the op has no VJP", graph::node_label(fwd_, n));
    rec_.set_name_hint(j_.graph.value(map_[size_t(n.outputs[0])]).name + "_bw");
    // Constants are handed over with their data (a rule may read a number, e.g. pow's integer exponent).
    OpCall call = bind_args(op, graph::node_ivalues(n, [&](ValueId id) {
      int p = fwd_.value(id).producer;
      if (p >= 0 && fwd_.nodes()[size_t(p)].kind == NodeKind::Constant)
        return rec_.bind_constant(map_[size_t(id)], fwd_.nodes()[size_t(p)].constant);
      return rec_.bind(map_[size_t(id)]);
    }));
    std::vector<Tensor> outputs, grads;
    std::vector<Tensor> results;
    const size_t first_node = j_.graph.nodes().size();
    {
      ScopedMetaCallRecorder on(&rec_);
      for (ValueId o : n.outputs) {
        outputs.push_back(rec_.bind(map_[size_t(o)]));
        // Eager's engine gives a node zeros for outputs that got no gradient; so does the joint graph.
        grads.push_back(grads_[size_t(o)].defined() ? grads_[size_t(o)] : zeros_like(outputs.back()));
      }
      results = op.vjp(VjpCall{call, outputs, grads, needs});
      KILN_CHECK(results.size() == flat.size(), "aot: {}: the VJP returned {} gradients for {} tensor inputs",
                 graph::node_label(fwd_, n), results.size(), flat.size());
      for (size_t k = 0; k < flat.size(); ++k) {
        if (!needs[k] || !results[k].defined()) continue;
        const TensorMeta& m = fwd_.value(flat[k]).meta;
        KILN_CHECK(results[k].sizes() == m.sizes, "aot: {}: the VJP returned a gradient of shape {} for input {} of shape {}",
                   graph::node_label(fwd_, n), shape_str(results[k].sizes()), k, shape_str(m.sizes));
        if (results[k].dtype() != m.dtype) results[k] = to(results[k], m.dtype);
        if (std::find(options_.wrong_vjp.begin(), options_.wrong_vjp.end(), op.id) != options_.wrong_vjp.end()) {
          const graph::ValueInfo& v = j_.graph.value(rec_.id_of(results[k]));
          const std::string right = v.stands_for.empty() ? v.name : v.stands_for;
          results[k] = add(results[k], 1);  // KILN_INJECT=<op>:vjp
          note_injection_fired(op.name, "vjp");
          j_.graph.value(rec_.id_of(results[k])).stands_for = right;  // provenance (graph.h): the bisector's match
        }
      }
    }
    // The VJP's nodes carry the forward node's source line: a wrong gradient points at the op it belongs to.
    for (size_t i = first_node; i < j_.graph.nodes().size(); ++i) j_.graph.nodes()[i].loc = n.loc;
    for (size_t k = 0; k < flat.size(); ++k)
      if (needs[k] && results[k].defined()) accumulate(flat[k], results[k]);
  }

  // The gradient of forward input i: what flowed into it, or zeros when nothing did.
  ValueId gradient_of_input(size_t i) {
    ValueId in = fwd_.inputs()[i];
    Tensor& g = grads_[size_t(in)];
    if (!g.defined()) {
      rec_.set_name_hint(fmt::format("primals_{}_zero", i + 1));
      ScopedMetaCallRecorder on(&rec_);
      g = zeros_like(rec_.bind(map_[size_t(in)]));
    }
    return rec_.id_of(g);
  }

  const Graph& fwd_;
  const std::vector<bool>& requires_grad_;
  const JointOptions& options_;
  std::vector<bool> needs_;
  JointGraph j_;
  std::vector<ValueId> map_;  // forward value -> joint value
  std::vector<Tensor> grads_;  // forward value -> its gradient so far (meta, bound to a joint value)
  graph::MetaGraphRecorder rec_;
};

}  // namespace

// Nodes that need a gradient through an op without a VJP become the nodes of its decomposition (repeatedly,
// for decompositions that use such ops), so every node left that needs a gradient has a VJP.
Graph expand_ops_without_vjp(const Graph& forward, const std::vector<bool>& requires_grad) {
  return expand_nodes(forward, [&](const Graph& g) -> NodePick {
    auto rg = std::make_shared<std::vector<bool>>(values_requiring_grad(g, requires_grad));
    return [rg](const Node& n) {
      if (!n.info().differentiable || n.info().vjp) return false;
      for (ValueId id : Graph::node_inputs(n))
        if ((*rg)[size_t(id)]) return true;
      return false;
    };
  }, "cannot differentiate: the op has no VJP");
}

JointGraph build_joint(const Graph& forward, std::vector<bool> requires_grad, const JointOptions& options) {
  if (requires_grad.empty())
    for (ValueId in : forward.inputs()) requires_grad.push_back(forward.value(in).requires_grad);
  KILN_CHECK(requires_grad.size() == forward.inputs().size(), "aot: {} has {} inputs but {} requires_grad flags",
             forward.name, forward.inputs().size(), requires_grad.size());
  for (const Node& n : forward.nodes())
    KILN_CHECK(n.kind != NodeKind::Op || !n.info().is_inplace(),
               "aot: {}: the joint graph needs a functional graph; functionalize it first", graph::node_label(forward, n));
  Graph fwd = expand_ops_without_vjp(forward, requires_grad);
  JointGraph j = JointBuilder(fwd, requires_grad, options).build();
  if (has_mutations(j.graph)) {  // VJP rules that wrote into fresh tensors
    FunctionalGraph f = functionalize(j.graph);
    KILN_ASSERT(f.mutations.empty(), "aot: a VJP rule in {} wrote into a primal or a tangent", forward.name);
    j.graph = std::move(f.graph);
    graph::eliminate_dead_code(j.graph);
  }
  return j;
}

}  // namespace kiln::aot
