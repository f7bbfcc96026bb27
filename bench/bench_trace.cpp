// The compile trace's cost (docs/observability.md, Cost), as ratios measured in one run:
//   trace/point_off          two trace points (an event with a field and a KILN_LOG line) with KILN_TRACE unset:
//                            the time per iteration is their cost
//   trace/cold_compile/<ex>  a cold compile of each example graph (fresh kernel cache, the JIT's memory cache and the
//                            graph cache off), KILN_TRACE off and on alternately: counters off_ms, on_ms (medians)
//                            and on_vs_off (the target: at most 1.2)
//   trace/report_1000        `kiln trace report`'s work (read, check, draw the page and the Chrome trace) for the
//                            trace of a 1000-node graph's compile (the target: under a second)
//   build/bench/kiln-bench --benchmark_filter='trace/' --benchmark_format=json
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "backends/cpu/jit.h"
#include "core/log.h"
#include "core/options.h"
#include "core/trace.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "trace/report.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

void BM_point_off(benchmark::State& state) {
  reset_option(Opt::Trace);
  int64_t n = 0;
  for (auto _ : state) {
    trace_event("span", {{"name", "x"}});
    KILN_LOG(LogChannel::Fusion, "decision {}", n);
    benchmark::DoNotOptimize(++n);
  }
}

double cold_compile_ms(const graph::Graph& g, const fs::path& cache) {
  set_option(Opt::CacheDir, cache.string());
  runtime::KernelJit::instance().forget_memory_cache();
  CompileOptions opts;
  opts.use_graph_cache = false;
  const auto t0 = std::chrono::steady_clock::now();
  benchmark::DoNotOptimize(compile(g, opts));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  fs::remove_all(cache);
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void cold_compile_case(benchmark::State& state, const std::string& file) {
  const graph::Graph g = graph::load_graph(std::string(KILN_SOURCE_DIR) + "/examples/" + file);
  const fs::path base = fs::temp_directory_path() / fmt::format("kiln-bench-trace-{}", ::getpid());
  compile(g, CompileOptions{});  // the JIT initialised outside the measurement
  std::vector<double> off, on;
  int i = 0;
  for (auto _ : state) {
    reset_option(Opt::Trace);
    off.push_back(cold_compile_ms(g, base / fmt::format("cache{}", i++)));
    set_option(Opt::Trace, (base / "trace").string());
    on.push_back(cold_compile_ms(g, base / fmt::format("cache{}", i++)));
    reset_option(Opt::Trace);
  }
  reset_option(Opt::CacheDir);
  fs::remove_all(base);
  state.counters["off_ms"] = median(off);
  state.counters["on_ms"] = median(on);
  state.counters["on_vs_off"] = median(on) / median(off);
}

std::string chain_text(int n) {
  std::string s = "graph chain1000(%x: f32[1024]) {\n  %v0 = tanh(%x) : f32[1024]\n";
  for (int i = 1; i < n; ++i)
    s += fmt::format("  %v{} = {}(%v{}) : f32[1024]\n", i, i % 3 == 0 ? "tanh" : i % 3 == 1 ? "sigmoid" : "neg", i - 1);
  return s + fmt::format("  return %v{}\n}}\n", n - 1);
}

void BM_report_1000(benchmark::State& state) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("kiln-bench-trace-report-{}", ::getpid());
  fs::remove_all(dir);
  {
    ScopedOption trace(Opt::Trace, (dir / "trace").string());
    compile(graph::parse_graph(chain_text(1000), "chain1000.kir"), CompileOptions{});
  }
  size_t bytes = 0;
  for (auto _ : state) {
    const std::vector<trace::ProcessTrace> traces = trace::read_trace_dir((dir / "trace").string());
    const std::string html = trace::trace_report_html(traces, "trace");
    const std::string chrome = trace::chrome_trace(traces).dump();
    bytes = html.size() + chrome.size();
  }
  state.counters["report_bytes"] = double(bytes);
  fs::remove_all(dir);
}

const bool kRegistered = [] {
  for (const char* ex : {"chain100.kir", "mlp.kir", "softmax.kir", "layernorm.kir", "attention.kir", "conv_block.kir"})
    benchmark::RegisterBenchmark(fmt::format("trace/cold_compile/{}", ex).c_str(),
                                 [ex](benchmark::State& s) { cold_compile_case(s, ex); })
        ->Unit(benchmark::kMillisecond)->Iterations(15);
  return true;
}();

BENCHMARK(BM_point_off)->Name("trace/point_off");
BENCHMARK(BM_report_1000)->Name("trace/report_1000")->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace kiln
