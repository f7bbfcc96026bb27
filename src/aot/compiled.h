// Compiled training (docs/aot.md): a forward graph compiled through AOT autograd. Called with inputs that
// require grad (grad mode on), it functionalizes the graph, builds the joint graph, partitions it, runs the
// compiled forward and connects the differentiable outputs to eager autograd through one CompiledBackward
// node, which compiles the backward graph on the first backward and runs it; `loss.backward()`, `kiln::grad`,
// retain_graph and gradients flowing on into eager computations work unchanged. Otherwise it runs the graph's
// inference program. The programs for each half come from the caller (the interpreter for aot_eager, the
// inductor for inductor: src/api/backends.cpp), so this layer depends on neither.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aot/joint.h"
#include "aot/partition.h"
#include "aot/rng.h"
#include "core/bisect.h"
#include "graph/graph.h"

namespace kiln::aot {

using Program = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using ProgramCompiler = std::function<Program(const graph::Graph&)>;

struct AotConfig {
  std::string backend = "aot_eager";  // for logs and dump directories
  PartitionPolicy policy = PartitionPolicy::SaveNeeded;
  // Applied to the joint graph before partitioning (aot_eager_decomp_partition: decompositions); may be empty.
  std::function<graph::Graph(const graph::Graph&)> transform_joint;
  ProgramCompiler compile;  // compiles the inference graph, and the forward and backward unless compile_halves
  // Compiles the forward and backward graphs when set (inductor: repro stage "aot", so KILN_REPRO_AFTER=aot
  // watches them, while the inference graph keeps the caller's stage).
  ProgramCompiler compile_halves;
  JointOptions joint;       // bug injection (KILN_INJECT=<op>:vjp)
  // KILN_INJECT=partition:accuracy: the min-cut partitioner's backward recomputes each floating value wrongly.
  bool wrong_partition = false;
  // The bisection settings the stages obey (the transform's decompositions ask should_run); nullopt: the
  // enclosing scope's, else KILN_BISECT_*'s (core/bisect.h). The graphs compile with the backend's own options.
  std::optional<BisectSettings> bisect;
};

// The three graphs of one training compile, as `kiln aot` writes them.
struct AotGraphs {
  JointGraph joint;
  Partition partition;
  std::vector<std::pair<int, int>> mutations;  // (forward input, forward graph output) copied back after a run
  // Outputs that alias a mutated input (an in-place op's result): returned as views of that input after the
  // copy-back, as eager returns them. `sizes`, `strides`, `offset` are relative to the input's first element.
  struct OutputAlias {
    int output = 0, input = 0;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
  };
  std::vector<OutputAlias> output_aliases;
  // Random ops functionalized (aot/rng.h): the forward (and joint) take rng_seed and rng_offset after the
  // graph's own inputs; a call passes take_rng_inputs(rng) there.
  RngPlan rng;
};
// The stages of aot/stages.h (expand, functionalize, rng, joint, transform, partition), each checked after it
// runs: logged on KILN_LOGS=aot_joint_graph / aot_graphs / passes and dumped to
// KILN_DEBUG_DIR/aot/NNN_<graph>/ (NN_<stage>.kir, then joint.kir, forward.kir, backward.kir).
AotGraphs aot_graphs(const graph::Graph& g, const std::vector<bool>& requires_grad, const AotConfig& config);

// The compiled function of `g`: thread-safe; compiles the training graphs once per set of inputs requiring grad.
Program aot_compile(const graph::Graph& g, AotConfig config);

}  // namespace kiln::aot
