// partition_joint (aot/partition.h): dispatches on the policy to the default partitioner
// (partition_save_needed.cpp) or min-cut rematerialisation (partition_mincut.cpp).
#include "aot/partition.h"

#include "aot/partition_impl.h"
#include "core/error.h"

namespace kiln::aot {

Partition partition_joint(const graph::Graph& joint, const JointLayout& layout, PartitionPolicy policy,
                          bool wrong_recompute) {
  switch (policy) {
    case PartitionPolicy::SaveNeeded: return partition_save_needed(joint, layout);
    case PartitionPolicy::MinCut: return partition_min_cut(joint, layout, {.wrong_recompute = wrong_recompute});
  }
  internal_fail("partition_joint: unknown partition policy {}", int(policy));
}

}  // namespace kiln::aot
