// Graph passes and the pass manager (decision 3). A pass is a named `bool run(Graph&)` that returns whether
// it changed the graph; a pipeline is a flat list of passes run in order by run_pipeline, which
//   - asks the bisection hook should_run("passes", pass name, ...) before each pass (src/core/bisect.h), and
//     skips the pass when the hook refuses (KILN_BISECT_DISABLE=passes:cse, whichever pipeline runs it);
//   - runs the verifier before the first pass and after every pass that changed the graph when KILN_VERIFY
//     is on (a failure names the pass that broke the graph);
//   - with KILN_DEBUG_DIR set, writes the input graph as DIR/<stage>/00_input.kir and the graph after each
//     pass that ran as DIR/<stage>/NN_<pass>.kir (NN = the pass's position in the pipeline, from 01);
//   - logs each pass and whether it changed the graph on the `passes` channel.
//
// The passes (each keeps the program's results, including in-place effects and random draws, unchanged):
//   dce               removes nodes none of whose outputs are used (not read by any node, not a graph
//                     output). In-place nodes are always kept (their effect is the mutation). A random node
//                     is removed only when no random node follows it, because each random node draws from
//                     the generator offset the previous ones leave: removing an earlier one would change
//                     the numbers later ones draw. (The generator's offset after the graph may then differ.)
//   cse               merges nodes with the same op, the same non-tensor arguments and the same input values
//                     (and equal constants), keeping the first. Random and in-place nodes are never merged,
//                     and no node is merged across an in-place node (the mutation may change what an
//                     identical computation reads).
//   constant_folding  evaluates, with the eager kernels, single-output nodes whose tensor inputs are all
//                     constants (creation ops with no tensor inputs included) and replaces each by a constant
//                     node. Skipped: random and in-place nodes, views (they alias their input), nodes reading
//                     a value some in-place node mutates, results with more than `max_elements` elements
//                     (default 4096: folding would bloat the graph and its .kir file), and nodes whose kernel
//                     fails (the error stays for run time).
//
// Unrounded values: a caller may compute some f16/bf16 values in f32 without rounding them to their dtype
// (the inductor's values internal to an op eager runs as one f32 kernel: lerp's decomposition, ...;
// inductor/decompose.h), flagged by value id. constant_folding leaves them (the eager kernels would round each
// to its dtype) and cse never merges one with a value that is rounded (nor the other way round).
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph {

struct Pass {
  std::string name;
  std::function<bool(Graph&)> run;
};
using Pipeline = std::vector<Pass>;

// Runs the passes in order (see above); returns whether any pass changed the graph. `stage` names the
// pipeline (the one that runs it, e.g. "inductor") in logs. Under KILN_DEBUG_DIR the input graph and each
// changed graph are dumped (00_input.kir, NN_<pass>.kir) to `dump_dir`, or, when that is empty, to a directory
// of their own, KILN_DEBUG_DIR/<stage>/NNN_<graph>/ (core/debug_dir.h).
bool run_pipeline(Graph& g, const Pipeline& pipeline, std::string_view stage = "passes",
                  const std::filesystem::path& dump_dir = {});

// By value id: whether a value is computed unrounded (see above); null or short: none is.
using UnroundedValues = const std::vector<bool>*;

bool eliminate_dead_code(Graph& g);
bool eliminate_common_subexpressions(Graph& g);
bool eliminate_common_subexpressions(Graph& g, UnroundedValues unrounded);
inline constexpr int64_t kDefaultFoldLimit = 4096;
bool fold_constants(Graph& g, int64_t max_elements = kDefaultFoldLimit, UnroundedValues unrounded = nullptr);

Pass dce_pass();
Pass cse_pass(UnroundedValues unrounded = nullptr);
Pass constant_folding_pass(int64_t max_elements = kDefaultFoldLimit, UnroundedValues unrounded = nullptr);
// constant_folding, cse, dce: the cleanup pipeline every stage can start from. `unrounded` must outlive it.
Pipeline cleanup_pipeline(UnroundedValues unrounded = nullptr);

}  // namespace kiln::graph
