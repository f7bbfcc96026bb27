// inductor_cuda/<case>: the CUDA backend's compiled programs on the GPU (cuda/device_program.h: inputs resident,
// kernels back to back) beside a device-to-device copy of the same bytes, timed with CUDA events in the same
// run. Counters: GB/s (input + output bytes over the fastest run), copy_GB/s, vs_copy, compile_ms (cold: the
// first compile of the case in this process, NVRTC included; the disk cache is bypassed with a fresh
// KILN_CACHE_DIR per process by ci/gpu-test.sh), kernels. Skipped with the reason where there is no GPU.
// torch.compile's figures for the same cases come from bench/peer_torch_cuda.py in the same device run.
// inductor_cuda/variant/<case>/slots:N/prefetch:P: the row cases compiled with other choices of the code generator
// (cuda::CodegenVariant: persistent rows of at most N elements a thread, the next row prefetched or not), to
// choose the defaults from measurements.
// inductor_cuda/overhead_<graph>_<launches>: the host's cost of one call of a tiny program (pointwise10 on 1024
// elements: 1 kernel; four softmaxes over alternating dims of 32x32: 9 kernels), launched kernel by kernel
// (direct) or replayed as a CUDA graph (reduce-overhead). Counters: issue_us (host time to enqueue one call, averaged over a burst that stays under
// the launch queue's depth), latency_us (one call launched and waited for, the median of kLatencyCalls).
// inductor_cuda/overhead_<graph>_tensors_<mode>: the same through CompiledGraph::operator() on CUDA tensors (mode
// default: kernels launched on the tensors; reduce-overhead: inputs copied into the recording's buffers, one
// graph replay, outputs copied out). Each call returns after the kernels ran. Counter: latency_us (median).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>

#include "backends/cuda/codegen_cuda.h"
#include "backends/cuda/device_program.h"
#include "backends/cuda/driver.h"
#include "core/error.h"
#include "eager/device_copy.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "inductor/compile.h"

namespace kiln {
namespace {

constexpr int kRuns = 20;

std::string pointwise10_text(int64_t n) {
  std::string s = fmt::format("graph pointwise10(%x: f32[{}], %y: f32[{}]) {{\n", n, n);
  const char* ops[] = {"add(%x, %y)", "mul(%t0, 0.5)", "sub(%t1, %y)", "relu(%t2)", "mul(%t3, %x)",
                       "add(%t4, 1.0)", "maximum(%t5, %y)", "mul(%t6, 2.0)", "sub(%t7, 0.25)", "abs(%t8)"};
  for (int i = 0; i < 10; ++i) s += fmt::format("  %t{} = {} : f32[{}]\n", i, ops[i], n);
  return s + "  return %t9\n}\n";
}
std::string softmax_text(int n) {
  return fmt::format("graph s(%x: f32[{0}, {0}]) {{\n  %y = softmax(%x, -1) : f32[{0}, {0}]\n  return %y\n}}\n", n);
}
std::string layernorm_text(int n) {
  return fmt::format("graph l(%x: f32[{0}, {0}], %w: f32[{0}], %b: f32[{0}]) {{\n"
                     "  %y = layer_norm(%x, [{0}], %w, %b) : f32[{0}, {0}]\n  return %y\n}}\n", n);
}
// Two linear layers with a relu between (4096 x 1024 -> 4096 -> 1024, f32): the products through cuBLAS, the bias
// broadcast by a rank-one product, the relu a kernel.
std::string mlp_text() {
  return "graph mlp(%x: f32[4096, 1024], %w1: f32[4096, 1024], %b1: f32[4096], %w2: f32[1024, 4096], %b2: f32[1024]) {\n"
         "  %h = linear(%x, %w1, %b1) : f32[4096, 4096]\n  %r = relu(%h) : f32[4096, 4096]\n"
         "  %y = linear(%r, %w2, %b2) : f32[4096, 1024]\n  return %y\n}\n";
}
std::string whole_sum_text(int64_t n) {
  return fmt::format("graph w(%x: f32[{0}]) {{\n  %y = sum(%x) : f32[]\n  return %y\n}}\n", n);
}
std::string row_sum_text(int n) {
  return fmt::format("graph r(%x: f32[{0}, {0}]) {{\n  %y = sum(%x, [1]) : f32[{0}]\n  return %y\n}}\n", n);
}

// The fastest of kRuns runs of `f` (launches on the null stream), in seconds, timed with CUDA events.
template <class F>
double min_gpu_seconds(const cuda::Driver& d, F&& f) {
  CUevent start, stop;
  cuda::check(d.event_create(&start, 0), "cuEventCreate");
  cuda::check(d.event_create(&stop, 0), "cuEventCreate");
  double best = 1e30;
  for (int i = 0; i < kRuns; ++i) {
    cuda::check(d.event_record(start, nullptr), "cuEventRecord");
    f();
    cuda::check(d.event_record(stop, nullptr), "cuEventRecord");
    cuda::check(d.event_synchronize(stop), "cuEventSynchronize");
    float ms = 0;
    cuda::check(d.event_elapsed_time(&ms, start, stop), "cuEventElapsedTime");
    best = std::min(best, double(ms) * 1e-3);
  }
  d.event_destroy(start);
  d.event_destroy(stop);
  return best;
}

void run_case_or_throw(benchmark::State& state, const std::string& text, const cuda::CodegenVariant* variant) {
  std::string why;
  const cuda::Driver* d = cuda::driver(&why);
  if (!d) return state.SkipWithError(("needs a CUDA device: " + why).c_str());
  graph::Graph g = graph::parse_graph(text, "bench.kir");
  CompileOptions options;
  options.device = "cuda";
  options.backend = "inductor_cuda";
  options.use_graph_cache = variant == nullptr;
  if (variant) cuda::set_codegen_variant_for_benchmarks(*variant);
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<CompiledGraph> c = compile(g, options);
  cuda::set_codegen_variant_for_benchmarks({});
  const double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cuda::DeviceProgram program(c);
  program.upload(graph::seeded_inputs(g, 0));
  program.launch();
  program.synchronize();
  const int64_t bytes = program.io_bytes();
  cuda::DeviceBlock from(size_t(bytes) / 2), to(size_t(bytes) / 2);
  double compiled_s = 0, copy_s = 0;
  for (auto _ : state) {
    compiled_s = min_gpu_seconds(*d, [&] { program.launch(); });
    copy_s = min_gpu_seconds(*d, [&] { cuda::check(d->memcpy_dtod(to.ptr, from.ptr, to.bytes), "cuMemcpyDtoD"); });
    state.SetIterationTime(compiled_s);
  }
  program.synchronize();
  // A copy of half the bytes reads them and writes them: it moves `bytes`.
  state.counters["compiled_ms"] = compiled_s * 1e3;
  state.counters["GB/s"] = double(bytes) / compiled_s * 1e-9;
  state.counters["copy_GB/s"] = double(bytes) / copy_s * 1e-9;
  state.counters["vs_copy"] = copy_s / compiled_s;
  state.counters["compile_ms"] = compile_s * 1e3;
  state.counters["kernels"] = c->stats().kernels;
}

// A case the backend cannot run on the device yet (an extern call) is skipped with the reason.
// variant: null for the code generator's defaults.
void run_case(benchmark::State& state, const std::string& text, const cuda::CodegenVariant* variant = nullptr) {
  try {
    run_case_or_throw(state, text, variant);
  } catch (const Error& e) {
    state.SkipWithError(e.what());
  }
}

constexpr int kLatencyCalls = 1001;

// Four softmaxes over alternating dims of a 32x32 tensor: 9 kernels (a reduction over the other dim cannot fuse).
std::string four_softmaxes_text() {
  return "graph four(%x: f32[32, 32]) {\n  %a = softmax(%x, -1) : f32[32, 32]\n  %b = softmax(%a, 0) : f32[32, 32]\n"
         "  %c = softmax(%b, -1) : f32[32, 32]\n  %d = softmax(%c, 0) : f32[32, 32]\n  return %d\n}\n";
}

void run_overhead_or_throw(benchmark::State& state, const std::string& text, cuda::DeviceProgram::Launches launches) {
  std::string why;
  if (!cuda::driver(&why)) return state.SkipWithError(("needs a CUDA device: " + why).c_str());
  graph::Graph g = graph::parse_graph(text, "bench.kir");
  CompileOptions options;
  options.device = "cuda";
  options.backend = "inductor_cuda";
  std::shared_ptr<CompiledGraph> c = compile(g, options);
  cuda::DeviceProgram program(c, launches);
  program.upload(graph::seeded_inputs(g, 0));
  program.launch();  // loads the modules; captures the graph
  program.synchronize();
  using clock = std::chrono::steady_clock;
  const int burst = std::max<int>(1, 400 / std::max<int64_t>(1, c->stats().kernels));
  double issue = 1e30;
  std::vector<double> latency;
  for (auto _ : state) {
    for (int rep = 0; rep < 20; ++rep) {
      const auto t0 = clock::now();
      for (int i = 0; i < burst; ++i) program.launch();
      issue = std::min(issue, std::chrono::duration<double>(clock::now() - t0).count() / burst);
      program.synchronize();
    }
    for (int i = 0; i < kLatencyCalls; ++i) {
      const auto t0 = clock::now();
      program.launch();
      program.synchronize();
      latency.push_back(std::chrono::duration<double>(clock::now() - t0).count());
    }
    std::nth_element(latency.begin(), latency.begin() + kLatencyCalls / 2, latency.end());
    state.SetIterationTime(latency[kLatencyCalls / 2]);
  }
  state.counters["issue_us"] = issue * 1e6;
  state.counters["latency_us"] = latency[kLatencyCalls / 2] * 1e6;
  state.counters["kernels"] = c->stats().kernels;
}

void run_overhead(benchmark::State& state, const std::string& text, cuda::DeviceProgram::Launches launches) {
  try {
    run_overhead_or_throw(state, text, launches);
  } catch (const Error& e) {
    state.SkipWithError(e.what());
  }
}

void run_tensor_overhead_or_throw(benchmark::State& state, const std::string& text, const std::string& mode) {
  std::string why;
  if (!cuda::driver(&why)) return state.SkipWithError(("needs a CUDA device: " + why).c_str());
  graph::Graph g = graph::parse_graph(text, "bench.kir");
  CompileOptions options;
  options.device = "cuda";
  options.backend = "inductor_cuda";
  options.mode = mode;
  std::shared_ptr<CompiledGraph> c = compile(g, options);
  std::vector<Tensor> inputs;
  for (const Tensor& t : graph::seeded_inputs(g, 0)) inputs.push_back(to_device(t, Device{DeviceType::CUDA, 0}));
  (*c)(inputs);  // loads the modules; records the graph
  using clock = std::chrono::steady_clock;
  std::vector<double> latency;
  for (auto _ : state) {
    for (int i = 0; i < kLatencyCalls; ++i) {
      const auto t0 = clock::now();
      benchmark::DoNotOptimize((*c)(inputs));
      latency.push_back(std::chrono::duration<double>(clock::now() - t0).count());
    }
    std::nth_element(latency.begin(), latency.begin() + kLatencyCalls / 2, latency.end());
    state.SetIterationTime(latency[kLatencyCalls / 2]);
  }
  state.counters["latency_us"] = latency[kLatencyCalls / 2] * 1e6;
  state.counters["kernels"] = c->stats().kernels;
}

void run_tensor_overhead(benchmark::State& state, const std::string& text, const std::string& mode) {
  try {
    run_tensor_overhead_or_throw(state, text, mode);
  } catch (const Error& e) {
    state.SkipWithError(e.what());
  }
}

void BM_pointwise10(benchmark::State& s) { run_case(s, pointwise10_text(64 << 20)); }
void BM_whole_sum(benchmark::State& s) { run_case(s, whole_sum_text(64 << 20)); }
void BM_mlp(benchmark::State& s) { run_case(s, mlp_text()); }
// Variants: range(0) the persistent row elements a thread holds, range(1) whether the next row is prefetched.
cuda::CodegenVariant variant_of(const benchmark::State& s) { return {int(s.range(0)), s.range(1) != 0}; }
void BM_softmax_variant(benchmark::State& s) {
  const cuda::CodegenVariant v = variant_of(s);
  run_case(s, softmax_text(8192), &v);
}
void BM_layernorm_variant(benchmark::State& s) {
  const cuda::CodegenVariant v = variant_of(s);
  run_case(s, layernorm_text(8192), &v);
}
void BM_row_sum_variant(benchmark::State& s) {
  const cuda::CodegenVariant v = variant_of(s);
  run_case(s, row_sum_text(8192), &v);
}
void BM_overhead_pointwise10_direct(benchmark::State& s) { run_overhead(s, pointwise10_text(1024), cuda::DeviceProgram::Launches::Direct); }
void BM_overhead_pointwise10_graph(benchmark::State& s) { run_overhead(s, pointwise10_text(1024), cuda::DeviceProgram::Launches::CudaGraph); }
void BM_overhead_four_softmaxes_direct(benchmark::State& s) { run_overhead(s, four_softmaxes_text(), cuda::DeviceProgram::Launches::Direct); }
void BM_overhead_four_softmaxes_graph(benchmark::State& s) { run_overhead(s, four_softmaxes_text(), cuda::DeviceProgram::Launches::CudaGraph); }
void BM_overhead_pointwise10_tensors(benchmark::State& s) { run_tensor_overhead(s, pointwise10_text(1024), "default"); }
void BM_overhead_pointwise10_tensors_recorded(benchmark::State& s) {
  run_tensor_overhead(s, pointwise10_text(1024), "reduce-overhead");
}
void BM_softmax(benchmark::State& s) { run_case(s, softmax_text(8192)); }
void BM_layernorm(benchmark::State& s) { run_case(s, layernorm_text(8192)); }
void BM_row_sum(benchmark::State& s) { run_case(s, row_sum_text(8192)); }

BENCHMARK(BM_pointwise10)->Name("inductor_cuda/pointwise10_f32_64M")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_softmax)->Name("inductor_cuda/softmax_8192x8192")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_layernorm)->Name("inductor_cuda/layernorm_8192x8192")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_row_sum)->Name("inductor_cuda/row_sum_8192x8192")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_softmax_variant)->Name("inductor_cuda/variant/softmax_8192x8192")->ArgNames({"slots", "prefetch"})->Args({16, 1})->Args({8, 0})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_layernorm_variant)->Name("inductor_cuda/variant/layernorm_8192x8192")->ArgNames({"slots", "prefetch"})->Args({16, 1})->Args({8, 0})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_row_sum_variant)->Name("inductor_cuda/variant/row_sum_8192x8192")->ArgNames({"slots", "prefetch"})->Args({16, 1})->Args({8, 0})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_mlp)->Name("inductor_cuda/mlp_4096x1024_f32")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_whole_sum)->Name("inductor_cuda/whole_sum_f32_64M")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_overhead_pointwise10_direct)->Name("inductor_cuda/overhead_pointwise10_1024_direct")->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_overhead_pointwise10_graph)->Name("inductor_cuda/overhead_pointwise10_1024_cudagraph")->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_overhead_four_softmaxes_direct)->Name("inductor_cuda/overhead_four_softmaxes_32x32_direct")->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_overhead_four_softmaxes_graph)->Name("inductor_cuda/overhead_four_softmaxes_32x32_cudagraph")->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_overhead_pointwise10_tensors)->Name("inductor_cuda/overhead_pointwise10_1024_tensors_default")->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_overhead_pointwise10_tensors_recorded)->Name("inductor_cuda/overhead_pointwise10_1024_tensors_reduce_overhead")->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln
