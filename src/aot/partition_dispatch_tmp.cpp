// TEMPORARY (the coordinator deletes this file at merge in favour of the partition helper's dispatcher,
// src/aot/partition.cpp): partition_joint for the default policy only.
#include "aot/partition.h"
#include "aot/partition_default.h"
#include "core/error.h"

namespace kiln::aot {

Partition partition_joint(const graph::Graph& joint, const JointLayout& layout, PartitionPolicy policy) {
  KILN_CHECK(policy == PartitionPolicy::SaveNeeded, "aot: the min-cut partitioner is not in this build yet");
  return partition_save_needed(joint, layout);
}

}  // namespace kiln::aot
