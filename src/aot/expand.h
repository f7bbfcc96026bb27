// Replacing graph nodes by their op's decomposition (recorded on meta tensors, graph/meta_trace.h), for AOT
// autograd's own needs: differentiating ops without a VJP (joint.h) and exposing the views inside composite ops
// before functionalization (functionalize.h). The inductor's decompose pass does the same for code generation
// with its bisection and injection hooks (inductor/decompose.h).
#pragma once
#include <functional>

#include "graph/graph.h"

namespace kiln::aot {

// Which op nodes of a graph to expand; `picker(g)` is asked once per round and returns the per-node choice.
using NodePick = std::function<bool(const graph::Node&)>;
using NodePicker = std::function<NodePick(const graph::Graph&)>;

// Replaces every op node the picker selects by its decomposition, in rounds until none is selected (a
// decomposition may use such ops itself). Throws kiln::Error naming the node and `why` it was picked when a
// selected op has no decomposition.
graph::Graph expand_nodes(const graph::Graph& g, const NodePicker& picker, const char* why);

}  // namespace kiln::aot
