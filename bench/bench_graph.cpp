// Graph-tooling benchmarks: .kir parse, verify and print throughput on generated 10k- and 100k-node graphs
// (counter `nodes/s`; target >= 500k nodes/s for parse+verify+print at 100k; comparing the two sizes shows
// whether a stage scales linearly), and the reference interpreter's per-node cost
// on tiny tensors (counter `us/node`; target < 2 us) beside the same ops called eagerly through the
// dispatcher (`eager_us/op`), so the interpreter's own overhead is the difference.
//   build/bench/kiln-bench --benchmark_filter='graph/'
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>

#include "graph/interpreter.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "ops/api.h"
#include "ops/dispatch.h"

using namespace kiln;
using namespace kiln::graph;

namespace {

TensorMeta f32_meta(int64_t size) {
  TensorMeta m;
  m.sizes = {size};
  return m;
}

// A graph of `n` pointwise nodes over f32[size] values; each node reads one or two of the last 16 values, so
// the graph has realistic fan-out and every value is used.
Graph generated_graph(int n, int64_t size) {
  Graph g;
  g.name = "generated";
  std::vector<ValueId> recent = {g.add_input("x", f32_meta(size)), g.add_input("y", f32_meta(size))};
  uint32_t state = 12345;
  auto pick = [&] {
    state = state * 1664525u + 1013904223u;
    size_t window = std::min<size_t>(recent.size(), 16);
    return recent[recent.size() - 1 - (state >> 8) % window];
  };
  for (int i = 0; i < n; ++i) {
    ValueId v;
    std::string name = "v" + std::to_string(i);
    switch (i % 5) {
      case 0: v = g.add_op1(OpId::add, {TensorArg{pick()}, TensorArg{pick()}, Scalar(int64_t(1))}, name); break;
      case 1: v = g.add_op1(OpId::mul, {TensorArg{pick()}, Scalar(0.5)}, name); break;
      case 2: v = g.add_op1(OpId::tanh, {TensorArg{pick()}}, name); break;
      case 3: v = g.add_op1(OpId::sub, {TensorArg{pick()}, TensorArg{pick()}, Scalar(int64_t(1))}, name); break;
      default: v = g.add_op1(OpId::relu, {TensorArg{pick()}}, name); break;
    }
    recent.push_back(v);
  }
  g.set_outputs({recent.back()});
  return g;
}

// The printed generated graph of `nodes` nodes over f32[8] values (built once per size).
const std::string& graph_text(int nodes) {
  static std::map<int, std::string> texts;
  auto it = texts.find(nodes);
  if (it == texts.end()) it = texts.emplace(nodes, print_graph(generated_graph(nodes, 8))).first;
  return it->second;
}

void set_node_rate(benchmark::State& state, int64_t nodes) {
  state.counters["nodes/s"] = benchmark::Counter(double(nodes) * double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_Parse(benchmark::State& state) {
  const std::string& text = graph_text(int(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(parse_graph(text, "generated.kir"));
  set_node_rate(state, state.range(0));
}

void BM_Verify(benchmark::State& state) {
  Graph g = parse_graph(graph_text(int(state.range(0))));
  for (auto _ : state) verify_graph(g);
  set_node_rate(state, state.range(0));
}

void BM_Print(benchmark::State& state) {
  Graph g = parse_graph(graph_text(int(state.range(0))));
  for (auto _ : state) benchmark::DoNotOptimize(print_graph(g));
  set_node_rate(state, state.range(0));
}

void BM_ParseVerifyPrint(benchmark::State& state) {
  const std::string& text = graph_text(int(state.range(0)));
  for (auto _ : state) {
    Graph g = parse_graph(text, "generated.kir");
    verify_graph(g);
    benchmark::DoNotOptimize(print_graph(g));
  }
  set_node_rate(state, state.range(0));
}

// Interpreter on f32[1] values: nearly all time is per-node overhead (dispatch, allocation, bookkeeping).
void BM_InterpreterPerNode(benchmark::State& state) {
  const int nodes = 1000;
  Graph g = generated_graph(nodes, 1);
  std::vector<Tensor> inputs = {Tensor::from_vector<float>({0.3f}, {1}), Tensor::from_vector<float>({-0.2f}, {1})};
  Interpreter interp(g);
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(interp.run(inputs));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.counters["us/node"] = s * 1e6 / (double(state.iterations()) * nodes);

  // Baseline in the same run: the same calls made eagerly (bind_args + dispatch per op), no graph.
  std::vector<OpCall> calls;
  {
    std::vector<Tensor> env(size_t(g.num_values()));
    env[size_t(g.inputs()[0])] = inputs[0];
    env[size_t(g.inputs()[1])] = inputs[1];
    for (const graph::Node& n : g.nodes()) {
      OpCall c = bind_args(n.info(), node_ivalues(g, n, env));
      env[size_t(n.outputs[0])] = dispatch(c)[0];
      calls.push_back(std::move(c));
    }
  }
  const int reps = 20;
  auto e0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) {
    NoGradGuard no_grad;
    for (const OpCall& c : calls) benchmark::DoNotOptimize(dispatch(c));
  }
  double es = std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
  state.counters["eager_us/op"] = es * 1e6 / (double(reps) * nodes);
}

// Preparing the interpreter (binding every node's arguments once) plus one run: the cost of run_graph.
void BM_RunGraphWithPreparation(benchmark::State& state) {
  const int nodes = 1000;
  Graph g = generated_graph(nodes, 1);
  std::vector<Tensor> inputs = {Tensor::from_vector<float>({0.3f}, {1}), Tensor::from_vector<float>({-0.2f}, {1})};
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(run_graph(g, inputs));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.counters["us/node"] = s * 1e6 / (double(state.iterations()) * nodes);
}

}  // namespace

BENCHMARK(BM_Parse)->Name("graph/parse")->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Verify)->Name("graph/verify")->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Print)->Name("graph/print")->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParseVerifyPrint)->Name("graph/parse_verify_print")->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_InterpreterPerNode)->Name("graph/interpreter_1k_tiny")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RunGraphWithPreparation)->Name("graph/run_graph_1k_tiny")->Unit(benchmark::kMicrosecond);
