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

namespace kiln {

namespace {

}  // namespace

FailureOracle::FailureOracle(OracleOptions opts) : opts_(std::move(opts)) {
  find_backend(opts_.backend);  // an unknown backend is an error before any work
  KILN_CHECK(std::isfinite(opts_.tolerance) && opts_.tolerance >= 0,
             "the comparator's tolerance must be a number >= 0, not {}", opts_.tolerance);
  KILN_CHECK(std::isfinite(opts_.timeout_s) && opts_.timeout_s > 0,
             "the time limit must be a positive number of seconds, not {}", opts_.timeout_s);
}

bool FailureOracle::has_compile_step() const { return find_backend_compiler(opts_.backend) != nullptr; }

double FailureOracle::setup_limit_s() const { return setup_limit_for(opts_.timeout_s); }

std::vector<Tensor> FailureOracle::reference(const graph::Graph& g, const std::vector<Tensor>& inputs) const {
  if (opts_.seed_state) default_generator() = *opts_.seed_state;
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  return graph::run_graph(g, graph::copy_inputs(inputs), fp64);
}

std::optional<FailureSignature> FailureOracle::run_backend(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                                           bool compile_only, std::vector<Tensor>& outs) const {
  if (opts_.seed_state) default_generator() = *opts_.seed_state;  // random ops draw what the reference drew
  try {
    // Compiling is the child's setup step: a cold kernel cache must not make a graph look like a hang, so
    // only the run counts against the time limit (docs/minifier.md, Time limits).
    const BackendCompileFn* compile = find_backend_compiler(opts_.backend);
    compile_step_then_run([&] { if (compile) (*compile)(g); }, [&] {
      isolated_run_starts();
      if (!compile_only) outs = find_backend(opts_.backend)(g, inputs);
    });
  } catch (const std::exception& e) {
    return failure_of_exception(e);
  }
  return std::nullopt;
}

FailureSignature FailureOracle::compare(const std::vector<Tensor>& outs, const std::vector<Tensor>& reference) const {
  if (outs.size() != reference.size())
    return {FailureKind::Accuracy, fmt::format("the backend returned {} outputs, the graph has {}", outs.size(),
                                               reference.size())};
  std::vector<Tensor> expected;
  for (size_t i = 0; i < outs.size(); ++i) expected.push_back(to(reference[i], outs[i].dtype()));
  CompareOptions co;
  co.tol = opts_.tolerance;
  co.ignore_non_float = !opts_.strict_accuracy;
  CompareVerdict v = compare_outputs(expected, outs, reference, co);
  return v.ok ? FailureSignature{} : FailureSignature{FailureKind::Accuracy, v.str()};
}

FailureSignature FailureOracle::classify(const graph::Graph& g, const std::vector<Tensor>& inputs) const {
  FailureOracle pinned = *this;  // the reference and the child draw random numbers from the same state
  if (!pinned.opts_.seed_state) pinned.opts_.seed_state = default_generator();
  std::vector<Tensor> ref;
  try {
    ref = pinned.reference(g, inputs);
  } catch (const Error& e) {
    fail("the fp64 reference run of this graph fails, so it cannot show a backend bug: {}", e.what());
  }
  IsolatedResult r = run_isolated([&] {
    std::vector<Tensor> outs;
    if (std::optional<FailureSignature> error = pinned.run_backend(g, graph::copy_inputs(inputs), false, outs))
      return encode_failure(*error);
    return encode_failure(pinned.compare(outs, ref));
  }, opts_.timeout_s, setup_limit_s());
  return kiln::classify(r);
}

bool FailureOracle::fails_same_way(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                   const FailureSignature& expected, const SameFailureRules& rules) const {
  return same_failure(expected, classify(g, inputs), rules);
}

}  // namespace kiln
