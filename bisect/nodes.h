// The bisector's node step (bisect.h, step 3): the first value the compiled program materialises that diverges
// from the fp64 interpreter, narrowed inside its kernel; and where a site's debug info points in the graph.
#pragma once
#include <string>
#include <vector>

#include "bisect/bisect.h"

namespace kiln::bisect {

// "%t5 = relu (line 7:3)" for debug info that starts with a value of `g` ("%t5 = relu", "t5 into k0");
// "" when it names none.
std::string locate_site(const graph::Graph& g, const std::string& site_info);

// Fills r.divergence (or r.divergence_note, saying why there is none) for a graph that fails on r.stage: the
// inductor's materialised buffers, or for a training graph failing on an AOT rung, find_aot_divergence.
void find_divergence(const graph::Graph& g, const std::vector<Tensor>& inputs, BisectReport& r,
                     const BisectOptions& o);

// A training graph (inputs marked `grad`) failing on aot_eager or aot_eager_decomp_partition: the rung's forward
// and backward graphs in the fp64 interpreter against the joint graph without the rung's own steps (nodes_aot.cpp).
void find_aot_divergence(const graph::Graph& g, const std::vector<Tensor>& inputs, BisectReport& r,
                         const BisectOptions& o);

}  // namespace kiln::bisect
