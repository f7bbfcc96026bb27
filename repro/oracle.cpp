// FailureOracle: the fp64 reference in the calling process, the backend in a forked child (isolate.h), the
// comparator between them, and the classification of what came back (failure.h).
#include "repro/oracle.h"

#include <cmath>

#include "api/backends.h"
#include "core/bisect.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "ops/api.h"
#include "repro/isolate.h"
#include "repro/training.h"

namespace kiln {

FailureOracle::FailureOracle(OracleOptions opts) : opts_(std::move(opts)) {
  find_backend(opts_.backend);  // an unknown backend is an error before any work
  KILN_CHECK(std::isfinite(opts_.tolerance) && opts_.tolerance >= 0,
             "the comparator's tolerance must be a number >= 0, not {}", opts_.tolerance);
  KILN_CHECK(std::isfinite(opts_.timeout_s) && opts_.timeout_s > 0,
             "the time limit must be a positive number of seconds, not {}", opts_.timeout_s);
}

bool FailureOracle::has_compile_step() const {
  return !opts_.gradients && find_backend_compiler(opts_.backend).has_value();  // a training run compiles in its call
}

double FailureOracle::setup_limit_s() const { return setup_limit_for(opts_.timeout_s); }

ComparisonBaselines FailureOracle::baselines(const graph::Graph& g, const std::vector<Tensor>& inputs) const {
  if (opts_.gradients) return training_baselines(g, inputs, training_run(g), opts_.seed_state);
  return comparison_baselines(g, inputs, opts_.seed_state);
}

std::vector<Tensor> FailureOracle::eager(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                         const std::vector<Tensor>& fp64) const {
  KILN_CHECK(!opts_.gradients, "internal: the eager baseline alone is of the forward outputs, not of a training run");
  return eager_baseline(g, inputs, fp64, opts_.seed_state);
}

std::optional<FailureSignature> FailureOracle::run_backend(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                                           bool compile_only, std::vector<Tensor>& outs) const {
  if (opts_.seed_state) default_generator() = *opts_.seed_state;  // random ops draw what the reference drew
  if (opts_.gradients) {  // compiled inside the call, with the inputs that require grad (AOT where the backend has it)
    try {
      outs = run_training(opts_.backend, g, inputs, training_run(g));
    } catch (const std::exception& e) {
      return failure_of_exception(e);
    }
    return std::nullopt;
  }
  try {
    // Compiling is the child's setup step: a cold kernel cache must not make a graph look like a hang, so
    // only the run counts against the time limit (docs/minifier.md, Time limits).
    // The run calls the compile step's program: the graph compiles once even where the backend bypasses its
    // graph cache (under KILN_BISECT_*), and KILN_BISECT_LIMIT counts the applications of that one compile.
    GraphProgram program;
    compile_step_then_run([&] { program = compile(g); }, [&] {
      isolated_run_starts();
      if (!compile_only) outs = run(g, program, inputs);
    });
  } catch (const std::exception& e) {
    return failure_of_exception(e);
  }
  return std::nullopt;
}

GraphProgram FailureOracle::compile(const graph::Graph& g) const {
  std::optional<BackendCompileFn> step = find_backend_compiler(opts_.backend);
  return step ? (*step)(g) : GraphProgram();
}

std::vector<Tensor> FailureOracle::run(const graph::Graph& g, const GraphProgram& program,
                                       const std::vector<Tensor>& inputs) const {
  return program ? program(inputs) : find_backend(opts_.backend)(g, inputs);
}

FailureSignature FailureOracle::compare(const graph::Graph& g, const std::vector<Tensor>& outs,
                                        const ComparisonBaselines& b) const {
  if (opts_.gradients) {
    TrainingVerdict v = judge_training(g, training_run(g), outs, b, opts_.tolerance);
    return v.ok ? FailureSignature{} : FailureSignature{FailureKind::Accuracy, v.text};
  }
  if (outs.size() != b.fp64.size() || outs.size() != b.eager.size())
    return {FailureKind::Accuracy, fmt::format("the backend returned {} outputs, the graph has {}", outs.size(),
                                               b.fp64.size())};
  CompareOptions co;
  co.tol = opts_.tolerance;
  co.ignore_non_float = !opts_.strict_accuracy;
  CompareVerdict v = compare_to_baselines(b, outs, co);
  return v.ok ? FailureSignature{} : FailureSignature{FailureKind::Accuracy, v.str()};
}

FailureSignature FailureOracle::classify(const graph::Graph& g, const std::vector<Tensor>& inputs) const {
  FailureOracle pinned = *this;  // the reference and the child draw random numbers from the same state
  if (!pinned.opts_.seed_state) pinned.opts_.seed_state = default_generator();
  ComparisonBaselines ref;
  try {
    ref = pinned.baselines(g, inputs);
  } catch (const Error& e) {
    fail("the fp64 reference run of this graph fails, so it cannot show a backend bug: {}", e.what());
  }
  IsolatedResult r = run_isolated([&] {
    std::vector<Tensor> outs;
    if (std::optional<FailureSignature> error = pinned.run_backend(g, graph::copy_inputs(inputs), false, outs))
      return encode_failure(*error);
    return encode_failure(pinned.compare(g, outs, ref));
  }, opts_.timeout_s, setup_limit_s());
  return kiln::classify(r);
}

bool FailureOracle::fails_same_way(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                   const FailureSignature& expected, const SameFailureRules& rules) const {
  return same_failure(expected, classify(g, inputs), rules);
}

}  // namespace kiln
