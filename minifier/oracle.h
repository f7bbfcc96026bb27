// The backend oracle of the minifier: runs each candidate on a backend in a forked child (a segfault, abort or
// hang is a verdict, not the end of the run), up to -j children at once, and says whether it shows the
// target failure. "The same failure":
//   compile_error, runtime_error  same kind, and the same message modulo value names and numbers
//                                 (normalize_failure_message), or, with a check string, a message containing it
//   crash                         a crash by the same signal
//   hang                          no result within the time limit
//   accuracy                      the comparator (compare.h) fails against the fp64 reference; errors and
//                                 crashes do not count; non-float outputs are ignored unless strict
// A candidate whose reference run fails never counts (kind "invalid").
//
// Where time goes: a candidate's inputs are the original inputs or recorded values (values.h), loaded in the
// child. test() judges accuracy against the recorded fp64 values of the candidate's outputs (every value of a
// candidate is a value of the original graph) instead of re-running the reference; confirm() re-runs the
// fp64 reference of the candidate itself from its own inputs, exactly as `kiln repro run` will, and checks
// the reference run succeeds. For graphs with random ops the shortcut is off (turning a random node into an
// input shifts later draws).
#pragma once
#include <string>
#include <vector>

#include "eager/philox.h"
#include "minifier/reducer.h"
#include "minifier/values.h"
#include "repro/isolate.h"

namespace kiln::minify {

struct Target {
  FailureSignature failure;    // the original graph's failure
  bool strict_accuracy = false;  // accuracy: compare non-float outputs too
  std::string check_str;       // errors: match by this substring instead of the normalised message
};

// Whether `observed` is the target failure (the rules above).
bool matches_target(const Target& t, const FailureSignature& observed);

// The inputs of a candidate: each input is named after the original value it carries: an original graph
// input (its given tensor) or an intermediate (its recorded value, rounded to the input's dtype).
class InputSource {
 public:
  InputSource(const graph::Graph& original, const std::vector<Tensor>& inputs, const ValueStore& values)
      : original_(original), inputs_(inputs), values_(values) {}
  // The original value id a candidate value stands for (by name); kNoValue if none.
  graph::ValueId origin(const graph::Graph& g, graph::ValueId id) const;
  Tensor value_of(const graph::Graph& g, graph::ValueId input) const;  // fresh tensor, the input's dtype
  std::vector<Tensor> inputs_of(const graph::Graph& g) const;
  // The recorded fp64 reference of a candidate value (f64 for floating values).
  Tensor reference_of(const graph::Graph& g, graph::ValueId id) const;
  const graph::Graph& original() const { return original_; }

 private:
  const graph::Graph& original_;
  const std::vector<Tensor>& inputs_;
  const ValueStore& values_;
};

struct ForkOracleOptions {
  std::string backend;
  Target target;
  double tolerance = 1e-4;
  double timeout_s = 10;
  int jobs = 1;
  GeneratorState seed_state;   // random ops start here, in the backend and the reference
  bool reuse_reference = true; // accuracy shortcut of test() (off automatically for random graphs)
};

class ForkOracle : public Oracle {
 public:
  ForkOracle(const InputSource& src, ForkOracleOptions opts);
  Verdict test(const Candidate& c) override;
  std::vector<std::optional<Verdict>> test_batch(const std::vector<const Candidate*>& batch) override;
  Verdict confirm(const Candidate& c) override;
  int parallelism() const override { return opts_.jobs; }
  // Classifies a graph exactly (as confirm does) without judging it: for the original graph.
  FailureSignature classify(const graph::Graph& g);

 private:
  std::string child_body(const graph::Graph& g, bool exact) const;
  Verdict judge(const IsolatedResult& r) const;
  const InputSource& src_;
  ForkOracleOptions opts_;
  bool random_graph_ = false;
};


}  // namespace kiln::minify
