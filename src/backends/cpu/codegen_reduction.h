// Reductions for the CPU code generator: one reduction's accumulator (Accumulation), started, combined with
// each element, finished into its buffer and a register; float max/min as integer reductions over the bits
// (FloatExtremes); float sums in blocks with an f64 total. A ReductionEmitter is made for one scope.
#pragma once
#include <optional>

#include "backends/cpu/codegen_context.h"
#include "backends/cpu/codegen_scalar.h"

namespace kiln::inductor::cpu_codegen {

// A NaN-propagating float max or min (torch.amax/amin: NaN wins, -0 < +0) as three integer reductions over the
// raw bits, which LLVM vectorises (3 integer ops a vector; order-preserving keys took 4): S = signed max,
// s = signed min, U = unsigned max. Non-negative floats order like their bits; negative floats order in
// reverse, and as unsigned integers they lie above every non-negative one. So:
//   max = S when some element is non-negative (S >= 0), else s (the negative nearest zero);
//   min = U when some element is negative (U has the sign bit), else s (the smallest non-negative);
//   a NaN was seen when S lies above +inf's bits (sign bit clear) or U above -inf's (sign bit set).
// s starts at the bits of the empty reduction's answer (-inf for max, +inf for min): every element it is
// compared with in the case that uses it lies on the far side of that start.
struct FloatExtremes {
  KernelContext& cx;
  llvm::Type* ft;
  bool max;
  llvm::IntegerType* it;
  llvm::AllocaInst *smax, *smin, *umax;
  FloatExtremes(KernelContext& context, llvm::Type* float_type, bool is_max) : cx(context), ft(float_type), max(is_max) {
    it = cx.b.getIntNTy(unsigned(ft->getPrimitiveSizeInBits()));
    const unsigned bits = it->getBitWidth();
    smax = start(llvm::APInt::getSignedMinValue(bits));
    smin = start(bits_of(llvm::ConstantFP::getInfinity(ft, max)));
    umax = start(llvm::APInt::getMinValue(bits));
  }
  static llvm::APInt bits_of(llvm::Constant* c) {
    return llvm::cast<llvm::ConstantFP>(c)->getValueAPF().bitcastToAPInt();
  }
  llvm::AllocaInst* start(const llvm::APInt& v) {
    llvm::AllocaInst* slot = cx.entry_alloca(it);
    cx.b.CreateStore(llvm::ConstantInt::get(it, v), slot);
    return slot;
  }
  void fold(llvm::AllocaInst* slot, llvm::Intrinsic::ID op, Value* x) {
    cx.b.CreateStore(cx.b.CreateBinaryIntrinsic(op, cx.b.CreateLoad(it, slot), x), slot);
  }
  void update(Value* v) {
    Value* x = cx.b.CreateBitCast(v, it);
    fold(smax, llvm::Intrinsic::smax, x);
    fold(smin, llvm::Intrinsic::smin, x);
    fold(umax, llvm::Intrinsic::umax, x);
  }
  Value* result() {
    auto& b = cx.b;
    Value* S = b.CreateLoad(it, smax);
    Value* s = b.CreateLoad(it, smin);
    Value* U = b.CreateLoad(it, umax);
    Value* zero = llvm::ConstantInt::get(it, 0);
    Value* pos_inf = llvm::ConstantInt::get(it, bits_of(llvm::ConstantFP::getInfinity(ft, false)));
    Value* neg_inf = llvm::ConstantInt::get(it, bits_of(llvm::ConstantFP::getInfinity(ft, true)));
    Value* nan_seen = b.CreateOr(b.CreateICmpSGT(S, pos_inf), b.CreateICmpUGT(U, neg_inf));
    Value* bits = max ? b.CreateSelect(b.CreateICmpSGE(S, zero), S, s)
                      : b.CreateSelect(b.CreateICmpSLT(U, zero), U, s);
    return b.CreateSelect(nan_seen, llvm::ConstantFP::getNaN(ft), b.CreateBitCast(bits, ft));
  }
};

// One reduction's running value while its loop runs.
struct Accumulation {
  const KernelLoop* l = nullptr;
  llvm::Type* t = nullptr;
  bool fl = false;
  bool skip_nan = false;               // a NaN-insensitive max as llvm.maximum (KernelContext::max_skips_nan)
  llvm::AllocaInst* acc = nullptr;
  llvm::AllocaInst* arg = nullptr;     // ArgMax/ArgMin: the index of the best element (-1 before the first)
  std::optional<FloatExtremes> extremes;
  llvm::AllocaInst* total = nullptr;   // a blocked float sum's f64 total (emit_blocked_sum)
};

class ReductionEmitter {
 public:
  ReductionEmitter(KernelContext& cx, EmitScope& scope) : cx_(cx), scope_(scope) {}

  // Reduction loop `l` over its reduced dims, at the current outer point.
  void emit_reduction(const KernelLoop& l);

 private:
  KernelContext& cx_;
  EmitScope& scope_;

  ScalarEmitter scalar() { return ScalarEmitter(cx_, scope_); }
  // The accumulator of reduction loop `l`, initialised.
  Accumulation start_reduction(const KernelLoop& l);
  // Combines the reduction's value at the current indices into its accumulator.
  void accumulate(Accumulation& a);
  // The result: finalised, stored, and kept in a register for the later loops of this outer point.
  void finish_reduction(Accumulation& a);
  Value* sum_or_product(ReduceOp op, Value* a, Value* b, bool fl);
  void emit_blocked_sum(const KernelLoop& l, Accumulation& a);
};

}  // namespace kiln::inductor::cpu_codegen
