// The partitioners' shared machinery (partition_impl.h): joint-graph regions, the op classification for
// recomputation, and building the forward and backward graphs from a set of saved values.
#include <algorithm>

#include "aot/partition_impl.h"
#include "core/fired.h"
#include "core/error.h"
#include "core/log.h"
#include "graph/interpreter.h"
#include "graph/rewrite.h"
#include "ops/api.h"

namespace kiln::aot {

using graph::Graph;
using graph::Node;
using graph::NodeKind;
using graph::ValueId;

std::string_view joint_region_name(JointRegion r) {
  switch (r) {
    case JointRegion::Primal: return "primal";
    case JointRegion::Tangent: return "tangent";
    case JointRegion::Constant: return "constant";
    case JointRegion::Forward: return "forward";
    case JointRegion::Unclaimed: return "unclaimed";
    case JointRegion::Backward: return "backward";
  }
  return "?";
}

namespace {

void check_layout(const Graph& joint, const JointLayout& layout) {
  const int num_inputs = int(joint.inputs().size()), num_outputs = int(joint.outputs().size());
  KILN_CHECK(layout.num_primals >= 0 && layout.num_primals <= num_inputs,
             "joint graph '{}': the layout names {} primals but the graph has {} inputs; a joint graph's inputs "
             "are the primals followed by the tangents",
             joint.name, layout.num_primals, num_inputs);
  KILN_CHECK(layout.num_forward_outputs >= 0 && layout.num_forward_outputs <= num_outputs,
             "joint graph '{}': the layout names {} forward outputs but the graph has {} outputs; a joint graph's "
             "outputs are the forward outputs followed by the gradients",
             joint.name, layout.num_forward_outputs, num_outputs);
}

// Marks every value `roots` reach backwards through producers (stopping at values `stop` marks).
std::vector<char> ancestors(const Graph& g, const std::vector<ValueId>& roots, const std::vector<char>& stop) {
  std::vector<char> seen(size_t(g.num_values()), 0);
  std::vector<ValueId> work(roots.begin(), roots.end());
  while (!work.empty()) {
    ValueId id = work.back();
    work.pop_back();
    if (seen[size_t(id)]) continue;
    seen[size_t(id)] = 1;
    if (stop[size_t(id)]) continue;
    int producer = g.value(id).producer;
    if (producer < 0) continue;
    for (ValueId in : Graph::node_inputs(g.nodes()[size_t(producer)])) work.push_back(in);
  }
  return seen;
}

}  // namespace

JointRegions classify_joint(const Graph& joint, const JointLayout& layout) {
  check_layout(joint, layout);
  const size_t n = size_t(joint.num_values());
  JointRegions r;
  r.of_value.assign(n, JointRegion::Unclaimed);
  r.def_order.assign(n, 0);
  std::vector<char> tangent_dependent(n, 0);
  for (size_t i = 0; i < joint.inputs().size(); ++i) {
    ValueId id = joint.inputs()[i];
    bool primal = int(i) < layout.num_primals;
    r.of_value[size_t(id)] = primal ? JointRegion::Primal : JointRegion::Tangent;
    tangent_dependent[size_t(id)] = !primal;
    r.def_order[size_t(id)] = int(i);
  }
  const int base = int(joint.inputs().size());
  for (size_t k = 0; k < joint.nodes().size(); ++k) {
    const Node& node = joint.nodes()[k];
    bool dependent = false;
    for (ValueId in : Graph::node_inputs(node)) dependent = dependent || tangent_dependent[size_t(in)];
    for (ValueId o : node.outputs) {
      tangent_dependent[size_t(o)] = dependent;
      r.def_order[size_t(o)] = base + int(k);
      r.of_value[size_t(o)] = node.kind == NodeKind::Constant ? JointRegion::Constant
                              : dependent                     ? JointRegion::Backward
                                                              : JointRegion::Unclaimed;
    }
  }
  // Forward: what the forward outputs need, and what random nodes computable from the primals need (random
  // numbers are drawn in the forward, in the joint's order, never in the backward).
  std::vector<ValueId> forward_roots(joint.outputs().begin(), joint.outputs().begin() + layout.num_forward_outputs);
  for (const Node& node : joint.nodes())
    if (graph::draws_from_generator(node) && !tangent_dependent[size_t(node.outputs[0])])
      forward_roots.insert(forward_roots.end(), node.outputs.begin(), node.outputs.end());
  for (int k = 0; k < layout.num_forward_outputs; ++k) {
    ValueId out = joint.outputs()[size_t(k)];
    if (tangent_dependent[size_t(out)])
      throw Error(fmt::format("joint graph '{}': forward output {} depends on tangent input(s); the forward outputs "
                              "of a joint graph must be computable from the primals alone (are num_primals and "
                              "num_forward_outputs right?)",
                              joint.name, "%" + joint.value(out).name));
  }
  std::vector<char> forward = ancestors(joint, forward_roots, std::vector<char>(n, 0));
  for (const Node& node : joint.nodes()) {  // a node runs whole: all its outputs are forward if one is
    bool any = false;
    for (ValueId o : node.outputs) any = any || forward[size_t(o)];
    for (ValueId o : node.outputs)
      if (any && r.of_value[size_t(o)] == JointRegion::Unclaimed) r.of_value[size_t(o)] = JointRegion::Forward;
  }
  // A gradient that the primals alone compute, and the forward does not, is backward work (functorch adds
  // the backward outputs to its required backward nodes).
  for (size_t i = size_t(layout.num_forward_outputs); i < joint.outputs().size(); ++i) {
    ValueId id = joint.outputs()[i];
    if (r.of_value[size_t(id)] == JointRegion::Unclaimed) r.of_value[size_t(id)] = JointRegion::Backward;
  }
  return r;
}

// ---------------------------------------------------------------- classification

RecomputeClass recompute_class(const Node& n) {
  if (n.kind == NodeKind::Constant) return RecomputeClass::Creation;
  if (n.op == OpId::philox_rand) return RecomputeClass::FunctionalRandom;
  if (graph::is_random_node(n)) return RecomputeClass::Random;
  const OpInfo& info = n.info();
  switch (info.kind) {
    case OpKind::Pointwise: return RecomputeClass::Pointwise;
    case OpKind::Reduction: return RecomputeClass::Reduction;
    case OpKind::View: return RecomputeClass::View;
    case OpKind::Extern: return RecomputeClass::Extern;
    case OpKind::Backward: return RecomputeClass::Extern;
    case OpKind::Data: return RecomputeClass::Copy;
    case OpKind::Creation: return RecomputeClass::Creation;
    case OpKind::Random: return RecomputeClass::Random;
    case OpKind::InPlace: return RecomputeClass::Mutation;
    case OpKind::Composite: break;
  }
  // A composite is classed by its family (ops.def): what its decomposition is made of.
  if (info.family == "pointwise") return RecomputeClass::Pointwise;
  if (info.family == "shape") return RecomputeClass::View;
  if (info.family == "linalg" || info.family == "conv") return RecomputeClass::Extern;
  if (info.family == "index") return RecomputeClass::Copy;
  if (info.family == "reduction" || info.family == "nn") return RecomputeClass::Reduction;  // norms, softmax, losses
  return RecomputeClass::Extern;  // unknown: not recomputed (the safe side)
}

std::string_view recompute_class_name(RecomputeClass c) {
  switch (c) {
    case RecomputeClass::View: return "view";
    case RecomputeClass::Pointwise: return "pointwise";
    case RecomputeClass::Reduction: return "reduction";
    case RecomputeClass::Copy: return "copy";
    case RecomputeClass::Creation: return "creation";
    case RecomputeClass::Random: return "random";
    case RecomputeClass::FunctionalRandom: return "functional random (philox_rand: redrawn from its seed and offset)";
    case RecomputeClass::Extern: return "extern kernel (matrix product, convolution or pooling)";
    case RecomputeClass::Mutation: return "in-place";
  }
  return "?";
}

bool recomputable(RecomputeClass c) {
  return c != RecomputeClass::Random && c != RecomputeClass::Extern && c != RecomputeClass::Mutation;
}

bool fusible(RecomputeClass a, const Node& b) {
  if (b.kind == NodeKind::Op && b.op == OpId::cat) return true;
  RecomputeClass cb = recompute_class(b);
  auto fuses = [](RecomputeClass c) { return recomputable(c) || c == RecomputeClass::Random; };
  return fuses(a) && fuses(cb);
}

int64_t value_bytes(const Graph& g, ValueId id) {
  const TensorMeta& m = g.value(id).meta;
  return shape_numel(m.sizes) * dtype_size(m.dtype);
}

// ---------------------------------------------------------------- building the two graphs

namespace {

std::string value_label(const Graph& g, ValueId id) { return "%" + g.value(id).name; }

// `hint` with the first free suffix .1, .2, ...: a name neither graph has (the joint's values are copied into
// `out` later under their own names).
std::string name_in_neither(const Graph& joint, const Graph& out, const std::string& hint) {
  for (int i = 1;; ++i) {
    std::string name = fmt::format("{}.{}", hint, i);
    if (!joint.find_value(name) && !out.find_value(name)) return name;
  }
}

// Copies `n` into the backward, keeping the saved inputs that stand for some of its outputs: those outputs
// get fresh names in the copy and stay mapped to the saved inputs.
void copy_node_keeping_saved(const Node& n, graph::GraphCloner& c, const std::vector<char>& saved) {
  bool any_saved = false;
  for (ValueId o : n.outputs) any_saved = any_saved || saved[size_t(o)];
  if (!any_saved) {
    c.copy_node(n);
    return;
  }
  std::vector<graph::Arg> args = n.args;
  graph::remap_args(args, [&](ValueId id) { return c[id]; });
  std::vector<std::string> names;
  std::vector<TensorMeta> metas;
  for (ValueId o : n.outputs) {
    const std::string& name = c.src().value(o).name;
    names.push_back(saved[size_t(o)] ? name_in_neither(c.src(), c.out(), name) : name);
    metas.push_back(c.src().value(o).meta);
  }
  std::vector<ValueId> outs = c.out().add_op(n.op, std::move(args), names, metas);
  for (size_t k = 0; k < outs.size(); ++k) {
    c.out().value(outs[k]).stands_for = c.src().value(n.outputs[k]).stands_for;
    if (!saved[size_t(n.outputs[k])]) c.map(n.outputs[k], outs[k]);
  }
}

// MinCutOptions::wrong_recompute's bug: `id` recomputed as id + 1.
void recompute_wrongly(ValueId id, graph::GraphCloner& c) {
  note_injection_fired("partition", "accuracy");
  const TensorMeta& meta = c.src().value(id).meta;
  ValueId one = c.out().add_constant(c.out().fresh_name("injected_one"), full(IntList{}, Scalar(int64_t(1)), meta.dtype));
  c.map(id, c.out().add_op1(OpId::add, {graph::TensorArg{c[id]}, graph::TensorArg{one}, Scalar(int64_t(1))},
                            c.out().fresh_name(c.src().value(id).name + "_injected")));
  const graph::ValueInfo& right = c.src().value(id);  // provenance (graph.h): what it recomputes, wrongly
  c.out().value(c[id]).stands_for = right.stands_for.empty() ? right.name : right.stands_for;
}

void log_decisions(std::string_view partitioner, const Graph& joint, const Partition& p) {
  if (!log_enabled(LogChannel::Partitioner)) return;
  log_line(LogChannel::Partitioner, fmt::format("{} partition of '{}': {} saved values, {} bytes", partitioner,
                                                joint.name, p.num_saved, p.saved_bytes));
  for (const PartitionDecision& d : p.decisions)
    log_line(LogChannel::Partitioner, fmt::format("  {} %{}: {}", d.saved ? "save" : "recompute", d.value, d.reason));
}

}  // namespace

std::vector<char> needed_by_gradients(const Graph& joint, const JointLayout& layout, const std::vector<char>& is_saved) {
  const auto& outs = joint.outputs();
  const std::vector<ValueId> gradients(outs.begin() + layout.num_forward_outputs, outs.end());
  std::vector<char> stop(is_saved);
  for (auto it = joint.inputs().begin() + layout.num_primals; it != joint.inputs().end(); ++it) stop[size_t(*it)] = 1;
  return ancestors(joint, gradients, stop);
}

int64_t bytes_the_backward_reads(const Graph& joint, const JointLayout& layout, const std::vector<ValueId>& saved) {
  std::vector<char> is_saved(size_t(joint.num_values()), 0);
  for (ValueId id : saved) is_saved[size_t(id)] = 1;
  const std::vector<char> needed = needed_by_gradients(joint, layout, is_saved);
  int64_t bytes = 0;
  for (ValueId id = 0; id < joint.num_values(); ++id)
    if (is_saved[size_t(id)] && needed[size_t(id)]) bytes += value_bytes(joint, id);
  return bytes;
}

Partition build_partition(const Graph& joint, const JointLayout& layout, const JointRegions& regions,
                          std::vector<ValueId> saved, const DecisionReason& saved_reason,
                          const DecisionReason& recompute_reason, std::string_view partitioner,
                          bool wrong_recompute) {
  const size_t n = size_t(joint.num_values());
  std::sort(saved.begin(), saved.end(),
            [&](ValueId a, ValueId b) { return regions.def_order[size_t(a)] < regions.def_order[size_t(b)]; });
  saved.erase(std::unique(saved.begin(), saved.end()), saved.end());
  std::vector<char> is_saved(n, 0);
  for (ValueId id : saved) {
    KILN_ASSERT(regions.forward_side(id), "partitioner: saved value {} is a {} value, not computable in the forward",
                value_label(joint, id), joint_region_name(regions.of_value[size_t(id)]));
    is_saved[size_t(id)] = 1;
  }
  const auto& outs = joint.outputs();
  const std::vector<ValueId> forward_outputs(outs.begin(), outs.begin() + layout.num_forward_outputs);
  const std::vector<ValueId> gradients(outs.begin() + layout.num_forward_outputs, outs.end());
  std::vector<ValueId> tangents(joint.inputs().begin() + layout.num_primals, joint.inputs().end());
  // What the gradients need, stopping at the saved values and the tangents; saved values the backward does
  // not read are dropped (functorch does the same).
  const std::vector<char> needed_by_backward = needed_by_gradients(joint, layout, is_saved);
  std::erase_if(saved, [&](ValueId id) {
    if (needed_by_backward[size_t(id)]) return false;
    is_saved[size_t(id)] = 0;
    return true;
  });

  Partition p;
  std::vector<ValueId> recomputed;
  // Forward: the primals -> the forward outputs, then the saved values.
  {
    graph::GraphCloner c(joint);
    c.out().name = joint.name + "_forward";
    for (int i = 0; i < layout.num_primals; ++i) c.copy_input(joint.inputs()[size_t(i)]);
    std::vector<ValueId> roots = forward_outputs;
    roots.insert(roots.end(), saved.begin(), saved.end());
    std::vector<char> needed = ancestors(joint, roots, std::vector<char>(n, 0));
    for (const Node& node : joint.nodes())
      if (std::any_of(node.outputs.begin(), node.outputs.end(), [&](ValueId o) { return needed[size_t(o)]; }))
        c.copy_node(node);
    for (ValueId id : roots)
      KILN_ASSERT(c[id] != graph::kNoValue, "partitioner: the forward cannot compute {} from the primals",
                  value_label(joint, id));
    c.set_outputs(roots);
    p.forward = c.take();
  }
  // Backward: the saved values, then the tangents -> the gradients; anything else is recomputed.
  {
    graph::GraphCloner c(joint);
    c.out().name = joint.name + "_backward";
    for (ValueId id : saved) c.copy_input(id);
    for (ValueId id : tangents) c.copy_input(id);
    const std::vector<char>& needed = needed_by_backward;
    for (ValueId id : joint.inputs())
      if (needed[size_t(id)] && !is_saved[size_t(id)] && regions.of_value[size_t(id)] == JointRegion::Primal)
        internal_fail("partitioner: the backward needs primal {} but it was not saved", value_label(joint, id));
    const bool inject = wrong_recompute;
    for (const Node& node : joint.nodes()) {
      bool wanted = false;
      for (ValueId o : node.outputs) wanted = wanted || (needed[size_t(o)] && !is_saved[size_t(o)]);
      if (!wanted) continue;
      copy_node_keeping_saved(node, c, is_saved);
      for (ValueId o : node.outputs)
        if (regions.forward_side(o) && !is_saved[size_t(o)]) {
          recomputed.push_back(o);
          if (inject && is_floating(joint.value(o).meta.dtype)) recompute_wrongly(o, c);
        }
    }
    c.set_outputs(gradients);
    p.backward = c.take();
  }
  p.num_saved = int(saved.size());
  for (ValueId id : saved) p.saved_bytes += value_bytes(joint, id);
  // The decisions, in definition order (saved and recomputed values interleaved as the joint defines them).
  std::vector<std::pair<ValueId, bool>> decided;
  for (ValueId id : saved) decided.push_back({id, true});
  for (ValueId id : recomputed) decided.push_back({id, false});
  std::sort(decided.begin(), decided.end(), [&](const auto& a, const auto& b) {
    return regions.def_order[size_t(a.first)] < regions.def_order[size_t(b.first)];
  });
  for (auto [id, is_save] : decided)
    p.decisions.push_back({joint.value(id).name, is_save, is_save ? saved_reason(id) : recompute_reason(id)});
  log_decisions(partitioner, joint, p);
  return p;
}

}  // namespace kiln::aot
