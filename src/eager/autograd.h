// The eager autograd engine: backward nodes (one per recorded op call, using the op's VJP), gradient
// accumulation into leaves, hooks, retain_graph, and history rewriting for in-place ops on views.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/op_info.h"

namespace kiln {

class Node;

struct Edge {
  std::shared_ptr<Node> fn;  // null: no gradient flows here
  uint32_t input_nr = 0;     // which gradient input of `fn`
  bool valid() const { return fn != nullptr; }
};

using GradHook = std::function<Tensor(const Tensor&)>;

// A backward function. It receives the gradients of the forward outputs and returns the gradients of the
// forward inputs, in the order of next_edges.
class Node : public std::enable_shared_from_this<Node> {
 public:
  virtual ~Node() = default;
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grads) = 0;
  virtual std::string name() const = 0;
  virtual void release_saved() {}  // frees saved tensors after a backward without retain_graph

  std::vector<Edge> next_edges;
  std::vector<TensorMeta> output_metas;        // to build zero gradients for outputs that got none
  std::vector<std::vector<GradHook>> pre_hooks;  // per output: hooks on the gradient w.r.t. that output
  uint64_t sequence_nr = 0;                      // creation order: later nodes run first
};

// Per-tensor autograd state.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  // leaves: the node that accumulates into `grad`
  std::vector<GradHook> leaf_hooks;      // leaves: hooks run before accumulation
  bool retains_grad = false;
};

AutogradMeta& autograd_meta(const Tensor& t);  // creates it on first use
Edge gradient_edge(const Tensor& t);            // where a gradient w.r.t. `t` goes

// Called by the dispatcher after running an op whose inputs require grad.
void record_op(const OpCall& call, std::vector<Tensor>& outputs);
// Called by the dispatcher for in-place ops that need history: runs the kernel on `self`, records a node
// whose saved `self` is a snapshot taken before the write, and, when `self` is a view, rewrites the history
// of its base (PyTorch's CopySlices) so gradients reach the base.
std::vector<Tensor> run_inplace_recorded(const OpCall& call);

// Runs backward from `roots` with gradients `grads`.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
                  bool create_graph);

// torch.autograd.grad: gradients of `outputs` w.r.t. `inputs` without touching .grad.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false);

}  // namespace kiln
