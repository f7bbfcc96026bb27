// fuzz/<backend>/<max nodes>: `kiln fuzz`'s loop (fuzz/fuzzer.h) without minification: graphs generated,
// given inputs (the NaN search), run on the fp64 and eager interpreters, and checked on the backend in forked
// children (8 graphs each, 64 for eager), -j 1. fuzz/eager is the interpreter as the backend (small tensors: at most 16384
// elements a value); fuzz/inductor compiles every graph with an empty kernel cache (KILN_CACHE_DIR pointing at
// a fresh directory each iteration: cold). Counters: graphs_per_s, valid_pct, nan_free_pct, checks (graphs +
// metamorphic variants). fuzz/workers/eager/N: 2000 graphs by N worker processes at once, each `--shard K/N` of
// the seed (graphs_per_s of the whole; the ratio of N=2 to N=1 is the scaling on this machine's cores).
// fuzz/merge/F: `kiln fuzz merge` of 10 summaries holding F findings in all (F/10 buckets), in memory.
// Run: kiln-bench --benchmark_filter='fuzz/' --benchmark_format=json
#include <benchmark/benchmark.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "core/options.h"
#include "fuzz/fuzzer.h"
#include "fuzz/merge.h"

namespace {

using namespace kiln;

void fuzz_bench(benchmark::State& st, const std::string& backend, int max_nodes, uint64_t runs, bool cold) {
  fuzz::FuzzOptions o;
  o.check.backend = backend;
  o.gen.max_nodes = max_nodes;
  o.runs = runs;
  fuzz::FuzzSummary s;
  int iteration = 0;
  for (auto _ : st) {
    std::string cache = (std::filesystem::temp_directory_path() / ("kiln_bench_fuzz_cache_" + std::to_string(iteration++))).string();
    std::filesystem::remove_all(cache);
    std::optional<ScopedOption> cold_cache;
    if (cold) cold_cache.emplace(Opt::CacheDir, cache);
    o.seed = uint64_t(iteration);
    s = fuzz::run_fuzz(o);
    std::filesystem::remove_all(cache);
  }
  st.counters["graphs_per_s"] = double(s.graphs) / s.seconds;
  st.counters["valid_pct"] = 100.0 * double(s.valid) / double(s.graphs);
  st.counters["nan_free_pct"] = 100.0 * double(s.nan_free) / double(std::max<uint64_t>(s.valid, 1));
  st.counters["checks"] = double(s.checks);
  st.counters["findings"] = double(s.findings.size());
}

// `workers` processes, each checking its shard of `runs` graphs; the time until the last one finishes.
void fuzz_workers_bench(benchmark::State& st, int workers) {
  const uint64_t runs = 2000;
  for (auto _ : st) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<pid_t> children;
    for (int k = 1; k <= workers; ++k) {
      pid_t pid = fork();
      if (pid == 0) {
        fuzz::FuzzOptions o;
        o.check.backend = "eager";
        o.gen.max_nodes = 10;
        o.seed = 1;
        o.runs = runs / uint64_t(workers);
        o.shard = {k, workers};
        fuzz::run_fuzz(o);
        _exit(0);
      }
      children.push_back(pid);
    }
    for (pid_t pid : children) waitpid(pid, nullptr, 0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    st.SetIterationTime(seconds);
    st.counters["graphs_per_s"] = double(runs) / seconds;
  }
}

void fuzz_merge_bench(benchmark::State& st) {
  const int findings = int(st.range(0)), parts = 10, buckets = std::max(1, findings / 10);
  std::vector<fuzz::FuzzSummary> summaries(parts);
  std::vector<std::string> where;
  for (int p = 0; p < parts; ++p) {
    summaries[size_t(p)].runs.push_back({"run" + std::to_string(p), "inductor", uint64_t(p), 0, 1000, {1, 1}, 60});
    where.push_back("summary " + std::to_string(p));
  }
  for (int f = 0; f < findings; ++f) {
    fuzz::FindingRecord r;
    r.bucket = "accuracy|inductor|inductor:lowering|op" + std::to_string(f % buckets);
    r.signature = "accuracy:op";
    r.kind = FailureKind::Accuracy;
    r.index = uint64_t(f);
    r.nodes = uint64_t(1 + f % 7);
    r.hits = 3;
    summaries[size_t(f % parts)].findings.push_back(r);
  }
  for (auto _ : st) benchmark::DoNotOptimize(fuzz::merge_summaries(summaries, where).findings.size());
  st.counters["findings"] = findings;
}

BENCHMARK_CAPTURE(fuzz_workers_bench, one, 1)->Name("fuzz/workers/eager/1")->Unit(benchmark::kSecond)->Iterations(1)->UseManualTime();
BENCHMARK_CAPTURE(fuzz_workers_bench, two, 2)->Name("fuzz/workers/eager/2")->Unit(benchmark::kSecond)->Iterations(1)->UseManualTime();
BENCHMARK(fuzz_merge_bench)->Name("fuzz/merge")->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(fuzz_bench, eager_10, "eager", 10, 2000, false)->Name("fuzz/eager/10")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(fuzz_bench, eager_3, "eager", 3, 2000, false)->Name("fuzz/eager/3")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(fuzz_bench, inductor_10, "inductor", 10, 100, true)->Name("fuzz/inductor/10")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(fuzz_bench, inductor_3, "inductor", 3, 100, true)->Name("fuzz/inductor/3")->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
