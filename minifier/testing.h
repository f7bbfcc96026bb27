// Generated failing graphs for the minifier's tests and benchmarks: `nodes` op nodes over f32 tensors with
// one relu among tanh, sin, sigmoid, mul (diamonds: operands from recent values), broadcasts against a bias
// input, row reductions (mean over a dim, broadcast back) and full reductions (a 0-dim mean), with several
// outputs. A spine (each op reads the previous op's result) runs through the graph; the op right after the
// relu is a tanh or sigmoid of it and is an output, so an off-by-one relu stays visible (products with means
// of 64K values would otherwise shrink it below any tolerance). Values stay in [-1, 1] (or [0, 2] after an injected relu+1),
// so no NaN or Inf drowns the bug.
#pragma once
#include <string>

#include "graph/graph.h"

namespace kiln::minify {

struct TestGraph {
  graph::Graph graph;
  std::string relu_input;   // the name of the value the relu reads
  std::string relu_output;
};

// rows x cols tensors; the relu is op number `relu_at` (default: the middle).
TestGraph relu_test_graph(int nodes, uint64_t seed, int64_t rows = 8, int64_t cols = 16, int relu_at = -1);

}  // namespace kiln::minify
