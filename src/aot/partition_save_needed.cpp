// The default partitioner (functorch's default_partition): the forward graph computes exactly what the
// forward outputs need; every forward value and primal that a backward-side node reads is saved; whatever
// else the backward needs (values computable from the primals that only the backward reads) is computed in
// the backward. Nothing the forward computes is recomputed.
#include <fmt/format.h>

#include "aot/partition_impl.h"

namespace kiln::aot {

using graph::Graph;
using graph::Node;
using graph::ValueId;

namespace {

bool computed_in_forward(const JointRegions& regions, ValueId id) {
  JointRegion r = regions.of_value[size_t(id)];
  return r == JointRegion::Primal || r == JointRegion::Forward;
}

}  // namespace

std::vector<ValueId> save_needed_values(const Graph& joint, const JointLayout& layout, const JointRegions& regions) {
  std::vector<char> saved(size_t(joint.num_values()), 0);
  for (const Node& n : joint.nodes()) {
    if (computed_in_forward(regions, n.outputs[0]) || regions.of_value[size_t(n.outputs[0])] == JointRegion::Constant)
      continue;
    for (ValueId in : Graph::node_inputs(n))
      if (computed_in_forward(regions, in)) saved[size_t(in)] = 1;
  }
  for (size_t i = size_t(layout.num_forward_outputs); i < joint.outputs().size(); ++i)
    if (computed_in_forward(regions, joint.outputs()[i])) saved[size_t(joint.outputs()[i])] = 1;
  std::vector<ValueId> out;
  for (ValueId id = 0; id < joint.num_values(); ++id)
    if (saved[size_t(id)]) out.push_back(id);
  return out;
}

Partition partition_save_needed(const Graph& joint, const JointLayout& layout) {
  JointRegions regions = classify_joint(joint, layout);
  auto saved_reason = [&](ValueId id) {
    return fmt::format("{} value the backward reads ({} bytes)",
                       regions.of_value[size_t(id)] == JointRegion::Primal ? "a primal" : "a forward",
                       value_bytes(joint, id));
  };
  auto computed_reason = [&](ValueId) {
    return std::string("only the backward reads it: computed in the backward (the default partitioner "
                       "recomputes nothing the forward computed)");
  };
  return build_partition(joint, layout, regions, save_needed_values(joint, layout, regions), saved_reason,
                         computed_reason, "default");
}

}  // namespace kiln::aot
