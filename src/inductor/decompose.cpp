// The decompose pass (decompose.h): one round clones the graph through graph::clone_graph (rewrite.h),
// replacing each Composite node by the nodes its decomposition records on meta tensors
// (graph::MetaGraphRecorder, graph/meta_trace.h); rounds repeat until nothing changes.
#include "inductor/decompose.h"

#include <unordered_map>

#include "core/bisect.h"
#include "core/fired.h"
#include "core/log.h"
#include "graph/interpreter.h"
#include "graph/meta_trace.h"
#include "graph/rewrite.h"
#include "ops/api.h"
#include "ops/common.h"
#include "ops/dispatch.h"

namespace kiln::inductor {

using graph::Graph;
using graph::Node;
using graph::NodeKind;
using graph::ValueId;

namespace {

// Records the op calls a decomposition makes on meta tensors standing for graph values as nodes of `out`
// (the one meta recorder, graph/meta_trace.h).
using DecompositionRecorder = graph::MetaGraphRecorder;

// `unrounded` (by value id) marks values computed inside an op that eager runs as one kernel: eager does not
// round those to f16/bf16, so the lowering must not either. It is carried from `g` to `out`.
struct UnroundedFlags {
  const std::vector<bool>& in;
  std::vector<bool>& out;
  void carry(ValueId from, ValueId to) {
    if (out.size() <= size_t(to)) out.resize(size_t(to) + 1, false);
    out[size_t(to)] = size_t(from) < in.size() && in[size_t(from)];
  }
};

bool should_decompose(const Graph& g, const Node& n) {
  if (n.kind != NodeKind::Op) return false;
  const OpInfo& op = n.info();
  const std::string& name0 = g.value(n.outputs[0]).name;
  return op.kind == OpKind::Composite && op.decomp && !graph::is_random_node(n) &&
         should_run("inductor", "decomposition", [&] { return fmt::format("{} = {}", name0, op.name); });
}

// Appends the nodes of n's decomposition to c.out() and maps n's outputs to its results.
void decompose_node(const Graph& g, const Node& n, graph::GraphCloner& c, const InjectSpec& inject,
                    UnroundedFlags& unrounded) {
  const OpInfo& op = n.info();
  const std::string& name0 = g.value(n.outputs[0]).name;
  Graph& out = c.out();
  DecompositionRecorder rec(out, name0);
  const ValueId first_new = out.num_values();
  const size_t first_node = out.nodes().size();
  // Bound like an eager call (numbers in Tensor slots become wrapped-number tensors, which the recorder
  // turns into constants), so the decomposition sees exactly what eager's dispatcher gives it.
  OpCall call = bind_args(op, graph::node_ivalues(n, [&](ValueId id) { return rec.bind(c[id]); }));
  const bool wrong = !inject.empty() && inject.wants(op.name, InjectKind::Decomposition);
  if (wrong) note_injection_fired(op.name, "decomposition");
  if (wrong && (op.id == OpId::var || op.id == OpId::std)) call.args[2] = IValue(Scalar(int64_t(0)));
  std::vector<Tensor> results;
  {
    ScopedMetaCallRecorder on(&rec);
    results = op.decomp(call);
  }
  if (wrong && op.id != OpId::var && op.id != OpId::std) {
    ScopedMetaCallRecorder on(&rec);
    results[0] = add(results[0], 1);
  }
  KILN_ASSERT(results.size() == n.outputs.size(), "decomposition of {} returned {} values for {} outputs", op.name,
             results.size(), n.outputs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const TensorMeta& want = g.value(n.outputs[i]).meta;
    if (results[i].dtype() != want.dtype && results[i].sizes() == want.sizes) {
      // The op's own inference is the contract (e.g. lerp's decomposition promotes a bf16 0-d case to
      // f32); convert rather than change the graph's dtype.
      ScopedMetaCallRecorder on(&rec);
      results[i] = to(results[i], want.dtype);
    }
    ValueId id = rec.id_of(results[i]);
    KILN_ASSERT(out.value(id).meta.sizes == want.sizes && out.value(id).meta.dtype == want.dtype,
               "decomposition of {} (%{}) gives {}{} where the graph has {}{}", op.name, name0,
               dtype_name(out.value(id).meta.dtype), shape_str(out.value(id).meta.sizes), dtype_name(want.dtype),
               shape_str(want.sizes));
    c.map(n.outputs[i], id);
    // Provenance (graph.h ValueInfo::stands_for): a value the decomposition made is the composite's output.
    const graph::ValueInfo& composite = g.value(n.outputs[i]);
    if (id >= first_new) out.value(id).stands_for = composite.stands_for.empty() ? composite.name : composite.stands_for;
  }
  // Values the decomposition made are internal to the op: unrounded when eager runs the op as one kernel
  // (its results are rounded like any op's).
  unrounded.out.resize(size_t(out.num_values()), false);
  for (ValueId v = first_new; v < out.num_values(); ++v) unrounded.out[size_t(v)] = op.kernel != nullptr;
  for (ValueId o : n.outputs)
    if (c[o] >= first_new) unrounded.carry(o, c[o]);
  for (size_t i = first_node; i < out.nodes().size(); ++i) out.nodes()[i].loc = n.loc;  // errors name the line
}

// One round: every composite node the bisection hook allows replaced by its decomposition (the rewrite
// helper's clone, graph/rewrite.h); returns whether any was.
bool decompose_once(const Graph& g, Graph& out, const InjectSpec& inject, const std::vector<bool>& unrounded_in,
                    std::vector<bool>& unrounded_out) {
  bool changed = false;
  UnroundedFlags unrounded{unrounded_in, unrounded_out};
  out = graph::clone_graph(g, [&](const Node& n, graph::GraphCloner& c) {
    if (n.kind == NodeKind::Constant) return false;
    if (should_decompose(g, n)) {
      decompose_node(g, n, c, inject, unrounded);
      changed = true;
      return true;
    }
    std::vector<ValueId> outs = c.copy_node(n);
    for (size_t i = 0; i < outs.size(); ++i) unrounded.carry(n.outputs[i], outs[i]);
    return true;
  });
  return changed;
}

}  // namespace

Graph decompose_composites(const Graph& g, const CompileContext& ctx, std::vector<bool>* unrounded) {
  const InjectSpec& inject = ctx.inject;
  Graph cur = g;
  std::vector<bool> flags;
  for (int round = 0; round < 8; ++round) {
    Graph next;
    std::vector<bool> next_flags;
    bool changed = decompose_once(cur, next, inject, flags, next_flags);
    cur = std::move(next);
    flags = std::move(next_flags);
    if (!changed) break;
  }
  if (unrounded) *unrounded = std::move(flags);
  return cur;
}


}  // namespace kiln::inductor
