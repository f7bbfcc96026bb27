// The decompose pass, first of the inductor's pass list (compile.cpp): every Composite node of the graph is
// replaced by the nodes its decomposition records on meta tensors, so that lowering (lowering.h) sees only ops
// it has a row for in the lowering table or runs as extern calls.
#pragma once
#include <vector>

#include "graph/graph.h"
#include "inductor/context.h"

namespace kiln::inductor {

// Replaces every Composite node by the nodes of its decomposition (repeatedly, so nested composites go too).
// A decomposition the bisection hook refuses (stage "inductor", subsystem "decomposition") stays as a node
// and later runs as an extern call; KILN_INJECT's `decomposition` bug (ctx.inject) is applied here.
// `unrounded` (optional) receives, by value id, which values are internal to an op that eager runs as one
// kernel (no f16/bf16 rounding there).
graph::Graph decompose_composites(const graph::Graph& g, const CompileContext& ctx,
                                  std::vector<bool>* unrounded = nullptr);

}  // namespace kiln::inductor
