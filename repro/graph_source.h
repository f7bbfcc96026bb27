// The graph a command is given: a .kir file or a repro file (`kiln run`, `kiln minify`, `kiln bisect` and
// `kiln doctor` take either). A repro brings its graph, its inputs, its configuration (applied while the source
// lives, as `kiln repro run` applies it), its backend, tolerance and what it checks; `--inputs` / `--seed` given
// on the command line replace its inputs. The reproduce line of a run over the source (repro/command.h) names the
// same file, so it runs what the tool ran.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "repro/command.h"
#include "repro/repro.h"

namespace kiln {

struct GraphSource {
  std::string file;
  std::optional<ReproFile> repro;      // set when the file is a repro
  graph::Graph graph;
  std::vector<Tensor> inputs;
  uint64_t seed = 0;                   // random ops draw from it (and generated inputs)
  std::optional<uint64_t> input_seed;  // the inputs came from this seed...
  std::string inputs_dir;              // ...or from .npy files in this directory (neither: the repro's own)
  std::string input_desc;              // "inputs from seed 0", for progress lines
  std::unique_ptr<AppliedReproConfig> applied;  // the repro's configuration, in effect while this lives

  // The repro's backend, tolerance and check, or the defaults of a graph.
  std::string backend_or(const std::string& fallback) const { return repro ? repro->backend : fallback; }
  double tolerance_or(double fallback) const { return repro ? repro->tolerance : fallback; }
  bool gradients() const { return repro && repro->gradients; }
  // A reproduce line over this source: its file and inputs as given (the rest is the caller's).
  RunLine run_line() const;
};

// Reads `file` (a .kir graph, verified, or a repro file); inputs from `inputs_dir`, else from `seed`, else (a
// repro) the repro's, else from KILN_SEED. Bad input is a kiln::Error naming the file.
GraphSource load_graph_source(const std::string& file, const std::string& inputs_dir, std::optional<uint64_t> seed);

// Whether `text` is a repro file (a `kiln-repro:` header line) rather than a .kir graph.
bool looks_like_repro(std::string_view text);

}  // namespace kiln
