// Per-tensor autograd state and the backward-graph node base class: the data a Tensor carries
// (TensorImpl::autograd). Pure data, no ops: the engine that builds and runs these nodes is src/autograd.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "eager/tensor.h"

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

// The raw state changes and reads behind Tensor::set_requires_grad, grad, set_grad and register_hook (the
// engine's methods report them to capture first; the engine itself calls these).
void set_requires_grad_raw(const Tensor& t, bool r);
Tensor stored_grad(const Tensor& t);
void set_grad_raw(const Tensor& t, const Tensor& g);
void register_hook_raw(const Tensor& t, GradHook hook);
}  // namespace kiln
