// The stages of one AOT autograd compile (docs/aot.md), in order, one line each, as Halide's lower_impl lists
// its passes: expand -> functionalize -> rng -> joint -> transform -> partition. Each stage reads and extends one
// AotState; run_aot_stages runs them and, after every stage, checks the graphs it produced (XLA's HloVerifier
// after each pass): graph::verify_graph on each, and the stage's own invariant (functionalize: no node mutates,
// and every input the graph wrote is in the copy-back list; partition: the forward and backward graphs' layout).
// A failed check is an internal error that names the stage, so a broken stage is caught where it broke, not
// later as a wrong gradient. Each stage is timed on KILN_LOGS=passes and its graph written to
// KILN_DEBUG_DIR/aot/NNN_<graph>/NN_<stage>.kir, as the inductor's passes are.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "aot/compiled.h"

namespace kiln::aot {

// What the stages build: the graph the next stage reads, and the training graphs as far as they are done.
struct AotState {
  graph::Graph graph;               // expand's, functionalize's, rng's result (then the joint graph's input)
  std::vector<bool> requires_grad;  // per input of `graph` (rng adds rng_seed and rng_offset, false)
  AotGraphs out;                    // mutations and aliases (functionalize), rng, joint, partition
};

struct AotStage {
  std::string name;
  std::function<void(AotState&, const AotConfig&)> run;
  // What must hold after the stage besides every graph verifying: nullopt, or what is wrong. `input` is the
  // graph the stage read (AotState::graph before it ran), kept for the check only when `invariant_reads_input`
  // (a copy of the graph; an empty graph otherwise).
  std::function<std::optional<std::string>(const graph::Graph& input, const AotState& after)> invariant;
  // The graphs the stage produced, for the verifier and the dump: name -> graph.
  std::function<std::vector<std::pair<std::string, const graph::Graph*>>(const AotState&)> graphs;
  bool invariant_reads_input = false;
};

// The stages in order (the one list: aot_graphs runs it; tests replace a stage to check the checks).
std::vector<AotStage> aot_stages();

// Runs `stages` on `g` (see above). Throws kiln::Error (internal) naming the stage whose output fails a check.
AotGraphs run_aot_stages(const graph::Graph& g, const std::vector<bool>& requires_grad, const AotConfig& config,
                         const std::vector<AotStage>& stages);

}  // namespace kiln::aot
