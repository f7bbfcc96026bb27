// The fuzzer's door to the failure layer: isolation (a crash or hang of a candidate is a finding, not the end
// of the run), classification of what a backend run showed, and minification of a finding into a repro
// file. Every call `kiln fuzz` makes into repro/ and minifier/ is in check.cpp, so the failure layer can
// change behind these functions.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "repro/failure.h"

namespace kiln::fuzz {

// What a backend run showed is a FailureSignature (repro/failure.h): kind None (it matched the reference),
// CompileError, RuntimeError, Crash, Hang or Accuracy, with the message (error text, signal name, or the
// comparator's verdict).

// Registers the test backends a fuzzing run may name (`inject_test`: the interpreter with KILN_INJECT faults).
void register_test_backends();

// One differential check: `graph` run on the backend from `inputs` under the options `config` (KILN_* name ->
// value, e.g. KILN_BISECT_DISABLE=inductor:fusion), judged by the comparator (decision 6: allclose to eager,
// or an RMSE against fp64 at most m x eager's) with `eager` (the interpreter's outputs at the graph's dtypes)
// as expected and `reference` (the fp64 interpreter's) as the fp64 outputs. Random ops start from
// `random_seed` in the backend.
struct CheckJob {
  const graph::Graph* graph = nullptr;
  const std::vector<Tensor>* inputs = nullptr;
  const std::vector<Tensor>* eager = nullptr;
  const std::vector<Tensor>* reference = nullptr;
  std::map<std::string, std::string> config;
  uint64_t random_seed = 0;
};

struct CheckOptions {
  std::string backend = "inductor";
  double tolerance = 1e-4;
  double timeout_s = 10;  // per job, after compiling (a longer run is a hang)
  int jobs = 1;           // children at once
  // Jobs per child (a crash or hang of a batch reruns its jobs one per child); 0: 8 for a backend with a
  // compile step (compiling dominates), else 64 (forking dominates).
  int batch = 0;
};

// How many jobs check_isolated runs in one child.
int batch_size(const CheckOptions& opts);

// The verdicts of `jobs`, in order. Each batch runs in a forked child.
std::vector<FailureSignature> check_isolated(const std::vector<CheckJob>& jobs, const CheckOptions& opts);

// Minifies the failing `job` (its config applied) into the repro file `path` (inputs in `path`.inputs/) and
// returns the minimized graph; when the failure does not show again (flaky), writes the unminified graph with
// `observed` as its failure and sets `minimized` false.
struct MinifiedFinding {
  graph::Graph graph;
  FailureSignature failure;
  bool minimized = false;
  std::string note;  // why it was not minimized
};
MinifiedFinding minify_finding(const CheckJob& job, const FailureSignature& observed, const CheckOptions& opts,
                               const std::string& path);

}  // namespace kiln::fuzz
