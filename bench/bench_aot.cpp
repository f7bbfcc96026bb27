// AOT autograd benchmarks (docs/aot.md, "Benchmark"): one training step (forward + backward, gradients reset)
// of an MLP with its loss, a self-attention block and a 100-op pointwise chain, compiled (inductor backend:
// both halves compiled, min-cut partition) against eager autograd in the same run. Counters per case:
// eager_ms, compiled_ms, speedup (eager / compiled), eager_peak_bytes, compiled_peak_bytes, peak_vs_eager,
// default_saved_bytes, mincut_saved_bytes, saved_ratio (min-cut / default), compile_cold_ms (functionalize,
// joint, partition and compile both halves with an empty kernel cache: a fresh cache directory, the JIT's
// in-memory cache forgotten, the graph-level cache off; the fastest of 3), and the same compile's CPU time on its
// thread (compile_cold_cpu_ms, the least of the 3), split: cold_graphs_cpu_ms (functionalize, joint, partition),
// cold_forward_cpu_ms and cold_backward_cpu_ms (each half's kiln::compile), and of those the JIT's
// cold_llvm_{build,optimise,emit,link}_cpu_ms over cold_kernels_built kernels.
//   build-bench/bench/kiln-bench --benchmark_filter='aot/' --benchmark_format=json
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "aot/compiled.h"
#include "api/backends.h"
#include "api/pipeline.h"
#include "autograd/autograd.h"
#include "backends/cpu/jit.h"
#include "bench_util.h"
#include "core/device.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "ops/api.h"

namespace kiln {
namespace {

// The cases, larger than examples/*.kir (whose tensors hold a few hundred elements, so a step there measures
// per-op overheads only) but the same graphs.
std::string mlp_text(int batch, int in, int hidden, int classes) {
  return fmt::format(
      "graph mlp(%x: f32[{0}, {1}], %w1: f32[{2}, {1}] grad, %b1: f32[{2}] grad, %w2: f32[{3}, {2}] grad, "
      "%b2: f32[{3}] grad, %y: i64[{0}]) {{\n"
      "  %h = linear(%x, %w1, %b1) : f32[{0}, {2}]\n  %a = relu(%h) : f32[{0}, {2}]\n"
      "  %logits = linear(%a, %w2, %b2) : f32[{0}, {3}]\n  %loss = cross_entropy(%logits, %y) : f32[]\n"
      "  return %loss\n}}\n",
      batch, in, hidden, classes);
}

// examples/attention.kir at batch b, sequence s, heads h of width d (model width h * d).
std::string attention_text(int b, int s, int h, int d) {
  const int w = h * d;
  return fmt::format(
      "graph attention(%x: f32[{b}, {s}, {w}], %wq: f32[{w}, {w}] grad, %wk: f32[{w}, {w}] grad, "
      "%wv: f32[{w}, {w}] grad, %wo: f32[{w}, {w}] grad, %bo: f32[{w}] grad) {{\n"
      "  %q = linear(%x, %wq) : f32[{b}, {s}, {w}]\n  %k = linear(%x, %wk) : f32[{b}, {s}, {w}]\n"
      "  %v = linear(%x, %wv) : f32[{b}, {s}, {w}]\n"
      "  %qh = view(%q, [{b}, {s}, {h}, {d}]) : f32[{b}, {s}, {h}, {d}]\n"
      "  %kh = view(%k, [{b}, {s}, {h}, {d}]) : f32[{b}, {s}, {h}, {d}]\n"
      "  %vh = view(%v, [{b}, {s}, {h}, {d}]) : f32[{b}, {s}, {h}, {d}]\n"
      "  %qp = permute(%qh, [0, 2, 1, 3]) : f32[{b}, {h}, {s}, {d}]{{{hs}, {d}, {w}, 1}}\n"
      "  %kp = permute(%kh, [0, 2, 3, 1]) : f32[{b}, {h}, {d}, {s}]{{{hs}, {d}, 1, {w}}}\n"
      "  %vp = permute(%vh, [0, 2, 1, 3]) : f32[{b}, {h}, {s}, {d}]{{{hs}, {d}, {w}, 1}}\n"
      "  %scores = matmul(%qp, %kp) : f32[{b}, {h}, {s}, {s}]\n"
      "  %scaled = mul(%scores, {scale}) : f32[{b}, {h}, {s}, {s}]\n"
      "  %p = softmax(%scaled, -1) : f32[{b}, {h}, {s}, {s}]\n"
      "  %ctx = matmul(%p, %vp) : f32[{b}, {h}, {s}, {d}]\n"
      "  %ct = transpose(%ctx, 1, 2) : f32[{b}, {s}, {h}, {d}]{{{hs2}, {d}, {sd}, 1}}\n"
      "  %merged = reshape(%ct, [{b}, {s}, {w}]) : f32[{b}, {s}, {w}]\n"
      "  %out = linear(%merged, %wo, %bo) : f32[{b}, {s}, {w}]\n  return %out\n}}\n",
      fmt::arg("b", b), fmt::arg("s", s), fmt::arg("h", h), fmt::arg("d", d), fmt::arg("w", w),
      fmt::arg("hs", s * w), fmt::arg("hs2", h * s * d), fmt::arg("sd", s * d),
      fmt::arg("scale", 1.0 / std::sqrt(double(d))));
}

// examples/chain100.kir with its [16, 16] input widened to `rows` x `cols`.
std::string chain100_text(int rows, int cols) {
  std::string text = graph::print_graph(graph::load_graph(KILN_SOURCE_DIR "/examples/chain100.kir"));
  const std::string from = "f32[16, 16]", to = fmt::format("f32[{}, {}]", rows, cols);
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// Inputs: floats standard normal scaled by 0.1 (leaves requiring grad where the graph marks `grad`), integer
// inputs class labels in [0, classes).
std::vector<Tensor> make_inputs(const graph::Graph& g, int64_t classes) {
  manual_seed(7);
  std::vector<Tensor> in;
  for (graph::ValueId id : g.inputs()) {
    const graph::ValueInfo& v = g.value(id);
    if (!is_floating(v.meta.dtype)) {
      in.push_back(randint(0, classes, v.meta.sizes, v.meta.dtype));
      continue;
    }
    Tensor t = mul(randn(v.meta.sizes, v.meta.dtype), 0.1);
    in.push_back(v.requires_grad ? t.set_requires_grad(true) : t);
  }
  return in;
}

using StepFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// One training step: forward, backward from the first output (ones as its gradient), gradients reset so every
// step does the same work.
void train_step(const StepFn& f, const std::vector<Tensor>& in) {
  Tensor out = f(in)[0];
  out.backward(out.dim() == 0 ? Tensor() : ones_like(out));
  for (Tensor t : in)
    if (t.requires_grad()) t.set_grad(Tensor());
}

// Peak bytes allocated during one step beyond what was live before it (inputs, parameters, compiled constants).
int64_t peak_bytes_of_step(const StepFn& f, const std::vector<Tensor>& in) {
  const int64_t base = Storage::live_bytes();
  Storage::reset_peak_bytes();
  train_step(f, in);
  return Storage::peak_bytes() - base;
}

aot::AotConfig inductor_config(aot::PartitionPolicy policy) {
  aot::AotConfig config = aot_backend_config("inductor", {.repro_stage = "bench"});
  config.policy = policy;
  return config;
}

// Cold compile of the training graphs: everything a first training call compiles, from an empty kernel cache.
// Wall time (the fastest run) and, from the run of least CPU time, that thread's CPU time split by phase.
struct ColdCompile {
  double wall_s = 1e30, cpu_s = 1e30;
  double graphs_cpu_s = 0, forward_cpu_s = 0, backward_cpu_s = 0;  // aot_graphs; each half's kiln::compile
  runtime::JitStats jit;  // of the same run: the LLVM phases' CPU time (build, optimise, emit, link)
};

ColdCompile cold_compile(const graph::Graph& g, const std::vector<bool>& mask) {
  CompileOptions options;
  options.use_graph_cache = false;
  compile(g, options);  // the JIT itself is initialised once per process, outside the measurement
  ColdCompile best;
  runtime::KernelJit& jit = runtime::KernelJit::instance();
  for (int i = 0; i < 3; ++i) {
    auto dir = std::filesystem::temp_directory_path() / fmt::format("kiln-bench-aot-cold-{}-{}", ::getpid(), i);
    set_option(Opt::CacheDir, dir.string());
    jit.forget_memory_cache();
    jit.reset_stats();
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_seconds();
    aot::AotGraphs gs = aot::aot_graphs(g, mask, inductor_config(aot::PartitionPolicy::MinCut));
    const double c1 = thread_cpu_seconds();
    benchmark::DoNotOptimize(compile(gs.partition.forward, options));
    const double c2 = thread_cpu_seconds();
    benchmark::DoNotOptimize(compile(gs.partition.backward, options));
    const double c3 = thread_cpu_seconds();
    best.wall_s = std::min(best.wall_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (c3 - c0 < best.cpu_s) {
      best.cpu_s = c3 - c0;
      best.graphs_cpu_s = c1 - c0, best.forward_cpu_s = c2 - c1, best.backward_cpu_s = c3 - c2;
      best.jit = jit.stats();
    }
    std::filesystem::remove_all(dir);
  }
  reset_option(Opt::CacheDir);
  return best;
}

void run_case(benchmark::State& state, const std::string& text, int64_t classes) {
  const graph::Graph g = graph::parse_graph(text, "bench.kir");
  const std::vector<Tensor> in = make_inputs(g, classes);
  std::vector<bool> mask;
  for (const Tensor& t : in) mask.push_back(t.requires_grad());

  const ColdCompile cold = cold_compile(g, mask);
  // Eager autograd: the graph's ops dispatched one by one under grad mode, as the user's eager code runs them.
  graph::InterpretOptions record{.autograd = true};
  const StepFn eager = [&](const std::vector<Tensor>& x) { return graph::run_graph(g, x, record); };
  const StepFn compiled = aot::aot_compile(g, inductor_config(aot::PartitionPolicy::MinCut));
  train_step(compiled, in);  // compiles the forward, then the backward

  double eager_s = 1e30, compiled_s = 1e30;
  for (auto _ : state) {  // alternate, so both see the same machine state
    eager_s = std::min(eager_s, min_seconds_of([&] { train_step(eager, in); }, 1));
    const double step_s = min_seconds_of([&] { train_step(compiled, in); }, 1);
    compiled_s = std::min(compiled_s, step_s);
    state.SetIterationTime(step_s);
  }
  const int64_t eager_peak = peak_bytes_of_step(eager, in), compiled_peak = peak_bytes_of_step(compiled, in);
  const int64_t default_saved = aot::aot_graphs(g, mask, inductor_config(aot::PartitionPolicy::SaveNeeded)).partition.saved_bytes;
  const int64_t mincut_saved = aot::aot_graphs(g, mask, inductor_config(aot::PartitionPolicy::MinCut)).partition.saved_bytes;
  state.counters["eager_ms"] = eager_s * 1e3;
  state.counters["compiled_ms"] = compiled_s * 1e3;
  state.counters["speedup"] = eager_s / compiled_s;
  state.counters["eager_peak_bytes"] = double(eager_peak);
  state.counters["compiled_peak_bytes"] = double(compiled_peak);
  state.counters["peak_vs_eager"] = double(compiled_peak) / double(eager_peak);
  state.counters["default_saved_bytes"] = double(default_saved);
  state.counters["mincut_saved_bytes"] = double(mincut_saved);
  state.counters["saved_ratio"] = double(mincut_saved) / double(default_saved);
  state.counters["compile_cold_ms"] = cold.wall_s * 1e3;
  state.counters["compile_cold_cpu_ms"] = cold.cpu_s * 1e3;
  state.counters["cold_graphs_cpu_ms"] = cold.graphs_cpu_s * 1e3;
  state.counters["cold_forward_cpu_ms"] = cold.forward_cpu_s * 1e3;
  state.counters["cold_backward_cpu_ms"] = cold.backward_cpu_s * 1e3;
  state.counters["cold_kernels_built"] = double(cold.jit.compiles);
  state.counters["cold_llvm_build_cpu_ms"] = cold.jit.build_cpu_ms;
  state.counters["cold_llvm_optimise_cpu_ms"] = cold.jit.optimise_cpu_ms;
  state.counters["cold_llvm_emit_cpu_ms"] = cold.jit.emit_cpu_ms;
  state.counters["cold_llvm_link_cpu_ms"] = cold.jit.link_cpu_ms;
}

void BM_mlp(benchmark::State& state) { run_case(state, mlp_text(256, 512, 1024, 10), 10); }
void BM_attention(benchmark::State& state) { run_case(state, attention_text(8, 128, 4, 64), 1); }
void BM_chain100(benchmark::State& state) { run_case(state, chain100_text(512, 512), 1); }

BENCHMARK(BM_mlp)->Name("aot/mlp/train_step")->UseManualTime()->Iterations(10)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention)->Name("aot/attention/train_step")->UseManualTime()->Iterations(10)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_chain100)->Name("aot/chain100/train_step")->UseManualTime()->Iterations(10)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln
