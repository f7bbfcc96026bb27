// fuzz/<backend>/<max nodes>: `kiln fuzz`'s loop (fuzz/fuzzer.h) without minification: graphs generated,
// given inputs (the NaN search), run on the fp64 and eager interpreters, and checked on the backend in forked
// children (8 graphs each, 64 for eager), -j 1. fuzz/eager is the interpreter as the backend (small tensors: at most 16384
// elements a value); fuzz/inductor compiles every graph with an empty kernel cache (KILN_CACHE_DIR pointing at
// a fresh directory each iteration: cold). Counters: graphs_per_s, valid_pct, nan_free_pct, checks (graphs +
// metamorphic variants). Run: kiln-bench --benchmark_filter='fuzz/' --benchmark_format=json
#include <benchmark/benchmark.h>

#include <filesystem>

#include "core/options.h"
#include "fuzz/fuzzer.h"

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

BENCHMARK_CAPTURE(fuzz_bench, eager_10, "eager", 10, 2000, false)->Name("fuzz/eager/10")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(fuzz_bench, eager_3, "eager", 3, 2000, false)->Name("fuzz/eager/3")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(fuzz_bench, inductor_10, "inductor", 10, 100, true)->Name("fuzz/inductor/10")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(fuzz_bench, inductor_3, "inductor", 3, 100, true)->Name("fuzz/inductor/3")->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
