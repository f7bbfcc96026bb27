// Lowering: graph IR -> loop IR (TorchInductor's lowering.py), after the decompose pass (decompose.h) replaced
// composite ops by their decompositions: every node becomes a lowered value: views
// become index arithmetic, pointwise ops a body that later consumers inline, reductions a realised Reduction
// node, and anything else an Extern node that runs the op's eager kernel (BLAS for matrix products). Each
// realise-or-inline choice and each fallback records its reason (KILN_LOGS=lowering).
#pragma once
#include <string>
#include <vector>

#include "graph/graph.h"
#include "inductor/context.h"
#include "inductor/ir.h"
#include "graph/storage_model.h"

namespace kiln::inductor {

struct LoweredGraph {
  std::vector<Buffer> buffers;
  std::vector<LoopNode> nodes;           // in execution order
  std::vector<BufferView> outputs;       // one per graph output
  std::vector<std::string> decisions;    // realise / inline / fallback decisions with their reasons
  int num_inputs = 0;
};

// Lowers a graph without Composite nodes (the result of decompose_composites, decompose.h); `unrounded` as
// returned there.
// `storage` (of `g`) places as_strided views and in-place writes where eager has them.
LoweredGraph lower_graph(const graph::Graph& g, const graph::StorageModel& storage, const CompileContext& ctx,
                         const std::vector<bool>& unrounded = {});

}  // namespace kiln::inductor
