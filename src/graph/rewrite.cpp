// GraphCloner, clone_graph, erase_nodes and the unused-input queries (rewrite.h).
#include "graph/rewrite.h"

#include <algorithm>

namespace kiln::graph {

void erase_nodes(Graph& g, const std::vector<bool>& dead) {
  std::vector<Node>& nodes = g.nodes();
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!dead[i]) {
      kept.push_back(std::move(nodes[i]));
      continue;
    }
    for (ValueId id : nodes[i].outputs) g.value(id).producer = -2;
  }
  nodes = std::move(kept);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (size_t k = 0; k < nodes[i].outputs.size(); ++k) {
      g.value(nodes[i].outputs[k]).producer = int(i);
      g.value(nodes[i].outputs[k]).output_index = int(k);
    }
}

GraphCloner::GraphCloner(const Graph& src, CloneOptions opts)
    : src_(src), opts_(opts), map_(size_t(src.num_values()), kNoValue) {
  out_.name = src.name;
}

ValueId GraphCloner::copy_input(ValueId src_id) { return input_as(src_id, src_.value(src_id).meta); }

ValueId GraphCloner::input_as(ValueId src_id, const TensorMeta& meta) {
  const ValueInfo& v = src_.value(src_id);
  ValueId id = out_.add_input(v.name, meta, v.requires_grad);
  out_.value(id).stands_for = v.stands_for;
  map(src_id, id);
  return id;
}

ValueId GraphCloner::constant_as(ValueId src_id, const Tensor& value) {
  ValueId id = out_.add_constant(src_.value(src_id).name, value);
  map(src_id, id);
  return id;
}

std::vector<ValueId> GraphCloner::copy_node(const Node& n) {
  if (n.kind == NodeKind::Constant) {
    const ValueId o = n.outputs[0];
    const ValueId id = constant_as(o, n.constant);
    out_.value(id).wrapped_number = src_.value(o).wrapped_number;
    if (opts_.keep_locations) out_.nodes().back().loc = n.loc;
    return {id};
  }
  std::vector<Arg> args = n.args;
  remap_args(args, [this](ValueId id) { return (*this)[id]; });
  std::vector<std::string> names;
  std::vector<TensorMeta> metas;
  for (ValueId o : n.outputs) {
    names.push_back(src_.value(o).name);
    metas.push_back(src_.value(o).meta);
  }
  std::vector<ValueId> outs = opts_.infer_metas ? out_.add_op(n.op, std::move(args), names)
                                                : out_.add_op(n.op, std::move(args), names, metas);
  if (opts_.keep_locations) out_.nodes().back().loc = n.loc;
  for (size_t k = 0; k < outs.size(); ++k) {
    map(n.outputs[k], outs[k]);
    out_.value(outs[k]).requires_grad = src_.value(n.outputs[k]).requires_grad;
    out_.value(outs[k]).stands_for = src_.value(n.outputs[k]).stands_for;
  }
  return outs;
}

void GraphCloner::set_outputs(const std::vector<ValueId>& src_ids) {
  std::vector<ValueId> outs;
  outs.reserve(src_ids.size());
  for (ValueId id : src_ids) outs.push_back((*this)[id]);
  out_.set_outputs(std::move(outs));
}

Graph clone_graph(const Graph& src, const NodeRewrite& rewrite, CloneOptions opts) {
  GraphCloner c(src, opts);
  for (ValueId id : src.inputs()) c.copy_input(id);
  for (const Node& n : src.nodes())
    if (!rewrite || !rewrite(n, c)) c.copy_node(n);
  c.set_outputs(src.outputs());
  return c.take();
}

std::vector<ValueId> used_inputs(const Graph& g) {
  const std::vector<std::vector<int>> users = g.users();
  const std::vector<ValueId>& outs = g.outputs();
  std::vector<ValueId> used;
  for (ValueId id : g.inputs())
    if (!users[size_t(id)].empty() || std::find(outs.begin(), outs.end(), id) != outs.end()) used.push_back(id);
  return used;
}

Graph without_unused_inputs(const Graph& g) {
  GraphCloner cloner(g);
  for (ValueId id : used_inputs(g)) cloner.copy_input(id);
  for (const Node& n : g.nodes()) cloner.copy_node(n);
  cloner.set_outputs(g.outputs());
  return cloner.take();
}

}  // namespace kiln::graph
