// The graph IR: the one thing every stage and tool shares (decision 2). An SSA graph over the op table:
// graph inputs (placeholders), constant nodes, op nodes with bound arguments, and an output list. Every value
// carries its TensorMeta. Nodes are kept in a valid topological order; values have stable ids. Rewrites go
// through the one rewrite helper (rewrite.h: clone through a value map, or in place keeping ids).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ops/dispatch.h"
#include "ops/op_info.h"

namespace kiln::graph {

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;  // an absent entry of a Tensor?[] argument

// Where a node or value came from: a line of the .kir file it was read from (file null), or a line of the C++
// program capture recorded it from (file: std::source_location's file name, static storage). 0 = not known.
struct SourceLoc {
  int line = 0, col = 0;
  const char* file = nullptr;
  bool known() const { return line > 0; }
};

// One argument of an op node: like IValue, with graph values in place of tensors.
struct TensorArg {
  ValueId id;
  bool operator==(const TensorArg&) const = default;
};
struct TensorListArg {
  std::vector<ValueId> ids;  // kNoValue for None entries of Tensor?[]
  bool operator==(const TensorListArg&) const = default;
};
using Arg = std::variant<std::monostate, TensorArg, TensorListArg, Scalar, IntList, DType, std::string>;

enum class NodeKind : uint8_t { Constant, Op };

struct Node {
  NodeKind kind = NodeKind::Op;
  OpId op{};                    // Op nodes
  std::vector<Arg> args;        // Op nodes: one per schema argument, defaults filled in
  std::vector<ValueId> outputs;
  Tensor constant;              // Constant nodes: the value (contiguous)
  SourceLoc loc;
  const OpInfo& info() const { return op_info(op); }
};

struct ValueInfo {
  std::string name;        // without the '%'; unique in the graph
  TensorMeta meta;
  bool requires_grad = false;
  bool wrapped_number = false;  // a number operand (constant), promoted like a Python scalar
  // Provenance: the name of the value this one computes in the graph a rewriting pass was given, where the pass
  // made it under another name (the decompose pass sets it on a composite node's results); "" otherwise. Copies
  // (graph/rewrite.h GraphCloner) keep it, so a value of the AOT forward or backward graph still names the node
  // of the user's graph it stands for (the bisector matches values by it).
  std::string stands_for;
  int producer = -1;       // index of the producing node in Graph::nodes(), -1 for graph inputs
  int output_index = 0;
  SourceLoc loc;
};

class Graph {
 public:
  std::string name = "main";

  // ---- construction ----
  ValueId add_input(const std::string& name, const TensorMeta& meta, bool requires_grad = false);
  ValueId add_constant(const std::string& name, const Tensor& value);
  // Appends an op node; output metas are inferred from the op table unless given.
  std::vector<ValueId> add_op(OpId op, std::vector<Arg> args, std::vector<std::string> output_names = {},
                              std::optional<std::vector<TensorMeta>> metas = std::nullopt);
  ValueId add_op1(OpId op, std::vector<Arg> args, const std::string& output_name = "");
  void set_outputs(std::vector<ValueId> outs) { outputs_ = std::move(outs); }
  // Room for this many nodes and values in total (the parser sizes a graph from its text).
  void reserve(size_t nodes, size_t values);

  // ---- queries ----
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const ValueInfo& value(ValueId id) const { return values_.at(size_t(id)); }
  ValueInfo& value(ValueId id) { return values_.at(size_t(id)); }
  int num_values() const { return int(values_.size()); }
  std::optional<ValueId> find_value(std::string_view name) const;
  std::string fresh_name(const std::string& hint = "") const;  // a name not used yet
  // Value ids a node reads (tensor arguments, flattened, without kNoValue).
  static std::vector<ValueId> node_inputs(const Node& n);
  // For every value: the indices of nodes that read it (and whether it is a graph output).
  std::vector<std::vector<int>> users() const;
  int num_op_nodes() const;

  // Structural hash: equal for graphs that print the same up to value names (stable across processes).
  uint64_t structural_hash() const;

 private:
  ValueId new_value(std::string name, TensorMeta meta, int producer, int output_index);
  std::vector<Node> nodes_;
  std::vector<ValueInfo> values_;
  // name -> id, so building an N-value graph is linear: an open-addressing table (power-of-two size, at most
  // half full) of (hash of the name, id), checked against values_[id].name. One flat array keeps lookups in
  // large graphs to about one cache miss. Renaming through value(id).name leaves a stale entry, which
  // find_value detects and ignores.
  struct NameSlot {
    uint32_t hash = 0;
    ValueId id = kNoValue;  // kNoValue: empty
  };
  std::vector<NameSlot> name_index_;
  size_t name_entries_ = 0;
  void index_name(uint32_t hash, ValueId id);  // adds an entry, growing the table as needed
  void grow_name_index(size_t entries);        // room for `entries` entries
  mutable size_t next_fresh_ = 0;
  std::vector<ValueId> inputs_, outputs_;
};

// Binds the nodes of one graph to meta tensors for shape inference (the verifier and the parser run it on every
// node). Values with the same meta (and wrapped-number flag) share one meta tensor, made on first use, and a
// number given for a Tensor argument becomes one wrapped-number tensor per distinct number, so binding a node
// costs little more than its argument list. (Shape inference reads a tensor's dtype, sizes, strides, device
// and wrapped flag, never its identity.) Values may be added to the graph while a binder is in use, but the
// metas and wrapped-number flags of values it has bound must not change.
class MetaBinder {
 public:
  explicit MetaBinder(const Graph& g) : g_(g) {}
  // bind_args on the node's arguments (schema checks and conversions), with values as meta tensors.
  OpCall bind(const Node& n);
  // The node's output metas from the op table's shape inference.
  std::vector<TensorMeta> infer(const Node& n) { return infer_meta(bind(n)); }
  void reserve(size_t values) { values_.reserve(values); }  // room for this many values' meta tensors

 private:
  const Tensor& value_tensor(ValueId id);
  const Tensor& number_tensor(const Scalar& s);
  const Tensor& interned(const TensorMeta& m, bool wrapped);
  struct MetaSlot {
    uint64_t hash = 0;
    Tensor tensor;  // undefined: empty
  };
  const Graph& g_;
  std::vector<Tensor> values_;                       // by value id; undefined until first bound
  std::vector<MetaSlot> metas_;                      // open addressing (power-of-two size, at most half full)
  size_t num_metas_ = 0;
  std::unordered_map<uint64_t, Tensor> numbers_[3];  // by Scalar kind, then bit pattern
};

// The meta tensors / argument list a node is called with (values replaced by meta tensors): for shape
// inference and the verifier (one-off; MetaBinder binds many nodes of a graph faster).
OpCall bind_node_meta(const Graph& g, const Node& n);
// A node's arguments as IValues, with each value id replaced by `tensor_of(id)`.
std::vector<IValue> node_ivalues(const Node& n, const std::function<Tensor(ValueId)>& tensor_of);
// The same with tensors from `env`, indexed by value id.
std::vector<IValue> node_ivalues(const Graph& g, const Node& n, const std::vector<Tensor>& env);

}  // namespace kiln::graph
