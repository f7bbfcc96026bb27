// `kiln bench`: benchmark tracking for graphs. Each graph is timed compiled (on a backend) and on the eager
// interpreter, beside a copy of the same bytes (the memory-bandwidth baseline kiln-bench uses), with cold caches
// (every byte the run touches flushed first) and warm ones, `repetitions` samples per case. Results are Google
// Benchmark JSON (so its tools read them), are compared with a baseline by the Mann-Whitney rank test over the
// samples (as Google Benchmark's compare.py does: noise is not a regression), and can be appended to a history
// file that `kiln bench report` draws as one self-contained HTML page.
#pragma once
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

struct BenchRun {
  std::string date, kiln_version, git_hash, backend;
  Machine machine;
  std::vector<BenchCase> cases;
  const BenchCase* find(const std::string& name) const;
};

BenchRun run_benchmarks(const std::vector<std::string>& graph_files, const BenchConfig& config);

// Google Benchmark's JSON: "context" and "benchmarks" (one "iteration" entry per sample, then mean, median,
// stddev and cv aggregates), real_time in ms.
nlohmann::json google_benchmark_json(const BenchRun& run);
// Reads the samples back from such a file (this tool's, or Google Benchmark's own with repetitions).
BenchRun bench_run_from_json(const nlohmann::json& j, const std::string& where);
BenchRun load_bench_json(const std::string& path);

struct CaseComparison {
  std::string name;
  double before_ms = 0, now_ms = 0;  // medians
  RankTest test;
  std::string verdict;  // "same" (within noise), "faster", "SLOWER" (a regression), "new", "missing"
};
// Compares the wall-clock samples, or with `cpu_time` the CPU-time samples: those move far less with other
// processes' load on the machine, but do not see a loss of parallelism (use them with one thread).
std::vector<CaseComparison> compare_runs(const BenchRun& before, const BenchRun& now, double tolerance, double alpha,
                                         bool cpu_time = false);

// Each run as one JSON line (date, commit, machine, every case's samples); appended atomically.
void append_history(const std::string& path, const BenchRun& run);
std::vector<BenchRun> load_history(const std::string& path);
// One HTML page, no scripts or external files: a plot per case of its median over the runs, with the spread
// of its samples, regressions (slower than the run before, by the rank test) marked in red.
std::string history_html(const std::vector<BenchRun>& history, double tolerance, double alpha);

}  // namespace kiln::gate
