// The fuzzer's door to the failure layer: isolation (a crash or hang of a candidate is a finding, not the end
// of the run), classification of what a backend run showed, minification of a finding into a repro file, and
// the bisection of a minimized finding to its root cause. Every call `kiln fuzz` makes into repro/, minifier/
// and bisect/ is in check.cpp, so the failure layer can change behind these functions.
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
  std::vector<Tensor> inputs;  // the minimized graph's
  FailureSignature failure;
  bool minimized = false;
  std::string note;  // why it was not minimized
};
MinifiedFinding minify_finding(const CheckJob& job, const FailureSignature& observed, const CheckOptions& opts,
                               const std::string& path);

// Where a finding's bug is: the bisector (bisect/bisect.h) run on the minimized graph, its first failing stage
// of the ladder, the subsystem whose first bad application causes it, and the op that application acts on
// after decomposition (the lowering of `mul` inside batch_norm's decomposition is `mul`). One injected bug in
// `mul` minimizes to a different graph per op that decomposes into mul, but bisects to one root cause.
struct RootCause {
  std::string outcome;  // the bisector's: bisected, unexplained, nondeterministic, passes
  std::string stage;    // the first rung of the ladder that fails ("" when none did)
  std::string site;     // "stage:subsystem" or the configuration flip; "" when nothing explained it
  std::string op;       // the op the first bad application acts on; "" when its debug info names none
  bool explained() const { return !site.empty(); }
  std::string str() const;  // "inductor:lowering of mul (stage inductor)"
};
// `failure` (the kind the finding showed) decides what counts in the bisection: an accuracy finding is bisected
// on accuracy failures only, any other on errors, crashes and hangs. The job's configuration (but its KILN_BISECT_*
// settings, which the bisector sets itself) is applied; random ops start from its seed.
RootCause bisect_finding(const graph::Graph& g, const std::vector<Tensor>& inputs, const FailureSignature& failure,
                         const CheckJob& job, const CheckOptions& opts);
// The op a should_run site's debug info names ("%t3 = mul" -> "mul"; "relu in kernel_2" -> ""): the text after
// " = " up to the next space, when it is an op of the table.
std::string op_of_site_info(const std::string& site_info);

}  // namespace kiln::fuzz
