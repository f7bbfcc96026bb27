// inductor_cuda/<case>: the CUDA backend's compiled programs on the GPU (cuda/device_program.h: inputs resident,
// kernels back to back) beside a device-to-device copy of the same bytes, timed with CUDA events in the same
// run. Counters: GB/s (input + output bytes over the fastest run), copy_GB/s, vs_copy, compile_ms (cold: the
// first compile of the case in this process, NVRTC included; the disk cache is bypassed with a fresh
// KILN_CACHE_DIR per process by ci/gpu-test.sh), kernels. Skipped with the reason where there is no GPU.
// torch.compile's figures for the same cases come from bench/peer_torch_cuda.py in the same device run.
#include <benchmark/benchmark.h>

#include <chrono>

#include "backends/cuda/device_program.h"
#include "backends/cuda/driver.h"
#include "core/error.h"
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

void run_case_or_throw(benchmark::State& state, const std::string& text) {
  std::string why;
  const cuda::Driver* d = cuda::driver(&why);
  if (!d) return state.SkipWithError(("needs a CUDA device: " + why).c_str());
  graph::Graph g = graph::parse_graph(text, "bench.kir");
  CompileOptions options;
  options.device = "cuda";
  options.backend = "inductor_cuda";
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<CompiledGraph> c = compile(g, options);
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
void run_case(benchmark::State& state, const std::string& text) {
  try {
    run_case_or_throw(state, text);
  } catch (const Error& e) {
    state.SkipWithError(e.what());
  }
}

void BM_pointwise10(benchmark::State& s) { run_case(s, pointwise10_text(64 << 20)); }
void BM_softmax(benchmark::State& s) { run_case(s, softmax_text(8192)); }
void BM_layernorm(benchmark::State& s) { run_case(s, layernorm_text(8192)); }
void BM_row_sum(benchmark::State& s) { run_case(s, row_sum_text(8192)); }

BENCHMARK(BM_pointwise10)->Name("inductor_cuda/pointwise10_f32_64M")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_softmax)->Name("inductor_cuda/softmax_8192x8192")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_layernorm)->Name("inductor_cuda/layernorm_8192x8192")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_row_sum)->Name("inductor_cuda/row_sum_8192x8192")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln
