// The minifier's oracle: the failure layer's oracle (repro/oracle.h: a backend in a forked child, judged
// against fp64 through the comparator) applied to candidates, up to -j children at once, with their inputs
// and references taken from recorded values. A candidate shows the target failure by the same-failure rules
// (repro/failure.h) with the signal of a crash and, with --check-str, a substring of an error's message;
// an accuracy target ignores non-float outputs unless strict. A candidate whose reference run fails never
// counts (kind invalid).
//
// Where time goes: a candidate's inputs are the original inputs or recorded values (values.h), loaded in the
// child. test() judges accuracy against the recorded fp64 values of the candidate's outputs (every value of a
// candidate is a value of the original graph) instead of re-running the fp64 reference, and against the
// candidate's own eager run at its dtypes (the comparator's eager baseline, graph/compare.h); confirm() re-runs the
// fp64 reference of the candidate itself from its own inputs, exactly as `kiln repro run` will, and checks
// the reference run succeeds. For graphs with random ops the shortcut is off (turning a random node into an
// input shifts later draws). A candidate that reads only original graph inputs (a truncation of the
// original, say) repeats part of the recorded reference run exactly, so its quick test is already exact and
// confirm() answers with that verdict instead of a second child. For a compile_error target a candidate is
// only compiled, where the backend has a compile step (api/backends.h): running it cannot change the verdict.
// With `gradients` (a training graph, repro/training.h) every candidate is judged on its outputs and gradients
// against its own reference training run (no recorded shortcut: the recording is of the forward run).
#pragma once
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/backends.h"
#include "eager/philox.h"
#include "minifier/reducer.h"
#include "minifier/values.h"
#include "repro/isolate.h"
#include "repro/oracle.h"

namespace kiln::minify {

struct Target {
  FailureSignature failure;    // the original graph's failure
  bool strict_accuracy = false;  // accuracy: compare non-float outputs too
  std::string check_str;       // errors: match by this substring instead of the normalised message
  // The same-failure rules of a reduction: the crash's signal must match too.
  SameFailureRules rules() const { return {check_str, true}; }
};

// Whether `observed` is the target failure (same_failure with the target's rules).
bool matches_target(const Target& t, const FailureSignature& observed);

// The inputs of a candidate: each input is named after the original value it carries: an original graph
// input (its given tensor) or an intermediate (its recorded value, rounded to the input's dtype); a shrunk
// input carries the leading part of that value in every dimension.
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
  // Whether a value of `g` has other sizes or another dtype than the original value of its name (the shrink and
  // dtype moves), or is computed by another op (simplify): the recorded values then are not its values.
  bool recomputes_differently(const graph::Graph& g) const;

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
  bool reuse_reference = true; // accuracy shortcut of test() (off automatically for random graphs and gradients)
  bool gradients = false;      // judge outputs then gradients (repro/oracle.h OracleOptions::gradients)
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
  // The original graph run on the backend, needing no recorded value (so it can run while they are being
  // recorded), as the body of a forked child: the failure text test() would report for an error
  // ("compile_error\n<message>", "runtime_error\n<message>"), or "ran\n<n>" when it ran; then only a
  // comparison with the reference tells, and its n outputs are written to `outputs_dir` as <i>.npy (just
  // "ran\n" when they are too large to be worth it).
  std::string original_backend_body(const std::string& outputs_dir) const;
  // The verdict test() would give the original, from what original_backend_body said and wrote ("ran\n<n>"),
  // once the reference values are recorded; nothing when the outputs cannot all be read back.
  std::optional<Verdict> judge_original_outputs(const std::string& said, const std::string& outputs_dir) const;
  // The verdict on a child's result (of a candidate, or of original_backend_body when it did not say "ran").
  // A child that failed outside the graph (it could not read the recorded values, say) is a kiln::Error
  // saying so, never a verdict.
  Verdict judge(const IsolatedResult& r) const;

 private:
  // A candidate's child: its failure signature, encoded (failure.h).
  std::string child_body(const graph::Graph& g, bool exact) const;
  // Whether test() of `g` is as exact as confirm() (see above).
  bool quick_test_is_exact(const graph::Graph& g) const;
  Verdict verdict(FailureSignature observed) const;
  const InputSource& src_;
  ForkOracleOptions opts_;
  FailureOracle backend_;
  bool random_graph_ = false;
  std::unordered_map<uint64_t, Verdict> exact_verdicts_;  // by candidate_key: test() verdicts confirm() would repeat
};


}  // namespace kiln::minify
