// The typed C++ API: one function per row of ops.def, each a thin call through the dispatcher (so autograd,
// meta tensors and capture see every call). Names follow PyTorch; `std_` because `std` is taken.
//
// The functions are generated from ops.def: a row's last column (`api`) lists the C++ parameters, in schema
// order, and the row expands here into `Result op(params..., CallSite where = CallSite::current())` (and in
// api.cpp into its definition, `call_op1(OpId::op, {params...}, where)`, or call_op for a `-> Tensor[]` op).
// So to see an op's signature, read its row in ops.def; api_columns.h says how a row becomes a declaration.
// The few functions that are not one row's mechanical wrapper are written by hand below the generated ones.
//
// Every call carries the caller's file:line into the dispatcher (OpCall::where) by one mechanism: each function
// takes a last parameter `CallSite where` defaulted to the call site, and each operator takes its tensor
// operand as a TensorOperand, which records the call site where the tensor converts. Users write calls as
// always (`relu(x)`, `x * 2.0`); capture names the line in graph nodes, breaks and logs (docs/capture.md).
#pragma once
#include <optional>
#include <source_location>
#include <string>

#include "ops/api_columns.h"
#include "ops/ivalue.h"

namespace kiln {

using OptScalar = std::optional<Scalar>;
using OptInt = std::optional<int64_t>;
using OptIntList = std::optional<IntList>;
using OptDType = std::optional<DType>;
using OptTensorList = std::vector<Tensor>;  // undefined entries mean None

// The caller's source line (the defaulted last parameter of every function below).
using CallSite = std::source_location;
// An operator's tensor operand with the call site of the expression (taken where the tensor converts).
struct TensorOperand {
  const Tensor& tensor;
  CallSite where;
  TensorOperand(const Tensor& t, CallSite w = CallSite::current()) : tensor(t), where(w) {}  // NOLINT: implicit by design
};

// One function per ops.def row with an `api` column: an IValue parameter takes a Tensor or a number (it
// becomes a wrapped-number tensor); a `dim` of nullopt reduces over every dim; in-place ops return their
// first argument.
#define KILN_OP(id, family, kind, flags, schema, aten, ...) \
  __VA_OPT__(KILN_API_RESULT(schema) id(KILN_API_PARAMS(__VA_ARGS__) CallSite where = CallSite::current());)
#include "ops/ops.def"
#undef KILN_OP

// ---- written by hand: the rows of ops.def without an `api` column ----
// std: the function is spelled std_ (a function named std would read as the namespace std at every call).
// detach has the method Tensor::detach() instead of a function; philox_rand has no function (AOT's rng pass
// adds its nodes to graphs directly).
Tensor std_(const Tensor& x, OptIntList dim = std::nullopt, OptScalar correction = std::nullopt, bool keepdim = false, CallSite where = CallSite::current());

// Reduces a broadcast gradient back to `shape` (sums the broadcast dims). Used by VJPs.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// operators
Tensor operator+(TensorOperand a, const Tensor& b);
Tensor operator-(TensorOperand a, const Tensor& b);
Tensor operator*(TensorOperand a, const Tensor& b);
Tensor operator/(TensorOperand a, const Tensor& b);
Tensor operator+(TensorOperand a, Scalar b);
Tensor operator-(TensorOperand a, Scalar b);
Tensor operator*(TensorOperand a, Scalar b);
Tensor operator/(TensorOperand a, Scalar b);
Tensor operator+(Scalar a, TensorOperand b);
Tensor operator-(Scalar a, TensorOperand b);
Tensor operator*(Scalar a, TensorOperand b);
Tensor operator/(Scalar a, TensorOperand b);
Tensor operator-(TensorOperand a);

}  // namespace kiln
