// Scalar math for the CPU code generator (codegen_math.cpp): libm calls and the inline f32 polynomials.
#pragma once
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <string>

namespace kiln::inductor::cpu_codegen {

using llvm::Value;

// libm's base(args...) ("exp", "pow": the f32 name is chosen from the arguments' type) through the one libmvec
// variant of the host on every code path, or libm where it has none (runtime::emit_libm_call, vector_math.h).
Value* call_libm(llvm::IRBuilder<>& b, llvm::Module& m, const std::string& base, llvm::ArrayRef<Value*> args);
// e^x for f32 (Cephes expf): within 2 ulp of expf, +-inf and NaN handled, vectorisable.
Value* exp_f32(llvm::IRBuilder<>& b, Value* x);
// tanh for f32 (Cephes tanhf): within 2 ulp, vectorisable, NaN and +-inf handled.
Value* tanh_f32(llvm::IRBuilder<>& b, Value* x);

}  // namespace kiln::inductor::cpu_codegen
