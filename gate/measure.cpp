// Entry measurement in isolated children (see measure.h). The child sends its Measurement back as JSON.
#include "gate/measure.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <variant>

#include "api/backends.h"
#include "gate/rank_test.h"
#include "core/device.h"
#include "core/escape.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "ops/api.h"
#include "repro/isolate.h"
#include "repro/oracle.h"
#include "repro/reproduce.h"
#include "repro/training.h"

namespace kiln::gate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Measurement failure(std::string status, std::string message) {
  Measurement m;
  m.status = std::move(status);
  m.message = std::move(message);
  return m;
}

// A failed entry's status is its failure kind's name (invalid: the entry cannot be checked).
Measurement failure(FailureKind kind, std::string message) {
  return failure(std::string(failure_kind_name(kind)), std::move(message));
}

// A call-time sample repeats the call until it lasts this long: single calls of small graphs take microseconds,
// where the timer's and the scheduler's noise would decide.
constexpr double kMinSampleMs = 5;

// A fresh directory for this child's kernel cache, removed when the measurement ends: compile times are cold.
struct TemporaryCacheDir {
  std::string path;
  TemporaryCacheDir() {
    std::string pattern = (fs::temp_directory_path() / "kiln-gate-cache-XXXXXX").string();
    KILN_CHECK(mkdtemp(pattern.data()) != nullptr, "cannot create a temporary kernel cache directory in {}",
               fs::temp_directory_path().string());
    path = pattern;
  }
  ~TemporaryCacheDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// One cold compile of `g`, in a child of its own with an empty kernel cache: what a fresh CI machine pays.
// Returns its milliseconds, or a failure Measurement when the child did not finish.
std::variant<double, Measurement> cold_compile_ms(const BackendCompileFn& compile, const graph::Graph& g,
                                                  double timeout_s) {
  IsolatedResult r = run_isolated([&] {
    TemporaryCacheDir cache;
    ScopedOption cold_cache(Opt::CacheDir, cache.path);
    const double t0 = process_cpu_ms();
    compile(g);
    return fmt::format("{}", process_cpu_ms() - t0);
  }, timeout_s);
  if (r.kind == FailureKind::None) return std::stod(r.payload);
  return failure(r.kind == FailureKind::Hang ? FailureKind::Hang : FailureKind::CompileError,
                 "a cold compile failed after the checked run passed: " + r.payload);
}

// Times a graph that passed: `repetitions` cold compiles, then one warm-up call (its peak allocation beyond
// the inputs is the entry's peak bytes) and `repetitions` samples of calls. Times are CPU time of the child
// (it computes on one thread, repro/isolate.h), which other jobs on a shared CI runner barely move.
void time_graph(const graph::Graph& g, const std::vector<Tensor>& inputs, uint64_t seed, const RunConfig& c,
                Measurement& m) {
  if (std::optional<BackendCompileFn> compile = find_backend_compiler(c.backend))
    for (int r = 0; r < c.repetitions; ++r) {
      auto ms = cold_compile_ms(*compile, g, c.timeout_s);
      if (auto* failed = std::get_if<Measurement>(&ms)) {
        m = *failed;
        return;
      }
      m.compile_ms.push_back(std::get<double>(ms));
    }
  const BackendFn& run = find_backend(c.backend);
  auto call = [&] {
    std::vector<Tensor> args = graph::copy_inputs(inputs);
    manual_seed(seed);
    return run(g, args);
  };
  // The warm-up call (it compiles, or finds the program in the kernel cache) gives the peak allocation; the
  // next one how many calls make a sample last kMinSampleMs.
  int64_t before = Storage::live_bytes();
  Storage::reset_peak_bytes();
  call();
  m.peak_bytes = Storage::peak_bytes() - before;
  const double w0 = process_cpu_ms();
  call();
  const double one_ms = process_cpu_ms() - w0;
  const int calls = int(std::clamp(std::ceil(kMinSampleMs / std::max(one_ms, 1e-3)), 1.0, 10000.0));
  for (int r = 0; r < c.repetitions; ++r) {
    const double t0 = process_cpu_ms();
    for (int i = 0; i < calls; ++i) call();
    m.run_ms.push_back((process_cpu_ms() - t0) / calls);
  }
}

Measurement measure_graph(const Entry& e, const RunConfig& c) {
  Measurement m;
  graph::Graph g;
  std::vector<Tensor> inputs;
  try {
    g = graph::load_graph(e.path);
    graph::verify_graph(g, e.path);
    inputs = e.inputs_dir.empty() ? graph::seeded_inputs(g, e.seed) : graph::load_inputs(g, e.inputs_dir);
  } catch (const Error& err) {
    return failure(FailureKind::Invalid, err.what());
  }
  manual_seed(e.seed);
  // Gradients: the entry's "grad", else --grad for every graph that trains.
  if (e.gradients.value_or(false) && !trains(g))
    return failure(FailureKind::Invalid, fmt::format("{}: \"grad\": true needs inputs marked `grad` (e.g. `%w: "
                                                     "f32[4] grad`); graph {} has none", e.name, g.name));
  m.gradients = e.gradients.value_or(c.gradients) && trains(g);
  FailureSignature f;
  try {
    OracleOptions o;
    o.backend = c.backend;
    o.gradients = m.gradients;
    o.tolerance = e.tolerance.value_or(c.tolerance);
    o.timeout_s = e.timeout_s.value_or(c.timeout_s);
    f = FailureOracle(o).classify(g, inputs);
  } catch (const Error& err) {  // the fp64 reference fails: the graph cannot show a backend bug
    return failure(FailureKind::Invalid, err.what());
  }
  if (f.failed()) {
    Measurement failed = failure(f.kind, f.message);
    failed.gradients = m.gradients;
    return failed;
  }
  time_graph(g, inputs, e.seed, c, m);
  return m;
}

Measurement measure_repro(const Entry& e, const RunConfig& c) {
  ReproFile r;
  try {
    r = load_repro(e.path);
  } catch (const Error& err) {
    return failure(FailureKind::Invalid, err.what());
  }
  ReproOutcome o;
  try {
    o = reproduce(r, e.path, e.timeout_s.value_or(c.timeout_s));
  } catch (const Error& err) {
    return failure(FailureKind::Invalid, err.what());
  }
  if (!o.observed.failed()) return {};
  std::string how = o.reproduces ? "the recorded failure reproduces" : "it fails differently than recorded";
  return failure(o.observed.kind, fmt::format("{} ({} recorded): {}", how, r.expected.kind, o.observed.message));
}

Measurement from_isolated(const IsolatedResult& r, double timeout_s) {
  switch (r.kind) {
    case FailureKind::Crash: return failure(FailureKind::Crash, "the entry crashed: " + r.payload);
    case FailureKind::Hang: return failure(FailureKind::Hang, fmt::format("no result within {} s", timeout_s));
    case FailureKind::None: break;
    default: return failure(FailureKind::RuntimeError, r.payload);
  }
  try {
    return measurement_from_json(json::parse(r.payload), "child result");
  } catch (const std::exception& e) {
    return failure(FailureKind::Crash, fmt::format("the entry's child sent an unreadable result ({})", e.what()));
  }
}

}  // namespace

json to_json(const Measurement& m) {
  // A message quotes file names and value names, which need not be UTF-8 (nlohmann::json's dump refuses that).
  json j = {{"status", utf8_lossless(m.status)}, {"message", utf8_lossless(m.message)}, {"compile_ms", m.compile_ms},
            {"run_ms", m.run_ms},
            {"seconds", m.seconds}};
  if (m.peak_bytes >= 0) j["peak_bytes"] = m.peak_bytes;
  if (m.gradients) j["check"] = "gradients";
  return j;
}

bool is_status_word(const std::string& status) {
  if (status == "pass" || status == "skipped") return true;
  for (FailureKind k : {FailureKind::CompileError, FailureKind::RuntimeError, FailureKind::Crash, FailureKind::Hang,
                        FailureKind::Accuracy, FailureKind::Invalid})
    if (status == failure_kind_name(k)) return true;
  return false;
}

Measurement measurement_from_json(const json& j, const std::string& where) {
  try {
    Measurement m;
    m.status = j.at("status").get<std::string>();
    m.message = j.value("message", "");
    m.run_ms = j.value("run_ms", std::vector<double>{});
    m.seconds = j.value("seconds", 0.0);
    m.compile_ms = j.value("compile_ms", std::vector<double>{});
    if (j.contains("peak_bytes")) m.peak_bytes = j["peak_bytes"].get<int64_t>();
    m.gradients = j.value("check", "outputs") == "gradients";
    return m;
  } catch (const json::exception& e) {
    fail("{}: malformed entry result ({}); expected {{\"status\": ..., \"run_ms\": [...], ...}}", where, e.what());
  }
}

std::vector<Measurement> measure_suite(const Suite& suite, const RunConfig& config, int jobs,
                                       const std::function<void(size_t, const Measurement&)>& on_entry) {
  std::vector<std::function<std::string()>> bodies;
  std::vector<size_t> run_index;  // entry index of each body
  double longest_timeout = config.timeout_s;
  for (size_t i = 0; i < suite.entries.size(); ++i) {
    const Entry& e = suite.entries[i];
    if (!e.skip_reason.empty()) continue;
    longest_timeout = std::max(longest_timeout, e.timeout_s.value_or(config.timeout_s));
    run_index.push_back(i);
    bodies.push_back([&e, &config] {
      Measurement m = e.kind == EntryKind::Graph ? measure_graph(e, config) : measure_repro(e, config);
      return to_json(m).dump();
    });
  }
  // An entry's own timeout is for its inner runs; the child as a whole gets twice the longest (it also
  // compiles and times a passing graph).
  std::vector<Measurement> out(suite.entries.size());
  for (size_t i = 0; i < suite.entries.size(); ++i)
    if (!suite.entries[i].skip_reason.empty()) {
      out[i] = failure("skipped", suite.entries[i].skip_reason);
      if (on_entry) on_entry(i, out[i]);
    }
  run_isolated_many(bodies, jobs, 2 * longest_timeout, 0, [&](size_t k, const IsolatedResult& r) {
    Measurement m = from_isolated(r, 2 * longest_timeout);
    m.seconds = r.seconds;
    out[run_index[k]] = std::move(m);
    if (on_entry) on_entry(run_index[k], out[run_index[k]]);
  });
  return out;
}

}  // namespace kiln::gate
