// The fuzzer's only calls into the failure layer (repro/ and minifier/); see check.h.
#include "fuzz/check.h"

#include <fcntl.h>
#include <unistd.h>

#include <memory>

#include "api/backends.h"
#include "core/bisect.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "minifier/inject_backend.h"
#include "minifier/minifier.h"
#include "ops/api.h"
#include "repro/isolate.h"
#include "repro/repro.h"

namespace kiln::fuzz {
namespace {

constexpr char kSeparator = '\x1e';  // between the verdicts of one batch

// The options of a job, set for the lifetime of the object.
struct AppliedConfig {
  explicit AppliedConfig(const std::map<std::string, std::string>& config) {
    for (const auto& [name, value] : config)
      if (std::optional<Opt> id = find_option(name)) applied.push_back(std::make_unique<ScopedOption>(*id, value));
  }
  std::vector<std::unique_ptr<ScopedOption>> applied;
};

// In a child: its stderr goes to /dev/null unless KILN_LOGS asks for logs (a bisection variant's "changed
// nothing" warning, say, is not news in a fuzzing run).
void quiet_child() {
  if (!opt_list(Opt::Logs).empty()) return;
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0) dup2(null, STDERR_FILENO), close(null);
}

// Runs one job in the calling (child) process, with the program its compile step made (else the backend
// compiles it): the encoded FailureSignature.
std::string run_job(const CheckJob& job, const CheckOptions& opts, const GraphProgram& program) {
  AppliedConfig config(job.config);
  manual_seed(job.random_seed);
  std::vector<Tensor> outs;
  try {
    outs = program ? program(graph::copy_inputs(*job.inputs))
                   : find_backend(opts.backend)(*job.graph, graph::copy_inputs(*job.inputs));
  } catch (const Error& e) {
    return encode_failure(failure_of_exception(e));
  }
  CompareOptions co;
  co.tol = opts.tolerance;
  CompareVerdict v = compare_outputs(*job.eager, outs, *job.reference, co);
  return encode_failure(v.ok ? FailureSignature{} : FailureSignature{FailureKind::Accuracy, v.str()});
}

}  // namespace

int batch_size(const CheckOptions& opts) {
  if (opts.batch > 0) return opts.batch;
  return find_backend_compiler(opts.backend) ? 8 : 64;
}

namespace {

// The body of a child checking jobs [start, end): first compiles every graph (the setup step, with the
// generous compile limit, isolate.h), then runs them (the timed step): the verdicts, separated.
std::string run_jobs(const std::vector<CheckJob>& jobs, const CheckOptions& opts, size_t start, size_t end) {
  quiet_child();
  std::string out;
  // The runs call the programs the compile step made: each graph compiles once, also where the backend bypasses
  // its graph cache (under KILN_BISECT_*, core/bisect.h).
  std::vector<GraphProgram> programs(end - start);
  compile_step_then_run([&] {
    if (const BackendCompileFn* compile = find_backend_compiler(opts.backend))
      for (size_t i = start; i < end; ++i) {
        AppliedConfig config(jobs[i].config);
        try {
          programs[i - start] = (*compile)(*jobs[i].graph);
        } catch (const Error&) {  // a compile error shows again when the job runs (the backend compiles it)
        }
      }
  }, [&] {
    isolated_run_starts();
    for (size_t i = start; i < end; ++i) out += run_job(jobs[i], opts, programs[i - start]) + kSeparator;
  });
  return out;
}

}  // namespace

std::vector<FailureSignature> check_isolated(const std::vector<CheckJob>& jobs, const CheckOptions& opts) {
  find_backend(opts.backend);  // an unknown backend is the caller's error, not a finding
  std::vector<std::function<std::string()>> bodies;
  std::vector<std::pair<size_t, size_t>> ranges;
  const size_t batch = size_t(batch_size(opts));
  for (size_t start = 0; start < jobs.size(); start += batch) {
    size_t end = std::min(jobs.size(), start + batch);
    ranges.emplace_back(start, end);
    bodies.push_back([&jobs, &opts, start, end] { return run_jobs(jobs, opts, start, end); });
  }
  // A batch's runs get about one job's time limit: a batch that runs out is not a finding; its jobs are then
  // checked one per child, each with its own limit.
  const double setup = setup_limit_for(opts.timeout_s);
  std::vector<IsolatedResult> results = run_isolated_many(bodies, opts.jobs, 2 * opts.timeout_s, setup);
  std::vector<FailureSignature> verdicts(jobs.size());
  for (size_t b = 0; b < results.size(); ++b) {
    auto [start, end] = ranges[b];
    if (results[b].kind == FailureKind::None) {
      const std::string& text = results[b].payload;
      size_t pos = 0;
      for (size_t i = start; i < end; ++i) {
        size_t sep = text.find(kSeparator, pos);
        verdicts[i] = (decode_failure(text.substr(pos, sep - pos)));
        pos = sep == std::string::npos ? text.size() : sep + 1;
      }
      continue;
    }
    for (size_t i = start; i < end; ++i)  // the batch crashed or ran out of time: which job was it?
      verdicts[i] = classify(
          run_isolated([&jobs, &opts, i] { return run_jobs(jobs, opts, i, i + 1); }, opts.timeout_s, setup));
  }
  return verdicts;
}

void register_test_backends() { minify::register_inject_test_backend(); }

MinifiedFinding minify_finding(const CheckJob& job, const FailureSignature& observed, const CheckOptions& opts,
                               const std::string& path) {
  AppliedConfig config(job.config);
  manual_seed(job.random_seed);
  minify::MinifyOptions o;
  o.backend = opts.backend;
  o.accuracy = observed.kind == FailureKind::Accuracy;
  o.jobs = opts.jobs;
  o.timeout_s = opts.timeout_s;
  o.tolerance = opts.tolerance;
  o.output = path;
  o.config = minify::current_config();
  MinifiedFinding f;
  try {
    minify::MinifyResult r = minify::minify(*job.graph, *job.inputs, o);
    f.graph = std::move(r.graph);
    f.failure = r.failure.failed() ? r.failure : r.original;
    f.minimized = r.reverified;
    if (!r.reverified) f.note = "the minified repro did not re-verify: " + r.reverify_message;
    return f;
  } catch (const Error& e) {
    f.note = e.what();
  }
  f.graph = *job.graph;
  f.failure = observed;
  minify::write_repro_with_inputs(*job.graph, *job.inputs, opts.backend,
                                  observed, o.config,
                                  opts.tolerance, path);
  return f;
}

}  // namespace kiln::fuzz
