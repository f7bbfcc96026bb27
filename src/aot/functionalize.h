// Functionalization (docs/aot.md): a graph with in-place ops and writes through views becomes a functional
// graph (no node mutates anything) that computes the same outputs and, as extra outputs, the new value of every
// graph input it mutated; those are written back into the inputs once, after the graph (the copy-back
// epilogue). Outputs that alias an input are recomputed as views of the functional values.
#pragma once
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace kiln::aot {

struct FunctionalGraph {
  graph::Graph graph;  // functional: the original outputs, then one new value per mutated input
  std::vector<std::pair<int, int>> mutations;  // (input index, output index of its new value)
  int num_outputs = 0;                          // the original graph's outputs (the first outputs)
};

FunctionalGraph functionalize(const graph::Graph& g);

// The functional graph with the copy-back epilogue as nodes (copy_ of each new value into its input) and the
// original outputs only: it runs in the interpreter exactly like the original graph, mutations included.
graph::Graph with_copy_back(const FunctionalGraph& f);

// Whether any node of `g` is an in-place op.
bool has_mutations(const graph::Graph& g);

}  // namespace kiln::aot
