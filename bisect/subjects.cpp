// The bisector's subjects (bisect.h): a graph on a backend, a user's shell command, a C++ function; each trial
// in a forked child (repro/isolate.h), so a crash or a hang is a verdict, reported back as a JSON payload.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "api/backends.h"
#include "bisect/bisect.h"
#include "eager/philox.h"
#include "bisect/nodes.h"
#include "core/escape.h"
#include "core/bisect.h"
#include "core/escape.h"
#include "core/options.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "repro/isolate.h"
#include "repro/oracle.h"
#include "repro/training.h"

namespace kiln::bisect {
namespace {

// ---- the child's report ----

std::string payload(const FailureSignature& f, const std::map<std::string, int64_t>& counts, bool counts_known,
                    const std::string& site_info) {
  nlohmann::json j;
  // The failure's message and the site name the graph's values, which need not be UTF-8 (json's dump refuses it).
  j["failure"] = utf8_lossless(encode_failure(f));
  j["counts"] = counts;
  j["counts_known"] = counts_known;
  j["site"] = utf8_lossless(site_info);
  return j.dump();
}

TrialResult decode(const IsolatedResult& r) {
  TrialResult t;
  if (r.kind != FailureKind::None) {
    t.failure = classify(r);
    return t;
  }
  nlohmann::json j = nlohmann::json::parse(r.payload);
  t.failure = decode_failure(j["failure"].get<std::string>());
  t.counts = j["counts"].get<std::map<std::string, int64_t>>();
  t.counts_known = j["counts_known"].get<bool>();
  t.site_info = j["site"].get<std::string>();
  return t;
}

std::map<std::string, int64_t> hook_counts() {
  std::map<std::string, int64_t> out;
  for (const auto& [site, n] : bisect_counts()) out[site.first + ":" + site.second] = n;
  return out;
}

// In a child: the trial's settings as option overrides (and its backend as KILN_BACKEND when `backend_option`),
// the counters reset and the watched site set.
std::vector<std::unique_ptr<ScopedOption>> apply_in_child(const Trial& t, bool backend_option) {
  std::vector<std::unique_ptr<ScopedOption>> applied;
  for (const auto& [name, value] : t.settings) {
    std::optional<Opt> opt = find_option(name);
    KILN_CHECK(opt, "the bisector set an unknown option {}", name);
    applied.push_back(std::make_unique<ScopedOption>(*opt, value));
  }
  if (backend_option && !t.backend.empty()) applied.push_back(std::make_unique<ScopedOption>(Opt::Backend, t.backend));
  reset_bisect_counts();
  if (t.watch_index >= 0) {
    size_t colon = t.watch_site.find(':');
    watch_bisect_site(t.watch_site.substr(0, colon), t.watch_site.substr(colon + 1), t.watch_index);
  }
  return applied;
}

// The trial's settings as an environment prefix over those in effect (repro/command.h).
std::string env_prefix(const Trial& t) { return environment_prefix(t.settings); }

// ---- a graph ----

class GraphSubject : public Subject {
 public:
  GraphSubject(const graph::Graph& g, const std::vector<Tensor>& inputs, const BisectOptions& o, RunLine rerun)
      : g_(g), inputs_(inputs), o_(o), rerun_(std::move(rerun)), seed_(default_generator()), training_(trains(g)) {
    try {  // a graph with `grad` inputs is judged on its outputs and gradients (repro/training.h)
      ref_ = oracle_for("eager").baselines(g, inputs);
    } catch (const Error& e) {
      fail("the fp64 reference{} run of this graph fails, so it cannot show a backend bug: {}",
           training_ ? " training" : "", e.what());
    }
  }

  TrialResult run(const Trial& t) override {
    const FailureOracle oracle = oracle_for(t.backend);
    IsolatedResult r = run_isolated([&] {
      auto applied = apply_in_child(t, false);
      std::vector<Tensor> outs;
      std::optional<FailureSignature> error = oracle.run_backend(g_, graph::copy_inputs(inputs_), false, outs);
      FailureSignature f = error ? *error : oracle.compare(g_, outs, ref_);
      return payload(f, hook_counts(), true, watched_bisect_site());
    }, o_.timeout_s, oracle.setup_limit_s());
    return decode(r);
  }

  std::string command_for(const Trial& t) const override {
    RunLine line = rerun_;
    line.backend = t.backend;
    line.tolerance = o_.tolerance;
    line.gradients = training_;
    line.settings = t.settings;
    return reproduce_command(line);
  }

  std::string locate(const std::string& site_info) const override { return locate_site(g_, site_info); }

 private:
  const graph::Graph& g_;
  const std::vector<Tensor>& inputs_;
  BisectOptions o_;
  RunLine rerun_;
  GeneratorState seed_;
  bool training_;
  ComparisonBaselines ref_;

  // The failure layer's oracle on `backend` with the bisector's tolerance, time limit and random state.
  FailureOracle oracle_for(const std::string& backend) const {
    OracleOptions oo;
    oo.backend = backend;
    oo.tolerance = o_.tolerance;
    oo.timeout_s = o_.timeout_s;
    oo.seed_state = seed_;
    oo.gradients = training_;
    return FailureOracle(oo);
  }
};

// ---- a shell command ----

// Counts and the watched site's debug info from the `bisect` log lines in a command's stderr:
// "[kiln:bisect] stage:subsystem #N (stage #M): run: <debug info>".
void read_bisect_log(const std::string& text, const Trial& t, TrialResult& out) {
  std::istringstream in(text);
  const std::string tag = "[kiln:bisect] ";
  for (std::string line; std::getline(in, line);) {
    size_t at = line.find(tag);
    if (at == std::string::npos) continue;
    std::string rest = line.substr(at + tag.size());
    size_t hash = rest.find(" #");
    if (hash == std::string::npos) continue;
    std::string site = rest.substr(0, hash);
    int64_t n = std::atoll(rest.c_str() + hash + 2);
    out.counts[site] = std::max(out.counts[site], n + 1);
    out.counts_known = true;
    if (site == t.watch_site && n == t.watch_index) {
      size_t info = rest.find(": ", rest.find("): ") + 3);
      if (info != std::string::npos) out.site_info = rest.substr(info + 2);
    }
  }
}

class CommandSubject : public Subject {
 public:
  CommandSubject(std::string command, const BisectOptions& o) : command_(std::move(command)), o_(o) {}

  TrialResult run(const Trial& t) override {
    IsolatedResult r = run_isolated([&] {
      for (const auto& [k, v] : t.settings) setenv(k.c_str(), v.c_str(), 1);
      if (!t.backend.empty()) setenv("KILN_BACKEND", t.backend.c_str(), 1);
      const char* logs = std::getenv("KILN_LOGS");
      std::string with_bisect = logs && *logs ? std::string(logs) + ",bisect" : "bisect";
      setenv("KILN_LOGS", with_bisect.c_str(), 1);
      std::string line = "(" + command_ + ") 2>&1 >/dev/null";
      FILE* p = popen(line.c_str(), "r");
      KILN_CHECK(p, "could not start the command: {}", command_);
      std::string err;
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) err.append(buf, n);
      int status = pclose(p);
      TrialResult res;
      read_bisect_log(err, t, res);
      FailureSignature f;
      if (WIFSIGNALED(status)) f = {FailureKind::Crash, fmt::format("the command was killed by signal {}", WTERMSIG(status))};
      else if (WEXITSTATUS(status) != 0) f = {FailureKind::RuntimeError, fmt::format("the command exited with status {}", WEXITSTATUS(status))};
      return payload(f, res.counts, res.counts_known, res.site_info);
    }, o_.timeout_s);
    return decode(r);
  }

  std::string command_for(const Trial& t) const override {
    std::string backend = t.backend.empty() ? "" : "KILN_BACKEND=" + shell_quote(t.backend) + " ";
    return fmt::format("{}{}sh -c {}", env_prefix(t), backend, shell_quote(command_));
  }

 private:
  std::string command_;
  BisectOptions o_;
};

// ---- a C++ function ----

class FunctionSubject : public Subject {
 public:
  FunctionSubject(std::function<bool()> good, const BisectOptions& o) : good_(std::move(good)), o_(o) {}

  TrialResult run(const Trial& t) override {
    IsolatedResult r = run_isolated([&] {
      auto applied = apply_in_child(t, true);
      FailureSignature f;
      try {
        if (!good_()) f = {FailureKind::Accuracy, "the function reported a bad result"};
      } catch (const std::exception& e) {
        f = failure_of_exception(e);
      }
      return payload(f, hook_counts(), true, watched_bisect_site());
    }, o_.timeout_s);
    return decode(r);
  }

  std::string command_for(const Trial& t) const override {
    std::string backend = t.backend.empty() ? "" : "KILN_BACKEND=" + shell_quote(t.backend) + " ";
    return fmt::format("{}{}<your program>", env_prefix(t), backend);
  }

 private:
  std::function<bool()> good_;
  BisectOptions o_;
};

}  // namespace

BisectReport bisect_graph(const graph::Graph& g, const std::vector<Tensor>& inputs, const BisectOptions& o,
                          const RunLine& rerun) {
  KILN_CHECK(!o.backend.empty(), "kiln bisect: name the backend to bisect with --backend");
  const auto start = std::chrono::steady_clock::now();
  GraphSubject subject(g, inputs, o, rerun);
  BisectReport r = search(subject, o);
  if (r.outcome == BisectReport::Outcome::Bisected || r.outcome == BisectReport::Outcome::Unexplained)
    find_divergence(g, inputs, r, o);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();  // with the node step
  return r;
}

BisectReport bisect_command(const std::string& command, const BisectOptions& o) {
  KILN_CHECK(!command.empty(), "kiln bisect --cmd: the command is empty");
  CommandSubject subject(command, o);
  BisectReport r = search(subject, o);
  if (r.failed()) r.divergence_note = "a command's values are not visible to kiln: bisect its graph for the node";
  return r;
}

BisectReport bisect_function(const std::function<bool()>& good, const BisectOptions& o) {
  FunctionSubject subject(good, o);
  BisectReport r = search(subject, o);
  if (r.failed()) r.divergence_note = "a function's values are not visible to the bisector: bisect its graph for the node";
  return r;
}

}  // namespace kiln::bisect
