// Graph construction, queries and surgery. Argument binding reuses the dispatcher's bind_args on meta
// tensors, so a graph node is type-checked, defaulted and shape-inferred exactly as an eager call would be;
// MetaBinder does it for many nodes of one graph, sharing meta tensors between them.
#include "graph/graph.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln::graph {

namespace {
uint32_t name_hash(std::string_view s) {
  uint64_t h = std::hash<std::string_view>{}(s);
  return uint32_t(h ^ (h >> 32));
}
}  // namespace

ValueId Graph::new_value(std::string name, TensorMeta meta, int producer, int output_index) {
  ValueInfo v;
  v.name = name.empty() ? fresh_name() : std::move(name);
  const ValueId id = ValueId(values_.size());
  // One probe of the name index both checks that the name is new and finds the free slot for it.
  const uint32_t hash = name_hash(v.name);
  if (2 * (name_entries_ + 1) > name_index_.size()) grow_name_index(2 * (name_entries_ + 1));
  const size_t mask = name_index_.size() - 1;
  size_t slot = hash & mask;
  for (; name_index_[slot].id != kNoValue; slot = (slot + 1) & mask) {
    const NameSlot& s = name_index_[slot];
    KILN_CHECK(s.hash != hash || values_[size_t(s.id)].name != v.name, "graph {}: value name %{} is defined twice",
               this->name, v.name);
  }
  name_index_[slot] = {hash, id};
  ++name_entries_;
  v.meta = std::move(meta);
  v.producer = producer;
  v.output_index = output_index;
  values_.push_back(std::move(v));
  return id;
}

void Graph::reserve(size_t nodes, size_t values) {
  nodes_.reserve(nodes);
  values_.reserve(values);
  grow_name_index(values);
}

void Graph::grow_name_index(size_t entries) {
  size_t slots = 16;
  while (slots < 2 * entries) slots *= 2;
  if (slots <= name_index_.size()) return;
  std::vector<NameSlot> old = std::exchange(name_index_, std::vector<NameSlot>(slots));
  name_entries_ = 0;
  for (const NameSlot& s : old)
    if (s.id != kNoValue) index_name(s.hash, s.id);
}

void Graph::index_name(uint32_t hash, ValueId id) {
  if (2 * (name_entries_ + 1) > name_index_.size()) grow_name_index(2 * (name_entries_ + 1));
  const size_t mask = name_index_.size() - 1;
  size_t i = hash & mask;
  while (name_index_[i].id != kNoValue) i = (i + 1) & mask;
  name_index_[i] = {hash, id};
  ++name_entries_;
}

ValueId Graph::add_input(const std::string& name, const TensorMeta& meta, bool requires_grad) {
  TensorMeta m = meta;
  if (m.strides.size() != m.sizes.size()) m.strides = contiguous_strides(m.sizes);
  ValueId id = new_value(name, std::move(m), -1, 0);
  values_[size_t(id)].requires_grad = requires_grad;
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_constant(const std::string& name, const Tensor& value) {
  Node n;
  n.kind = NodeKind::Constant;
  n.constant = value.is_contiguous() ? value : contiguous(value);
  n.constant = history_free_alias(n.constant);
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
  std::vector<TensorMeta> out_metas = metas ? std::move(*metas) : infer_meta(bind_node_meta(*this, n));
  n.outputs.reserve(out_metas.size());
  for (size_t i = 0; i < out_metas.size(); ++i)
    n.outputs.push_back(new_value(i < output_names.size() ? std::move(output_names[i]) : std::string(),
                                  std::move(out_metas[i]), int(nodes_.size()), int(i)));
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

ValueId Graph::add_op1(OpId op, std::vector<Arg> args, const std::string& output_name) {
  std::vector<ValueId> outs = add_op(op, std::move(args), {output_name});
  KILN_CHECK(outs.size() == 1, "graph: {} has {} outputs, not 1", op_info(op).name, outs.size());
  return outs[0];
}

std::optional<ValueId> Graph::find_value(std::string_view n) const {
  if (name_index_.empty()) return std::nullopt;
  const uint32_t hash = name_hash(n);
  const size_t mask = name_index_.size() - 1;
  for (size_t i = hash & mask; name_index_[i].id != kNoValue; i = (i + 1) & mask) {
    const NameSlot& s = name_index_[i];
    if (s.hash == hash && values_[size_t(s.id)].name == n) return s.id;
  }
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

namespace {
// bind_args on a node's arguments, with value ids replaced by tensor_of(id) and numbers in Tensor slots by
// number_of(scalar) (which may leave them to bind_args to wrap).
template <class TensorOf, class NumberOf>
OpCall bind_node(const Node& n, TensorOf&& tensor_of, NumberOf&& number_of) {
  const OpInfo& op = n.info();
  const std::vector<ArgSpec>& specs = op.schema.args;
  std::vector<IValue> args;
  args.reserve(n.args.size());
  for (size_t i = 0; i < n.args.size(); ++i) {
    const Arg& a = n.args[i];
    if (const auto* t = std::get_if<TensorArg>(&a)) {
      args.emplace_back(tensor_of(t->id));
    } else if (const auto* l = std::get_if<TensorListArg>(&a)) {
      TensorList list;
      list.reserve(l->ids.size());
      for (ValueId id : l->ids) list.push_back(id == kNoValue ? Tensor() : tensor_of(id));
      args.emplace_back(std::move(list));
    } else if (const auto* s = std::get_if<Scalar>(&a); s && i < specs.size() && specs[i].type == ArgType::Tensor) {
      args.emplace_back(number_of(*s));
    } else {
      args.push_back(std::visit([](const auto& v) -> IValue {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate> || std::is_same_v<V, TensorArg> ||
                      std::is_same_v<V, TensorListArg>) return IValue();
        else return IValue(v);
      }, a));
    }
  }
  return bind_args(op, std::move(args));
}
}  // namespace

OpCall bind_node_meta(const Graph& g, const Node& n) {
  return bind_node(n, [&](ValueId id) {
    const ValueInfo& v = g.value(id);
    Tensor t = Tensor::meta(v.meta);
    if (v.wrapped_number) t.impl()->wrapped_number = true;
    return t;
  }, [](const Scalar& s) { return IValue(s); });  // bind_args wraps it
}

const Tensor& MetaBinder::value_tensor(ValueId id) {
  if (size_t(id) >= values_.size()) {
    KILN_CHECK(id >= 0 && id < g_.num_values(), "graph: a node reads value #{}, which does not exist", id);
    values_.resize(size_t(g_.num_values()));  // amortised: the graph's values grow geometrically
  }
  Tensor& t = values_[size_t(id)];
  if (!t.defined()) {
    const ValueInfo& v = g_.value(id);
    t = interned(v.meta, v.wrapped_number);
  }
  return t;
}

const Tensor& MetaBinder::interned(const TensorMeta& m, bool wrapped) {
  uint64_t h = (uint64_t(m.dtype) << 1 | uint64_t(wrapped)) * 0x9e3779b97f4a7c15ull;
  for (int64_t s : m.sizes) h = (h ^ uint64_t(s)) * 0x100000001b3ull;
  for (int64_t s : m.strides) h = (h ^ uint64_t(s)) * 0x100000001b3ull;
  h ^= uint64_t(m.device.type) << 8 ^ uint64_t(m.device.index);
  if (2 * (num_metas_ + 1) > metas_.size()) {  // grow (rehash) to keep the table at most half full
    std::vector<MetaSlot> old = std::exchange(metas_, std::vector<MetaSlot>(std::max<size_t>(16, 2 * metas_.size())));
    for (MetaSlot& s : old) {
      if (!s.tensor.defined()) continue;
      size_t i = s.hash & (metas_.size() - 1);
      while (metas_[i].tensor.defined()) i = (i + 1) & (metas_.size() - 1);
      metas_[i] = std::move(s);
    }
  }
  const size_t mask = metas_.size() - 1;
  size_t i = h & mask;
  for (; metas_[i].tensor.defined(); i = (i + 1) & mask) {
    const Tensor& t = metas_[i].tensor;
    if (metas_[i].hash == h && t.dtype() == m.dtype && t.sizes() == m.sizes && t.strides() == m.strides &&
        t.device() == m.device && t.is_wrapped_number() == wrapped)
      return t;
  }
  Tensor t = Tensor::meta(m);  // (strides of the wrong length become contiguous: then it matches no later lookup)
  if (wrapped) t.impl()->wrapped_number = true;
  metas_[i] = {h, std::move(t)};
  ++num_metas_;
  return metas_[i].tensor;
}

const Tensor& MetaBinder::number_tensor(const Scalar& s) {
  // Keyed by kind and bit pattern, so -0.0 and 0.0 (equal as Scalars) stay apart, as do NaN payloads.
  const uint64_t bits = s.is_float() ? std::bit_cast<uint64_t>(s.to_double()) : uint64_t(s.to_int());
  Tensor& t = numbers_[size_t(s.kind())][bits];
  if (!t.defined()) t = Tensor::wrapped_number(s);
  return t;
}

OpCall MetaBinder::bind(const Node& n) {
  // A number in a Tensor slot becomes the shared wrapped-number tensor bind_args would otherwise make anew.
  return bind_node(n, [&](ValueId id) { return value_tensor(id); }, [&](const Scalar& s) { return number_tensor(s); });
}

}  // namespace kiln::graph
