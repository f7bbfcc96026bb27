// inductor_cuda/<case>: the CUDA backend's compiled programs on the GPU (cuda/device_program.h: inputs resident,
// kernels back to back) beside a device-to-device copy of the same bytes, timed with CUDA events in the same
// run. Counters: GB/s (input + output bytes over the fastest run), copy_GB/s, vs_copy, compile_ms (cold: the
// first compile of the case in this process, NVRTC included; the disk cache is bypassed with a fresh
// KILN_CACHE_DIR per process by ci/gpu-test.sh), kernels. Skipped with the reason where there is no GPU.
// torch.compile's figures for the same cases come from bench/peer_torch_cuda.py in the same device run.
// inductor_cuda/variant/<case>_slots/N: the row cases with persistent rows of at most N elements a thread (the
// default is 16), to choose that default from measurements.
// inductor_cuda/overhead_<graph>_<launches>: the host's cost of one call of a tiny program (pointwise10 on 1024
// elements, fused: 1 kernel, unfused: 10), launched kernel by kernel (direct) or replayed as a CUDA graph
// (reduce-overhead). Counters: issue_us (host time to enqueue one call, averaged over a burst that stays under
// the launch queue's depth), latency_us (one call launched and waited for, the median of kLatencyCalls).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>

#include "backends/cuda/codegen_cuda.h"
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

void run_case_or_throw(benchmark::State& state, const std::string& text, int persistent_slots) {
  std::string why;
  const cuda::Driver* d = cuda::driver(&why);
  if (!d) return state.SkipWithError(("needs a CUDA device: " + why).c_str());
  graph::Graph g = graph::parse_graph(text, "bench.kir");
  CompileOptions options;
  options.device = "cuda";
  options.backend = "inductor_cuda";
  options.use_graph_cache = persistent_slots == 0;
  cuda::set_persistent_slots_for_benchmarks(persistent_slots);
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<CompiledGraph> c = compile(g, options);
  cuda::set_persistent_slots_for_benchmarks(0);
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
// persistent_slots: 0 for the code generator's choice, else the row elements a thread holds at most (a variant).
void run_case(benchmark::State& state, const std::string& text, int persistent_slots = 0) {
  try {
    run_case_or_throw(state, text, persistent_slots);
  } catch (const Error& e) {
    state.SkipWithError(e.what());
  }
}

constexpr int kLatencyCalls = 1001;

void run_overhead_or_throw(benchmark::State& state, bool fuse, cuda::DeviceProgram::Launches launches) {
  std::string why;
  if (!cuda::driver(&why)) return state.SkipWithError(("needs a CUDA device: " + why).c_str());
  graph::Graph g = graph::parse_graph(pointwise10_text(1024), "bench.kir");
  CompileOptions options;
  options.device = "cuda";
  options.backend = "inductor_cuda";
  options.fuse = fuse;
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

void run_overhead(benchmark::State& state, bool fuse, cuda::DeviceProgram::Launches launches) {
  try {
    run_overhead_or_throw(state, fuse, launches);
  } catch (const Error& e) {
    state.SkipWithError(e.what());
  }
}

void BM_pointwise10(benchmark::State& s) { run_case(s, pointwise10_text(64 << 20)); }
void BM_whole_sum(benchmark::State& s) { run_case(s, whole_sum_text(64 << 20)); }
void BM_softmax_slots(benchmark::State& s) { run_case(s, softmax_text(8192), int(s.range(0))); }
void BM_layernorm_slots(benchmark::State& s) { run_case(s, layernorm_text(8192), int(s.range(0))); }
void BM_row_sum_slots(benchmark::State& s) { run_case(s, row_sum_text(8192), int(s.range(0))); }
void BM_overhead_fused_direct(benchmark::State& s) { run_overhead(s, true, cuda::DeviceProgram::Launches::Direct); }
void BM_overhead_fused_graph(benchmark::State& s) { run_overhead(s, true, cuda::DeviceProgram::Launches::CudaGraph); }
void BM_overhead_unfused_direct(benchmark::State& s) { run_overhead(s, false, cuda::DeviceProgram::Launches::Direct); }
void BM_overhead_unfused_graph(benchmark::State& s) { run_overhead(s, false, cuda::DeviceProgram::Launches::CudaGraph); }
void BM_softmax(benchmark::State& s) { run_case(s, softmax_text(8192)); }
void BM_layernorm(benchmark::State& s) { run_case(s, layernorm_text(8192)); }
void BM_row_sum(benchmark::State& s) { run_case(s, row_sum_text(8192)); }

BENCHMARK(BM_pointwise10)->Name("inductor_cuda/pointwise10_f32_64M")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_softmax)->Name("inductor_cuda/softmax_8192x8192")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_layernorm)->Name("inductor_cuda/layernorm_8192x8192")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_row_sum)->Name("inductor_cuda/row_sum_8192x8192")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_softmax_slots)->Name("inductor_cuda/variant/softmax_8192x8192_slots")->Arg(8)->Arg(32)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_layernorm_slots)->Name("inductor_cuda/variant/layernorm_8192x8192_slots")->Arg(8)->Arg(32)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_row_sum_slots)->Name("inductor_cuda/variant/row_sum_8192x8192_slots")->Arg(8)->Arg(32)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_whole_sum)->Name("inductor_cuda/whole_sum_f32_64M")->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_overhead_fused_direct)->Name("inductor_cuda/overhead_fused_direct")->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_overhead_fused_graph)->Name("inductor_cuda/overhead_fused_cudagraph")->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_overhead_unfused_direct)->Name("inductor_cuda/overhead_unfused_direct")->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_overhead_unfused_graph)->Name("inductor_cuda/overhead_unfused_cudagraph")->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln
