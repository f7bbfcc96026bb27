// Graph inputs: loading them from a directory of .npy files, or generating them from a seed. A seeded input
// set is fully described by (graph, seed), which is what repro files record when inputs are not stored.
#pragma once
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph {

// Deterministic inputs for `g` from `seed`: floating inputs standard normal (Philox, see eager/philox.h);
// integer inputs uniform in [0, bound) where bound is derived from how the graph uses them (class targets of
// cross_entropy/nll_loss: the class count; indices of embedding/index_select/gather/index: the indexed dim's
// size; otherwise [0, 10)); bool inputs fair coins. Inputs marked `grad` get requires_grad.
std::vector<Tensor> seeded_inputs(const Graph& g, uint64_t seed);

// One .npy per graph input, named after the input (%x -> DIR/x.npy); dtypes and shapes must match the graph.
std::vector<Tensor> load_inputs(const Graph& g, const std::string& dir);
void save_inputs(const Graph& g, const std::vector<Tensor>& inputs, const std::string& dir);

}  // namespace kiln::graph
