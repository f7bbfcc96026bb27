// The op table's record type (OpInfo), the parsed schema, the call record passed to kernels (OpCall), and
// the signatures of the functions each row provides. See ops.def for the rows and docs/adding-an-op.md.
#pragma once
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "ops/ivalue.h"

namespace kiln {

enum class OpId : uint16_t {
#define KILN_OP(id, family, kind, flags, schema, ...) id,
#include "ops/ops.def"
#undef KILN_OP
  NumOps
};
inline constexpr int kNumOps = int(OpId::NumOps);

enum class OpKind : uint8_t { Pointwise, Reduction, View, Extern, Data, Creation, Random, Composite, InPlace, Backward };
std::string_view op_kind_name(OpKind k);

enum class ArgType : uint8_t {
  Tensor,         // Tensor (or Tensor? when optional)
  TensorList,     // Tensor[]
  OptTensorList,  // Tensor?[] (entries may be undefined tensors)
  Scalar, Int, Float, Bool, IntList, DType, Str
};

struct ArgSpec {
  std::string name;
  ArgType type = ArgType::Tensor;
  bool optional = false;    // `T?`: None allowed
  bool kwarg_only = false;  // after `*`
  bool mutated = false;     // `Tensor(a!)`
  std::optional<IValue> default_value;  // None-as-default is stored as an IValue holding None
};

struct Schema {
  std::string name;
  std::vector<ArgSpec> args;
  bool returns_list = false;  // `-> Tensor[]`
  int num_returns = 1;        // for `-> (Tensor, Tensor)`
  std::string str() const;
  int arg_index(std::string_view name) const;  // -1 when absent
};
// Parses an ATen-style schema string; throws kiln::Error naming the column on malformed input.
Schema parse_schema(std::string_view text);

struct OpInfo;

// One call of an op: its arguments normalised to the schema (one IValue per schema argument, defaults
// filled in, numbers in Tensor slots turned into wrapped-number tensors). Accessors check types.
struct OpCall {
  const OpInfo* op = nullptr;
  std::vector<IValue> args;
  // The user's call site when the call came through the Tensor API (ops/api.h) or a custom op's handle;
  // line 0 otherwise (the interpreter, tools). Capture names it in graph nodes, breaks and logs.
  std::source_location where{};

  const Tensor& tensor(int i) const { return args[i].tensor(); }
  // Undefined tensor for None (Tensor? arguments).
  Tensor opt_tensor(int i) const { return args[i].is_none() ? Tensor() : args[i].tensor(); }
  const TensorList& tensors(int i) const { return args[i].tensor_list(); }
  Scalar scalar(int i) const { return args[i].scalar(); }
  std::optional<Scalar> opt_scalar(int i) const { if (args[i].is_none()) return std::nullopt; return args[i].scalar(); }
  int64_t int_(int i) const { return args[i].scalar().to_int(); }
  std::optional<int64_t> opt_int(int i) const { if (args[i].is_none()) return std::nullopt; return args[i].scalar().to_int(); }
  double float_(int i) const { return args[i].scalar().to_double(); }
  std::optional<double> opt_float(int i) const { if (args[i].is_none()) return std::nullopt; return args[i].scalar().to_double(); }
  bool bool_(int i) const { return args[i].scalar().to_bool(); }
  const IntList& ints(int i) const { return args[i].int_list(); }
  std::optional<IntList> opt_ints(int i) const { if (args[i].is_none()) return std::nullopt; return args[i].int_list(); }
  DType dtype(int i) const { return args[i].dtype(); }
  std::optional<DType> opt_dtype(int i) const { if (args[i].is_none()) return std::nullopt; return args[i].dtype(); }
  const std::string& str(int i) const { return args[i].string(); }
  std::optional<std::string> opt_str(int i) const { if (args[i].is_none()) return std::nullopt; return args[i].string(); }
  std::string_view name() const;
  // Every tensor argument in schema order, Tensor[] flattened (undefined where None). VJPs return gradients
  // in this order.
  std::vector<Tensor> flat_tensors() const;
  bool any_meta() const;
};

// What a VJP sees: the forward call (its saved arguments), the forward outputs (detached), the gradients of
// the outputs (undefined where no gradient flowed), and which flat tensor inputs need a gradient.
struct VjpCall {
  const OpCall& call;
  const std::vector<Tensor>& outputs;
  const std::vector<Tensor>& grads;
  const std::vector<bool>& needs_grad;
  bool needs(int flat_index) const { return needs_grad[flat_index]; }
};

using InferFn = std::vector<TensorMeta> (*)(const OpCall&);   // output metas; inputs may be meta tensors
using KernelFn = std::vector<Tensor> (*)(const OpCall&);      // eager CPU kernel
using VjpFn = std::vector<Tensor> (*)(const VjpCall&);        // one gradient per flat tensor input
using DecompFn = std::vector<Tensor> (*)(const OpCall&);      // the op in terms of other ops (Tensor API)

struct OpInfo {
  OpId id{};
  std::string_view name;
  std::string_view family;
  OpKind kind{};
  bool differentiable = false;
  Schema schema;
  InferFn infer = nullptr;
  KernelFn kernel = nullptr;
  VjpFn vjp = nullptr;
  DecompFn decomp = nullptr;
  bool is_inplace() const { return kind == OpKind::InPlace; }
  bool is_view() const { return kind == OpKind::View; }
};

// The table (built once, on first use; each family file's register function attaches its functions).
const OpInfo& op_info(OpId id);
const OpInfo* find_op(std::string_view name);
// op_info and find_op also answer for custom ops (ops/custom.h, ids past the table); all_ops() is the
// built-in table (ops.def) only.
const std::vector<OpInfo>& all_ops();

// What a family file uses to attach its functions to its rows.
struct OpRegistration {
  OpInfo& info;
  OpRegistration& infer(InferFn f) { info.infer = f; return *this; }
  OpRegistration& kernel(KernelFn f) { info.kernel = f; return *this; }
  OpRegistration& vjp(VjpFn f) { info.vjp = f; return *this; }
  OpRegistration& decomp(DecompFn f) { info.decomp = f; return *this; }
};
OpRegistration def(OpId id);

}  // namespace kiln
