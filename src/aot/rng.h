// RNG functionalization (PyTorch's functionalize_rng_ops, torch/_functorch/partitioners.py and
// torch/_prims/rng_prims.py): the random ops of a training graph become `philox_rand` nodes reading the
// generator's (seed, offset) from two graph inputs, so what a graph draws is a function of its inputs. The
// compiled function passes the default generator's state in and advances it once per call by what the graph
// draws, exactly as the eager ops would have; the min-cut partitioner may then redraw a dropout mask in the
// backward from the saved (seed, offset) instead of saving it (docs/partitioners.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "eager/philox.h"
#include "graph/graph.h"

namespace kiln::aot {

struct RngPlan {
  bool used = false;   // the graph draws, every draw has a functional form, and it takes rng_seed, rng_offset
  uint64_t draws = 0;  // counters the graph consumes per call (the generator's offset advance)
  std::string note;    // what was done, or why the graph was left as it was
};
struct RngFunctional {
  graph::Graph graph;  // plan.used: the input graph's inputs, then rng_seed and rng_offset (i64, 0-dim)
  RngPlan plan;
};

// Rewrites rand, randn, rand_like, randn_like and bernoulli (and dropout in training mode, through its
// decomposition) into philox_rand at offset base + the element counts of the draws before it, in node order
// (eager's order). A graph with another random op (randint) is left as it is, and says so in `note`.
RngFunctional functionalize_rng(const graph::Graph& g);

// The two extra inputs for a call at generator state `state` (empty when the graph takes none).
std::vector<Tensor> rng_inputs(const RngPlan& plan, const GeneratorState& state);
// Takes this call's state from the default generator and advances it by the graph's draws (as eager would).
std::vector<Tensor> take_rng_inputs(const RngPlan& plan);

}  // namespace kiln::aot
