// The inductor's model of eager's storages, and eager's view and in-place checks run on it (storage_model.h).
#include "graph/storage_model.h"

#include <algorithm>

#include "graph/interpreter.h"
#include "ops/dispatch.h"

namespace kiln::graph {

using graph::Graph;
using graph::Node;
using graph::ValueId;

namespace {

ValueId tensor_arg(const Node& n, size_t i) {
  const auto* t = std::get_if<graph::TensorArg>(&n.args.at(i));
  return t ? t->id : graph::kNoValue;
}

// Whether eager answers node `n` with (a view of) its first argument's storage: views and in-place ops always,
// contiguous of a contiguous tensor and `to` its own dtype (their kernels return the input itself).
bool aliases_first_input(const Graph& g, const Node& n) {
  if (n.kind != graph::NodeKind::Op || n.args.empty() || tensor_arg(n, 0) == graph::kNoValue) return false;
  const OpInfo& op = n.info();
  if (op.kind == OpKind::View || op.is_inplace()) return true;
  const TensorMeta& in = g.value(tensor_arg(n, 0)).meta;
  if (n.op == OpId::contiguous) return Tensor::meta(in).is_contiguous();
  if (n.op == OpId::to) return std::get_if<DType>(&n.args.at(1)) && std::get<DType>(n.args[1]) == in.dtype;
  return false;
}

// Follows an undecomposed composite op's decomposition (KILN_BISECT_DISABLE, a random dropout) on meta tensors
// placed where eager's tensors lie, as eager runs it: a result aliases the first input when the decomposition
// answers with (views of) it, like dropout with p = 0 or reshape of a viewable tensor.
class AliasTracer : public MetaCallRecorder {
 public:
  explicit AliasTracer(const Tensor& source) { track(source); }
  bool tracked(const Tensor& t) const { return std::find(tracked_.begin(), tracked_.end(), t.impl()) != tracked_.end(); }

  std::vector<Tensor> record(const OpCall& call) override {
    const OpInfo& op = *call.op;
    const bool from_source = !call.args.empty() && call.args[0].is_tensor() && tracked(call.args[0].tensor());
    if (op.kind == OpKind::Composite && op.decomp) {  // eager runs it by its decomposition too (no kernel)
      ScopedMetaCallRecorder on(this);
      return op.decomp(call);
    }
    std::vector<Tensor> outs;
    const Tensor& x = from_source ? call.args[0].tensor() : Tensor();
    if (from_source && (op.kind == OpKind::View || (op.id == OpId::contiguous && x.is_contiguous()) ||
                        (op.id == OpId::to && call.args[1].is_dtype() && call.args[1].dtype() == x.dtype()))) {
      outs = op.kind == OpKind::View ? op.kernel(call) : std::vector<Tensor>{x};
      for (const Tensor& t : outs) track(t);
      return outs;
    }
    for (const TensorMeta& m : infer_meta(call)) outs.push_back(Tensor::meta(m));
    return outs;
  }
  void alias(const Tensor& of, const Tensor& alias) override {
    if (tracked(of)) track(alias);
  }

 private:
  void track(const Tensor& t) {
    tracked_.push_back(t.impl());
    keep_.push_back(t);
  }
  std::vector<const TensorImpl*> tracked_;
  std::vector<Tensor> keep_;  // keeps the impls alive, so their addresses stay unique
};

}  // namespace

StorageModel::StorageModel(const Graph& g) : g_(g), entries_(size_t(g.num_values())) {
  for (ValueId id : g.inputs()) own(id);
  for (const Node& n : g.nodes()) model_node(n);
}

void StorageModel::own(ValueId v) {
  const TensorMeta& m = g_.value(v).meta;
  entries_[size_t(v)] = Entry{v, 0, strided_extent(m.sizes, m.strides), false};
}

void StorageModel::model_node(const Node& n) {
  auto placed = [&](ValueId id) {  // a meta tensor where eager's tensor for `id` lies
    Tensor t = Tensor::meta(g_.value(id).meta);
    t.impl()->offset = entries_[size_t(id)].offset;
    return t;
  };
  if (n.kind == graph::NodeKind::Op && n.info().kind == OpKind::Composite && n.info().decomp &&
      tensor_arg(n, 0) != graph::kNoValue) {
    const ValueId src = tensor_arg(n, 0);
    OpCall call = bind_args(n.info(), graph::node_ivalues(n, placed));
    AliasTracer tracer(call.tensor(0));
    std::vector<Tensor> results;
    {
      ScopedMetaCallRecorder on(&tracer);
      results = n.info().decomp(call);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (k < results.size() && tracer.tracked(results[k]))
        entries_[size_t(n.outputs[k])] = Entry{entries_[size_t(src)].owner, results[k].offset(), 0, false};
      else
        own(n.outputs[k]);
    }
    return;
  }
  if (!aliases_first_input(g_, n)) {
    for (ValueId o : n.outputs) own(o);
    return;
  }
  const ValueId src = tensor_arg(n, 0);
  int64_t offset = entries_[size_t(src)].offset;
  if (n.info().kind == OpKind::View) {
    // The view kernels compute sizes, strides and offset only, so they run on meta tensors placed where eager's
    // tensors lie; as_strided's storage check is check()'s (the meta tensors have no storage).
    OpCall call = bind_args(n.info(), graph::node_ivalues(n, placed));
    offset = n.info().kernel(call).at(0).offset();
  }
  entries_[size_t(n.outputs[0])] = Entry{entries_[size_t(src)].owner, offset, 0};
  if (n.info().is_inplace()) entries_[size_t(entries_[size_t(src)].owner)].written = true;
  for (size_t i = 1; i < n.outputs.size(); ++i) own(n.outputs[i]);
}

StorageSpan StorageModel::span(ValueId v) const {
  const TensorMeta& m = g_.value(v).meta;
  const Entry& e = entries_[size_t(v)];
  return StorageSpan{uintptr_t(e.owner), e.offset, m.sizes, m.strides};
}

void StorageModel::check(const std::function<std::string(const Node&)>& label) const {
  for (const Node& n : g_.nodes()) {
    try {
      check_node(n);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", label ? label(n) : graph::node_label(g_, n), e.what()), e.internal());
    }
  }
}

void StorageModel::check_node(const Node& n) const {
  if (n.kind != graph::NodeKind::Op) return;
  if (n.op == OpId::as_strided && tensor_arg(n, 0) != graph::kNoValue) {
    const OpCall call = graph::bind_node_meta(g_, n);
    const ValueId src = tensor_arg(n, 0);
    const int64_t offset = call.opt_int(3).value_or(entries_[size_t(src)].offset);
    check_view_in_storage("as_strided", call.ints(1), call.ints(2), offset, capacity(owner(src)));
  }
  if (inplace_checks_overlap(n.info()) && tensor_arg(n, 0) != graph::kNoValue) {
    const std::vector<ValueId> read = Graph::node_inputs(n);  // the written-to tensor first
    std::vector<StorageSpan> inputs;
    for (size_t i = 1; i < read.size(); ++i) inputs.push_back(span(read[i]));
    check_inplace_overlap(n.info().name, span(tensor_arg(n, 0)), inputs);
  }
}

}  // namespace kiln::graph
