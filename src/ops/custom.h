// Custom ops: kiln::register_op adds a row to the op table at run time (a schema, a meta function, an eager
// kernel, an optional VJP), so a user's own kernel is called through the dispatcher like a built-in op:
// autograd records it, capture records it as one graph node (no break), .kir prints and parses it, the
// interpreter runs it and the inductor runs it as an extern call (it cannot see inside the kernel).
//
//   static const kiln::CustomOp scale = kiln::register_op("mylib::scale(Tensor self, float k) -> Tensor",
//       {.meta = [](const OpCall& c) { return std::vector<TensorMeta>{c.tensor(0).meta()}; },
//        .kernel = [](const OpCall& c) { return std::vector<Tensor>{my_scale_kernel(c.tensor(0), c.float_(1))}; }});
//   Tensor y = scale({x, 2.0});
#pragma once
#include <functional>
#include <string_view>

#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln {

struct CustomOpFunctions {
  // Required: the output metas from the call (its tensors may be meta tensors: read only metas).
  std::function<std::vector<TensorMeta>(const OpCall&)> meta;
  // Required: the eager CPU kernel. Outputs must match `meta` and be new tensors (not views of inputs).
  std::function<std::vector<Tensor>(const OpCall&)> kernel;
  // Optional: one gradient per flat tensor input (undefined where none); without it, a call whose inputs
  // require grad is an error.
  std::function<std::vector<Tensor>(const VjpCall&)> vjp;
};

// The handle register_op returns: calls the op through the dispatcher with the caller's line.
class CustomOp {
 public:
  explicit CustomOp(const OpInfo& info) : info_(&info) {}
  const OpInfo& info() const { return *info_; }
  std::vector<Tensor> call(std::vector<IValue> args, CallSite where = CallSite::current()) const;
  Tensor operator()(std::vector<IValue> args, CallSite where = CallSite::current()) const;  // the first output

 private:
  const OpInfo* info_;
};

// Registers `schema` (ATen style; the name takes a namespace, `mylib::scale`; arguments are not mutated; it
// returns Tensor, Tensor[] or (Tensor, ...)). A malformed schema, a name registered before, or a missing
// meta function or kernel is a kiln::Error naming `where`. Thread-safe; ops stay registered for the process.
CustomOp register_op(std::string_view schema, CustomOpFunctions functions, CallSite where = CallSite::current());

// The registered custom op called `name` / with id `id` (ids follow the built-in table's), or null.
// op_info() and find_op() consult these, so every consumer of the table sees custom ops.
const OpInfo* find_custom_op(std::string_view name);
const OpInfo* find_custom_op(OpId id);
inline bool is_custom_op(OpId id) { return size_t(id) >= size_t(kNumOps); }

}  // namespace kiln
