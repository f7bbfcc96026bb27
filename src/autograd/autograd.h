// The eager autograd engine: backward nodes (one per recorded op call, using the op's VJP), gradient
// accumulation into leaves, hooks, retain_graph, and history rewriting for in-place ops on views. It sits above
// src/ops (it runs the op table's VJPs through ops) and defines Tensor::backward and Tensor::retain_grad.
#pragma once
#include <memory>
#include <vector>

#include "eager/autograd_meta.h"
#include "ops/op_info.h"

namespace kiln {

Edge gradient_edge(const Tensor& t);  // where a gradient w.r.t. `t` goes

// For backward nodes made outside the engine (AOT autograd's compiled backward, aot/compiled.h): a creation
// number for Node::sequence_nr (later nodes run first), and giving `t` the history of `node`'s output
// `output_nr`.
uint64_t next_node_sequence_nr();
void set_history(const Tensor& t, const std::shared_ptr<Node>& node, uint32_t output_nr);

// Called by the dispatcher (through its AutogradHook, ops/dispatch.h, which autograd.cpp installs) after
// running an op whose inputs require grad.
void record_op(const OpCall& call, std::vector<Tensor>& outputs);
// Called by the dispatcher (through its AutogradHook) for in-place ops that need history: runs the kernel on
// `self`, records a node whose saved `self` is a snapshot taken before the write, and, when `self` is a view,
// rewrites the history of its base (PyTorch's CopySlices) so gradients reach the base.
std::vector<Tensor> run_inplace_recorded(const OpCall& call);

// Runs backward from `roots` with gradients `grads`.
// Inside a compiled function being captured, both run as an eager region (capture's `autograd` graph break).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
                  bool create_graph, std::source_location where = std::source_location::current());

// torch.autograd.grad: gradients of `outputs` w.r.t. `inputs` without touching .grad.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, std::source_location where = std::source_location::current());

}  // namespace kiln
