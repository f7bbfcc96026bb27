// The default partitioner (partition_default.h): save what the backward reads.
#include "aot/partition_default.h"

#include <fmt/format.h>

#include "graph/interpreter.h"
#include "graph/rewrite.h"

namespace kiln::aot {

using graph::Graph;
using graph::Node;
using graph::NodeKind;
using graph::ValueId;

namespace {

// A node the backward makes again rather than receives: a constant, or a non-random op without tensor inputs.
bool is_free(const Node& n) {
  return n.kind == NodeKind::Constant || (Graph::node_inputs(n).empty() && !graph::is_random_node(n));
}

// Whether each value is computed from the primals alone (the forward's part of the joint graph).
std::vector<bool> forward_values(const Graph& joint, const JointLayout& layout) {
  std::vector<bool> fwd(size_t(joint.num_values()), false);
  for (int i = 0; i < layout.num_primals; ++i) fwd[size_t(joint.inputs()[size_t(i)])] = true;
  for (const Node& n : joint.nodes()) {
    bool all = true;
    for (ValueId id : Graph::node_inputs(n)) all = all && fwd[size_t(id)];
    for (ValueId o : n.outputs) fwd[size_t(o)] = all;
  }
  return fwd;
}

// Marks the nodes needed to compute `roots`, stopping at values in `stop` (inputs of the graph being built).
std::vector<bool> needed_nodes(const Graph& g, const std::vector<ValueId>& roots, const std::vector<bool>& stop) {
  std::vector<bool> needed(g.nodes().size(), false);
  std::vector<ValueId> todo(roots.begin(), roots.end());
  while (!todo.empty()) {
    ValueId v = todo.back();
    todo.pop_back();
    int p = g.value(v).producer;
    if (p < 0 || stop[size_t(v)] || needed[size_t(p)]) continue;
    needed[size_t(p)] = true;
    for (ValueId in : Graph::node_inputs(g.nodes()[size_t(p)])) todo.push_back(in);
  }
  return needed;
}

int64_t bytes_of(const TensorMeta& m) {
  int64_t n = 1;
  for (int64_t s : m.sizes) n *= s;
  return n * dtype_size(m.dtype);
}

}  // namespace

Partition split_joint(const Graph& joint, const JointLayout& layout, const std::vector<ValueId>& saved,
                      const std::vector<bool>& recompute) {
  const std::vector<ValueId>& ins = joint.inputs();
  const std::vector<ValueId>& outs = joint.outputs();
  Partition p;
  // Forward: primals -> forward outputs, then the saved values.
  std::vector<ValueId> fwd_roots(outs.begin(), outs.begin() + layout.num_forward_outputs);
  fwd_roots.insert(fwd_roots.end(), saved.begin(), saved.end());
  std::vector<bool> no_stop(size_t(joint.num_values()), false);
  std::vector<bool> in_forward = needed_nodes(joint, fwd_roots, no_stop);
  graph::GraphCloner f(joint);
  for (int i = 0; i < layout.num_primals; ++i) f.copy_input(ins[size_t(i)]);
  for (size_t i = 0; i < joint.nodes().size(); ++i)
    if (in_forward[i]) f.copy_node(joint.nodes()[i]);
  f.set_outputs(fwd_roots);
  p.forward = f.take();
  p.forward.name = joint.name + "_forward";
  // Backward: saved values, then tangents -> gradients.
  std::vector<bool> stop(size_t(joint.num_values()), false);
  for (ValueId v : saved) stop[size_t(v)] = true;
  for (size_t i = size_t(layout.num_primals); i < ins.size(); ++i) stop[size_t(ins[i])] = true;
  std::vector<ValueId> grads(outs.begin() + layout.num_forward_outputs, outs.end());
  std::vector<bool> in_backward = needed_nodes(joint, grads, stop);
  graph::GraphCloner b(joint);
  for (ValueId v : saved) {
    ValueId id = b.input_as(v, joint.value(v).meta);
    b.out().value(id).requires_grad = false;
  }
  for (size_t i = size_t(layout.num_primals); i < ins.size(); ++i) b.copy_input(ins[i]);
  const std::vector<bool> fwd = forward_values(joint, layout);
  for (size_t i = 0; i < joint.nodes().size(); ++i) {
    if (!in_backward[i]) continue;
    const Node& n = joint.nodes()[i];
    bool recomputed = !recompute.empty() && recompute[i];
    KILN_ASSERT(!fwd[size_t(n.outputs[0])] || is_free(n) || recomputed,
                "aot: the backward needs forward value %{} that is neither saved nor recomputed",
                joint.value(n.outputs[0]).name);
    b.copy_node(n);
  }
  b.set_outputs(grads);
  p.backward = b.take();
  p.backward.name = joint.name + "_backward";
  p.num_saved = int(saved.size());
  for (ValueId v : saved) p.saved_bytes += bytes_of(joint.value(v).meta);
  return p;
}

Partition partition_save_needed(const Graph& joint, const JointLayout& layout) {
  const std::vector<bool> fwd = forward_values(joint, layout);
  const std::vector<ValueId>& outs = joint.outputs();
  std::vector<ValueId> grads(outs.begin() + layout.num_forward_outputs, outs.end());
  // The backward's own nodes: those computing the gradients from the tangents, plus free nodes they read.
  std::vector<bool> stop = fwd;
  std::vector<bool> in_backward = needed_nodes(joint, grads, stop);
  std::vector<ValueId> saved;
  std::vector<std::string> reasons;
  std::vector<bool> is_saved(size_t(joint.num_values()), false);
  auto save = [&](ValueId v, std::string why) {
    if (is_saved[size_t(v)]) return;
    int p = joint.value(v).producer;
    if (p >= 0 && is_free(joint.nodes()[size_t(p)])) return;  // copied into the backward
    is_saved[size_t(v)] = true;
    saved.push_back(v);
    reasons.push_back(std::move(why));
  };
  for (ValueId g : grads)
    if (fwd[size_t(g)]) save(g, "a gradient computed from the primals alone");
  for (size_t i = 0; i < joint.nodes().size(); ++i) {
    if (!in_backward[i]) continue;
    const Node& n = joint.nodes()[i];
    for (ValueId in : Graph::node_inputs(n))
      if (fwd[size_t(in)]) save(in, fmt::format("read by the backward (%{} = {})", joint.value(n.outputs[0]).name, n.info().name));
  }
  Partition p = split_joint(joint, layout, saved);
  for (size_t i = 0; i < saved.size(); ++i) p.decisions.push_back({joint.value(saved[i]).name, true, reasons[i]});
  return p;
}

}  // namespace kiln::aot
