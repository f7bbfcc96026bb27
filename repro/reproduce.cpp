// reproduce(): the repro's inputs and configuration, then the failure oracle (oracle.h) on its backend.
#include "repro/reproduce.h"

#include <filesystem>

#include "graph/inputs.h"

namespace kiln {

std::vector<Tensor> repro_inputs(const ReproFile& r, const std::string& repro_path) {
  if (r.input_seed) return graph::seeded_inputs(r.graph, *r.input_seed);
  KILN_CHECK(!r.input_dir.empty(), "{}: the repro names no inputs (expected 'inputs: seed N' or 'inputs: npy \"DIR\"')",
             repro_path);
  const std::filesystem::path dir = confined_path(std::filesystem::path(repro_path).parent_path(), r.input_dir,
                                                  repro_path + ": the input directory");
  for (const auto& [file, hash] : r.input_hashes) {
    const std::string path = confined_path(dir, file, repro_path + ": the input file").string();
    KILN_CHECK(content_hash_matches(path, hash), "{}: input file {} has hash {} but the repro recorded {}; the "
               "inputs changed since the repro was written", repro_path, path, content_hash_of_file(path), hash);
  }
  return graph::load_inputs(r.graph, dir.string());
}

ReproOutcome reproduce(const ReproFile& r, const std::string& repro_path, double timeout_s) {
  // The recorded configuration applies to this run only; afterwards each option is back to what it was
  // (an override the caller had set included: in-process callers such as the minifier rely on it).
  AppliedReproConfig applied(r);
  ReproOutcome out;
  std::vector<Tensor> inputs = repro_inputs(r, repro_path);
  OracleOptions o;
  o.backend = r.backend;
  o.tolerance = r.tolerance;
  o.timeout_s = timeout_s;
  o.gradients = r.gradients;
  out.observed = FailureOracle(o).classify(r.graph, inputs);
  // `failure: none` records no failure (docs/repro-format.md): there is nothing to reproduce, only a graph that
  // must keep passing.
  out.reproduces = r.expected.failed() && same_failure(r.expected, out.observed);
  return out;
}

}  // namespace kiln
