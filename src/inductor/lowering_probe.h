// What the inductor does with each op of the table, found by running its own decomposition and lowering on a
// one-node graph. tests/test_lowering_table.cpp checks every row of the lowering table (lowerings.def, the column
// `kiln ops` prints) against it, so the table cannot drift from the compiler.
#pragma once
#include <string>

#include "graph/graph.h"
#include "inductor/decision.h"

#include "ops/op_info.h"

namespace kiln::inductor {

struct OpLowering {
  enum class Kind { Lowered, Decomposed, Extern, Unknown } kind = Kind::Unknown;
  std::string reason;  // Extern: why it runs its eager kernel; Unknown: why no probe call could be built
  std::string str() const;  // "lowered", "decomposed", "extern: <reason>", "?: <reason>"
};

// Probes `op` with meta tensors standing for graph inputs (no data, no code generation).
OpLowering probe_lowering(const OpInfo& op);

// The probe's call of `op` as a graph (its inputs, one node, its outputs), or a Decision::no when no candidate
// call passes shape inference, saying what the last candidate was refused for.
struct ProbeGraph {
  Decision decision;
  graph::Graph graph;  // empty unless the decision is yes
};
ProbeGraph one_node_graph(const OpInfo& op);

}  // namespace kiln::inductor
