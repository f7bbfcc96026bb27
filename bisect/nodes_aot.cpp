// The bisector's node step for a training graph failing on an AOT rung (aot_eager, aot_eager_decomp_partition):
// the forward and backward graphs that rung builds, run in the fp64 interpreter, against the joint graph built
// without the rung's own steps (no decomposition, the default partition, no injected bug), values matched by
// name, or by provenance where a decomposition made them (graph.h ValueInfo::stands_for: the composite's result
// is compared with the composite's value, and the composite is the node named); the first value of the forward,
// then the backward graph, that diverges is the first diverging node.
#include <fmt/format.h>

#include "aot/compiled.h"
#include "api/backends.h"
#include "api/pipeline.h"
#include "bisect/nodes.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "ops/api.h"
#include "repro/training.h"

namespace kiln::bisect {
namespace {

std::vector<double> first_values(const Tensor& t, int64_t from) {
  Tensor d = contiguous(to(t, DType::F64));
  std::vector<double> out;
  const double* p = static_cast<const double*>(d.data_ptr());
  for (int64_t i = std::max<int64_t>(from, 0); i < d.numel() && out.size() < 8; ++i) out.push_back(p[i]);
  return out;
}

// The values of `g` (by id) for `inputs`, in f64.
std::vector<Tensor> fp64_values(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  return graph::run_graph_all_values(g, inputs, fp64);
}

// `t` at the dtype graph input `id` of `g` declares (a saved value or a tangent handed to the backward).
Tensor as_input_of(const graph::Graph& g, graph::ValueId id, const Tensor& t) {
  return to(t, g.value(id).meta.dtype);
}

// The value of `joint` that `id` of `part` computes: the one of its name, else (a value a decomposition made)
// the one it stands for.
std::optional<graph::ValueId> counterpart(const graph::Graph& part, graph::ValueId id, const graph::Graph& joint) {
  if (std::optional<graph::ValueId> same = joint.find_value(part.value(id).name)) return same;
  const std::string& source = part.value(id).stands_for;
  return source.empty() ? std::nullopt : joint.find_value(source);
}

// "%v = logsumexp (line 6:3)", or for a value made under another name (a decomposition's result, an injected
// VJP's wrong gradient), the node of the joint it stands for, then what computed it in the rung's graph.
std::string label_of(const graph::Graph& part, const graph::Node& n, graph::ValueId id, const graph::Graph& joint,
                     graph::ValueId rid) {
  if (part.value(id).name == joint.value(rid).name || joint.value(rid).producer < 0) return graph::node_label(part, n);
  return fmt::format("{} (computed as %{} = {} in the rung's graph)",
                     graph::node_label(joint, joint.nodes()[size_t(joint.value(rid).producer)]), part.value(id).name,
                     n.kind == graph::NodeKind::Op ? std::string(n.info().name) : "constant");
}

// The first value of `part` (in node order) whose reference (the joint's value it computes, of the same shape)
// differs beyond `tolerance`.
std::optional<Divergence> first_diverging(const graph::Graph& part, const std::vector<Tensor>& values,
                                          const graph::Graph& joint, const std::vector<Tensor>& ref,
                                          const std::string& step, double tolerance) {
  CompareOptions cmp;
  cmp.tol = tolerance;
  for (const graph::Node& n : part.nodes()) {
    for (graph::ValueId id : n.outputs) {
      std::optional<graph::ValueId> rid = counterpart(part, id, joint);
      const Tensor& got = values[size_t(id)];
      if (!rid || !got.defined() || !ref[size_t(*rid)].defined() || !is_floating(got.dtype())) continue;
      const Tensor& want = ref[size_t(*rid)];
      if (want.sizes() != got.sizes()) continue;
      CompareVerdict v = compare_outputs({want}, {got}, {want}, cmp);
      if (v.ok) continue;
      Divergence d;
      d.value = part.value(id).name;
      d.node = label_of(part, n, id, joint, *rid);
      d.step = step;
      d.verdict = v.str();
      d.worst_index = v.outputs[0].worst_index;
      d.expected = first_values(want, d.worst_index);
      d.actual = first_values(got, d.worst_index);
      return d;
    }
  }
  return std::nullopt;
}

}  // namespace

void find_aot_divergence(const graph::Graph& g, const std::vector<Tensor>& inputs, BisectReport& r,
                         const BisectOptions& o) {
  std::vector<bool> requires_grad;
  for (graph::ValueId in : g.inputs()) requires_grad.push_back(g.value(in).requires_grad);
  const aot::AotGraphs built = aot::aot_graphs(g, requires_grad, aot_backend_config(r.stage));
  const aot::AotGraphs reference = aot::aot_graphs(g, requires_grad, aot::AotConfig{});
  const TrainingRun run = training_run(g);
  const graph::Graph& fwd = built.partition.forward;
  const graph::Graph& bwd = built.partition.backward;
  const graph::Graph& joint = reference.joint.graph;

  std::vector<Tensor> primals = graph::copy_inputs(inputs);
  for (Tensor& state : aot::rng_inputs(built.rng, GeneratorState{})) primals.push_back(std::move(state));  // fixed draws
  std::vector<Tensor> tangents;  // one per backward tangent input, from the run's fixed tangents
  const size_t num_saved = size_t(built.partition.num_saved);
  for (size_t k = 0; k < built.joint.tangent_of.size(); ++k) {
    const size_t out = size_t(built.joint.tangent_of[k]);
    graph::ValueId id = bwd.inputs()[num_saved + k];
    tangents.push_back(out < run.tangents.size() && run.tangents[out].defined()
                           ? as_input_of(bwd, id, run.tangents[out])
                           : zeros(bwd.value(id).meta.sizes, bwd.value(id).meta.dtype));
  }
  std::vector<Tensor> joint_inputs = primals;
  joint_inputs.insert(joint_inputs.end(), tangents.begin(), tangents.end());
  const std::vector<Tensor> ref = fp64_values(joint, joint_inputs);

  const std::vector<Tensor> fwd_values = fp64_values(fwd, primals);
  std::string narrowed = fmt::format("the {} forward and backward graphs in the fp64 interpreter against the joint "
                                     "graph without its decompositions, partition and injected bugs (values matched "
                                     "by name or by the composite a decomposition stands for)", r.stage);
  if (std::optional<Divergence> d = first_diverging(fwd, fwd_values, joint, ref, "the AOT forward graph", o.tolerance)) {
    r.divergence = *d, r.divergence->narrowed_by = narrowed;
    return;
  }
  std::vector<Tensor> bwd_inputs;
  const size_t first_saved = fwd.outputs().size() - num_saved;
  for (size_t k = 0; k < num_saved; ++k)
    bwd_inputs.push_back(as_input_of(bwd, bwd.inputs()[k], fwd_values[size_t(fwd.outputs()[first_saved + k])]));
  bwd_inputs.insert(bwd_inputs.end(), tangents.begin(), tangents.end());
  if (std::optional<Divergence> d = first_diverging(bwd, fp64_values(bwd, bwd_inputs), joint, ref,
                                                    "the AOT backward graph", o.tolerance)) {
    r.divergence = *d, r.divergence->narrowed_by = narrowed;
    return;
  }
  r.divergence_note = fmt::format("no value of the {} forward and backward graphs diverges from the joint graph "
                                  "without its decompositions, partition and injected bugs: the bug is in what both "
                                  "share (a VJP rule, functionalization)", r.stage);
}

}  // namespace kiln::bisect
