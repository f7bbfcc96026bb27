// The reference interpreter (decision 2): runs a graph node by node with the eager kernels through the
// dispatcher. It is what every other stage is judged by; in fp64 mode it is the accuracy reference of the
// comparator (decision 6).
//
// Contract:
// - Inputs must match the graph's inputs in number, dtype and shape (any strides); otherwise kiln::Error.
// - Every node runs under NoGradGuard (unless InterpretOptions::autograd) with the global random generator (seed it first for reproducible
//   random ops). In-place nodes mutate the tensors they are given, as in eager mode, graph inputs included.
// - A kernel error is rethrown as kiln::Error naming the node (%name = op at line:col).
// - check_meta: each result's dtype and shape must equal the graph's recorded meta (strides are not checked).
// - fp64: every floating input and constant is upcast to f64, floating dtype arguments (e.g. `to(x, f16)`,
//   `sum(.., dtype=f32)`) become f64, and floating outputs are returned as f64. Random ops are the exception:
//   they draw at the graph's dtype (so both modes draw the same numbers) and their result is then upcast.
//   The meta check then accepts any floating dtype where the graph has a floating dtype.
// - Values are released after their last use unless on_value keeps them.
#pragma once
#include <functional>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph {

struct InterpretOptions {
  bool fp64 = false;
  bool check_meta = true;
  // Nodes run with grad mode as the caller has it (not under NoGradGuard): inputs that require grad get
  // gradients through eager autograd (the reference of training runs, repro/training.h).
  bool autograd = false;
  // Called for every value as it is defined: graph inputs (after the fp64 upcast), constants and node
  // outputs, in execution order.
  std::function<void(ValueId, const Tensor&)> on_value;
};

// A graph prepared for repeated runs: per-node argument templates (non-tensor arguments bound once, tensor
// slots filled at run time) and the release schedule. The graph must outlive the interpreter.
class Interpreter {
 public:
  Interpreter(const Graph& g, InterpretOptions opts = {});
  ~Interpreter();
  Interpreter(Interpreter&&) noexcept;
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

 private:
  struct Plan;
  const Graph& graph_;
  InterpretOptions opts_;
  std::unique_ptr<Plan> plan_;
};

std::vector<Tensor> run_graph(const Graph& g, const std::vector<Tensor>& inputs, const InterpretOptions& opts = {});

// Every value of the graph indexed by ValueId (undefined for ids that are not defined by g), for tools that
// need intermediates (minifier, per-node accuracy bisection).
std::vector<Tensor> run_graph_all_values(const Graph& g, const std::vector<Tensor>& inputs,
                                         const InterpretOptions& opts = {});

// "%name = op (line L:C)": how errors name a node (the interpreter's and the inductor's compile-time checks).
std::string node_label(const Graph& g, const Node& n);

// Whether a node draws random numbers (Random ops, and dropout in training mode), so passes must not
// duplicate, merge or fold it.
bool is_random_node(const Node& n);
// Whether it reads and advances the global generator when it runs: every random node but philox_rand, whose
// generator state is its inputs (so it is a pure function of them: AOT's partitioner may recompute it).
bool draws_from_generator(const Node& n);

}  // namespace kiln::graph
