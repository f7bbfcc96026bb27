// Graph construction, queries and surgery. Argument binding reuses the dispatcher's bind_args on meta
// tensors, so a graph node is type-checked, defaulted and shape-inferred exactly as an eager call would be.
#include "graph/graph.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln::graph {

ValueId Graph::new_value(const std::string& name, const TensorMeta& meta, int producer, int output_index) {
  ValueInfo v;
  v.name = name.empty() ? fresh_name() : name;
  KILN_CHECK(!find_value(v.name), "graph {}: value name %{} is defined twice", this->name, v.name);
  v.meta = meta;
  v.producer = producer;
  v.output_index = output_index;
  by_name_[v.name] = ValueId(values_.size());
  values_.push_back(std::move(v));
  return ValueId(values_.size() - 1);
}

ValueId Graph::add_input(const std::string& name, const TensorMeta& meta, bool requires_grad) {
  TensorMeta m = meta;
  if (m.strides.size() != m.sizes.size()) m.strides = contiguous_strides(m.sizes);
  ValueId id = new_value(name, m, -1, 0);
  values_[size_t(id)].requires_grad = requires_grad;
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_constant(const std::string& name, const Tensor& value) {
  Node n;
  n.kind = NodeKind::Constant;
  n.constant = value.is_contiguous() ? value : contiguous(value);
  n.constant = n.constant.detach();
  ValueId id = new_value(name, n.constant.meta(), int(nodes_.size()), 0);
  values_[size_t(id)].wrapped_number = value.is_wrapped_number();
  n.outputs = {id};
  nodes_.push_back(std::move(n));
  return id;
}

std::vector<ValueId> Graph::add_op(OpId op, std::vector<Arg> args, std::vector<std::string> output_names,
                                   std::optional<std::vector<TensorMeta>> metas) {
  Node n;
  n.kind = NodeKind::Op;
  n.op = op;
  n.args = std::move(args);
  KILN_CHECK(n.args.size() == op_info(op).schema.args.size(), "graph: {} node has {} arguments, its schema {}",
             op_info(op).name, n.args.size(), op_info(op).schema.str());
  std::vector<TensorMeta> out_metas = metas ? *metas : infer_meta(bind_node_meta(*this, n));
  std::vector<ValueId> outs;
  for (size_t i = 0; i < out_metas.size(); ++i)
    outs.push_back(new_value(i < output_names.size() ? output_names[i] : "", out_metas[i], int(nodes_.size()), int(i)));
  n.outputs = outs;
  nodes_.push_back(std::move(n));
  return outs;
}

ValueId Graph::add_op1(OpId op, std::vector<Arg> args, const std::string& output_name) {
  std::vector<ValueId> outs = add_op(op, std::move(args), {output_name});
  KILN_CHECK(outs.size() == 1, "graph: {} has {} outputs, not 1", op_info(op).name, outs.size());
  return outs[0];
}

std::optional<ValueId> Graph::find_value(const std::string& n) const {
  auto it = by_name_.find(n);
  if (it != by_name_.end() && values_[size_t(it->second)].name == n) return it->second;
  return std::nullopt;
}

std::string Graph::fresh_name(const std::string& hint) const {
  if (!hint.empty() && !find_value(hint)) return hint;
  for (;; ++next_fresh_) {
    std::string s = (hint.empty() ? "v" : hint + "_") + std::to_string(next_fresh_);
    if (!find_value(s)) return s;
  }
}

std::vector<ValueId> Graph::node_inputs(const Node& n) {
  std::vector<ValueId> out;
  for (const Arg& a : n.args) {
    if (auto* t = std::get_if<TensorArg>(&a)) out.push_back(t->id);
    if (auto* l = std::get_if<TensorListArg>(&a))
      for (ValueId id : l->ids)
        if (id != kNoValue) out.push_back(id);
  }
  return out;
}

std::vector<std::vector<int>> Graph::users() const {
  std::vector<std::vector<int>> u(values_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (ValueId id : node_inputs(nodes_[i])) u[size_t(id)].push_back(int(i));
  return u;
}

int Graph::num_op_nodes() const {
  return int(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.kind == NodeKind::Op; }));
}

void Graph::replace_all_uses(ValueId from, ValueId to) {
  for (Node& n : nodes_)
    for (Arg& a : n.args) {
      if (auto* t = std::get_if<TensorArg>(&a); t && t->id == from) t->id = to;
      if (auto* l = std::get_if<TensorListArg>(&a))
        for (ValueId& id : l->ids)
          if (id == from) id = to;
    }
  for (ValueId& o : outputs_)
    if (o == from) o = to;
}

void Graph::renumber_producers() {
  for (ValueInfo& v : values_)
    if (v.producer >= 0) v.producer = -2;  // mark: set below, or orphaned (erased)
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (size_t k = 0; k < nodes_[i].outputs.size(); ++k) {
      values_[size_t(nodes_[i].outputs[k])].producer = int(i);
      values_[size_t(nodes_[i].outputs[k])].output_index = int(k);
    }
}

void Graph::erase_node(int index) {
  KILN_CHECK(index >= 0 && index < int(nodes_.size()), "graph: no node {}", index);
  auto u = users();
  for (ValueId id : nodes_[size_t(index)].outputs) {
    KILN_CHECK(u[size_t(id)].empty() && std::find(outputs_.begin(), outputs_.end(), id) == outputs_.end(),
               "graph: cannot erase the node defining %{}: it is still used", values_[size_t(id)].name);
  }
  nodes_.erase(nodes_.begin() + index);
  renumber_producers();
}

void Graph::insert_node(int index, Node node) {
  KILN_CHECK(index >= 0 && index <= int(nodes_.size()), "graph: cannot insert at {}", index);
  nodes_.insert(nodes_.begin() + index, std::move(node));
  renumber_producers();
}

std::vector<ValueId> Graph::node_to_inputs(int index) {
  KILN_CHECK(index >= 0 && index < int(nodes_.size()), "graph: no node {}", index);
  std::vector<ValueId> outs = nodes_[size_t(index)].outputs;
  nodes_.erase(nodes_.begin() + index);
  for (ValueId id : outs) {
    values_[size_t(id)].producer = -1;
    values_[size_t(id)].output_index = 0;
    inputs_.push_back(id);
  }
  renumber_producers();
  return outs;
}

void Graph::truncate_after(int index) {
  KILN_CHECK(index >= 0 && index < int(nodes_.size()), "graph: no node {}", index);
  outputs_ = nodes_[size_t(index)].outputs;
  nodes_.erase(nodes_.begin() + index + 1, nodes_.end());
  renumber_producers();
}

void Graph::remove_unused_inputs() {
  auto u = users();
  std::vector<ValueId> kept;
  for (ValueId id : inputs_)
    if (!u[size_t(id)].empty() || std::find(outputs_.begin(), outputs_.end(), id) != outputs_.end()) kept.push_back(id);
  inputs_ = kept;
}

Graph Graph::extract(const std::vector<int>& node_indices, std::optional<std::vector<ValueId>> outputs) const {
  Graph out;
  out.name = name;
  std::unordered_map<ValueId, ValueId> map;
  std::set<int> chosen(node_indices.begin(), node_indices.end());
  auto mapped = [&](ValueId id) -> ValueId {
    if (auto it = map.find(id); it != map.end()) return it->second;
    const ValueInfo& v = values_[size_t(id)];
    ValueId nid;
    if (v.producer >= 0 && nodes_[size_t(v.producer)].kind == NodeKind::Constant) {
      nid = out.add_constant(v.name, nodes_[size_t(v.producer)].constant);
    } else {
      nid = out.add_input(v.name, v.meta, v.requires_grad);
    }
    map[id] = nid;
    return nid;
  };
  for (int i : node_indices) {
    const Node& n = nodes_.at(size_t(i));
    if (n.kind == NodeKind::Constant) {
      map[n.outputs[0]] = out.add_constant(values_[size_t(n.outputs[0])].name, n.constant);
      continue;
    }
    Node copy = n;
    for (Arg& a : copy.args) {
      if (auto* t = std::get_if<TensorArg>(&a)) t->id = mapped(t->id);
      if (auto* l = std::get_if<TensorListArg>(&a))
        for (ValueId& id : l->ids)
          if (id != kNoValue) id = mapped(id);
    }
    std::vector<ValueId> outs;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const ValueInfo& v = values_[size_t(n.outputs[k])];
      ValueId nid = out.new_value(v.name, v.meta, int(out.nodes_.size()), int(k));
      out.values_[size_t(nid)].requires_grad = v.requires_grad;
      map[n.outputs[k]] = nid;
      outs.push_back(nid);
    }
    copy.outputs = outs;
    out.nodes_.push_back(std::move(copy));
  }
  std::vector<ValueId> outs;
  if (outputs) {
    for (ValueId id : *outputs) outs.push_back(mapped(id));
  } else {
    auto u = users();
    for (int i : node_indices)
      for (ValueId id : nodes_[size_t(i)].outputs) {
        bool used_outside = std::find(outputs_.begin(), outputs_.end(), id) != outputs_.end();
        for (int user : u[size_t(id)]) used_outside |= !chosen.count(user);
        if (used_outside) outs.push_back(map.at(id));
      }
  }
  out.set_outputs(outs);
  return out;
}

// ---------------------------------------------------------------- hashing
namespace {
struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void bytes(const void* p, size_t n) {
    auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 0x100000001b3ull;
  }
  void u64(uint64_t v) { bytes(&v, 8); }
  void str(const std::string& s) { u64(s.size()); bytes(s.data(), s.size()); }
  void meta(const TensorMeta& m) {
    u64(uint64_t(m.dtype));
    u64(m.sizes.size());
    for (int64_t s : m.sizes) u64(uint64_t(s));
    for (int64_t s : m.strides) u64(uint64_t(s));
  }
};
}  // namespace

uint64_t Graph::structural_hash() const {
  Hasher hs;
  std::unordered_map<ValueId, uint64_t> ordinal;  // definition order, so names do not matter
  for (ValueId id : inputs_) {
    ordinal[id] = ordinal.size();
    hs.meta(values_[size_t(id)].meta);
    hs.u64(values_[size_t(id)].requires_grad);
  }
  for (const Node& n : nodes_) {
    hs.u64(uint64_t(n.kind));
    if (n.kind == NodeKind::Constant) {
      Tensor c = contiguous(n.constant);
      hs.meta(c.meta());
      if (c.numel() > 0) hs.bytes(c.data_ptr(), size_t(c.numel() * dtype_size(c.dtype())));
    } else {
      hs.u64(uint64_t(n.op));
      for (const Arg& a : n.args) {
        hs.u64(a.index());
        std::visit([&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, TensorArg>) hs.u64(ordinal.count(v.id) ? ordinal[v.id] : ~0ull);
          else if constexpr (std::is_same_v<V, TensorListArg>) {
            for (ValueId id : v.ids) hs.u64(id == kNoValue ? ~1ull : ordinal.count(id) ? ordinal[id] : ~0ull);
          } else if constexpr (std::is_same_v<V, Scalar>) hs.str(v.str());
          else if constexpr (std::is_same_v<V, IntList>) { for (int64_t x : v) hs.u64(uint64_t(x)); }
          else if constexpr (std::is_same_v<V, DType>) hs.u64(uint64_t(v));
          else if constexpr (std::is_same_v<V, std::string>) hs.str(v);
        }, a);
      }
    }
    for (ValueId id : n.outputs) {
      ordinal[id] = ordinal.size();
      hs.meta(values_[size_t(id)].meta);
    }
  }
  for (ValueId id : outputs_) hs.u64(ordinal.count(id) ? ordinal[id] : ~0ull);
  return hs.h;
}

// ---------------------------------------------------------------- binding
std::vector<IValue> node_ivalues(const Node& n, const std::function<Tensor(ValueId)>& tensor_of) {
  std::vector<IValue> out;
  out.reserve(n.args.size());
  for (const Arg& a : n.args) {
    out.push_back(std::visit([&](const auto& v) -> IValue {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<V, std::monostate>) return IValue();
      else if constexpr (std::is_same_v<V, TensorArg>) return IValue(tensor_of(v.id));
      else if constexpr (std::is_same_v<V, TensorListArg>) {
        TensorList l;
        for (ValueId id : v.ids) l.push_back(id == kNoValue ? Tensor() : tensor_of(id));
        return IValue(l);
      } else return IValue(v);
    }, a));
  }
  return out;
}

std::vector<IValue> node_ivalues(const Graph&, const Node& n, const std::vector<Tensor>& env) {
  return node_ivalues(n, [&](ValueId id) { return env.at(size_t(id)); });
}

OpCall bind_node_meta(const Graph& g, const Node& n) {
  return bind_args(n.info(), node_ivalues(n, [&](ValueId id) {
    const ValueInfo& v = g.value(id);
    Tensor t = Tensor::meta(v.meta);
    if (v.wrapped_number) t.impl()->wrapped_number = true;
    return t;
  }));
}

}  // namespace kiln::graph
