// Scalar math without a vector library: f32 e^x and tanh as branch-free polynomials the loop vectoriser can
// widen (used where the JIT found no libmvec), and calls of libm functions, which compute through one libmvec
// variant on every path where it exists (vector_math.h). kiln's own AVX-512 exp is vector_math.h.
#include "backends/cpu/codegen_math.h"
#include "backends/cpu/vector_math.h"

namespace kiln::inductor::cpu_codegen {

Value* call_libm(llvm::IRBuilder<>& b, llvm::Module& m, const std::string& base, llvm::ArrayRef<Value*> args) {
  return runtime::emit_libm_call(b, m, base, args);
}

// e^x for f32 as a branch-free polynomial (Cephes expf), scaled by 2^n in two steps so every step stays a
// normal number: within 2 ulp of expf, +-inf and NaN handled, vectorisable.
Value* exp_f32(llvm::IRBuilder<>& b, Value* x) {
  llvm::Type* f = x->getType();
  llvm::Type* i32 = b.getInt32Ty();
  Value* xc = b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, x, llvm::ConstantFP::get(f, -104.0)), llvm::ConstantFP::get(f, 88.8));
  Value* fx = b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b.CreateFMul(xc, llvm::ConstantFP::get(f, 1.44269504088896341)));
  // a * b + c as llvm.fmuladd: one FMA where the target has it (half the dependent steps of the Horner
  // chain; the reduction x - n ln2 is then also more exact).
  auto fma = [&](Value* x1, Value* x2, Value* x3) { return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {f}, {x1, x2, x3}); };
  Value* r = fma(fx, llvm::ConstantFP::get(f, -0.693359375), xc);
  r = fma(fx, llvm::ConstantFP::get(f, 2.12194440e-4), r);
  Value* z = b.CreateFMul(r, r);
  Value* y = llvm::ConstantFP::get(f, 1.9875691500e-4);
  for (double c : {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
    y = fma(y, r, llvm::ConstantFP::get(f, c));
  y = b.CreateFAdd(fma(y, z, r), llvm::ConstantFP::get(f, 1.0));
  Value* n = b.CreateFPToSI(fx, i32);
  Value* n1 = b.CreateSDiv(n, b.getInt32(2));
  Value* n2 = b.CreateSub(n, n1);
  auto pow2 = [&](Value* e) { return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, b.getInt32(127)), 23), f); };
  Value* result = b.CreateFMul(b.CreateFMul(y, pow2(n1)), pow2(n2));
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, result);
}

// tanh for f32 without a libm call (Cephes tanhf: an odd polynomial below |x| = 0.625, else
// 1 - 2 / (e^(2|x|) + 1) with the sign of x): within 2 ulp, vectorisable, NaN and +-inf handled.
Value* tanh_f32(llvm::IRBuilder<>& b, Value* x) {
  llvm::Type* f = x->getType();
  Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* z = b.CreateFMul(x, x);
  Value* p = llvm::ConstantFP::get(f, -5.70498872745e-3);
  for (double c : {2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1})
    p = b.CreateFAdd(b.CreateFMul(p, z), llvm::ConstantFP::get(f, c));
  Value* small = b.CreateFAdd(b.CreateFMul(b.CreateFMul(p, z), x), x);
  Value* e = exp_f32(b, b.CreateFMul(ax, llvm::ConstantFP::get(f, 2.0)));
  Value* large = b.CreateFSub(llvm::ConstantFP::get(f, 1.0), b.CreateFDiv(llvm::ConstantFP::get(f, 2.0), b.CreateFAdd(e, llvm::ConstantFP::get(f, 1.0))));
  large = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, large, x);
  Value* r = b.CreateSelect(b.CreateFCmpOLT(ax, llvm::ConstantFP::get(f, 0.625)), small, large);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

}  // namespace kiln::inductor::cpu_codegen
