// The one graph rewrite helper (decision 3). Two forms, for the two kinds of rewrite kiln does:
//
//   * Clone through a value map: a new graph is built from a source graph node by node, and a map from
//     source value ids to new ids rewires every argument. A per-node callback may replace a node by new nodes
//     (mapping the node's outputs to the values that stand for them) or let it be copied. Used by the
//     inductor's decomposition (a composite node becomes the nodes of its decomposition) and the minifier's
//     reducer (nodes dropped, turned into inputs or constants).
//
//       Graph out = clone_graph(g, [&](const Node& n, GraphCloner& c) {
//         if (!is_composite(n)) return false;              // copied as it is
//         c.map(n.outputs[0], build_decomposition(n, c));  // new nodes in c.out(), reading c[id] of g's ids
//         return true;
//       });
//
//   * In place, keeping value ids: remap_args and erase_nodes, for the cleanup passes (passes.h). Value ids
//     stay stable there because callers key per-value facts by id across a pipeline (the inductor's
//     "unrounded" flags from decomposition are read by the lowering after the cleanup pipeline).
#pragma once
#include <functional>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph {

// Rewires the tensor arguments of `args` through `map` (a callable ValueId -> ValueId); kNoValue entries of
// Tensor?[] lists stay.
template <class Map>
void remap_args(std::vector<Arg>& args, const Map& map) {
  for (Arg& a : args) {
    if (auto* t = std::get_if<TensorArg>(&a)) t->id = map(t->id);
    if (auto* l = std::get_if<TensorListArg>(&a))
      for (ValueId& id : l->ids)
        if (id != kNoValue) id = map(id);
  }
}

// Removes the nodes marked in `dead` (by node index) in one sweep and renumbers producers. Values of erased
// nodes stay, orphaned (producer -2): ids never change. Their uses must be gone (or rewired) already.
void erase_nodes(Graph& g, const std::vector<bool>& dead);

struct CloneOptions {
  // Copy each node's source location. Off for graphs printed as files of their own (a minifier candidate
  // becomes a repro, whose lines are not the original file's).
  bool keep_locations = true;
  // Re-infer the output metas of copied op nodes from the op table instead of copying them (needed when an
  // input's strides changed).
  bool infer_metas = false;
};

// Builds a new graph from `src` through a value map. Every copy keeps the value's name, meta, requires_grad
// and wrapped-number flag.
class GraphCloner {
 public:
  explicit GraphCloner(const Graph& src, CloneOptions opts = {});
  const Graph& src() const { return src_; }
  Graph& out() { return out_; }
  CloneOptions& options() { return opts_; }

  // The new id of source value `id` (kNoValue while unmapped).
  ValueId operator[](ValueId id) const { return map_[size_t(id)]; }
  void map(ValueId src_id, ValueId out_id) { map_[size_t(src_id)] = out_id; }

  ValueId copy_input(ValueId src_id);                          // a source input as an input
  ValueId input_as(ValueId src_id, const TensorMeta& meta);    // any source value as an input with `meta`
  ValueId constant_as(ValueId src_id, const Tensor& value);    // any source value as a constant
  // Appends a copy of `n` (a constant or an op node reading mapped values) and maps its outputs.
  std::vector<ValueId> copy_node(const Node& n);
  // The new graph's outputs: `src_ids` mapped (all mapped by now).
  void set_outputs(const std::vector<ValueId>& src_ids);
  Graph take() { return std::move(out_); }

 private:
  const Graph& src_;
  CloneOptions opts_;
  Graph out_;
  std::vector<ValueId> map_;
};

// Whether the callback rewrote node `n` (then it added the nodes standing for it to cloner.out() and mapped
// each of n's outputs that later nodes or the outputs read); false: the node is copied.
using NodeRewrite = std::function<bool(const Node& n, GraphCloner& cloner)>;

// Clones `src`: every input copied, every node handed to `rewrite` (or copied when there is none or it
// declines), the outputs mapped.
Graph clone_graph(const Graph& src, const NodeRewrite& rewrite = {}, CloneOptions opts = {});

// The inputs of `g` that a node reads or that are outputs, in input order.
std::vector<ValueId> used_inputs(const Graph& g);
// A clone of `g` without the inputs nothing reads (value ids change; inputs keep their order).
Graph without_unused_inputs(const Graph& g);

}  // namespace kiln::graph
