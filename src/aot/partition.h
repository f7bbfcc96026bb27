// The contract between AOT autograd's joint graph (aot/joint.h) and the partitioners that split it into a
// forward and a backward graph (docs/aot.md). A joint graph's inputs are the primals (the forward's inputs)
// followed by the tangents (one per differentiable forward output); its outputs are the forward outputs
// followed by one gradient per primal that requires grad, in primal order. A partition's forward graph
// takes the primals and returns the forward outputs followed by the saved values; its backward graph takes
// the saved values (in that order) followed by the tangents and returns the gradients.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::aot {

struct JointLayout {
  int num_primals = 0;          // inputs [0, num_primals) are primals, the rest tangents
  int num_forward_outputs = 0;  // outputs [0, num_forward_outputs) are forward outputs, the rest gradients
};

enum class PartitionPolicy {
  SaveNeeded,  // the default: save every forward value the backward reads
  MinCut,      // min-cut rematerialisation: a max-flow over byte sizes picks what to save, the rest is recomputed
};

// One save or recompute decision and why (logged on KILN_LOGS=partitioner, one line each).
struct PartitionDecision {
  std::string value;   // the joint graph's value name
  bool saved = false;  // false: recomputed in the backward
  std::string reason;
};

struct Partition {
  graph::Graph forward;   // primals -> forward outputs, then saved values
  graph::Graph backward;  // saved values, then tangents -> gradients
  int num_saved = 0;
  int64_t saved_bytes = 0;  // sum of the saved values' sizes
  std::vector<PartitionDecision> decisions;
};

// `wrong_recompute`: KILN_INJECT=partition:accuracy (AotConfig::wrong_partition): the min-cut partitioner's
// backward computes each floating value it recomputes as value + 1; the default partitioner recomputes nothing.
Partition partition_joint(const graph::Graph& joint, const JointLayout& layout, PartitionPolicy policy,
                          bool wrong_recompute = false);

}  // namespace kiln::aot
