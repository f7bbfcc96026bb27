// `kiln bench`: benchmark tracking for graphs. Each graph is timed compiled (on a backend) and on the eager
// interpreter, beside a copy of the same bytes (the memory-bandwidth baseline kiln-bench uses), with cold caches
// (every byte the run touches flushed first) and warm ones, `repetitions` samples per case. Results are Google
// Benchmark JSON (so its tools read them), are compared with a baseline by the Mann-Whitney rank test over the
// samples (as Google Benchmark's compare.py does: noise is not a regression), and can be appended to a history
// file that `kiln bench report` draws as one self-contained HTML page. Each graph is first run once compiled in a
// forked child (repro/isolate.h): one that crashes, hangs or fails there is reported and not timed, and the other
// graphs are timed as usual (in this process, so compiled code keeps its threads). Only compiled cases are judged
// against a baseline: eager and copy are the references the compiled figures are read against.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gate/judge.h"
#include "gate/rank_test.h"

namespace kiln::gate {

struct BenchConfig {
  std::string backend = "inductor";
  int repetitions = 10;
  uint64_t seed = 0;
  bool cold = true, warm = true;  // which cache regimes to time
  double min_sample_ms = 5;       // a sample repeats the call until it lasts at least this long
  std::string inputs_dir;         // inputs: one .npy per graph input here (one graph only), else from `seed`
  double timeout_s = 60;          // the isolated first run's limit after compiling (a longer one is a hang)
  std::function<void(const std::string&)> progress;  // one line per graph checked and per case timed, when set
};

// One benchmark: "<graph>/<compiled|eager|copy>/<cold|warm>", its samples (ms per call, one per repetition):
// wall-clock time, and the CPU time of the whole process (all its threads) over the same calls.
struct BenchCase {
  std::string name;
  std::vector<double> samples_ms;
  std::vector<double> cpu_samples_ms;
  int64_t iterations = 1;  // calls per sample
  int64_t bytes = 0;       // bytes the graph reads and writes (inputs + outputs)
};

// A graph that could not be timed: its isolated first run compiled, ran or compared badly.
struct BenchFailure {
  std::string graph;  // the case prefix (the file's stem)
  std::string kind;   // failure_kind_name: compile_error, runtime_error, crash, hang
  std::string message;
};

struct BenchRun {
  std::string date, kiln_version, git_hash, backend;
  Machine machine;
  std::vector<BenchCase> cases;
  std::vector<BenchFailure> failures;
  const BenchCase* find(const std::string& name) const;
};

// Whether a case is judged against a baseline (and marked in the report): the compiled ones. "eager" and "copy"
// are references, shown beside them.
bool is_gated_case(const std::string& name);

// `after_graph` is called with the run so far after each graph (timed or failed): `kiln bench` rewrites its JSON
// then, so a run killed at a CI timeout keeps what it measured.
BenchRun run_benchmarks(const std::vector<std::string>& graph_files, const BenchConfig& config,
                        const std::function<void(const BenchRun&)>& after_graph = nullptr);

// Google Benchmark's JSON: "context" and "benchmarks" (one "iteration" entry per sample, then mean, median,
// stddev and cv aggregates), real_time in ms; a failed graph is one entry "<stem>/compiled" with Google
// Benchmark's "error_occurred" and "error_message" (and "error_kind").
nlohmann::json google_benchmark_json(const BenchRun& run);
// Reads the samples back from such a file (this tool's, or Google Benchmark's own with repetitions).
BenchRun bench_run_from_json(const nlohmann::json& j, const std::string& where);
BenchRun load_bench_json(const std::string& path);

struct CaseComparison {
  std::string name;
  double before_ms = 0, now_ms = 0;  // medians
  RankTest test;
  std::string verdict;  // "same" (within noise), "faster", "SLOWER", "new", "missing", "FAILED" (no figure now)
  bool gated = false;   // a compiled case: SLOWER and FAILED are regressions; for references they are shown only
  bool regression() const { return gated && (verdict == "SLOWER" || verdict == "FAILED"); }
};
// Compares the wall-clock samples, or with `cpu_time` the CPU-time samples: those move far less with other
// processes' load on the machine, but do not see a loss of parallelism (use them with one thread).
std::vector<CaseComparison> compare_runs(const BenchRun& before, const BenchRun& now, double tolerance, double alpha,
                                         bool cpu_time = false);

// Each run as one JSON line (date, commit, machine, every case's samples); appended atomically.
void append_history(const std::string& path, const BenchRun& run);
std::vector<BenchRun> load_history(const std::string& path);
// The machines of `history`, in the order of their first run.
std::vector<Machine> machines_of(const std::vector<BenchRun>& history);
// One HTML page, no scripts or external files: per machine (runs of several machines are never compared), a plot
// per case of its median over that machine's runs, with the spread of its samples, regressions (slower than the
// machine's run before, by the rank test) marked in red.
std::string history_html(const std::vector<BenchRun>& history, double tolerance, double alpha);

}  // namespace kiln::gate
