// Reductions for the CPU code generator (codegen_reduction.h): accumulators, their initial values and
// combination per reduce op, blocked float sums, and the finished result (finalised, stored, and kept in a
// register for same-point reads).
#include "backends/cpu/codegen_reduction.h"

#include <llvm/IR/Intrinsics.h>

#include "backends/cpu/codegen_loops.h"

namespace kiln::inductor::cpu_codegen {

Accumulation ReductionEmitter::start_reduction(const KernelLoop& l) {
  const LoopNode& n = cx_.lg.nodes[size_t(l.node)];
  const DType dt = l.value->dtype;
  Accumulation a;
  a.l = &l;
  a.t = cx_.compute_type(dt);
  a.fl = is_floating(dt);
  llvm::Type* t = a.t;
  const bool fl = a.fl;
  a.acc = cx_.entry_alloca(t);
  Value* init = nullptr;
  switch (n.reduce) {
    case ReduceOp::Sum: init = fl ? cx_.fconst(t, 0.0) : llvm::ConstantInt::get(t, 0); break;
    case ReduceOp::Prod: init = fl ? cx_.fconst(t, 1.0) : llvm::ConstantInt::get(t, 1); break;
    case ReduceOp::Max:
      init = fl ? llvm::ConstantFP::getInfinity(t, true)
                : (dt == DType::Bool ? cx_.b.getFalse() : llvm::ConstantInt::get(t, is_unsigned(dt) ? llvm::APInt::getMinValue(t->getIntegerBitWidth()) : llvm::APInt::getSignedMinValue(t->getIntegerBitWidth())));
      break;
    case ReduceOp::Min:
      init = fl ? llvm::ConstantFP::getInfinity(t, false)
                : (dt == DType::Bool ? cx_.b.getTrue() : llvm::ConstantInt::get(t, is_unsigned(dt) ? llvm::APInt::getMaxValue(t->getIntegerBitWidth()) : llvm::APInt::getSignedMaxValue(t->getIntegerBitWidth())));
      break;
    case ReduceOp::Any: init = cx_.b.getFalse(); break;
    case ReduceOp::All: init = cx_.b.getTrue(); break;
    case ReduceOp::ArgMax: case ReduceOp::ArgMin:
      init = fl ? cx_.fconst(t, 0.0) : llvm::ConstantInt::get(t, 0);
      a.arg = cx_.entry_alloca(cx_.i64());
      cx_.b.CreateStore(cx_.c64(-1), a.arg);
      break;
  }
  cx_.b.CreateStore(init, a.acc);
  // Float max/min: a NaN-insensitive max as llvm.maximum (see cx_.max_skips_nan), else three integer reductions
  // over the raw bits (see FloatExtremes).
  a.skip_nan = fl && n.reduce == ReduceOp::Max && n.nan_insensitive && cx_.max_skips_nan;
  cx_.used_max_skipping_nan |= a.skip_nan;
  if (fl && (n.reduce == ReduceOp::Max || n.reduce == ReduceOp::Min) && !a.skip_nan)
    a.extremes.emplace(cx_, t, n.reduce == ReduceOp::Max);
  return a;
}

// a + b (Sum) or a * b (Prod); reassociable for floats.
Value* ReductionEmitter::sum_or_product(ReduceOp op, Value* a, Value* b, bool fl) {
  Value* r = op == ReduceOp::Sum ? (fl ? cx_.b.CreateFAdd(a, b) : cx_.b.CreateAdd(a, b))
                                 : (fl ? cx_.b.CreateFMul(a, b) : cx_.b.CreateMul(a, b));
  if (fl) {
    llvm::FastMathFlags reassoc;
    reassoc.setAllowReassoc();
    llvm::cast<llvm::Instruction>(r)->setFastMathFlags(reassoc);
  }
  return r;
}

// Combines the reduction's value at the current indices into its accumulator.
void ReductionEmitter::accumulate(Accumulation& a) {
  const KernelLoop& l = *a.l;
  const LoopNode& n = cx_.lg.nodes[size_t(l.node)];
  const DType dt = l.value->dtype;
  const bool fl = a.fl;
  Value* v = scalar().value(l.value);
  Value* acc = cx_.b.CreateLoad(a.t, a.acc);
  Value* r = nullptr;
  switch (n.reduce) {
    case ReduceOp::Sum: case ReduceOp::Prod: r = sum_or_product(n.reduce, acc, v, fl); break;
    case ReduceOp::Max: case ReduceOp::Min: {
      bool mx = n.reduce == ReduceOp::Max;
      if (a.skip_nan) r = cx_.b.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, acc, v);
      else if (fl) {
        a.extremes->update(v);
        r = acc;
      }
      else if (dt == DType::Bool) r = mx ? cx_.b.CreateOr(acc, v) : cx_.b.CreateAnd(acc, v);
      else r = cx_.b.CreateSelect(mx ? scalar().binary(SOp::Gt, v, acc, dt) : scalar().binary(SOp::Lt, v, acc, dt), v, acc);
      break;
    }
    case ReduceOp::Any: r = cx_.b.CreateOr(acc, v); break;
    case ReduceOp::All: r = cx_.b.CreateAnd(acc, v); break;
    case ReduceOp::ArgMax: case ReduceOp::ArgMin: {
      // Ties keep the first index; NaN beats any number and the first NaN wins (as eager).
      Value* cur = cx_.b.CreateLoad(cx_.i64(), a.arg);
      Value* better = scalar().binary(n.reduce == ReduceOp::ArgMax ? SOp::Gt : SOp::Lt, v, acc, dt);
      if (fl) better = cx_.b.CreateOr(better, cx_.b.CreateAnd(cx_.b.CreateFCmpUNO(v, v), cx_.b.CreateFCmpORD(acc, acc)));
      Value* take = cx_.b.CreateOr(cx_.b.CreateICmpSLT(cur, cx_.c64(0)), better);
      cx_.b.CreateStore(cx_.b.CreateSelect(take, scalar().index(ix_linear(l.ridx, n.rsizes)), cur), a.arg);
      r = cx_.b.CreateSelect(take, v, acc);
      break;
    }
  }
  cx_.b.CreateStore(r, a.acc);
}

// The result: finalised, stored, and kept in a register for the later loops of this outer point.
void ReductionEmitter::finish_reduction(Accumulation& a) {
  const KernelLoop& l = *a.l;
  const LoopNode& n = cx_.lg.nodes[size_t(l.node)];
  const DType dt = l.value->dtype;
  Value* result = cx_.b.CreateLoad(a.t, a.acc);
  if (a.extremes) result = a.extremes->result();
  DType result_dt = dt;
  if (a.total) {  // finalised (mean's division) in f64, then rounded once to the buffer's dtype
    result = cx_.b.CreateLoad(cx_.b.getDoubleTy(), a.total);
    result_dt = DType::F64;
  }
  if (a.arg) {
    result = cx_.b.CreateLoad(cx_.i64(), a.arg);
    result_dt = DType::I64;
  }
  if (n.finalize) {
    scope_.acc = result;
    SExpr f = n.finalize(s_load(kAccumulatorBuffer, ix_const(0), result_dt));
    result = scalar().value(f);
    result_dt = f->dtype;
    scope_.memo.clear();
    scope_.acc = nullptr;
  }
  Index at = ix_linear(l.idx, n.sizes);
  scalar().store(n.buffer, at, result, result_dt);
  // Later loops of this kernel read the value for this outer point from a register (as stored, then loaded).
  const Buffer& buf = cx_.lg.buffers[size_t(n.buffer)];
  scope_.registers[n.buffer] = {at.str(), scalar().from_storage(scalar().to_storage(scalar().cast(result, result_dt, buf.dtype), buf.dtype), buf.dtype)};
}

// A float sum in blocks: its innermost reduced loop adds at most kSumBlock elements into the accumulator, in the
// compute dtype (the vectoriser's four vectors of partial sums: 64 for f32 on AVX-512, 32 on AVX2), and each
// block's sum then joins an f64 total. Every partial then sums at most kSumBlock / 32 elements, whatever the
// length: an f32 sum stays within about 128 eps of sum |x| (a single f32 accumulator per lane lost 1.8e-4 over 1e8
// values and 13% over 1e9, where it stops growing at 2^24 times the value). Blocks cost one horizontal
// addition per 4096 elements. Eager sums f32 the same way (blocks in f32 lanes, an f64 total).
void ReductionEmitter::emit_blocked_sum(const KernelLoop& l, Accumulation& a) {
  const LoopNode& n = cx_.lg.nodes[size_t(l.node)];
  llvm::Type* f64 = cx_.b.getDoubleTy();
  a.total = cx_.entry_alloca(f64);
  cx_.b.CreateStore(cx_.fconst(f64, 0.0), a.total);
  auto add_block = [&] {
    Value* block = cx_.b.CreateFPCast(cx_.b.CreateLoad(a.t, a.acc), f64);
    cx_.b.CreateStore(cx_.b.CreateFAdd(cx_.b.CreateLoad(f64, a.total), block), a.total);
    cx_.b.CreateStore(cx_.fconst(a.t, 0.0), a.acc);
  };
  const size_t last = innermost(l.ridx);
  if (last == l.ridx.size()) {  // nothing reduced: one element
    scope_.memo.clear();
    accumulate(a);
    add_block();
    return;
  }
  const std::string& key = l.ridx[last].terms[0].first->key;
  const int64_t extent = n.rsizes[last];
  emit_nest(cx_, scope_, l.ridx, n.rsizes, 0, -1, [&] {
    emit_loop(cx_, cx_.c64(0), cx_.c64(extent), [&](Value* start) {
      Value* end = cx_.b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, cx_.b.CreateAdd(start, cx_.c64(kSumBlock)), cx_.c64(extent));
      emit_loop(cx_, start, end, [&](Value* i) {
        scope_.vars[key] = i;
        scope_.memo.clear();
        accumulate(a);
      }, interleave_hint(cx_, 4));
      add_block();
    }, nullptr, kSumBlock);
  }, last);
}

void ReductionEmitter::emit_reduction(const KernelLoop& l) {
  const LoopNode& n = cx_.lg.nodes[size_t(l.node)];
  Accumulation a = start_reduction(l);
  if (a.fl && n.reduce == ReduceOp::Sum) {
    emit_blocked_sum(l, a);
    scope_.memo.clear();
    return finish_reduction(a);
  }
  emit_nest(cx_, scope_, l.ridx, n.rsizes, 0, -1, [&] {
    scope_.memo.clear();
    accumulate(a);
  }, SIZE_MAX, interleave_hint(cx_, 4));
  scope_.memo.clear();
  finish_reduction(a);
}

}  // namespace kiln::inductor::cpu_codegen
