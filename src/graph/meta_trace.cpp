// The meta-tensor graph recorder (meta_trace.h).
#include "graph/meta_trace.h"

#include <fmt/format.h>

namespace kiln::graph {

Tensor MetaGraphRecorder::bind(ValueId id) {
  const ValueInfo& v = out_.value(id);
  Tensor t = Tensor::meta(v.meta);
  if (v.wrapped_number) t.impl()->wrapped_number = true;
  ids_[t.impl()] = id;
  keep_.push_back(t);
  return t;
}

Tensor MetaGraphRecorder::bind_constant(ValueId id, const Tensor& value) {
  ids_[value.impl()] = id;
  keep_.push_back(value);
  return value;
}

void MetaGraphRecorder::alias(const Tensor& of, const Tensor& alias) {
  auto it = ids_.find(of.impl());
  if (it == ids_.end()) return;  // not a graph value: id_of reports it if the recorded code uses it
  ids_[alias.impl()] = it->second;
  keep_.push_back(alias);
}

ValueId MetaGraphRecorder::id_of(const Tensor& t) {
  auto it = ids_.find(t.impl());
  if (it != ids_.end()) return it->second;
  KILN_ASSERT(!t.is_meta(), "recording {}: a meta tensor that is not derived from the graph's values", hint_);
  ValueId id = out_.add_constant(out_.fresh_name(hint_ + "_c"), t);
  ids_[t.impl()] = id;
  keep_.push_back(t);
  return id;
}

std::vector<Tensor> MetaGraphRecorder::record(const OpCall& call) {
  std::vector<Arg> args = graph_args(call, [&](const Tensor& t) { return id_of(t); });
  std::vector<TensorMeta> metas = infer_meta(call);
  std::vector<std::string> names;
  for (size_t i = 0; i < metas.size(); ++i) names.push_back(out_.fresh_name(fmt::format("{}_d{}_", hint_, i)));
  std::vector<ValueId> outs = out_.add_op(call.op->id, std::move(args), names, metas);
  std::vector<Tensor> result;
  for (ValueId id : outs) result.push_back(bind(id));
  return result;
}

}  // namespace kiln::graph
