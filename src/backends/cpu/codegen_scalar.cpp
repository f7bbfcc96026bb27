// Scalar code: one element's value of a loop-IR expression (SExpr) as LLVM IR, with the conversions between
// storage and compute types, index arithmetic and the loads and stores of buffers, kernel-local rows and the
// two-row buffers of deferred writes. Values emitted for one element are memoised in the scope.
#include "backends/cpu/codegen_scalar.h"

#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <functional>
#include <set>

#include "backends/cpu/codegen_math.h"
#include "backends/cpu/vector_math.h"
#include "core/error.h"

namespace kiln::inductor::cpu_codegen {

Value* ScalarEmitter::cast(Value* v, DType from, DType to) {
  from = compute_dtype_of(from);
  to = compute_dtype_of(to);
  if (from == to) return v;
  llvm::Type* t = cx_.compute_type(to);
  if (to == DType::Bool) {
    return is_floating(from) ? cx_.b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                             : cx_.b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (is_floating(from) && is_floating(to)) return cx_.b.CreateFPCast(v, t);
  if (is_floating(to)) return is_unsigned(from) ? cx_.b.CreateUIToFP(v, t) : cx_.b.CreateSIToFP(v, t);
  if (is_floating(from)) return float_to_int(v, to);
  return cx_.b.CreateIntCast(v, t, !is_unsigned(from));
}

// A float converted to integer type `to` as eager's float_to_int (core/scalar_math.h): truncated by the 64-bit
// (i64) or 32-bit (narrower types) conversion, whose minimum NaN and out-of-range values give, narrower types
// keeping the low bits. The compares are exact for both source types (-2^31 - 1 is a double; no float lies
// strictly between it and -2^31). x86's cvtt instructions compute exactly this, and the backend folds the
// select into them.
Value* ScalarEmitter::float_to_int(Value* v, DType to) {
  const bool wide = to == DType::I64;
  llvm::IntegerType* it = wide ? cx_.b.getInt64Ty() : cx_.b.getInt32Ty();
  llvm::Type* ft = v->getType();
  Value* below_max = cx_.b.CreateFCmpOLT(v, cx_.fconst(ft, wide ? 0x1p63 : 0x1p31));
  Value* above_min = wide || ft->isFloatTy() ? cx_.b.CreateFCmpOGE(v, cx_.fconst(ft, wide ? -0x1p63 : -0x1p31))
                                             : cx_.b.CreateFCmpOGT(v, cx_.fconst(ft, -0x1p31 - 1));
  Value* converted = cx_.b.CreateSelect(cx_.b.CreateAnd(above_min, below_max), cx_.b.CreateFPToSI(v, it),
                                     llvm::ConstantInt::get(it, llvm::APInt::getSignedMinValue(it->getBitWidth())));
  return cx_.b.CreateTrunc(converted, cx_.compute_type(to));
}

Value* ScalarEmitter::to_storage(Value* v, DType dt) {
  switch (dt) {
    case DType::F16: return cx_.b.CreateFPTrunc(v, cx_.b.getHalfTy());
    case DType::BF16: {  // round to nearest even on the f32 bits; NaN stays a quiet NaN
      Value* bits = cx_.b.CreateBitCast(v, cx_.b.getInt32Ty());
      Value* lsb = cx_.b.CreateAnd(cx_.b.CreateLShr(bits, 16), 1);
      Value* rounded = cx_.b.CreateLShr(cx_.b.CreateAdd(bits, cx_.b.CreateAdd(lsb, cx_.b.getInt32(0x7fff))), 16);
      Value* nan = cx_.b.CreateFCmpUNO(v, v);
      return cx_.b.CreateSelect(nan, cx_.b.getInt16(0x7fc0), cx_.b.CreateTrunc(rounded, cx_.b.getInt16Ty()));
    }
    case DType::Bool: return cx_.b.CreateZExt(v, cx_.b.getInt8Ty());
    default: return v;
  }
}

Value* ScalarEmitter::from_storage(Value* v, DType dt) {
  switch (dt) {
    case DType::F16: return cx_.b.CreateFPExt(v, cx_.b.getFloatTy());
    case DType::BF16: return cx_.b.CreateBitCast(cx_.b.CreateShl(cx_.b.CreateZExt(v, cx_.b.getInt32Ty()), 16), cx_.b.getFloatTy());
    case DType::Bool: return cx_.b.CreateICmpNE(v, cx_.b.getInt8(0));
    default: return v;
  }
}

// ---- indices
Value* ScalarEmitter::index(const Index& ix) {
  Value* r = cx_.c64(ix.constant);
  for (const auto& [atom, k] : ix.terms) {
    Value* a;
    if (atom->kind == IndexAtom::Kind::Var) {
      a = scope_.vars.at(atom->key);  // bound: the loop-IR verifier's `bound-variables` invariant
    } else {
      Value* arg = index(atom->arg);
      a = atom->kind == IndexAtom::Kind::Div ? cx_.b.CreateSDiv(arg, cx_.c64(atom->divisor)) : cx_.b.CreateSRem(arg, cx_.c64(atom->divisor));
    }
    r = cx_.b.CreateAdd(r, k == 1 ? a : cx_.b.CreateMul(a, cx_.c64(k), "", false, true), "", false, true);
  }
  return r;
}

Value* ScalarEmitter::element_ptr(int buffer, const Index& ix) {
  const Buffer& buf = cx_.lg.buffers[size_t(buffer)];
  if (auto local = cx_.local_rows.find(buffer); local != cx_.local_rows.end()) {
    // A kernel-local buffer holds the current outer point's row: drop the outer variables' part of the index
    // (every access shares the producer's coefficients on them; the scheduler checked).
    Index row = ix;
    for (size_t d = 0; d < cx_.k.outer_vars.size(); ++d)
      if (!cx_.k.outer_vars[d].is_constant()) row = ix_add(row, ix_scale(cx_.k.outer_vars[d], -buf.strides[d]));
    Value* base = local->second;
    if (auto odd = cx_.odd_rows.find(buffer); odd != cx_.odd_rows.end()) {
      // Two rows, by the parity of the row variable: the deferred last loop reads the previous row's. Two
      // allocas chosen by one condition with the arms swapped for the previous row, so alias analysis sees
      // the current row's writes and the previous row's reads apart (one alloca indexed by parity made the
      // vectoriser check at run time and keep a scalar copy of the host loop). The base is its own value,
      // which LICM hoists out of the element loop. Two-row buffers exist only in deferred kernels, whose rows
      // all set the parity (the loop-IR verifier's `defer` invariant).
      base = scope_.previous_row ? cx_.b.CreateSelect(scope_.row_is_odd, base, odd->second)
                           : cx_.b.CreateSelect(scope_.row_is_odd, odd->second, base);
    }
    return cx_.b.CreateInBoundsGEP(cx_.storage_type(buf.dtype), base, index(row));
  }
  return cx_.b.CreateInBoundsGEP(cx_.storage_type(buf.dtype), cx_.ptrs.at(size_t(cx_.slot.at(buffer))), index(ix));
}

Value* ScalarEmitter::load(int buffer, const Index& ix) {
  auto reg = scope_.registers.find(buffer);
  if (reg != scope_.registers.end() && reg->second.first == ix.str()) return reg->second.second;
  const Buffer& buf = cx_.lg.buffers[size_t(buffer)];
  llvm::Type* t = cx_.storage_type(buf.dtype);
  llvm::LoadInst* ld = cx_.b.CreateLoad(t, element_ptr(buffer, ix));
  ld->setAlignment(llvm::Align(dtype_size(buf.dtype)));
  return from_storage(ld, buf.dtype);
}

void ScalarEmitter::store(int buffer, const Index& ix, Value* v, DType v_dtype) {
  const Buffer& buf = cx_.lg.buffers[size_t(buffer)];
  Value* s = to_storage(cast(v, v_dtype, buf.dtype), buf.dtype);
  llvm::StoreInst* st = cx_.b.CreateStore(s, element_ptr(buffer, ix));
  st->setAlignment(llvm::Align(dtype_size(buf.dtype)));
}

Value* ScalarEmitter::unary(SOp op, Value* x, DType dt) {
  const bool fl = is_floating(dt);
  llvm::Type* t = x->getType();
  switch (op) {
    case SOp::Neg: return fl ? cx_.b.CreateFNeg(x) : cx_.b.CreateSub(llvm::ConstantInt::get(t, 0), x);
    case SOp::Abs:
      if (fl) return cx_.b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      return cx_.b.CreateSelect(cx_.b.CreateICmpSLT(x, llvm::ConstantInt::get(t, 0)), cx_.b.CreateSub(llvm::ConstantInt::get(t, 0), x), x);
    case SOp::Exp:
      if (t->isFloatTy() && cx_.fast_exp) return runtime::emit_fast_expf(cx_.b, cx_.m, x);
      return t->isFloatTy() && !cx_.vector_math ? exp_f32(cx_.b, x) : call_libm(cx_.b, cx_.m, "exp", x);
    case SOp::Exp2: return call_libm(cx_.b, cx_.m, "exp2", x);
    case SOp::Log: return call_libm(cx_.b, cx_.m, "log", x);
    case SOp::Log2: return call_libm(cx_.b, cx_.m, "log2", x);
    case SOp::Log1p: return call_libm(cx_.b, cx_.m, "log1p", x);
    case SOp::Expm1: return call_libm(cx_.b, cx_.m, "expm1", x);
    case SOp::Sqrt: return cx_.b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
    case SOp::Sin: return call_libm(cx_.b, cx_.m, "sin", x);
    case SOp::Cos: return call_libm(cx_.b, cx_.m, "cos", x);
    case SOp::Tan: return call_libm(cx_.b, cx_.m, "tan", x);
    case SOp::Tanh: return t->isFloatTy() && !cx_.vector_math ? tanh_f32(cx_.b, x) : call_libm(cx_.b, cx_.m, "tanh", x);
    case SOp::Asin: return call_libm(cx_.b, cx_.m, "asin", x);
    case SOp::Acos: return call_libm(cx_.b, cx_.m, "acos", x);
    case SOp::Atan: return call_libm(cx_.b, cx_.m, "atan", x);
    case SOp::Sinh: return call_libm(cx_.b, cx_.m, "sinh", x);
    case SOp::Cosh: return call_libm(cx_.b, cx_.m, "cosh", x);
    case SOp::Erf: return call_libm(cx_.b, cx_.m, "erf", x);
    case SOp::Floor: return cx_.b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x);
    case SOp::Ceil: return cx_.b.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, x);
    case SOp::RoundEven: return cx_.b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, x);
    case SOp::Trunc: return cx_.b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, x);
    case SOp::IsNan: return cx_.b.CreateFCmpUNO(x, x);
    case SOp::IsInf:
      return cx_.b.CreateFCmpOEQ(cx_.b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), llvm::ConstantFP::getInfinity(t));
    case SOp::Not: return cx_.b.CreateNot(x);
    default: break;
  }
  fail("codegen: {} is not a unary op", sop_name(op));
}

Value* ScalarEmitter::binary(SOp op, Value* x, Value* y, DType dt, bool by_reciprocal) {
  const bool fl = is_floating(dt);
  const bool uns = is_unsigned(dt);
  switch (op) {
    case SOp::Add: return fl ? cx_.b.CreateFAdd(x, y) : cx_.b.CreateAdd(x, y);
    case SOp::Sub: return fl ? cx_.b.CreateFSub(x, y) : cx_.b.CreateSub(x, y);
    case SOp::Mul: return fl ? cx_.b.CreateFMul(x, y) : cx_.b.CreateMul(x, y);
    case SOp::Div: {
      // x * (1 / y) where the element loop does not vary y (inductor/reciprocal.h): LICM hoists the exact
      // reciprocal out of the loop.
      if (by_reciprocal) return cx_.b.CreateFMul(x, cx_.b.CreateFDiv(llvm::ConstantFP::get(y->getType(), 1.0), y));
      return cx_.b.CreateFDiv(x, y);
    }
    case SOp::Max: case SOp::Min: {
      Value* m = cx_.b.CreateBinaryIntrinsic(op == SOp::Max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, x, y);
      if (!fl) return m;
      // NaN made explicit: InstCombine narrows maximum(fpext a, fpext b) of f16 values to an f16 maximum, which
      // the x86 backend (no native f16) lowered without NaN propagation (maximum(0, NaN) gave 0).
      return cx_.b.CreateSelect(cx_.b.CreateFCmpUNO(x, y), cx_.b.CreateFAdd(x, y), m);
    }
    case SOp::Pow: return call_libm(cx_.b, cx_.m, "pow", {x, y});
    case SOp::Atan2: return call_libm(cx_.b, cx_.m, "atan2", {x, y});
    case SOp::Eq: return fl ? cx_.b.CreateFCmpOEQ(x, y) : cx_.b.CreateICmpEQ(x, y);
    case SOp::Ne: return fl ? cx_.b.CreateFCmpUNE(x, y) : cx_.b.CreateICmpNE(x, y);
    case SOp::Lt: return fl ? cx_.b.CreateFCmpOLT(x, y) : uns ? cx_.b.CreateICmpULT(x, y) : cx_.b.CreateICmpSLT(x, y);
    case SOp::Le: return fl ? cx_.b.CreateFCmpOLE(x, y) : uns ? cx_.b.CreateICmpULE(x, y) : cx_.b.CreateICmpSLE(x, y);
    case SOp::Gt: return fl ? cx_.b.CreateFCmpOGT(x, y) : uns ? cx_.b.CreateICmpUGT(x, y) : cx_.b.CreateICmpSGT(x, y);
    case SOp::Ge: return fl ? cx_.b.CreateFCmpOGE(x, y) : uns ? cx_.b.CreateICmpUGE(x, y) : cx_.b.CreateICmpSGE(x, y);
    case SOp::And: return cx_.b.CreateAnd(x, y);
    case SOp::Or: return cx_.b.CreateOr(x, y);
    case SOp::Xor: return cx_.b.CreateXor(x, y);
    default: break;
  }
  fail("codegen: {} is not a binary op", sop_name(op));
}

Value* ScalarEmitter::value(const SExpr& e) {
  if (auto it = scope_.memo.find(e.get()); it != scope_.memo.end()) return it->second;
  Value* v = nullptr;
  const DType dt = e->dtype;
  switch (e->op) {
    case SOp::Const:
      v = is_floating(dt) ? cx_.fconst(cx_.compute_type(dt), e->fvalue)
                          : llvm::ConstantInt::get(cx_.compute_type(dt), uint64_t(e->ivalue), true);
      break;
    case SOp::Load:
      v = e->buffer == kAccumulatorBuffer ? scope_.acc : load(e->buffer, e->index);
      break;
    case SOp::IndexValue: v = index(e->index); break;
    case SOp::Cast: v = cast(value(e->args[0]), e->args[0]->dtype, dt); break;
    case SOp::RoundTo: {
      DType narrow = DType(e->ivalue);
      v = from_storage(to_storage(value(e->args[0]), narrow), narrow);
      break;
    }
    case SOp::Where: v = cx_.b.CreateSelect(value(e->args[0]), value(e->args[1]), value(e->args[2])); break;
    case SOp::MulAdd: {
      Value* x = value(e->args[0]);
      v = cx_.b.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {x, value(e->args[1]), value(e->args[2])});
      break;
    }
    case SOp::Helper: {
      std::vector<Value*> args;
      std::vector<llvm::Type*> types;
      for (const SExpr& a : e->args) {
        args.push_back(value(a));
        types.push_back(args.back()->getType());
      }
      args.push_back(cx_.status);
      types.push_back(cx_.b.getPtrTy());
      auto callee = cx_.m.getOrInsertFunction(e->helper, llvm::FunctionType::get(cx_.compute_type(dt), types, false));
      v = cx_.b.CreateCall(callee, args);
      break;
    }
    case SOp::Trap: {  // an injected crash: a write to an unmapped address
      Value* x = value(e->args[0]);
      cx_.b.CreateStore(cx_.b.getInt32(0), cx_.b.CreateIntToPtr(cx_.c64(8), cx_.b.getPtrTy()), /*isVolatile=*/true);
      v = x;
      break;
    }
    case SOp::Fail: {  // a reported runtime error: the first code set sticks; the host reports it
      Value* x = value(e->args[0]);
      cx_.b.CreateAtomicCmpXchg(cx_.status, cx_.b.getInt32(0), cx_.b.getInt32(uint32_t(e->ivalue)), llvm::MaybeAlign(4),
                             llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic);
      v = x;
      break;
    }
    case SOp::Invalid: {  // an injected compile error: a terminator in the middle of a block
      v = value(e->args[0]);
      cx_.b.CreateUnreachable();
      break;
    }
    default:
      if (e->args.size() == 1) v = unary(e->op, value(e->args[0]), e->args[0]->dtype);
      else v = binary(e->op, value(e->args[0]), value(e->args[1]), e->args[0]->dtype,
                      divides_by_reciprocal(e, element_vars_));
      break;
  }
  scope_.memo[e.get()] = v;
  return v;
}

}  // namespace kiln::inductor::cpu_codegen
