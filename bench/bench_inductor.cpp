// inductor/* benchmarks: compiled graphs against the eager interpreter and a memory-bandwidth baseline that reads
// the graph's inputs and writes its outputs (bench_util.h CopyBaseline: the faster of a streaming-store pass and,
// when reads and writes are equal, memcpy), all measured in the same run (compiled and baseline alternately,
// fastest of 10 each), every timed run from cold caches (bench_util.h Caches; KILN_BENCH_WARM_CACHES=1: warm).
// Counters: eager_ms, speedup (eager / compiled), GB/s over the bytes that must move (inputs read once, outputs
// written once), copy_GB/s (stream_copy_GB/s and memcpy_GB/s, the two ways), vs_copy and cold_caches; memory
// cases report peak bytes of compiled and eager runs; cases with a slice (the same graph small enough to stay in
// L2) report in_cache_ms, roofline_ms and vs_roofline (run_case). Compile latency: inductor/compile_chain100_cold
// (no kernel cache: a fresh cache directory and an empty in-memory index per iteration),
// inductor/compile_chain100_kernels_cached (every kernel a cache hit, the graph compiled again) and
// inductor/compile_chain100_cached (a graph-level hit).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include <omp.h>

#include "bench_util.h"
#include "core/device.h"
#include "core/options.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "backends/cpu/jit.h"

namespace kiln {
namespace {

graph::Graph parse(const std::string& text) { return graph::parse_graph(text, "bench.kir"); }

std::string chain_text(int ops, int64_t n) {
  static const char* const kOps[] = {"sin", "tanh", "neg", "sigmoid", "cos"};
  std::string s = fmt::format("graph chain(%x: f32[{}]) {{\n", n);
  std::string prev = "%x";
  for (int i = 0; i < ops; ++i) {
    std::string cur = fmt::format("%t{}", i);
    if (i % 3 == 1) s += fmt::format("  {} = mul({}, 0.5) : f32[{}]\n", cur, prev, n);
    else if (i % 3 == 2) s += fmt::format("  {} = add({}, 1.0) : f32[{}]\n", cur, prev, n);
    else s += fmt::format("  {} = {}({}) : f32[{}]\n", cur, kOps[(i / 3) % 5], prev, n);
    prev = cur;
  }
  return s + fmt::format("  return {}\n}}\n", prev);
}

// pointwise10: ten cheap pointwise ops over n f32 (16M: memory-bound when fused).
std::string pointwise10_text(int64_t n) {
  std::string s = fmt::format("graph pointwise10(%x: f32[{}], %y: f32[{}]) {{\n", n, n);
  const char* ops[] = {"add(%x, %y)", "mul(%t0, 0.5)", "sub(%t1, %y)", "relu(%t2)", "mul(%t3, %x)",
                       "add(%t4, 1.0)", "maximum(%t5, %y)", "mul(%t6, 2.0)", "sub(%t7, 0.25)", "abs(%t8)"};
  for (int i = 0; i < 10; ++i) s += fmt::format("  %t{} = {} : f32[{}]\n", i, ops[i], n);
  return s + "  return %t9\n}\n";
}

// Bytes every input read once and every output written once: what must move for the graph to run.
int64_t bytes_of(const graph::Graph& g, const std::vector<graph::ValueId>& ids) {
  int64_t bytes = 0;
  for (graph::ValueId id : ids) bytes += shape_numel(g.value(id).meta.sizes) * dtype_size(g.value(id).meta.dtype);
  return bytes;
}

// The time the case `g` would take if memory were free: `slice`, the same computation small enough that its
// inputs and outputs stay in L2 (1 MB or less), compiled and run on one thread, its fastest run scaled by the
// case's output bytes over the slice's and divided by the threads the case runs on. It errs high: it includes a call's
// fixed cost (1-2 us on the development VM, against the slices' 20-50), and a slice's output, too small for
// streaming stores (docs/inductor.md), is written with ordinary ones that read each line first. It assumes every
// core computes as fast as one alone.
double in_cache_seconds(const graph::Graph& g, const graph::Graph& slice) {
  const double scale = double(bytes_of(g, g.outputs())) / double(bytes_of(slice, slice.outputs()));
  std::vector<Tensor> inputs = graph::seeded_inputs(slice, 0);
  std::shared_ptr<CompiledGraph> c = compile(slice);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  double s = min_seconds_of([&] { (*c)(inputs); }, 200);
  omp_set_num_threads(threads);
  return s * scale / threads;
}

// Times the compiled graph beside the eager interpreter and the copy baseline and sets the counters. With a
// slice, also in_cache_ms (in_cache_seconds), roofline_ms (the larger of in_cache_ms and the baseline's time:
// the roofline model's bound, memory or compute, whichever is slower here) and vs_roofline (roofline_ms over
// the compiled time). vs_copy alone cannot tell a kernel that wastes bandwidth from a computation that takes
// longer than moving its bytes; in_cache_ms above the baseline's time says the case is not memory-bound here.
void run_case(benchmark::State& state, const graph::Graph& g, bool report_memory,
              const std::optional<graph::Graph>& slice = std::nullopt) {
  const int64_t read_bytes = bytes_of(g, g.inputs()), write_bytes = bytes_of(g, g.outputs());
  const int64_t bytes = read_bytes + write_bytes;
  if (bytes == 0) return state.SkipWithError("the graph reads and writes no tensor bytes");
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  std::shared_ptr<CompiledGraph> c = compile(g);
  graph::Interpreter eager(g);
  // Cold runs start with the inputs and the last run's outputs (whose blocks the allocator hands out again)
  // flushed from the caches.
  const Caches caches = bench_caches();
  std::vector<Tensor> outputs;
  auto flush = [&] {
    for (const std::vector<Tensor>* ts : {&inputs, &outputs})
      for (const Tensor& t : *ts)
        if (t.storage()) flush_from_caches(t.storage()->data(), t.storage()->nbytes());
  };
  double eager_s = min_seconds_of([&] { outputs = eager.run(inputs); }, 3, flush_when(caches, flush));
  for (auto _ : state) benchmark::DoNotOptimize((*c)(inputs));
  auto [compiled_s, copy_times] =
      min_seconds_beside_copy([&] { outputs = (*c)(inputs); }, flush, read_bytes, write_bytes, 10, caches);
  double copy_bw = double(bytes) / copy_times.best();
  state.counters["eager_ms"] = eager_s * 1e3;
  state.counters["compiled_ms"] = compiled_s * 1e3;
  state.counters["speedup"] = eager_s / compiled_s;
  state.counters["GB/s"] = double(bytes) / compiled_s * 1e-9;
  state.counters["copy_GB/s"] = copy_bw * 1e-9;
  if (copy_times.memcpy_s < 1e30) state.counters["memcpy_GB/s"] = double(bytes) / copy_times.memcpy_s * 1e-9;
  state.counters["stream_copy_GB/s"] = double(bytes) / copy_times.streaming_s * 1e-9;
  state.counters["vs_copy"] = double(bytes) / compiled_s / copy_bw;
  if (slice) {
    const double in_cache_s = in_cache_seconds(g, *slice);
    const double roofline_s = std::max(in_cache_s, copy_times.best());
    state.counters["in_cache_ms"] = in_cache_s * 1e3;
    state.counters["roofline_ms"] = roofline_s * 1e3;
    state.counters["vs_roofline"] = roofline_s / compiled_s;
  }
  state.counters["kernels"] = c->stats().kernels;
  state.counters["cold_caches"] = caches == Caches::Cold;
  if (report_memory) {
    int64_t base = Storage::live_bytes();
    Storage::reset_peak_bytes();
    eager.run(inputs);
    int64_t eager_peak = Storage::peak_bytes() - base;
    Storage::reset_peak_bytes();
    (*c)(inputs);
    int64_t compiled_peak = Storage::peak_bytes() - base;
    state.counters["eager_peak_bytes"] = double(eager_peak);
    state.counters["compiled_peak_bytes"] = double(compiled_peak);
    state.counters["peak_vs_eager"] = double(compiled_peak) / double(eager_peak);
  }
}

// The row cases over `rows` rows of 4096 f32: 4096 in the benchmarks, 32 or 64 in their slices.
std::string softmax_text(int rows) {
  return fmt::format("graph s(%x: f32[{0}, 4096]) {{\n  %y = softmax(%x, -1) : f32[{0}, 4096]\n  return %y\n}}\n",
                     rows);
}
std::string layernorm_text(int rows) {
  return fmt::format("graph l(%x: f32[{0}, 4096], %w: f32[4096], %b: f32[4096]) {{\n"
                     "  %y = layer_norm(%x, [4096], %w, %b) : f32[{0}, 4096]\n  return %y\n}}\n",
                     rows);
}
std::string row_sum_text(int rows) {
  return fmt::format("graph r(%x: f32[{0}, 4096]) {{\n  %y = sum(%x, [1]) : f32[{0}]\n  return %y\n}}\n", rows);
}

void BM_pointwise10(benchmark::State& state) {
  run_case(state, parse(pointwise10_text(16 << 20)), false, parse(pointwise10_text(64 << 10)));
}
void BM_softmax(benchmark::State& state) {
  run_case(state, parse(softmax_text(4096)), false, parse(softmax_text(32)));
}
void BM_layernorm(benchmark::State& state) {
  run_case(state, parse(layernorm_text(4096)), false, parse(layernorm_text(32)));
}
void BM_row_sum(benchmark::State& state) {
  run_case(state, parse(row_sum_text(4096)), false, parse(row_sum_text(64)));
}
void BM_chain100(benchmark::State& state) {
  run_case(state, parse(chain_text(100, 1 << 20)), true, parse(chain_text(100, 64 << 10)));
}
void BM_mlp(benchmark::State& state) {
  graph::Graph g = parse(
      "graph mlp(%x: f32[512, 1024], %w1: f32[1024, 1024], %b1: f32[1024], %w2: f32[1024, 1024], %b2: f32[1024]) {\n"
      "  %h = linear(%x, %w1, %b1) : f32[512, 1024]\n  %a = gelu(%h) : f32[512, 1024]\n"
      "  %o = linear(%a, %w2, %b2) : f32[512, 1024]\n  %r = relu(%o) : f32[512, 1024]\n  return %r\n}\n");
  run_case(state, g, true);  // the matrix products dominate the time
}

// inductor/conv_<kind>: one f32 conv2d with bias of each kind real CNNs use, the shapes of
// bench/peer_torch_conv.py (which times PyTorch eager and torch.compile on them). conv2d runs extern.
struct ConvKind {
  const char* name;
  int64_t n, c, h, w, out, k, stride, pad, groups;
};
constexpr ConvKind kConvKinds[] = {
    {"depthwise7x7", 1, 96, 56, 56, 96, 7, 1, 3, 96},  {"pointwise1x1", 1, 64, 56, 56, 256, 1, 1, 0, 1},
    {"3x3", 1, 64, 56, 56, 64, 3, 1, 1, 1},            {"strided3x3", 1, 64, 56, 56, 128, 3, 2, 1, 1},
    {"grouped3x3", 1, 128, 28, 28, 128, 3, 1, 1, 4},
};
std::string conv_text(const ConvKind& k) {
  const int64_t oh = (k.h + 2 * k.pad - k.k) / k.stride + 1, ow = (k.w + 2 * k.pad - k.k) / k.stride + 1;
  return fmt::format("graph conv(%x: f32[{n}, {c}, {h}, {w}], %wt: f32[{o}, {cg}, {k}, {k}], %b: f32[{o}]) {{\n"
                     "  %y = conv2d(%x, %wt, %b, [{s}, {s}], [{p}, {p}], [1, 1], {g}) : f32[{n}, {o}, {oh}, {ow}]\n"
                     "  return %y\n}}\n",
                     fmt::arg("n", k.n), fmt::arg("c", k.c), fmt::arg("h", k.h), fmt::arg("w", k.w),
                     fmt::arg("o", k.out), fmt::arg("cg", k.c / k.groups), fmt::arg("k", k.k), fmt::arg("s", k.stride),
                     fmt::arg("p", k.pad), fmt::arg("g", k.groups), fmt::arg("oh", oh), fmt::arg("ow", ow));
}
const bool kConvKindsRegistered = [] {
  for (const ConvKind& k : kConvKinds)
    benchmark::RegisterBenchmark(fmt::format("inductor/conv_{}", k.name).c_str(), [k](benchmark::State& state) {
      run_case(state, parse(conv_text(k)), false);
    })->UseRealTime()->Unit(benchmark::kMillisecond);
  return true;
}();

// inductor/convnext_tiny: a whole small model (bench/graphs/convnext_tiny.kir, bench/real_models.py's
// TinyConvNeXt): convolutions through oneDNN, matrix products through BLAS, layer norms over channels of permuted
// conv outputs, GELU. Before the index and column-reduction fixes of 2026-11-28 it took 8.1 ms on one thread
// here, 2.8 ms after (docs/benchmarks.md, Real models).
void BM_convnext_tiny(benchmark::State& state) {
  run_case(state, graph::load_graph(KILN_SOURCE_DIR "/bench/graphs/convnext_tiny.kir"), true);
}

void BM_compile_chain100_cold(benchmark::State& state) {
  graph::Graph g = parse(chain_text(100, 1 << 20));
  CompileOptions opts;
  opts.use_graph_cache = false;
  compile(g, opts);  // the JIT itself is initialised once per process, outside the measurement
  int i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto dir = std::filesystem::temp_directory_path() / fmt::format("kiln-bench-cold-{}-{}", ::getpid(), i++);
    set_option(Opt::CacheDir, dir.string());
    runtime::KernelJit::instance().forget_memory_cache();
    state.ResumeTiming();
    benchmark::DoNotOptimize(compile(g, opts));
    state.PauseTiming();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  reset_option(Opt::CacheDir);
}
// Every kernel in the kernel cache, but the graph-level cache off: lowering, scheduling and keying run again.
void BM_compile_chain100_kernels_cached(benchmark::State& state) {
  graph::Graph g = parse(chain_text(100, 1 << 20));
  CompileOptions opts;
  opts.use_graph_cache = false;
  compile(g, opts);
  for (auto _ : state) benchmark::DoNotOptimize(compile(g, opts));
}
// Any .kir file, named by KILN_BENCH_GRAPH: compiled, eager and the baseline timed like the cases above.
const bool kUserGraphRegistered = [] {
  const char* path = std::getenv("KILN_BENCH_GRAPH");
  if (!path || !*path) return false;
  benchmark::RegisterBenchmark(fmt::format("inductor/graph:{}", path).c_str(), [path = std::string(path)](benchmark::State& state) {
    std::optional<graph::Graph> g;
    try {
      g = graph::load_graph(path);
    } catch (const std::exception& e) {
      return state.SkipWithError(e.what());
    }
    run_case(state, *g, true);
  })->UseRealTime()->Unit(benchmark::kMillisecond);
  return true;
}();

// A structurally equal graph compiled before: the graph-level cache returns the program.
void BM_compile_chain100_cached(benchmark::State& state) {
  graph::Graph g = parse(chain_text(100, 1 << 20));
  compile(g);
  for (auto _ : state) benchmark::DoNotOptimize(compile(g));
}

BENCHMARK(BM_pointwise10)->Name("inductor/pointwise10_f32_16M")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_softmax)->Name("inductor/softmax_4096x4096")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_layernorm)->Name("inductor/layernorm_4096x4096")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_row_sum)->Name("inductor/row_sum_4096x4096")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_chain100)->Name("inductor/chain100_f32_1M")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_mlp)->Name("inductor/mlp_forward_512x1024")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_convnext_tiny)->Name("inductor/convnext_tiny")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_compile_chain100_cold)->Name("inductor/compile_chain100_cold")->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_compile_chain100_kernels_cached)->Name("inductor/compile_chain100_kernels_cached")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_compile_chain100_cached)->Name("inductor/compile_chain100_cached")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln
