// Scalar code for the CPU code generator (codegen_scalar.cpp): a loop-IR expression's value at the current
// index bindings, conversions, index arithmetic, loads and stores. A ScalarEmitter is made for one scope (and
// the element loop's variable, when a pointwise element loop is being emitted); it holds no state of its own.
#pragma once
#include <vector>

#include "backends/cpu/codegen_context.h"
#include "inductor/reciprocal.h"

namespace kiln::inductor::cpu_codegen {

class ScalarEmitter {
 public:
  // `element_var`: the variable of the pointwise element loop being emitted (null elsewhere); a division by a
  // value that does not vary along it multiplies by its reciprocal (inductor/reciprocal.h).
  ScalarEmitter(KernelContext& cx, EmitScope& scope, const Index* element_var = nullptr)
      : cx_(cx), scope_(scope), element_vars_(element_var ? std::vector<Index>{*element_var} : std::vector<Index>{}) {}

  Value* value(const SExpr& e);  // memoised in the scope
  Value* index(const Index& ix);
  Value* load(int buffer, const Index& ix);
  void store(int buffer, const Index& ix, Value* v, DType v_dtype);
  Value* cast(Value* v, DType from, DType to);
  Value* to_storage(Value* v, DType dt);
  Value* from_storage(Value* v, DType dt);
  Value* binary(SOp op, Value* x, Value* y, DType dt, bool by_reciprocal = false);

 private:
  KernelContext& cx_;
  EmitScope& scope_;
  std::vector<Index> element_vars_;  // the element loop's variable, or none

  Value* float_to_int(Value* v, DType to);
  Value* element_ptr(int buffer, const Index& ix);
  Value* unary(SOp op, Value* x, DType dt);
};

}  // namespace kiln::inductor::cpu_codegen
