// The default partitioner (PartitionPolicy::SaveNeeded, aot/partition.h): every joint node that depends only
// on the primals runs in the forward, every node that depends on a tangent in the backward, and the forward
// values the backward reads are saved. Constants and creation nodes without tensor inputs are copied into the
// backward instead of saved (they cost nothing to make again).
#pragma once
#include "aot/partition.h"

namespace kiln::aot {

Partition partition_save_needed(const graph::Graph& joint, const JointLayout& layout);

// The forward and backward graphs of `joint` when `saved` (joint value ids, in order) are the values handed
// from the forward to the backward and `recompute[node index]` marks forward nodes the backward computes again
// (the min-cut partitioner's choice; empty: none). Shared by the partitioners.
Partition split_joint(const graph::Graph& joint, const JointLayout& layout, const std::vector<graph::ValueId>& saved,
                      const std::vector<bool>& recompute = {});

}  // namespace kiln::aot
