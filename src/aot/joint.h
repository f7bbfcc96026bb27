// The joint graph of AOT autograd (docs/aot.md): one graph computing a forward graph's outputs and the
// gradients of its inputs, built by recording the op table's VJP rules (the ones eager autograd runs) on meta
// tensors standing for the graph's values (graph/meta_trace.h). Its layout is the partitioners' contract
// (aot/partition.h): inputs primals_1..N then tangents_1..M, outputs the forward outputs then one gradient
// per primal that requires grad.
#pragma once
#include <vector>

#include "aot/partition.h"
#include "graph/graph.h"

namespace kiln::aot {

struct JointGraph {
  graph::Graph graph;
  JointLayout layout;
  std::vector<int> grad_primals;  // the primal (forward input index) of each gradient output, in order
  std::vector<int> tangent_of;    // the forward output index each tangent is the gradient of, in order
};

struct JointOptions {
  // Bug injection (KILN_INJECT=<op>:vjp, parsed by core/inject.h and handed down by src/api): the VJP of
  // these ops is recorded wrong (1 is added to each gradient it returns), so the tools can be tested against a
  // known wrong gradient.
  std::vector<OpId> wrong_vjp;
};

// Builds the joint graph of `forward`, which must be functional (no in-place nodes: functionalize first,
// aot/functionalize.h). `requires_grad[i]` says whether forward input i gets a gradient (empty: the inputs'
// requires_grad flags). A forward output gets a tangent when it is floating and depends on an input that
// requires grad through differentiable ops. Ops without a VJP are differentiated through their decomposition,
// as eager autograd does. Throws kiln::Error naming the node when an op cannot be differentiated.
JointGraph build_joint(const graph::Graph& forward, std::vector<bool> requires_grad = {},
                       const JointOptions& options = {});

// `forward` with every node that needs a gradient through an op without a VJP replaced by its decomposition
// (build_joint does this itself; aot_graphs does it before functionalizing, since a decomposition may write
// in place, e.g. batch_norm's running statistics).
graph::Graph expand_ops_without_vjp(const graph::Graph& forward, const std::vector<bool>& requires_grad);

// Which values of `g` require grad when its inputs do as `requires_grad` says (eager autograd's rule: a
// floating output of a differentiable op with an input that requires grad).
std::vector<bool> values_requiring_grad(const graph::Graph& g, const std::vector<bool>& requires_grad);

}  // namespace kiln::aot
