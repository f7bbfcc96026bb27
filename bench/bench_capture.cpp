// Capture benchmarks (docs/capture.md): the cost a compiled call adds over the eager op (guard check,
// replay, dispatch), guard checks alone for 1, 10 and 100 tensor inputs, tracing cost per recorded op, and a
// trace-tree walk through 10 graph breaks.
//   build-bench/bench/kiln-bench --benchmark_filter='capture/' --benchmark_format=json
#include <benchmark/benchmark.h>

#include <chrono>

#include "bench_util.h"
#include "capture/capture.h"
#include "ops/api.h"

using namespace kiln;

namespace {

void BM_eager_one_op(benchmark::State& state) {
  Tensor a = ones({1}), b = ones({1});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
}

// Reports `overhead_ns`: the compiled call's time minus the eager op's, measured in the same run.
void compiled_one_op(benchmark::State& state, const std::string& backend) {
  Tensor a = ones({1}), b = ones({1});
  auto f = compile([](const Tensor& x, const Tensor& y) { return add(x, y); }, {.backend = backend});
  f(a, b);  // trace and compile
  const double eager_s = seconds_of([&] { benchmark::DoNotOptimize(add(a, b)); }, 20000);
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(f(a, b));
  double per_call = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                    double(std::max<int64_t>(state.iterations(), 1));
  state.counters["eager_ns"] = eager_s * 1e9;
  state.counters["overhead_ns"] = (per_call - eager_s) * 1e9;
}
void BM_compiled_one_op_eager(benchmark::State& state) { compiled_one_op(state, "eager"); }
void BM_compiled_one_op_inductor(benchmark::State& state) { compiled_one_op(state, "inductor"); }

// Guards alone: flatten the arguments and check them against a cached guard set of `n` tensors.
void BM_guard_check(benchmark::State& state) {
  const auto n = size_t(state.range(0));
  std::vector<Tensor> xs;
  for (size_t i = 0; i < n; ++i) xs.push_back(ones({4, 4}));
  capture::Flat named;
  std::vector<std::string> leaf_names, length_names;
  named.leaf_names = &leaf_names;
  named.length_names = &length_names;
  capture::flatten_into(named, xs, "xs");
  capture::GuardSet guards = capture::GuardSet::of_call(named, leaf_names, length_names, "inductor");
  for (auto _ : state) {
    capture::Flat flat;
    capture::flatten_into(flat, xs, "");
    benchmark::DoNotOptimize(guards.check(flat, "inductor"));
  }
}

// The first call of a function of `n` pointwise ops: tracing (recording) and compiling with the eager
// backend (which compiles nothing), per recorded op.
void BM_trace_per_op(benchmark::State& state) {
  const int n = int(state.range(0));
  Tensor x = ones({8});
  for (auto _ : state) {
    auto f = compile(
        [n](const Tensor& t) {
          Tensor y = t;
          for (int i = 0; i < n; ++i) y = y * 1.0001;
          return y;
        },
        {.backend = "eager"});
    benchmark::DoNotOptimize(f(x));
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n);  // items_per_second: recorded ops per second
}

// A cached call through 10 graph breaks (item() reads), eager backend: the tree walk and break reads.
void BM_tree_walk_10_breaks(benchmark::State& state) {
  Tensor x = ones({1});
  auto f = compile(
      [](const Tensor& t) {
        Tensor y = t;
        for (int i = 0; i < 10; ++i) {
          double s = y.item().to_double();
          y = y * (s > 0 ? 1.0 : -1.0);
        }
        return y;
      },
      {.backend = "eager"});
  f(x);
  for (auto _ : state) benchmark::DoNotOptimize(f(x));
}

}  // namespace

BENCHMARK(BM_eager_one_op)->Name("capture/overhead/eager_add_1elem");
BENCHMARK(BM_compiled_one_op_eager)->Name("capture/overhead/compiled_add_1elem_eager_backend");
BENCHMARK(BM_compiled_one_op_inductor)->Name("capture/overhead/compiled_add_1elem_inductor_backend");
BENCHMARK(BM_guard_check)->Name("capture/overhead/guard_check")->Arg(1)->Arg(10)->Arg(100);
BENCHMARK(BM_trace_per_op)->Name("capture/trace/first_call")->Arg(10)->Arg(100);
BENCHMARK(BM_tree_walk_10_breaks)->Name("capture/trace/tree_walk_10_breaks");
