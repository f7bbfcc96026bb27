// relu_test_graph: a seeded std::mt19937 picks each op and its operands (see testing.h).
#include "minifier/testing.h"

#include <random>

namespace kiln::minify {

TestGraph relu_test_graph(int nodes, uint64_t seed, int64_t rows, int64_t cols, int relu_at) {
  using graph::TensorArg;
  std::mt19937_64 rng(seed);
  auto uni = [&](int n) { return int(rng() % uint64_t(n)); };
  TestGraph t;
  graph::Graph& g = t.graph;
  auto x = g.add_input("x", {DType::F32, {rows, cols}, {}, {}});
  auto b = g.add_input("b", {DType::F32, {cols}, {}, {}});
  if (relu_at < 0) relu_at = nodes / 2;
  relu_at = std::max(1, std::min(relu_at, nodes - 1));
  std::vector<graph::ValueId> pool;
  int ops = 0;
  auto emit = [&](OpId op, std::vector<graph::Arg> args) {
    ++ops;
    return g.add_op1(op, std::move(args), fmt::format("v{}", ops));
  };
  pool.push_back(emit(OpId::tanh, {TensorArg{x}}));
  graph::ValueId after_relu = graph::kNoValue;
  int relu_op = -1;
  auto recent = [&]() { return pool[pool.size() - 1 - size_t(uni(int(std::min<size_t>(pool.size(), 8))))]; };
  while (ops < nodes) {
    graph::ValueId last = pool.back();
    graph::ValueId v;
    int left = (ops < relu_at ? relu_at : nodes) - ops;  // two-op steps never jump over the relu's slot
    if (ops == relu_at) {
      t.relu_input = g.value(last).name;
      v = emit(OpId::relu, {TensorArg{last}});
      t.relu_output = g.value(v).name;
      relu_op = ops;
    } else if (relu_op >= 0 && after_relu == graph::kNoValue) {  // one unary op hides the relu from the output that shows it
      v = emit(uni(2) ? OpId::tanh : OpId::sigmoid, {TensorArg{last}});
      after_relu = v;
    } else {
      int kind = uni(left >= 2 ? 6 : 2);
      switch (kind) {
        case 0: v = emit(uni(2) ? OpId::tanh : OpId::sin, {TensorArg{last}}); break;
        case 1: v = emit(OpId::mul, {TensorArg{last}, TensorArg{recent()}}); break;
        case 2: v = emit(OpId::sigmoid, {TensorArg{last}}); break;
        case 3: {  // broadcast against the bias
          graph::ValueId s = emit(OpId::add, {TensorArg{last}, TensorArg{b}, Scalar(1)});
          v = emit(OpId::tanh, {TensorArg{s}});
          break;
        }
        case 4: {  // row reduction, broadcast back
          graph::ValueId m = emit(OpId::mean, {TensorArg{recent()}, IntList{1}, Scalar(true), std::monostate{}});
          v = emit(OpId::mul, {TensorArg{last}, TensorArg{m}});
          break;
        }
        default: {  // full reduction to 0-dim
          graph::ValueId m = emit(OpId::mean, {TensorArg{recent()}, std::monostate{}, Scalar(false), std::monostate{}});
          v = emit(OpId::mul, {TensorArg{last}, TensorArg{m}});
          break;
        }
      }
    }
    pool.push_back(v);
  }
  std::vector<graph::ValueId> outs = {pool.back()};
  if (after_relu != graph::kNoValue && after_relu != pool.back()) outs.push_back(after_relu);
  graph::ValueId early = pool[size_t(uni(int(pool.size())))];
  if (std::find(outs.begin(), outs.end(), early) == outs.end()) outs.push_back(early);
  g.set_outputs(outs);
  return t;
}

}  // namespace kiln::minify
