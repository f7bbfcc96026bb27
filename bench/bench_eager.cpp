// Eager baseline benchmarks. Every memory-bound case reports its achieved bandwidth beside a multi-threaded
// memory copy of the same number of bytes measured in the same run (counter `vs_copy`, the ratio), so the
// figures mean the same on a noisy 2-core machine as on a big one. mm reports its speed relative to calling
// the BLAS directly on the same operands (`vs_blas`).
//   build/bench/kiln-bench --benchmark_filter='eager/' --benchmark_format=json
#include <benchmark/benchmark.h>

#include "bench_util.h"
#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <cstring>

#include "eager/loops.h"
#include "eager/philox.h"
#include "ops/api.h"

using namespace kiln;

namespace {

constexpr int64_t k16M = 16 * 1024 * 1024;

// Runs `op` in the timing loop and reports GB/s for `bytes` moved per call, the same-run copy bandwidth, and
// their ratio `vs_copy` (1.0 = as fast as copying the same bytes).
void report_bandwidth(benchmark::State& state, int64_t bytes, const std::function<void()>& op) {
  double copy_bw = copy_bandwidth(bytes);
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) op();
  double per_call = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                    double(std::max<int64_t>(state.iterations(), 1));
  double bw = double(bytes) / per_call;
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["GB/s"] = bw * 1e-9;
  state.counters["copy_GB/s"] = copy_bw * 1e-9;
  state.counters["vs_copy"] = bw / copy_bw;
}

void BM_add_f32(benchmark::State& state) {
  manual_seed(0);
  Tensor a = rand({k16M}), b = rand({k16M});
  report_bandwidth(state, 3 * k16M * 4, [&] { benchmark::DoNotOptimize(add(a, b)); });
}
void BM_mul_f32(benchmark::State& state) {
  manual_seed(0);
  Tensor a = rand({k16M}), b = rand({k16M});
  report_bandwidth(state, 3 * k16M * 4, [&] { benchmark::DoNotOptimize(mul(a, b)); });
}
void BM_sum_rows_f32(benchmark::State& state) {
  manual_seed(0);
  Tensor a = rand({4096, 4096});
  report_bandwidth(state, k16M * 4 + 4096 * 4, [&] { benchmark::DoNotOptimize(sum(a, IntList{1})); });
}
void BM_sum_cols_f32(benchmark::State& state) {
  manual_seed(0);
  Tensor a = rand({4096, 4096});
  report_bandwidth(state, k16M * 4 + 4096 * 4, [&] { benchmark::DoNotOptimize(sum(a, IntList{0})); });
}
void BM_sum_all_f32(benchmark::State& state) {
  manual_seed(0);
  Tensor a = rand({k16M});
  report_bandwidth(state, k16M * 4, [&] { benchmark::DoNotOptimize(sum(a)); });
}
void BM_softmax_f32(benchmark::State& state) {
  manual_seed(0);
  Tensor a = rand({4096, 4096});
  report_bandwidth(state, 2 * k16M * 4, [&] { benchmark::DoNotOptimize(softmax(a, -1)); });
}

// mm through kiln vs cblas_sgemm directly on the same buffers.
void BM_mm_f32(benchmark::State& state) {
  const int64_t n = state.range(0);
  manual_seed(0);
  Tensor a = rand({n, n}), b = rand({n, n});
  Tensor c = Tensor::empty({n, n});
  double blas = seconds_of([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0f, a.data<float>(), int(n),
                b.data<float>(), int(n), 0.0f, c.data<float>(), int(n));
  }, 5);
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(mm(a, b));
  double per_call = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                    double(std::max<int64_t>(state.iterations(), 1));
  double flops = 2.0 * double(n * n * n);
  state.counters["GFLOP/s"] = flops * 1e-9 / per_call;
  state.counters["blas_GFLOP/s"] = flops * 1e-9 / blas;
  state.counters["vs_blas"] = blas / per_call;
}

// Per-call overhead of the eager dispatcher on a tiny tensor (the floor later per-node figures compare to).
void BM_tiny_add(benchmark::State& state) {
  Tensor a = ones({4}), b = ones({4});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
}

}  // namespace

BENCHMARK(BM_add_f32)->Name("eager/add_f32_16M")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_mul_f32)->Name("eager/mul_f32_16M")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sum_rows_f32)->Name("eager/sum_rows_f32_4096x4096")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sum_cols_f32)->Name("eager/sum_cols_f32_4096x4096")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sum_all_f32)->Name("eager/sum_all_f32_16M")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_softmax_f32)->Name("eager/softmax_f32_4096x4096")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_mm_f32)->Name("eager/mm_f32")->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_tiny_add)->Name("eager/tiny_add_overhead")->Unit(benchmark::kNanosecond);
