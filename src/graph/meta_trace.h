// The one recorder that turns Tensor-API code into graph nodes: code written against the Tensor API (an op's
// decomposition, an op's VJP rule) runs on meta tensors standing for graph values while this recorder is
// installed (ScopedMetaCallRecorder, ops/dispatch.h), and every op call it makes becomes a node of the graph.
// The inductor's decompose pass records decompositions with it; AOT autograd records VJP rules into the joint
// graph with it (docs/aot.md).
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "ops/dispatch.h"

namespace kiln::graph {

class MetaGraphRecorder : public MetaCallRecorder {
 public:
  // New values are named `<name_hint>_d<k>_<n>`, constants `<name_hint>_c<n>`.
  MetaGraphRecorder(Graph& out, std::string name_hint) : out_(out), hint_(std::move(name_hint)) {}

  // A meta tensor standing for value `id` of the graph.
  Tensor bind(ValueId id);
  // `value` (a tensor with data: a constant of the graph) standing for value `id`, so recorded code can read it.
  Tensor bind_constant(ValueId id, const Tensor& value);
  // See MetaCallRecorder::records_all_calls (AOT's VJP recording turns it on).
  void set_records_all_calls(bool on) { all_calls_ = on; }
  bool records_all_calls() const override { return all_calls_; }
  // The value `t` stands for; a tensor with data that is no graph value becomes a constant node.
  ValueId id_of(const Tensor& t);
  void set_name_hint(std::string hint) { hint_ = std::move(hint); }

  void alias(const Tensor& of, const Tensor& alias) override;
  std::vector<Tensor> record(const OpCall& call) override;

 private:
  Graph& out_;
  std::string hint_;
  std::unordered_map<TensorImpl*, ValueId> ids_;
  std::vector<Tensor> keep_;  // keeps the impls alive, so their addresses stay unique
  bool all_calls_ = false;
};

// A node's arguments as graph arguments: every tensor replaced by the value `id_of` gives for it.
template <class IdOf>
std::vector<Arg> graph_args(const OpCall& call, IdOf&& id_of) {
  std::vector<Arg> args;
  for (const IValue& v : call.args) {
    if (v.is_none()) args.emplace_back(std::monostate{});
    else if (v.is_tensor()) args.emplace_back(TensorArg{id_of(v.tensor())});
    else if (v.is_tensor_list()) {
      TensorListArg l;
      for (const Tensor& t : v.tensor_list()) l.ids.push_back(t.defined() ? id_of(t) : kNoValue);
      args.emplace_back(l);
    } else if (v.is_scalar()) args.emplace_back(v.scalar());
    else if (v.is_int_list()) args.emplace_back(v.int_list());
    else if (v.is_dtype()) args.emplace_back(v.dtype());
    else args.emplace_back(v.string());
  }
  return args;
}

}  // namespace kiln::graph
