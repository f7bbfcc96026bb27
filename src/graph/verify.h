// The graph verifier: the invariants every graph holds, checked where a graph comes from outside or a pass
// changed it. parse_graph (graph/text.h) runs its node check as it reads each node, so a parsed graph passes it
// without verifying again.
#pragma once
#include <string>

#include "graph/graph.h"

namespace kiln::graph {

// Re-infers every node's output metas from the op table and checks them against the recorded ones, plus
// structural invariants (defined before use, unique names, outputs defined). Throws kiln::Error naming the
// first inconsistency with its file:line:col, the op, and expected vs found.
void verify_graph(const Graph& g, const std::string& filename = "<graph>");

}  // namespace kiln::graph
