// The oracle every tool asks "does this graph, with these inputs, still fail, and how?" (decision 8): the
// graph runs on a backend in a forked child (isolate.h: a crash or hang is an answer) and is judged against
// the reference interpreter's baselines (eager at the graph's own dtypes and fp64) through the one comparator
// (graph/compare.h). `kiln repro run`, the minifier's candidates, gating, the bisector and the fuzzer all
// classify through it.
//
//   FailureOracle oracle({.backend = "inductor", .tolerance = 1e-4, .timeout_s = 10});
//   FailureSignature f = oracle.classify(g, inputs);         // none, compile_error, ..., accuracy
//   bool still = oracle.fails_same_way(g, inputs, expected); // classify + same_failure (failure.h)
//
// Time limits: the backend's compile step (api/backends.h register_backend_compiler) is the child's setup step
// with a generous limit (setup_limit_for), and only the run counts against `timeout_s` (docs/minifier.md,
// Time limits). The baselines run in the calling process: when the fp64 reference fails, the graph itself is
// invalid.
//
// Callers that fork their own children (the minifier judges many candidates at once, against recorded
// reference values; `kiln fuzz` checks batches of graphs a child) use the building blocks: run_backend (or its
// two halves, compile and run) and compare in the child, classify(IsolatedResult) (failure.h) in the parent.
//
// With `gradients` (a graph with inputs marked `grad`, judged as it is trained: repro/training.h) every building
// block works on what a user of the gradients sees: the baselines and the backend's run are the outputs then one
// gradient per `grad` input (forward and backward, fixed tangents), and compare names a wrong gradient. A wrong
// VJP or partition changes only the gradients, so every tool that must see it (`kiln doctor`'s ablation, the
// minifier's candidates, `kiln repro run` of a repro recording `check: gradients`, the bisector) sets it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "api/backends.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/graph.h"
#include "repro/failure.h"

namespace kiln {

struct OracleOptions {
  std::string backend = "eager";
  double tolerance = 1e-4;       // the comparator's tolerance
  double timeout_s = 60;         // how long a run may take (its compile step not counted)
  bool strict_accuracy = true;   // compare non-float outputs too (`kiln run --check`); false ignores them
  std::optional<GeneratorState> seed_state;  // random ops start here in backend and reference (default: now)
  bool gradients = false;        // judge outputs then gradients (`kiln run --check --grad`; see above)
};

class FailureOracle {
 public:
  // Checks the options: an unknown backend, a bad tolerance or time limit is a kiln::Error here.
  explicit FailureOracle(OracleOptions opts);
  const OracleOptions& options() const { return opts_; }

  // The failure `g` shows on the backend with `inputs` (kind None when it runs and matches the fp64
  // reference). Throws kiln::Error when the fp64 reference run itself fails: such a graph shows no backend bug.
  FailureSignature classify(const graph::Graph& g, const std::vector<Tensor>& inputs) const;
  // Whether `g` still fails as `expected` says (classify, then same_failure with `rules`).
  bool fails_same_way(const graph::Graph& g, const std::vector<Tensor>& inputs, const FailureSignature& expected,
                      const SameFailureRules& rules = {}) const;

  // ---- building blocks ----
  // The comparator's baselines of `g` (graph/compare.h comparison_baselines: eager at the graph's dtypes and
  // the fp64 reference), from copies of `inputs`, random ops from seed_state, on this thread; throws
  // kiln::Error (the interpreter's) when the fp64 reference fails.
  ComparisonBaselines baselines(const graph::Graph& g, const std::vector<Tensor>& inputs) const;
  // The eager baseline alone, for a caller holding `g`'s fp64 reference (graph/compare.h eager_baseline);
  // forward outputs only (a kiln::Error with `gradients`: a training run has no such shortcut).
  std::vector<Tensor> eager(const graph::Graph& g, const std::vector<Tensor>& inputs,
                            const std::vector<Tensor>& fp64) const;
  // In a forked child: compiles `g` where the backend has a compile step (then isolated_run_starts()), and
  // runs it unless `compile_only`, outputs in `outs` (with `gradients`: the training run, which compiles inside
  // its call, outputs then gradients). Returns the failure of a thrown error, or nothing.
  std::optional<FailureSignature> run_backend(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                              bool compile_only, std::vector<Tensor>& outs) const;
  // run_backend's two halves, forward outputs only, for a child that compiles several graphs in its setup step
  // before it runs them (fuzz/check.cpp): the compile step's program (empty where the backend has none), and
  // `g` run on `inputs` through `program` (empty: the backend compiles `g` in the call). Both throw what the
  // backend throws; neither touches the random generator.
  GraphProgram compile(const graph::Graph& g) const;
  std::vector<Tensor> run(const graph::Graph& g, const GraphProgram& program, const std::vector<Tensor>& inputs) const;
  // The comparator's verdict on `outs` of `g` against the baselines of the same outputs: None or Accuracy
  // (with `gradients`, a wrong gradient is named: "output 2 is the gradient of %w").
  FailureSignature compare(const graph::Graph& g, const std::vector<Tensor>& outs,
                           const ComparisonBaselines& baselines) const;
  // Whether the backend has a compile step apart from its run (compile errors need no run); a training run has
  // none (`gradients`: it compiles inside its call, so run_backend ignores compile_only).
  bool has_compile_step() const;
  // The time limit of a child's setup (compile) step for these options.
  double setup_limit_s() const;

 private:
  OracleOptions opts_;
};

}  // namespace kiln
