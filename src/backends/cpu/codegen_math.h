// Scalar math for the CPU code generator (codegen_math.cpp): libm calls and the inline f32 polynomials.
#pragma once
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <string>

namespace kiln::inductor::cpu_codegen {

using llvm::Value;

// `base` (e.g. "exp"; "expf" for f32) of type t^arity -> t, declared in `m` as pure, non-throwing.
llvm::FunctionCallee libm(llvm::Module& m, const std::string& base, llvm::Type* t, int arity);
// base(x) through libm.
Value* call_libm(llvm::IRBuilder<>& b, llvm::Module& m, const std::string& base, Value* x);
// e^x for f32 (Cephes expf): within 2 ulp of expf, +-inf and NaN handled, vectorisable.
Value* exp_f32(llvm::IRBuilder<>& b, Value* x);
// tanh for f32 (Cephes tanhf): within 2 ulp, vectorisable, NaN and +-inf handled.
Value* tanh_f32(llvm::IRBuilder<>& b, Value* x);

}  // namespace kiln::inductor::cpu_codegen
