// The fuzzer's only calls into the failure layer (repro/ and minifier/); see check.h. A job runs and is judged by
// the repro oracle's building blocks (repro/oracle.h: compile, run, compare), batched several to a child.
#include "fuzz/check.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "api/backends.h"
#include "bisect/bisect.h"
#include "core/bisect.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "minifier/inject_backend.h"
#include "minifier/minifier.h"
#include "ops/api.h"
#include "ops/op_info.h"
#include "repro/isolate.h"
#include "repro/oracle.h"
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

// The oracle that judges the jobs: the backend, the comparator's tolerance (strict: integer and bool outputs
// are compared too) and the time limit. The baselines are the jobs' own (eager and reference).
FailureOracle oracle_of(const CheckOptions& opts) {
  OracleOptions o;
  o.backend = opts.backend;
  o.tolerance = opts.tolerance;
  o.timeout_s = opts.timeout_s;
  return FailureOracle(o);
}

// Runs one job in the calling (child) process, with the program its compile step made (else the backend
// compiles it): the encoded FailureSignature.
std::string run_job(const CheckJob& job, const FailureOracle& oracle, const GraphProgram& program) {
  AppliedConfig config(job.config);
  manual_seed(job.random_seed);
  std::vector<Tensor> outs;
  try {
    outs = oracle.run(*job.graph, program, graph::copy_inputs(*job.inputs));
  } catch (const Error& e) {
    return encode_failure(failure_of_exception(e));
  }
  return encode_failure(oracle.compare(*job.graph, outs, ComparisonBaselines{*job.eager, *job.reference}));
}

}  // namespace

int batch_size(const CheckOptions& opts) {
  if (opts.batch > 0) return opts.batch;
  return oracle_of(opts).has_compile_step() ? 8 : 64;
}

namespace {

// The body of a child checking jobs [start, end): first compiles every graph (the setup step, with the
// generous compile limit, isolate.h), then runs them (the timed step): the verdicts, separated.
std::string run_jobs(const std::vector<CheckJob>& jobs, const CheckOptions& opts, size_t start, size_t end) {
  quiet_child();
  const FailureOracle oracle = oracle_of(opts);
  std::string out;
  // The runs call the programs the compile step made: each graph compiles once, also where the backend bypasses
  // its graph cache (under KILN_BISECT_*, core/bisect.h).
  std::vector<GraphProgram> programs(end - start);
  compile_step_then_run([&] {
    if (oracle.has_compile_step())
      for (size_t i = start; i < end; ++i) {
        AppliedConfig config(jobs[i].config);
        try {
          programs[i - start] = oracle.compile(*jobs[i].graph);
        } catch (const Error&) {  // a compile error shows again when the job runs (the backend compiles it)
        }
      }
  }, [&] {
    isolated_run_starts();
    for (size_t i = start; i < end; ++i) out += run_job(jobs[i], oracle, programs[i - start]) + kSeparator;
  });
  return out;
}

}  // namespace

std::vector<FailureSignature> check_isolated(const std::vector<CheckJob>& jobs, const CheckOptions& opts) {
  oracle_of(opts);  // an unknown backend (or a bad tolerance or time limit) is the caller's error, not a finding
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
    f.inputs = std::move(r.inputs);
    f.failure = r.failure.failed() ? r.failure : r.original;
    f.minimized = r.reverified;
    if (!r.reverified) f.note = "the minified repro did not re-verify: " + r.reverify_message;
    return f;
  } catch (const Error& e) {
    f.note = e.what();
  }
  f.graph = *job.graph;
  f.inputs = *job.inputs;
  f.failure = observed;
  minify::write_repro_with_inputs(*job.graph, *job.inputs, opts.backend,
                                  observed, o.config,
                                  opts.tolerance, path);
  return f;
}

std::string op_of_site_info(const std::string& site_info) {
  const size_t eq = site_info.find(" = ");
  if (eq == std::string::npos) return "";
  const size_t start = eq + 3, end = site_info.find_first_of(" (", start);
  std::string op = site_info.substr(start, end == std::string::npos ? std::string::npos : end - start);
  return find_op(op) ? op : "";
}

std::string RootCause::str() const {
  if (!explained()) return stage.empty() ? outcome : fmt::format("{} (stage {})", outcome, stage);
  return fmt::format("{}{} (stage {})", site, op.empty() ? "" : " of " + op, stage);
}

namespace {

// Its stderr to /dev/null while alive, unless KILN_LOGS asks for logs (quiet_child's rule for this process: the
// bisector's children inherit it).
struct QuietStderr {
  QuietStderr() {
    if (!opt_list(Opt::Logs).empty()) return;
    std::fflush(stderr);
    saved = dup(STDERR_FILENO);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO), close(null);
  }
  ~QuietStderr() {
    if (saved < 0) return;
    std::fflush(stderr);
    dup2(saved, STDERR_FILENO), close(saved);
  }
  int saved = -1;
};

// The debug info of application `index` of `site` ("stage:subsystem") when `g` compiles under `setting` (NAME=VALUE,
// the bisector's failing configuration), read from a compile in a forked child: the bisector reads it from a run,
// which a crash ends before it reports ("" when the backend has no compile step or the child fails).
std::string site_info_of_compile(const graph::Graph& g, const std::string& backend, const std::string& site,
                                 int64_t index, const std::string& setting, double timeout_s) {
  std::optional<BackendCompileFn> compile = find_backend_compiler(backend);
  const size_t colon = site.find(':'), eq = setting.find('=');
  if (!compile || colon == std::string::npos || index < 0) return "";
  IsolatedResult r = run_isolated([&] {
    std::optional<ScopedOption> bad;  // also makes the backend bypass its graph cache, so the sites are asked
    if (eq != std::string::npos)
      if (std::optional<Opt> id = find_option(setting.substr(0, eq))) bad.emplace(*id, setting.substr(eq + 1));
    reset_bisect_counts();
    watch_bisect_site(site.substr(0, colon), site.substr(colon + 1), index);
    (*compile)(g);
    return watched_bisect_site();
  }, timeout_s, setup_limit_for(timeout_s));
  return r.kind == FailureKind::None ? r.payload : "";
}

}  // namespace

RootCause bisect_finding(const graph::Graph& g, const std::vector<Tensor>& inputs, const FailureSignature& failure,
                         const CheckJob& job, const CheckOptions& opts) {
  std::map<std::string, std::string> config;
  for (const auto& [name, value] : job.config)
    if (name.rfind("KILN_BISECT_", 0) != 0) config[name] = value;
  AppliedConfig applied(config);
  manual_seed(job.random_seed);
  bisect::BisectOptions o;
  o.backend = opts.backend;
  o.want = failure.kind == FailureKind::Accuracy ? bisect::Want::Accuracy : bisect::Want::Error;
  o.tolerance = opts.tolerance;
  o.timeout_s = opts.timeout_s;
  bisect::BisectReport r;
  RootCause c;
  try {
    QuietStderr quiet;
    r = bisect::bisect_graph(g, inputs, o, RunLine{});  // the lines are not printed: only the cause is kept
  } catch (const Error& e) {
    // The ladder cannot judge this finding (a KILN_INJECT kind its rungs reject, such as inject_test's hang):
    // the finding is bucketed by its signature, as one the bisector does not explain.
    c.outcome = "not bisected";
    return c;
  }
  c.outcome = std::string(bisect::outcome_name(r.outcome));
  c.stage = r.stage;
  if (r.outcome == bisect::BisectReport::Outcome::Bisected && r.culprit) {
    c.site = r.culprit->site;
    std::string info = r.culprit->site_info;
    if (info.empty() && !r.culprit->is_flip)
      info = site_info_of_compile(g, opts.backend, c.site, r.culprit->application, r.culprit->bad_setting,
                                  opts.timeout_s);
    c.op = op_of_site_info(info);
    if (c.op.empty()) c.op = op_of_site_info(r.culprit->location);
  }
  return c;
}

}  // namespace kiln::fuzz
