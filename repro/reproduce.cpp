// classify_run: the fp64 reference runs in the parent (its failure is the user's problem, reported as an
// error); the backend run and the comparison run in a forked child.
#include "repro/reproduce.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "core/options.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "ops/api.h"
#include "repro/isolate.h"

namespace kiln {

namespace {

std::vector<Tensor> detached_clones(const std::vector<Tensor>& ts) {
  NoGradGuard no_grad;
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(clone(t).detach());
  return out;
}

}  // namespace

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

FailureSignature classify_run(const graph::Graph& g, const std::vector<Tensor>& inputs, const std::string& backend,
                              double tolerance, double timeout_s) {
  const BackendFn& run_backend = find_backend(backend);
  KILN_CHECK(std::isfinite(tolerance) && tolerance >= 0, "the comparator's tolerance must be a number >= 0, not {}",
             tolerance);
  GeneratorState seed_state = default_generator();
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  std::vector<Tensor> reference;
  try {
    reference = graph::run_graph(g, detached_clones(inputs), fp64);
  } catch (const Error& e) {
    fail("the fp64 reference run of this graph fails, so it cannot show a backend bug: {}", e.what());
  }
  const BackendCompileFn* compile = find_backend_compiler(backend);
  IsolatedResult r = run_isolated([&]() -> std::string {
    default_generator() = seed_state;  // random ops draw what the reference drew
    std::vector<Tensor> outs;
    try {
      // Compiling is the child's setup step: a cold kernel cache must not make a graph look like a hang, so
      // only the run counts against `timeout_s` (docs/minifier.md, Time limits).
      if (compile) (*compile)(g);
      isolated_run_starts();
      outs = run_backend(g, detached_clones(inputs));
    } catch (const Error& e) {
      return encode_backend_error(e);
    }
    std::vector<Tensor> expected;
    for (size_t i = 0; i < outs.size(); ++i) expected.push_back(to(reference[i], outs[i].dtype()));
    CompareOptions opts;
    opts.tol = tolerance;
    CompareVerdict v = compare_outputs(expected, outs, reference, opts);
    return encode_failure(v.ok ? FailureSignature{} : FailureSignature{"accuracy", v.str()});
  }, timeout_s, setup_limit_for(timeout_s));
  switch (r.kind) {
    case IsolatedResult::Kind::Crash: return {"crash", r.payload};
    case IsolatedResult::Kind::Hang: return {"hang", r.payload};
    case IsolatedResult::Kind::Error: return {"runtime_error", r.payload};
    case IsolatedResult::Kind::Ok: break;
  }
  return decode_failure(r.payload);
}

ReproOutcome reproduce(const ReproFile& r, const std::string& repro_path, double timeout_s) {
  // The recorded configuration applies to this run only; afterwards each option is back to what it was
  // (an override the caller had set included: in-process callers such as the minifier rely on it).
  AppliedReproConfig applied(r);
  ReproOutcome out;
  std::vector<Tensor> inputs = repro_inputs(r, repro_path);
  out.observed = classify_run(r.graph, inputs, r.backend, r.tolerance, timeout_s);
  out.reproduces = same_failure(r.expected, out.observed);
  return out;
}

}  // namespace kiln
