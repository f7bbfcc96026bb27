// Definitions of the typed API (api.h). Each function generated from a row of ops.def forwards to the
// dispatcher with its arguments in schema order; the hand-written ones follow, then the operators.
#include "ops/api.h"

#include <type_traits>
#include <utility>

#include "ops/dispatch.h"

namespace kiln {

namespace {
// The dispatcher call for a function returning R: call_op1 for one tensor, call_op for a list.
template <class R>
R dispatch_as(OpId id, std::vector<IValue> args, CallSite where) {
  if constexpr (std::is_same_v<R, Tensor>) return call_op1(id, std::move(args), where);
  else return call_op(id, std::move(args), where);
}
}  // namespace

#define KILN_OP(id, family, kind, flags, schema, aten, ...)                                 \
  __VA_OPT__(KILN_API_RESULT(schema) id(KILN_API_FORMALS(__VA_ARGS__) CallSite where) {    \
    return dispatch_as<KILN_API_RESULT(schema)>(OpId::id, {KILN_API_ARGS(__VA_ARGS__)}, where); \
  })
#include "ops/ops.def"
#undef KILN_OP

// ---- written by hand (see api.h for why each is not generated) ----
Tensor std_(const Tensor& x, OptIntList dim, OptScalar correction, bool keepdim, CallSite where) {
  return call_op1(OpId::std, {x, dim, correction, keepdim}, where);
}

Tensor operator+(TensorOperand a, const Tensor& b) { return add(a.tensor, b, 1, a.where); }
Tensor operator-(TensorOperand a, const Tensor& b) { return sub(a.tensor, b, 1, a.where); }
Tensor operator*(TensorOperand a, const Tensor& b) { return mul(a.tensor, b, a.where); }
Tensor operator/(TensorOperand a, const Tensor& b) { return div(a.tensor, b, std::nullopt, a.where); }
Tensor operator+(TensorOperand a, Scalar b) { return add(a.tensor, b, 1, a.where); }
Tensor operator-(TensorOperand a, Scalar b) { return sub(a.tensor, b, 1, a.where); }
Tensor operator*(TensorOperand a, Scalar b) { return mul(a.tensor, b, a.where); }
Tensor operator/(TensorOperand a, Scalar b) { return div(a.tensor, b, std::nullopt, a.where); }
Tensor operator+(Scalar a, TensorOperand b) { return add(a, b.tensor, 1, b.where); }
Tensor operator-(Scalar a, TensorOperand b) { return sub(a, b.tensor, 1, b.where); }
Tensor operator*(Scalar a, TensorOperand b) { return mul(a, b.tensor, b.where); }
Tensor operator/(Scalar a, TensorOperand b) { return div(a, b.tensor, std::nullopt, b.where); }
Tensor operator-(TensorOperand a) { return neg(a.tensor, a.where); }

}  // namespace kiln
