// Random graphs for properties of the compiled backends (tests/test_inductor.cpp on the CPU,
// tests/test_cuda.cpp on the GPU): drawn with RapidCheck inside a property, so a failure shrinks.
#pragma once
#include <rapidcheck.h>

#include <vector>

#include "graph/graph.h"
#include "ops/op_info.h"

namespace kiln {

// A random graph over %x: f32[R, C] and %y: f32[C] built from lowered ops: pointwise chains and diamonds,
// broadcasts, reductions over the last dim (kept and broadcast back), and views.
inline graph::Graph random_lowered_graph() {
  const int64_t rows = *rc::gen::inRange<int64_t>(1, 6);
  const int64_t cols = *rc::gen::element<int64_t>(1, 3, 7, 8, 17, 33);
  graph::Graph g;
  std::vector<graph::ValueId> full{g.add_input("x", TensorMeta{DType::F32, {rows, cols}, {cols, 1}, {}})};
  graph::ValueId y = g.add_input("y", TensorMeta{DType::F32, {cols}, {1}, {}});
  const int steps = *rc::gen::inRange(1, 12);
  for (int i = 0; i < steps; ++i) {
    graph::ValueId a = full[size_t(*rc::gen::inRange<int>(0, int(full.size())))];
    graph::ValueId b = full[size_t(*rc::gen::inRange<int>(0, int(full.size())))];
    using graph::TensorArg;
    switch (*rc::gen::inRange(0, 9)) {
      case 0: full.push_back(g.add_op1(OpId::tanh, {TensorArg{a}})); break;
      case 1: full.push_back(g.add_op1(OpId::sigmoid, {TensorArg{a}})); break;
      case 2: full.push_back(g.add_op1(OpId::mul, {TensorArg{a}, TensorArg{b}})); break;
      case 3: full.push_back(g.add_op1(OpId::add, {TensorArg{a}, TensorArg{y}, Scalar(1.0)})); break;
      case 4: full.push_back(g.add_op1(OpId::maximum, {TensorArg{a}, TensorArg{b}})); break;
      case 5: {  // x - amax(x, -1, keepdim)
        graph::ValueId m = g.add_op1(OpId::amax, {TensorArg{a}, IntList{1}, Scalar(true)});
        full.push_back(g.add_op1(OpId::sub, {TensorArg{a}, TensorArg{m}, Scalar(1.0)}));
        break;
      }
      case 6: {  // x / (1 + sum(exp(x), -1, keepdim))
        graph::ValueId e = g.add_op1(OpId::exp, {TensorArg{a}});
        graph::ValueId s = g.add_op1(OpId::sum, {TensorArg{e}, IntList{1}, Scalar(true), std::monostate{}});
        graph::ValueId d = g.add_op1(OpId::add, {TensorArg{s}, Scalar(1.0), Scalar(1.0)});
        full.push_back(g.add_op1(OpId::div, {TensorArg{b}, TensorArg{d}, std::monostate{}}));
        break;
      }
      case 7: {  // flip(x, [0]) * x
        graph::ValueId f = g.add_op1(OpId::flip, {TensorArg{a}, IntList{0}});
        full.push_back(g.add_op1(OpId::mul, {TensorArg{f}, TensorArg{b}}));
        break;
      }
      case 8: {  // mean over rows, broadcast back
        graph::ValueId m = g.add_op1(OpId::mean, {TensorArg{a}, IntList{0}, Scalar(true), std::monostate{}});
        full.push_back(g.add_op1(OpId::sub, {TensorArg{b}, TensorArg{m}, Scalar(1.0)}));
        break;
      }
    }
  }
  std::vector<graph::ValueId> outs{full.back()};
  if (full.size() > 2 && *rc::gen::arbitrary<bool>()) outs.push_back(full[full.size() / 2]);
  g.set_outputs(outs);
  return g;
}

}  // namespace kiln
