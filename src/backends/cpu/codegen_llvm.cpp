// LLVM IR emission for fused kernels (see codegen_llvm.h). Loops are emitted in the plain
// header/body/latch form; SROA, loop rotation, LICM and the loop vectoriser of the O2 pipeline (run in
// runtime/jit.cpp) do the rest. Accumulators live in allocas that SROA promotes to registers.
#include "backends/cpu/codegen_llvm.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/vector_math.h"

namespace kiln::inductor {

namespace {

using llvm::Value;

class Emitter {
 public:
  Emitter(llvm::Module& m, const Kernel& k, const LoweredGraph& lg, const std::vector<int>& args)
      : m_(m), ctx_(m.getContext()), b_(ctx_), k_(k), lg_(lg), args_(args) {
    for (size_t i = 0; i < args.size(); ++i) slot_[args[i]] = int(i);
  }

  void emit(const std::string& symbol);

 private:
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const Kernel& k_;
  const LoweredGraph& lg_;
  const std::vector<int>& args_;
  std::map<int, int> slot_;
  std::vector<Value*> ptrs_;
  std::map<int, Value*> locals_;  // kernel-local buffer -> its scratch row (an alloca in the body's entry)
  Value* status_ = nullptr;
  Value* begin_ = nullptr;
  Value* end_ = nullptr;
  llvm::Function* fn_ = nullptr;
  std::unordered_map<std::string, Value*> vars_;
  std::unordered_map<const SNode*, Value*> memo_;
  std::map<int, std::pair<std::string, Value*>> registers_;  // same-point reads of reduction results
  Value* acc_ = nullptr;  // the accumulator while emitting a finalize expression
  // With libmvec the vectoriser turns expf/tanhf calls into vector calls: smaller code than the inline
  // polynomials, which remain for machines without it, and at least as fast (softmax 4096x4096 on one thread,
  // libmvec's expf against the inline polynomial with FMA: 15 vs 19 ms at 256 bits, 11.8 vs 12.4 ms at 512).
  const bool vector_math_ = runtime::KernelJit::instance().vector_math();
  // On AVX-512 hosts f32 e^x is kiln's own vector polynomial (runtime/vector_math.h): half libmvec's cost, but
  // inlined at every vectorised call site, at about 0.5 ms of code generation each. Kernels with more than
  // kMaxFastExpSites f32 exps call libmvec's instead: chain100's seven sigmoids vectorise into 20 sites (13-21 ms
  // to generate inlined, 8-10 ms as libmvec calls, the same run time: its time is in sin, tanh and cos), while
  // softmax's one exp (9 sites with its deferred writes) runs at 0.57-0.63 of copy bandwidth inlined against
  // 0.45-0.56 as calls.
  static constexpr int kMaxFastExpSites = 2;
  const bool fast_exp_ = runtime::has_fast_vector_math() && f32_exp_sites(k_) <= kMaxFastExpSites;
  // NaN-insensitive max reductions (LoopNode::nan_insensitive) as llvm.maximum recurrences, which JIT turns into
  // the host's one-instruction max (runtime::lower_max_skipping_nan): softmax's max loop then costs 1 vector op
  // an element instead of FloatExtremes' 3. That pass changes every vector llvm.maximum of the module, so
  // kernels that also compute a pointwise float maximum (SOp::Max, torch.maximum: llvm.maximum, which must
  // propagate NaN) keep FloatExtremes; so do hosts without AVX-512, where llvm.maximum costs 5 ops.
  const bool max_skips_nan_ =
      runtime::has_fast_vector_math() &&
      count_nodes(k_, [](const SNode& n) { return n.op == SOp::Max && is_floating(n.dtype); }) == 0;
  bool used_max_skipping_nan_ = false;
  static int f32_exp_sites(const Kernel& k) {
    return count_nodes(k, [](const SNode& n) { return n.op == SOp::Exp && n.dtype == DType::F32; });
  }
  // How many distinct nodes of the kernel's loop bodies satisfy `pred`.
  static int count_nodes(const Kernel& k, const std::function<bool(const SNode&)>& pred) {
    std::set<const SNode*> seen;
    std::function<void(const SExpr&)> visit = [&](const SExpr& e) {
      if (!seen.insert(e.get()).second) return;
      for (const SExpr& a : e->args) visit(a);
    };
    for (const KernelLoop& l : k.loops) visit(l.value);
    return int(std::count_if(seen.begin(), seen.end(), [&](const SNode* n) { return pred(*n); }));
  }

  llvm::Type* i64() { return b_.getInt64Ty(); }
  Value* c64(int64_t v) { return b_.getInt64(uint64_t(v)); }

  llvm::Type* compute_type(DType dt) {
    switch (compute_dtype_of(dt)) {
      case DType::Bool: return b_.getInt1Ty();
      case DType::I8: case DType::U8: return b_.getInt8Ty();
      case DType::I16: return b_.getInt16Ty();
      case DType::I32: return b_.getInt32Ty();
      case DType::I64: return b_.getInt64Ty();
      case DType::F64: return b_.getDoubleTy();
      default: return b_.getFloatTy();
    }
  }
  llvm::Type* storage_type(DType dt) {
    switch (dt) {
      case DType::F16: return b_.getHalfTy();
      case DType::BF16: return b_.getInt16Ty();
      case DType::Bool: return b_.getInt8Ty();
      default: return compute_type(dt);
    }
  }
  static bool is_unsigned(DType dt) { return dt == DType::U8 || dt == DType::Bool; }

  // ---- conversions
  Value* cast(Value* v, DType from, DType to) {
    from = compute_dtype_of(from);
    to = compute_dtype_of(to);
    if (from == to) return v;
    llvm::Type* t = compute_type(to);
    if (to == DType::Bool) {
      return is_floating(from) ? b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                               : b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    }
    if (is_floating(from) && is_floating(to)) return b_.CreateFPCast(v, t);
    if (is_floating(to)) return is_unsigned(from) ? b_.CreateUIToFP(v, t) : b_.CreateSIToFP(v, t);
    if (is_floating(from)) return float_to_int(v, to);
    return b_.CreateIntCast(v, t, !is_unsigned(from));
  }
  // A float converted to integer type `to` as eager's float_to_int (ops/scalar_math.h): truncated by the 64-bit
  // (i64) or 32-bit (narrower types) conversion, whose minimum NaN and out-of-range values give, narrower types
  // keeping the low bits. The compares are exact for both source types (-2^31 - 1 is a double; no float lies
  // strictly between it and -2^31). x86's cvtt instructions compute exactly this, and the backend folds the
  // select into them.
  Value* float_to_int(Value* v, DType to) {
    const bool wide = to == DType::I64;
    llvm::IntegerType* it = wide ? b_.getInt64Ty() : b_.getInt32Ty();
    llvm::Type* ft = v->getType();
    Value* below_max = b_.CreateFCmpOLT(v, fconst(ft, wide ? 0x1p63 : 0x1p31));
    Value* above_min = wide || ft->isFloatTy() ? b_.CreateFCmpOGE(v, fconst(ft, wide ? -0x1p63 : -0x1p31))
                                               : b_.CreateFCmpOGT(v, fconst(ft, -0x1p31 - 1));
    Value* converted = b_.CreateSelect(b_.CreateAnd(above_min, below_max), b_.CreateFPToSI(v, it),
                                       llvm::ConstantInt::get(it, llvm::APInt::getSignedMinValue(it->getBitWidth())));
    return b_.CreateTrunc(converted, compute_type(to));
  }
  Value* to_storage(Value* v, DType dt) {
    switch (dt) {
      case DType::F16: return b_.CreateFPTrunc(v, b_.getHalfTy());
      case DType::BF16: {  // round to nearest even on the f32 bits; NaN stays a quiet NaN
        Value* bits = b_.CreateBitCast(v, b_.getInt32Ty());
        Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), 1);
        Value* rounded = b_.CreateLShr(b_.CreateAdd(bits, b_.CreateAdd(lsb, b_.getInt32(0x7fff))), 16);
        Value* nan = b_.CreateFCmpUNO(v, v);
        return b_.CreateSelect(nan, b_.getInt16(0x7fc0), b_.CreateTrunc(rounded, b_.getInt16Ty()));
      }
      case DType::Bool: return b_.CreateZExt(v, b_.getInt8Ty());
      default: return v;
    }
  }
  Value* from_storage(Value* v, DType dt) {
    switch (dt) {
      case DType::F16: return b_.CreateFPExt(v, b_.getFloatTy());
      case DType::BF16: return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, b_.getInt32Ty()), 16), b_.getFloatTy());
      case DType::Bool: return b_.CreateICmpNE(v, b_.getInt8(0));
      default: return v;
    }
  }

  // ---- indices
  Value* index(const Index& ix) {
    Value* r = c64(ix.constant);
    for (const auto& [atom, k] : ix.terms) {
      Value* a;
      if (atom->kind == IndexAtom::Kind::Var) {
        auto it = vars_.find(atom->key);
        KILN_CHECK(it != vars_.end(), "codegen: index variable {} is not bound in kernel {}", atom->key, k_.name);
        a = it->second;
      } else {
        Value* arg = index(atom->arg);
        a = atom->kind == IndexAtom::Kind::Div ? b_.CreateSDiv(arg, c64(atom->divisor)) : b_.CreateSRem(arg, c64(atom->divisor));
      }
      r = b_.CreateAdd(r, k == 1 ? a : b_.CreateMul(a, c64(k), "", false, true), "", false, true);
    }
    return r;
  }

  Value* element_ptr(int buffer, const Index& ix) {
    const Buffer& buf = lg_.buffers[size_t(buffer)];
    if (auto local = locals_.find(buffer); local != locals_.end()) {
      // A kernel-local buffer holds the current outer point's row: drop the outer variables' part of the index
      // (every access shares the producer's coefficients on them; the scheduler checked).
      Index row = ix;
      for (size_t d = 0; d < k_.outer_vars.size(); ++d)
        if (!k_.outer_vars[d].is_constant()) row = ix_add(row, ix_scale(k_.outer_vars[d], -buf.strides[d]));
      Value* base = local->second;
      if (auto odd = odd_rows_.find(buffer); odd != odd_rows_.end()) {
        // Two rows, by the parity of the row variable: the deferred last loop reads the previous row's. Two
        // allocas chosen by one condition with the arms swapped for the previous row, so alias analysis sees
        // the current row's writes and the previous row's reads apart (one alloca indexed by parity made the
        // vectoriser check at run time and keep a scalar copy of the host loop). The base is its own value,
        // which LICM hoists out of the element loop.
        KILN_CHECK(row_is_odd_, "codegen: kernel {}: a two-row buffer accessed outside a row", k_.name);
        base = previous_row_ ? b_.CreateSelect(row_is_odd_, base, odd->second)
                             : b_.CreateSelect(row_is_odd_, odd->second, base);
      }
      return b_.CreateInBoundsGEP(storage_type(buf.dtype), base, index(row));
    }
    return b_.CreateInBoundsGEP(storage_type(buf.dtype), ptrs_.at(size_t(slot_.at(buffer))), index(ix));
  }
  // The variable of the pointwise element loop being emitted (null elsewhere).
  const Index* element_var_ = nullptr;
  // Whether a division by `e` may multiply by a reciprocal hoisted out of the element loop: `e` is read (from
  // memory or a register) and does not change along the loop. Not a constant: x * (1 / c) with 1 / c rounded
  // differs from eager's x / c (round(x, decimals=-1) at ties).
  bool hoistable_divisor(const SExpr& e) const {
    if (!element_var_) return false;
    bool reads = false;
    std::set<const SNode*> seen;
    std::function<bool(const SExpr&)> varies = [&](const SExpr& n) {
      if (!seen.insert(n.get()).second) return false;
      if (n->op == SOp::Load) {
        reads = true;
        return n->buffer != kAccumulatorBuffer && ix_depends_on(n->index, *element_var_);
      }
      if (n->op == SOp::IndexValue) return ix_depends_on(n->index, *element_var_);
      return std::any_of(n->args.begin(), n->args.end(), varies);
    };
    return !varies(e) && reads;
  }
  Value* load(int buffer, const Index& ix) {
    auto reg = registers_.find(buffer);
    if (reg != registers_.end() && reg->second.first == ix.str()) return reg->second.second;
    const Buffer& buf = lg_.buffers[size_t(buffer)];
    llvm::Type* t = storage_type(buf.dtype);
    llvm::LoadInst* ld = b_.CreateLoad(t, element_ptr(buffer, ix));
    ld->setAlignment(llvm::Align(dtype_size(buf.dtype)));
    return from_storage(ld, buf.dtype);
  }
  void store(int buffer, const Index& ix, Value* v, DType v_dtype) {
    const Buffer& buf = lg_.buffers[size_t(buffer)];
    Value* s = to_storage(cast(v, v_dtype, buf.dtype), buf.dtype);
    llvm::StoreInst* st = b_.CreateStore(s, element_ptr(buffer, ix));
    st->setAlignment(llvm::Align(dtype_size(buf.dtype)));
  }

  // ---- math
  llvm::FunctionCallee libm(const std::string& base, llvm::Type* t, int arity) {
    std::string name = t->isFloatTy() ? base + "f" : base;
    std::vector<llvm::Type*> params(size_t(arity), t);
    llvm::FunctionCallee f = m_.getOrInsertFunction(name, llvm::FunctionType::get(t, params, false));
    if (auto* fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
      fn->setDoesNotThrow();
      fn->setWillReturn();
      fn->setMemoryEffects(llvm::MemoryEffects::none());
    }
    return f;
  }
  Value* call1(const std::string& base, Value* x) { return b_.CreateCall(libm(base, x->getType(), 1), {x}); }
  Value* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }

  // e^x for f32 as a branch-free polynomial (Cephes expf), scaled by 2^n in two steps so every step stays a
  // normal number: within 2 ulp of expf, +-inf and NaN handled, vectorisable.
  Value* exp_f32(Value* x) {
    llvm::Type* f = x->getType();
    llvm::Type* i32 = b_.getInt32Ty();
    Value* xc = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, x, fconst(f, -104.0)), fconst(f, 88.8));
    Value* fx = b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b_.CreateFMul(xc, fconst(f, 1.44269504088896341)));
    // a * b + c as llvm.fmuladd: one FMA where the target has it (half the dependent steps of the Horner
    // chain; the reduction x - n ln2 is then also more exact).
    auto fma = [&](Value* a, Value* b, Value* c) { return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {f}, {a, b, c}); };
    Value* r = fma(fx, fconst(f, -0.693359375), xc);
    r = fma(fx, fconst(f, 2.12194440e-4), r);
    Value* z = b_.CreateFMul(r, r);
    Value* y = fconst(f, 1.9875691500e-4);
    for (double c : {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
      y = fma(y, r, fconst(f, c));
    y = b_.CreateFAdd(fma(y, z, r), fconst(f, 1.0));
    Value* n = b_.CreateFPToSI(fx, i32);
    Value* n1 = b_.CreateSDiv(n, b_.getInt32(2));
    Value* n2 = b_.CreateSub(n, n1);
    auto pow2 = [&](Value* e) { return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(e, b_.getInt32(127)), 23), f); };
    Value* result = b_.CreateFMul(b_.CreateFMul(y, pow2(n1)), pow2(n2));
    return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, result);
  }

  // tanh for f32 without a libm call (Cephes tanhf: an odd polynomial below |x| = 0.625, else
  // 1 - 2 / (e^(2|x|) + 1) with the sign of x): within 2 ulp, vectorisable, NaN and +-inf handled.
  Value* tanh_f32(Value* x) {
    llvm::Type* f = x->getType();
    Value* ax = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    Value* z = b_.CreateFMul(x, x);
    Value* p = fconst(f, -5.70498872745e-3);
    for (double c : {2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1})
      p = b_.CreateFAdd(b_.CreateFMul(p, z), fconst(f, c));
    Value* small = b_.CreateFAdd(b_.CreateFMul(b_.CreateFMul(p, z), x), x);
    Value* e = exp_f32(b_.CreateFMul(ax, fconst(f, 2.0)));
    Value* large = b_.CreateFSub(fconst(f, 1.0), b_.CreateFDiv(fconst(f, 2.0), b_.CreateFAdd(e, fconst(f, 1.0))));
    large = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, large, x);
    Value* r = b_.CreateSelect(b_.CreateFCmpOLT(ax, fconst(f, 0.625)), small, large);
    return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, r);
  }

  Value* unary(SOp op, Value* x, DType dt) {
    const bool fl = is_floating(dt);
    llvm::Type* t = x->getType();
    switch (op) {
      case SOp::Neg: return fl ? b_.CreateFNeg(x) : b_.CreateSub(llvm::ConstantInt::get(t, 0), x);
      case SOp::Abs:
        if (fl) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
        return b_.CreateSelect(b_.CreateICmpSLT(x, llvm::ConstantInt::get(t, 0)), b_.CreateSub(llvm::ConstantInt::get(t, 0), x), x);
      case SOp::Exp:
        if (t->isFloatTy() && fast_exp_) return runtime::emit_fast_expf(b_, m_, x);
        return t->isFloatTy() && !vector_math_ ? exp_f32(x) : call1("exp", x);
      case SOp::Exp2: return call1("exp2", x);
      case SOp::Log: return call1("log", x);
      case SOp::Log2: return call1("log2", x);
      case SOp::Log1p: return call1("log1p", x);
      case SOp::Expm1: return call1("expm1", x);
      case SOp::Sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
      case SOp::Sin: return call1("sin", x);
      case SOp::Cos: return call1("cos", x);
      case SOp::Tan: return call1("tan", x);
      case SOp::Tanh: return t->isFloatTy() && !vector_math_ ? tanh_f32(x) : call1("tanh", x);
      case SOp::Asin: return call1("asin", x);
      case SOp::Acos: return call1("acos", x);
      case SOp::Atan: return call1("atan", x);
      case SOp::Sinh: return call1("sinh", x);
      case SOp::Cosh: return call1("cosh", x);
      case SOp::Erf: return call1("erf", x);
      case SOp::Floor: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x);
      case SOp::Ceil: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, x);
      case SOp::RoundEven: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, x);
      case SOp::Trunc: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, x);
      case SOp::IsNan: return b_.CreateFCmpUNO(x, x);
      case SOp::IsInf:
        return b_.CreateFCmpOEQ(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), llvm::ConstantFP::getInfinity(t));
      case SOp::Not: return b_.CreateNot(x);
      default: break;
    }
    fail("codegen: {} is not a unary op", sop_name(op));
  }

  Value* binary(SOp op, Value* x, Value* y, DType dt, bool invariant_divisor = false) {
    const bool fl = is_floating(dt);
    const bool uns = is_unsigned(dt);
    switch (op) {
      case SOp::Add: return fl ? b_.CreateFAdd(x, y) : b_.CreateAdd(x, y);
      case SOp::Sub: return fl ? b_.CreateFSub(x, y) : b_.CreateSub(x, y);
      case SOp::Mul: return fl ? b_.CreateFMul(x, y) : b_.CreateMul(x, y);
      case SOp::Div: {
        // A divisor read once for the element loop (softmax's row sum): a multiplication by its reciprocal,
        // which LICM hoists out of the loop (at most 1 ulp from the exact quotient while the reciprocal is a
        // normal number). The reciprocal is an exact division: no `arcp` anywhere, since it also lets the backend
        // replace 1 / sqrt(y) by its reciprocal-square-root estimate, which gives NaN for 0 and inf (rsqrt, and
        // rms_norm's rows holding inf).
        if (invariant_divisor) return b_.CreateFMul(x, b_.CreateFDiv(llvm::ConstantFP::get(y->getType(), 1.0), y));
        return b_.CreateFDiv(x, y);
      }
      case SOp::Max: case SOp::Min: {
        Value* m = b_.CreateBinaryIntrinsic(op == SOp::Max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, x, y);
        if (!fl) return m;
        // NaN made explicit: InstCombine narrows maximum(fpext a, fpext b) of f16 values to an f16 maximum, which
        // the x86 backend (no native f16) lowered without NaN propagation (maximum(0, NaN) gave 0).
        return b_.CreateSelect(b_.CreateFCmpUNO(x, y), b_.CreateFAdd(x, y), m);
      }
      case SOp::Pow: return b_.CreateCall(libm("pow", x->getType(), 2), {x, y});
      case SOp::Atan2: return b_.CreateCall(libm("atan2", x->getType(), 2), {x, y});
      case SOp::Eq: return fl ? b_.CreateFCmpOEQ(x, y) : b_.CreateICmpEQ(x, y);
      case SOp::Ne: return fl ? b_.CreateFCmpUNE(x, y) : b_.CreateICmpNE(x, y);
      case SOp::Lt: return fl ? b_.CreateFCmpOLT(x, y) : uns ? b_.CreateICmpULT(x, y) : b_.CreateICmpSLT(x, y);
      case SOp::Le: return fl ? b_.CreateFCmpOLE(x, y) : uns ? b_.CreateICmpULE(x, y) : b_.CreateICmpSLE(x, y);
      case SOp::Gt: return fl ? b_.CreateFCmpOGT(x, y) : uns ? b_.CreateICmpUGT(x, y) : b_.CreateICmpSGT(x, y);
      case SOp::Ge: return fl ? b_.CreateFCmpOGE(x, y) : uns ? b_.CreateICmpUGE(x, y) : b_.CreateICmpSGE(x, y);
      case SOp::And: return b_.CreateAnd(x, y);
      case SOp::Or: return b_.CreateOr(x, y);
      case SOp::Xor: return b_.CreateXor(x, y);
      default: break;
    }
    fail("codegen: {} is not a binary op", sop_name(op));
  }

  Value* value(const SExpr& e) {
    if (auto it = memo_.find(e.get()); it != memo_.end()) return it->second;
    Value* v = nullptr;
    const DType dt = e->dtype;
    switch (e->op) {
      case SOp::Const:
        v = is_floating(dt) ? fconst(compute_type(dt), e->fvalue)
                            : llvm::ConstantInt::get(compute_type(dt), uint64_t(e->ivalue), true);
        break;
      case SOp::Load:
        v = e->buffer == kAccumulatorBuffer ? acc_ : load(e->buffer, e->index);
        break;
      case SOp::IndexValue: v = index(e->index); break;
      case SOp::Cast: v = cast(value(e->args[0]), e->args[0]->dtype, dt); break;
      case SOp::RoundTo: {
        DType narrow = DType(e->ivalue);
        v = from_storage(to_storage(value(e->args[0]), narrow), narrow);
        break;
      }
      case SOp::Where: v = b_.CreateSelect(value(e->args[0]), value(e->args[1]), value(e->args[2])); break;
      case SOp::MulAdd: {
        Value* x = value(e->args[0]);
        v = b_.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {x, value(e->args[1]), value(e->args[2])});
        break;
      }
      case SOp::Helper: {
        std::vector<Value*> args;
        std::vector<llvm::Type*> types;
        for (const SExpr& a : e->args) {
          args.push_back(value(a));
          types.push_back(args.back()->getType());
        }
        args.push_back(status_);
        types.push_back(b_.getPtrTy());
        auto callee = m_.getOrInsertFunction(e->helper, llvm::FunctionType::get(compute_type(dt), types, false));
        v = b_.CreateCall(callee, args);
        break;
      }
      case SOp::Trap: {  // an injected crash: a write to an unmapped address
        Value* x = value(e->args[0]);
        b_.CreateStore(b_.getInt32(0), b_.CreateIntToPtr(c64(8), b_.getPtrTy()), /*isVolatile=*/true);
        v = x;
        break;
      }
      case SOp::Fail: {  // a reported runtime error: the first code set sticks; the host reports it
        Value* x = value(e->args[0]);
        b_.CreateAtomicCmpXchg(status_, b_.getInt32(0), b_.getInt32(uint32_t(e->ivalue)), llvm::MaybeAlign(4),
                               llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic);
        v = x;
        break;
      }
      case SOp::Invalid: {  // an injected compile error: a terminator in the middle of a block
        v = value(e->args[0]);
        b_.CreateUnreachable();
        break;
      }
      default:
        if (e->args.size() == 1) v = unary(e->op, value(e->args[0]), e->args[0]->dtype);
        else v = binary(e->op, value(e->args[0]), value(e->args[1]), e->args[0]->dtype,
                        e->op == SOp::Div && hoistable_divisor(e->args[1]));
        break;
    }
    memo_[e.get()] = v;
    return v;
  }

  // ---- loops
  // for (iv = lo; iv < hi; iv += step) body(iv). `hints` (optional): loop metadata for the vectoriser.
  void loop(Value* lo, Value* hi, const std::function<void(Value*)>& body, llvm::MDNode* hints = nullptr,
            int64_t step = 1) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    auto* inner = llvm::BasicBlock::Create(ctx_, "body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(i64(), 2);
    iv->addIncoming(lo, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(iv, hi), inner, exit);
    b_.SetInsertPoint(inner);
    body(iv);
    Value* next = b_.CreateAdd(iv, c64(step), "", true, true);
    iv->addIncoming(next, b_.GetInsertBlock());
    llvm::BranchInst* latch = b_.CreateBr(header);
    if (hints) latch->setMetadata(llvm::LLVMContext::MD_loop, hints);
    b_.SetInsertPoint(exit);
  }

  // Position of the last non-constant variable of `vars` (the innermost loop), or vars.size() when none.
  static size_t innermost(const std::vector<Index>& vars) {
    for (size_t i = vars.size(); i-- > 0;)
      if (!vars[i].is_constant()) return i;
    return vars.size();
  }

  // Loops over each non-constant variable of vars[from, until) (extents in `sizes`), then calls `body`;
  // `parallel` (-1: none) runs [begin, end). `innermost_hints` go on the innermost loop.
  void nest(const std::vector<Index>& vars, const Shape& sizes, size_t from, int parallel, const std::function<void()>& body,
            size_t until = SIZE_MAX, llvm::MDNode* innermost_hints = nullptr) {
    until = std::min(until, vars.size());
    if (from == until) return body();
    if (vars[from].is_constant()) return nest(vars, sizes, from + 1, parallel, body, until, innermost_hints);
    bool par = int(from) == parallel;
    loop(par ? begin_ : c64(0), par ? end_ : c64(sizes[from]), [&](Value* iv) {
      vars_[vars[from].terms[0].first->key] = iv;
      nest(vars, sizes, from + 1, parallel, body, until, innermost_hints);
    }, from == innermost(vars) ? innermost_hints : nullptr);
  }

  // Loop metadata forcing an interleave count: a reduction's vector loop then keeps `count` independent
  // accumulators, so it runs at the adder's throughput instead of its latency (4 cycles per vector add).
  llvm::MDNode* interleave_hint(int count) {
    llvm::Metadata* ops[] = {nullptr, llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.interleave.count"),
                                                               llvm::ConstantAsMetadata::get(b_.getInt32(uint32_t(count)))})};
    llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, ops);
    md->replaceOperandWith(0, md);
    return md;
  }

  llvm::AllocaInst* entry_alloca(llvm::Type* t) {
    llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    return eb.CreateAlloca(t);
  }

  void emit_pointwise(const KernelLoop& l, int parallel, bool prefetch_next_row) {
    const LoopNode& n = lg_.nodes[size_t(l.node)];
    std::vector<Index> inner(l.idx.begin() + int64_t(k_.outer_vars.size()), l.idx.end());
    Shape inner_sizes(n.sizes.begin() + int64_t(k_.outer.size()), n.sizes.end());
    const Index at = ix_linear(l.idx, n.sizes);
    auto body = [&] {
      memo_.clear();
      store(n.buffer, at, value(l.value), l.value->dtype);
    };
    const size_t last = innermost(inner);
    if (last == inner.size()) {  // a single point per outer point
      nest(inner, inner_sizes, 0, parallel, body);
      memo_.clear();
      return;
    }
    const std::string& key = inner[last].terms[0].first->key;
    const Index* outer_element_var = element_var_;
    element_var_ = &inner[last];
    const bool par = int(last) == parallel;
    const int64_t line = std::max<int64_t>(1, 64 / dtype_size(lg_.buffers[size_t(n.buffer)].dtype));
    Index row_start = ix_add(at, ix_scale(inner[last], -1));
    const bool stream = l.stream && ix_coefficient(at, inner[last]) == 1 && !ix_depends_on(row_start, inner[last]);
    const Prefetch next_row{&next_row_reads_, 2};
    std::vector<RowRead> ahead = stream && k_.loops.size() == 1 ? reads_ahead(l, inner[last]) : std::vector<RowRead>{};
    const Prefetch prefetch = prefetch_next_row ? next_row : ahead.empty() ? Prefetch{} : Prefetch{&ahead, 3};
    nest(inner, inner_sizes, 0, parallel, [&] {
      Value* lo = par ? begin_ : c64(0);
      Value* hi = par ? end_ : c64(inner_sizes[last]);
      if (!stream) {
        innermost_loop(lo, hi, c64(0), line, prefetch_next_row ? next_row : Prefetch{}, [&](Value* x, Value* lane) {
          vars_[key] = x;
          body();
          accumulate_element(x, lane);
          if (deferred_) deferred_(x);
        });
        return;
      }
      // A streamed store: split where the output address reaches a 64-byte boundary; the second part runs over
      // the element index L = row_start + x from a multiple of the cache line, so the vectoriser's stores are
      // provably aligned, which the JIT's streaming-store pass needs (runtime/jit.cpp) to make them
      // non-temporal.
      Value* c = index(row_start);
      Value* aligned = b_.CreateAnd(b_.CreateAdd(c, b_.CreateAdd(lo, c64(line - 1))), c64(-line));
      loop(lo, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, hi, b_.CreateSub(aligned, c)), [&](Value* x) {
        vars_[key] = x;
        body();
        accumulate_element(x, nullptr);
      });
      innermost_loop(aligned, b_.CreateAdd(c, hi), c, line, prefetch, [&](Value* linear, Value* lane) {
        Value* x = b_.CreateSub(linear, c);
        vars_[key] = x;
        body();
        accumulate_element(x, lane);
      });
    }, last);
    element_var_ = outer_element_var;
    memo_.clear();
  }

  // Lines to prefetch while a loop runs: `reads` at `locality` (llvm.prefetch: 3 = into L1, 2 = into L2).
  struct RowRead;
  struct Prefetch {
    const std::vector<RowRead>* reads = nullptr;
    int locality = 3;
  };
  // for (i = lo; i < hi; ++i) body(i, lane), the innermost loop of a pointwise loop. With prefetching, in blocks
  // of kPrefetchLines cache lines of the output (`line` elements each): first prefetch each read's lines for the
  // block (x = i - x_offset in its index, moved by its `ahead` elements; one prefetch per 64 bytes of that
  // read, so an input wider than the output gets more per block), then run the block's elements in a loop of
  // constant trip count (vectorised and unrolled without runtime checks; one line per step cost layer norm a
  // fifth of its time in loop control once vectors were 16 floats); the last partial block runs as a plain loop.
  // With reductions accumulated in the loop, the block is a loop over its lines around a loop over the line's
  // elements, and `lane` is the element's place in its line (else null): each reduction adds into one partial
  // per lane, an array the vectoriser reads and writes as one vector and SROA, after unrolling, keeps in a
  // register across blocks. A scalar accumulator would be reduced across the vector at the end of every block
  // (the vectoriser cannot carry a vector accumulator through the outer loop): 9 more ops a block.
  static constexpr int64_t kPrefetchLines = 4;
  void innermost_loop(Value* lo, Value* hi, Value* x_offset, int64_t line, const Prefetch& prefetch,
                      const std::function<void(Value*, Value*)>& body) {
    auto element = [&](Value* i) { body(i, nullptr); };
    if (!prefetch.reads) return loop(lo, hi, element);
    const bool lanes = accumulating_ && std::any_of(accumulating_->begin(), accumulating_->end(),
                                                    [&](const Accumulation& a) { return a.lane_count == line; });
    const int64_t block = kPrefetchLines * line;
    Value* full = b_.CreateMul(b_.CreateSDiv(b_.CreateSub(hi, lo), c64(block)), c64(block));
    Value* blocks_end = b_.CreateSelect(b_.CreateICmpSGT(hi, lo), b_.CreateAdd(lo, full), lo);
    loop(lo, blocks_end, [&](Value* start) {
      for (const RowRead& r : *prefetch.reads) {
        const int64_t read_line = std::max<int64_t>(1, 64 / dtype_size(lg_.buffers[size_t(r.buffer)].dtype));
        for (int64_t e = 0; e < block; e += read_line) {
          vars_[r.var_key] = b_.CreateSub(b_.CreateAdd(start, c64(e)), x_offset);
          Value* at = b_.CreateAdd(index(r.index), c64(r.ahead));
          const Buffer& buf = lg_.buffers[size_t(r.buffer)];
          // Not inbounds: the line ahead may lie past the buffer's end (a prefetch never faults).
          Value* ptr = b_.CreateGEP(storage_type(buf.dtype), ptrs_.at(size_t(slot_.at(r.buffer))), at);
          // llvm.prefetch(address, read, locality, data)
          b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                             {ptr, b_.getInt32(0), b_.getInt32(uint32_t(prefetch.locality)), b_.getInt32(1)});
        }
      }
      if (!lanes) return loop(c64(0), c64(block), [&](Value* j) { element(b_.CreateAdd(start, j, "", true, true)); });
      loop(c64(0), c64(kPrefetchLines), [&](Value* l) {
        Value* first = b_.CreateAdd(start, b_.CreateMul(l, c64(line), "", true, true), "", true, true);
        loop(c64(0), c64(line), [&](Value* lane) { body(b_.CreateAdd(first, lane, "", true, true), lane); });
      });
    }, nullptr, block);
    loop(blocks_end, hi, element);
  }

  // Rows the kernel's first loop reads from memory, one element per step of its only loop variable: the
  // kernel's most expensive pointwise loop after the first (prefetch_loop_; with deferred row writes, the
  // host, which may be the first) prefetches their next-outer-point lines.
  // Only for kernels of several loops over an outer nest (layer norm, softmax): the first loop's reads go to
  // memory, the later loops compute from cache, and without prefetching the memory sits idle while they do;
  // the most expensive loop (softmax's exp, not its division) gives the lines the most time to arrive.
  struct RowRead {
    int buffer;
    Index index;          // the load's index
    std::string var_key;  // its loop variable
    int64_t ahead;        // elements from the line read now to the line to prefetch (the next outer point's row,
                          // or kPrefetchAheadBytes ahead)
  };
  std::vector<RowRead> next_row_reads_;
  int prefetch_loop_ = -1;

  // Single-loop kernels that stream their output (at least the streaming threshold) read their inputs
  // from memory one line after another; the hardware prefetcher alone keeps too few lines in flight for two
  // input streams and a streaming store on this machine. Each contiguous input is prefetched (into L1)
  // kPrefetchAheadBytes ahead. pointwise10 written in C with intrinsics: 0.67-0.70 of copy bandwidth without,
  // 0.80-0.86 with (4 and 8 KB ahead).
  static constexpr int64_t kPrefetchAheadBytes = 8192;
  std::vector<RowRead> reads_ahead(const KernelLoop& l, const Index& var) {
    std::vector<std::pair<int, Index>> loads;
    s_loads(l.value, loads);
    std::vector<RowRead> reads;
    std::set<int> seen;
    for (const auto& [b, ix] : loads) {
      if (b < 0 || locals_.count(b) || !slot_.count(b) || ix_coefficient(ix, var) != 1 || !seen.insert(b).second) continue;
      reads.push_back({b, ix, var.terms[0].first->key, kPrefetchAheadBytes / dtype_size(lg_.buffers[size_t(b)].dtype)});
    }
    return reads;
  }

  void find_next_row_reads() {
    size_t o = innermost(k_.outer_vars);
    if (k_.loops.size() < 2 || o == k_.outer_vars.size() || k_.parallel_loop != -1) return;
    const KernelLoop& first = k_.loops[0];
    std::vector<Index> vars(first.idx.begin() + int64_t(k_.outer_vars.size()), first.idx.end());
    vars.insert(vars.end(), first.ridx.begin(), first.ridx.end());
    std::vector<Index> loop_vars;
    for (const Index& v : vars)
      if (!v.is_constant()) loop_vars.push_back(v);
    if (loop_vars.size() != 1) return;
    const Index& v = loop_vars[0];
    std::vector<std::pair<int, Index>> loads;
    s_loads(first.value, loads);
    std::set<int> written, seen;
    for (const KernelLoop& l : k_.loops) written.insert(lg_.nodes[size_t(l.node)].buffer);
    for (const auto& [b, ix] : loads) {
      if (b < 0 || written.count(b) || locals_.count(b) || !slot_.count(b) || !seen.insert(b).second) continue;
      int64_t step = ix_coefficient(ix, k_.outer_vars[o]);
      if (ix_coefficient(ix, v) != 1 || step == 0) continue;
      next_row_reads_.push_back({b, ix, v.terms[0].first->key, step});
    }
    if (next_row_reads_.empty()) return;
    int best_cost = -1;
    for (size_t i = 1; i < k_.loops.size(); ++i) {
      const LoopNode& n = lg_.nodes[size_t(k_.loops[i].node)];
      int cost = s_cost(k_.loops[i].value);
      if (n.kind == LoopNode::Kind::Pointwise && cost > best_cost) {
        best_cost = cost;
        prefetch_loop_ = int(i);
      }
    }
  }

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
    Emitter& e;
    llvm::Type* ft;
    bool max;
    llvm::IntegerType* it;
    llvm::AllocaInst *smax, *smin, *umax;
    FloatExtremes(Emitter& em, llvm::Type* float_type, bool is_max) : e(em), ft(float_type), max(is_max) {
      it = e.b_.getIntNTy(unsigned(ft->getPrimitiveSizeInBits()));
      const unsigned bits = it->getBitWidth();
      smax = start(llvm::APInt::getSignedMinValue(bits));
      smin = start(bits_of(llvm::ConstantFP::getInfinity(ft, max)));
      umax = start(llvm::APInt::getMinValue(bits));
    }
    static llvm::APInt bits_of(llvm::Constant* c) {
      return llvm::cast<llvm::ConstantFP>(c)->getValueAPF().bitcastToAPInt();
    }
    llvm::AllocaInst* start(const llvm::APInt& v) {
      llvm::AllocaInst* slot = e.entry_alloca(it);
      e.b_.CreateStore(llvm::ConstantInt::get(it, v), slot);
      return slot;
    }
    void fold(llvm::AllocaInst* slot, llvm::Intrinsic::ID op, Value* x) {
      e.b_.CreateStore(e.b_.CreateBinaryIntrinsic(op, e.b_.CreateLoad(it, slot), x), slot);
    }
    void update(Value* v) {
      Value* x = e.b_.CreateBitCast(v, it);
      fold(smax, llvm::Intrinsic::smax, x);
      fold(smin, llvm::Intrinsic::smin, x);
      fold(umax, llvm::Intrinsic::umax, x);
    }
    Value* result() {
      auto& b = e.b_;
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

  // ---- deferred row writes (the scheduler's choose_deferred_stores): the last loop runs one row late, inside
  // the host loop of the next row, and after the outer loop for the last row of the thread's range.
  std::string row_key_;                    // the outer variable the rows run along
  std::map<int, Value*> odd_rows_;         // Kernel::two_row_buffers -> the odd rows' scratch (locals_: even)
  Value* row_is_odd_ = nullptr;            // the parity of the current row
  bool previous_row_ = false;              // while emitting the deferred body: two-row buffers give the previous row
  std::function<void(Value*)> deferred_;   // while emitting the host: the last loop's body at element x
  int deferred_bodies_ = 0;                // how many times it was emitted (the host must run it)

  static std::string row_var_key(const std::vector<Index>& vars) {
    for (const Index& v : vars)
      if (!v.is_constant()) return v.terms[0].first->key;
    return "";
  }
  // The last loop's body at element `x` of the previous row: index variables, registers and memo are the
  // previous row's (its reduction results are loaded from memory; the host's registers are the current row's).
  void emit_last_loop_body(Value* x) {
    const KernelLoop& last = k_.loops.back();
    const LoopNode& n = lg_.nodes[size_t(last.node)];
    auto saved_vars = vars_;
    auto saved_registers = std::move(registers_);
    auto saved_memo = std::move(memo_);
    registers_.clear();
    memo_.clear();
    ++deferred_bodies_;
    vars_[row_key_] = b_.CreateSub(vars_.at(row_key_), c64(1), "", true, true);
    previous_row_ = true;
    const std::vector<Index> inner(last.idx.begin() + int64_t(k_.outer_vars.size()), last.idx.end());
    vars_[row_var_key(inner)] = x;
    const size_t element = innermost(inner);
    const Index* host_element_var = std::exchange(element_var_, element < inner.size() ? &inner[element] : nullptr);
    store(n.buffer, ix_linear(last.idx, n.sizes), value(last.value), last.value->dtype);
    element_var_ = host_element_var;
    previous_row_ = false;
    vars_ = std::move(saved_vars);
    registers_ = std::move(saved_registers);
    memo_ = std::move(saved_memo);
  }
  // The rows one sweep of the row variable (the innermost outer one) runs: [begin, end) when the threads split
  // them, else all.
  std::pair<Value*, Value*> row_range() {
    const size_t r = innermost(k_.outer_vars);
    return k_.parallel_loop == -1 && k_.parallel_dim == int(r) ? std::make_pair(begin_, end_)
                                                               : std::make_pair(c64(0), c64(k_.outer[r]));
  }
  // The (pointwise) host loop of the current row: twice, with the previous row's writes (row > first) and
  // without (a thread's first row).
  void emit_host(const KernelLoop& l, int parallel, bool prefetch, Value* first) {
    KILN_CHECK(lg_.nodes[size_t(l.node)].kind == LoopNode::Kind::Pointwise, "codegen: kernel {} defers its last loop "
               "into a reduction loop; hosts are pointwise (scheduler.cpp choose_deferred_stores)", k_.name);
    auto* with = llvm::BasicBlock::Create(ctx_, "host_deferred", fn_);
    auto* without = llvm::BasicBlock::Create(ctx_, "host_first_row", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "host_join", fn_);
    b_.CreateCondBr(b_.CreateICmpSGT(vars_.at(row_key_), first), with, without);
    for (bool deferring : {true, false}) {
      b_.SetInsertPoint(deferring ? with : without);
      if (deferring) deferred_ = [&](Value* x) { emit_last_loop_body(x); };
      const int before = deferred_bodies_;
      emit_pointwise(l, parallel, prefetch);
      deferred_ = nullptr;
      // The host's element loop is where the body goes (not its streamed or single-point forms, which the
      // scheduler excludes); without it the rows would silently go unwritten.
      KILN_CHECK(!deferring || deferred_bodies_ > before, "codegen: kernel {}: host loop {} did not emit the deferred "
                 "last loop", k_.name, k_.deferred_host);
      b_.CreateBr(join);
    }
    b_.SetInsertPoint(join);
    memo_.clear();
  }

  // One reduction's running value: while its own loop runs, or while the pointwise loop it is accumulated in
  // runs (scheduler.cpp choose_accumulated_reductions).
  struct Accumulation {
    const KernelLoop* l = nullptr;
    llvm::Type* t = nullptr;
    bool fl = false;
    bool skip_nan = false;               // a NaN-insensitive max as llvm.maximum (see max_skips_nan_)
    llvm::AllocaInst* acc = nullptr;
    llvm::AllocaInst* arg = nullptr;     // ArgMax/ArgMin: the index of the best element (-1 before the first)
    std::optional<FloatExtremes> extremes;
    llvm::AllocaInst* total = nullptr;   // a blocked float sum's f64 total (emit_blocked_sum)
    // Accumulated in a prefetched loop: one partial value per lane of its cache lines (see innermost_loop).
    llvm::AllocaInst* lanes = nullptr;
    int64_t lane_count = 0;
  };

  // While a pointwise loop is emitted: the reductions accumulated in it (choose_accumulated_reductions), each
  // combining its value at the loop's element x (its own row variable set to x).
  std::vector<Accumulation>* accumulating_ = nullptr;
  void accumulate_element(Value* x, Value* lane) {
    if (!accumulating_) return;
    const Index* element_var = std::exchange(element_var_, nullptr);  // reductions run along their own variable
    for (Accumulation& a : *accumulating_) {
      vars_[row_var_key(a.l->ridx)] = x;
      accumulate(a, lane);
    }
    element_var_ = element_var;
  }

  Accumulation start_reduction(const KernelLoop& l, int64_t lane_count = 0) {
    const LoopNode& n = lg_.nodes[size_t(l.node)];
    const DType dt = l.value->dtype;
    Accumulation a;
    a.l = &l;
    a.t = compute_type(dt);
    a.fl = is_floating(dt);
    llvm::Type* t = a.t;
    const bool fl = a.fl;
    a.acc = entry_alloca(t);
    Value* init = nullptr;
    switch (n.reduce) {
      case ReduceOp::Sum: init = fl ? fconst(t, 0.0) : llvm::ConstantInt::get(t, 0); break;
      case ReduceOp::Prod: init = fl ? fconst(t, 1.0) : llvm::ConstantInt::get(t, 1); break;
      case ReduceOp::Max:
        init = fl ? llvm::ConstantFP::getInfinity(t, true)
                  : (dt == DType::Bool ? b_.getFalse() : llvm::ConstantInt::get(t, is_unsigned(dt) ? llvm::APInt::getMinValue(t->getIntegerBitWidth()) : llvm::APInt::getSignedMinValue(t->getIntegerBitWidth())));
        break;
      case ReduceOp::Min:
        init = fl ? llvm::ConstantFP::getInfinity(t, false)
                  : (dt == DType::Bool ? b_.getTrue() : llvm::ConstantInt::get(t, is_unsigned(dt) ? llvm::APInt::getMaxValue(t->getIntegerBitWidth()) : llvm::APInt::getSignedMaxValue(t->getIntegerBitWidth())));
        break;
      case ReduceOp::Any: init = b_.getFalse(); break;
      case ReduceOp::All: init = b_.getTrue(); break;
      case ReduceOp::ArgMax: case ReduceOp::ArgMin:
        init = fl ? fconst(t, 0.0) : llvm::ConstantInt::get(t, 0);
        a.arg = entry_alloca(i64());
        b_.CreateStore(c64(-1), a.arg);
        break;
    }
    b_.CreateStore(init, a.acc);
    // Float max/min: a NaN-insensitive max as llvm.maximum (see max_skips_nan_), else three integer reductions
    // over the raw bits (see FloatExtremes).
    a.skip_nan = fl && n.reduce == ReduceOp::Max && n.nan_insensitive && max_skips_nan_;
    used_max_skipping_nan_ |= a.skip_nan;
    if (fl && (n.reduce == ReduceOp::Max || n.reduce == ReduceOp::Min) && !a.skip_nan)
      a.extremes.emplace(*this, t, n.reduce == ReduceOp::Max);
    if (lane_count > 0) {
      KILN_CHECK(n.reduce == ReduceOp::Sum || n.reduce == ReduceOp::Prod, "codegen: kernel {}: only sums and products "
                 "are accumulated in lanes (scheduler.cpp choose_accumulated_reductions)", k_.name);
      a.lane_count = lane_count;
      a.lanes = entry_alloca(llvm::ArrayType::get(t, uint64_t(lane_count)));
      for (int64_t i = 0; i < lane_count; ++i) b_.CreateStore(init, lane_slot(a, c64(i)));
    }
    return a;
  }
  Value* lane_slot(const Accumulation& a, Value* lane) {
    return b_.CreateInBoundsGEP(a.lanes->getAllocatedType(), a.lanes, {c64(0), lane});
  }

  // a + b (Sum) or a * b (Prod); reassociable for floats.
  Value* sum_or_product(ReduceOp op, Value* a, Value* b, bool fl) {
    Value* r = op == ReduceOp::Sum ? (fl ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b))
                                   : (fl ? b_.CreateFMul(a, b) : b_.CreateMul(a, b));
    if (fl) {
      llvm::FastMathFlags reassoc;
      reassoc.setAllowReassoc();
      llvm::cast<llvm::Instruction>(r)->setFastMathFlags(reassoc);
    }
    return r;
  }

  // Combines the reduction's value at the current indices into its accumulator (lane `lane`'s partial when the
  // accumulation has lanes and a lane is given).
  void accumulate(Accumulation& a, Value* lane = nullptr) {
    const KernelLoop& l = *a.l;
    const LoopNode& n = lg_.nodes[size_t(l.node)];
    const DType dt = l.value->dtype;
    const bool fl = a.fl;
    Value* v = value(l.value);
    Value* slot = lane && a.lanes ? lane_slot(a, lane) : a.acc;
    Value* acc = b_.CreateLoad(a.t, slot);
    Value* r = nullptr;
    switch (n.reduce) {
      case ReduceOp::Sum: case ReduceOp::Prod: r = sum_or_product(n.reduce, acc, v, fl); break;
      case ReduceOp::Max: case ReduceOp::Min: {
        bool mx = n.reduce == ReduceOp::Max;
        if (a.skip_nan) r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, acc, v);
        else if (fl) {
          a.extremes->update(v);
          r = acc;
        }
        else if (dt == DType::Bool) r = mx ? b_.CreateOr(acc, v) : b_.CreateAnd(acc, v);
        else r = b_.CreateSelect(mx ? binary(SOp::Gt, v, acc, dt) : binary(SOp::Lt, v, acc, dt), v, acc);
        break;
      }
      case ReduceOp::Any: r = b_.CreateOr(acc, v); break;
      case ReduceOp::All: r = b_.CreateAnd(acc, v); break;
      case ReduceOp::ArgMax: case ReduceOp::ArgMin: {
        // Ties keep the first index; NaN beats any number and the first NaN wins (as eager).
        Value* cur = b_.CreateLoad(i64(), a.arg);
        Value* better = binary(n.reduce == ReduceOp::ArgMax ? SOp::Gt : SOp::Lt, v, acc, dt);
        if (fl) better = b_.CreateOr(better, b_.CreateAnd(b_.CreateFCmpUNO(v, v), b_.CreateFCmpORD(acc, acc)));
        Value* take = b_.CreateOr(b_.CreateICmpSLT(cur, c64(0)), better);
        b_.CreateStore(b_.CreateSelect(take, index(ix_linear(l.ridx, n.rsizes)), cur), a.arg);
        r = b_.CreateSelect(take, v, acc);
        break;
      }
    }
    b_.CreateStore(r, slot);
  }

  // The result: lanes folded in, finalised, stored, and kept in a register for the later loops of this outer
  // point.
  void finish_reduction(Accumulation& a) {
    const KernelLoop& l = *a.l;
    const LoopNode& n = lg_.nodes[size_t(l.node)];
    const DType dt = l.value->dtype;
    Value* result = b_.CreateLoad(a.t, a.acc);
    for (int64_t i = 0; i < a.lane_count; ++i)
      result = sum_or_product(n.reduce, result, b_.CreateLoad(a.t, lane_slot(a, c64(i))), a.fl);
    if (a.extremes) result = a.extremes->result();
    DType result_dt = dt;
    if (a.total) {  // finalised (mean's division) in f64, then rounded once to the buffer's dtype
      result = b_.CreateLoad(b_.getDoubleTy(), a.total);
      result_dt = DType::F64;
    }
    if (a.arg) {
      result = b_.CreateLoad(i64(), a.arg);
      result_dt = DType::I64;
    }
    if (n.finalize) {
      acc_ = result;
      SExpr f = n.finalize(s_load(kAccumulatorBuffer, ix_const(0), result_dt));
      result = value(f);
      result_dt = f->dtype;
      memo_.clear();
      acc_ = nullptr;
    }
    Index at = ix_linear(l.idx, n.sizes);
    store(n.buffer, at, result, result_dt);
    // Later loops of this kernel read the value for this outer point from a register (as stored, then loaded).
    const Buffer& buf = lg_.buffers[size_t(n.buffer)];
    registers_[n.buffer] = {at.str(), from_storage(to_storage(cast(result, result_dt, buf.dtype), buf.dtype), buf.dtype)};
  }

  // A float sum in blocks: its innermost reduced loop adds at most kSumBlock elements into the accumulator, in the
  // compute dtype (the vectoriser's four vectors of partial sums: 64 for f32 on AVX-512, 32 on AVX2), and each
  // block's sum then joins an f64 total. Every partial then sums at most kSumBlock / 32 elements, whatever the
  // length: an f32 sum stays within about 128 eps of sum |x| (a single f32 accumulator per lane lost 1.8e-4 over 1e8
  // values and 13% over 1e9, where it stops growing at 2^24 times the value). Blocks cost one horizontal
  // addition per 4096 elements. Eager sums f32 the same way (blocks in f32 lanes, an f64 total).
  void emit_blocked_sum(const KernelLoop& l, Accumulation& a) {
    const LoopNode& n = lg_.nodes[size_t(l.node)];
    llvm::Type* f64 = b_.getDoubleTy();
    a.total = entry_alloca(f64);
    b_.CreateStore(fconst(f64, 0.0), a.total);
    auto add_block = [&] {
      Value* block = b_.CreateFPCast(b_.CreateLoad(a.t, a.acc), f64);
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64, a.total), block), a.total);
      b_.CreateStore(fconst(a.t, 0.0), a.acc);
    };
    const size_t last = innermost(l.ridx);
    if (last == l.ridx.size()) {  // nothing reduced: one element
      memo_.clear();
      accumulate(a);
      add_block();
      return;
    }
    const std::string& key = l.ridx[last].terms[0].first->key;
    const int64_t extent = n.rsizes[last];
    nest(l.ridx, n.rsizes, 0, -1, [&] {
      loop(c64(0), c64(extent), [&](Value* start) {
        Value* end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(start, c64(kSumBlock)), c64(extent));
        loop(start, end, [&](Value* i) {
          vars_[key] = i;
          memo_.clear();
          accumulate(a);
        }, interleave_hint(4));
        add_block();
      }, nullptr, kSumBlock);
    }, last);
  }

  void emit_reduction(const KernelLoop& l) {
    const LoopNode& n = lg_.nodes[size_t(l.node)];
    Accumulation a = start_reduction(l);
    if (a.fl && n.reduce == ReduceOp::Sum) {
      emit_blocked_sum(l, a);
      memo_.clear();
      return finish_reduction(a);
    }
    nest(l.ridx, n.rsizes, 0, -1, [&] {
      memo_.clear();
      accumulate(a);
    }, SIZE_MAX, interleave_hint(4));
    memo_.clear();
    finish_reduction(a);
  }
};

void Emitter::emit(const std::string& symbol) {
  llvm::Type* ptr = b_.getPtrTy();
  // The body takes each buffer as its own noalias pointer; the entry point unpacks the array and calls it
  // (always inlined), which tells the vectoriser the buffers do not overlap.
  std::vector<llvm::Type*> params(args_.size(), ptr);
  params.push_back(i64());
  params.push_back(i64());
  params.push_back(ptr);
  auto* body_ty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  fn_ = llvm::Function::Create(body_ty, llvm::Function::InternalLinkage, symbol + "_body", m_);
  fn_->addFnAttr(llvm::Attribute::AlwaysInline);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  for (size_t i = 0; i < args_.size() + 3; ++i)
    if (i < args_.size() || i == args_.size() + 2) fn_->addParamAttr(unsigned(i), llvm::Attribute::NoAlias);
  auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry);
  for (size_t i = 0; i < args_.size(); ++i) ptrs_.push_back(fn_->getArg(unsigned(i)));
  const bool defer = k_.deferred_host >= 0;
  if (defer) row_key_ = k_.outer_vars[innermost(k_.outer_vars)].terms[0].first->key;
  for (int b : k_.local_buffers) {
    const Buffer& buf = lg_.buffers[size_t(b)];
    int64_t outer = shape_numel(Shape(buf.sizes.begin(), buf.sizes.begin() + int64_t(k_.outer.size())));
    int64_t row_elements = shape_numel(buf.sizes) / std::max<int64_t>(outer, 1);
    auto scratch_row = [&] {
      auto* row = b_.CreateAlloca(llvm::ArrayType::get(storage_type(buf.dtype), uint64_t(row_elements)));
      row->setAlignment(llvm::Align(64));
      return row;
    };
    locals_[b] = scratch_row();
    if (std::find(k_.two_row_buffers.begin(), k_.two_row_buffers.end(), b) != k_.two_row_buffers.end())
      odd_rows_[b] = scratch_row();
  }
  find_next_row_reads();
  const int last = int(k_.loops.size()) - 1;
  if (defer && prefetch_loop_ == last) prefetch_loop_ = k_.deferred_host;  // the last loop now runs in the host
  begin_ = fn_->getArg(unsigned(args_.size()));
  end_ = fn_->getArg(unsigned(args_.size() + 1));
  status_ = fn_->getArg(unsigned(args_.size() + 2));
  const int outer_parallel = k_.parallel_loop == -1 ? k_.parallel_dim : -1;
  auto row = [&] {  // the kernel's loops at one outer point
    registers_.clear();
    for (size_t i = 0; i < k_.loops.size(); ++i) {
      const KernelLoop& l = k_.loops[i];
      const int par = k_.parallel_loop == int(i) ? k_.parallel_dim - int(k_.outer.size()) : -1;
      if (defer && int(i) == last) continue;  // written one row late, by the host
      if (l.accumulated_in >= 0) continue;    // accumulated while its producer ran
      const bool prefetched = int(i) == prefetch_loop_;
      // Reductions accumulated in this loop: in lanes when its elements run in prefetched blocks.
      std::vector<Accumulation> accumulations;
      const int64_t line = std::max<int64_t>(1, 64 / dtype_size(lg_.buffers[size_t(lg_.nodes[size_t(l.node)].buffer)].dtype));
      for (const KernelLoop& r : k_.loops)
        if (r.accumulated_in == int(i)) accumulations.push_back(start_reduction(r, prefetched && !next_row_reads_.empty() ? line : 0));
      accumulating_ = accumulations.empty() ? nullptr : &accumulations;
      if (defer && int(i) == k_.deferred_host) emit_host(l, par, prefetched, row_range().first);
      else if (lg_.nodes[size_t(l.node)].kind == LoopNode::Kind::Reduction) emit_reduction(l);
      else emit_pointwise(l, par, prefetched);
      accumulating_ = nullptr;
      for (Accumulation& a : accumulations) finish_reduction(a);
    }
  };
  if (!defer) {
    nest(k_.outer_vars, k_.outer, 0, outer_parallel, row);
  } else {
    // The outer variables before the row variable as usual; each sweep of the row variable, then its last row.
    nest(k_.outer_vars, k_.outer, 0, outer_parallel, [&] {
      auto [first, end] = row_range();
      loop(first, end, [&](Value* r) {
        vars_[row_key_] = r;
        row_is_odd_ = b_.CreateTrunc(r, b_.getInt1Ty());
        row();
      });
      auto* write = llvm::BasicBlock::Create(ctx_, "last_row", fn_);
      auto* done = llvm::BasicBlock::Create(ctx_, "done", fn_);
      b_.CreateCondBr(b_.CreateICmpSLT(first, end), write, done);
      b_.SetInsertPoint(write);
      vars_[row_key_] = b_.CreateSub(end, c64(1));
      row_is_odd_ = b_.CreateTrunc(vars_[row_key_], b_.getInt1Ty());
      registers_.clear();
      emit_pointwise(k_.loops.back(), -1, false);
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    }, innermost(k_.outer_vars));
  }
  b_.CreateRetVoid();
  if (used_max_skipping_nan_) runtime::mark_max_skipping_nan(m_);

  auto* entry_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64(), i64(), ptr}, false);
  llvm::Function* outer = llvm::Function::Create(entry_ty, llvm::Function::ExternalLinkage, symbol, m_);
  outer->addFnAttr(llvm::Attribute::NoUnwind);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", outer));
  std::vector<Value*> call_args;
  std::set<int> streamed;
  for (const KernelLoop& l : k_.loops)
    if (l.stream) streamed.insert(lg_.nodes[size_t(l.node)].buffer);
  for (size_t i = 0; i < args_.size(); ++i) {
    llvm::LoadInst* p = b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, outer->getArg(0), i));
    if (streamed.count(args_[i])) {
      // What the JIT's streaming-store pass looks for (runtime/jit.cpp); the host program allocates written
      // buffers 64-byte aligned (and checks it for these).
      p->setMetadata(runtime::kStreamMetadata, llvm::MDNode::get(ctx_, {}));
      p->setMetadata(llvm::LLVMContext::MD_align,
                     llvm::MDNode::get(ctx_, {llvm::ConstantAsMetadata::get(b_.getInt64(runtime::kStreamAlignment))}));
    }
    call_args.push_back(p);
  }
  call_args.push_back(outer->getArg(1));
  call_args.push_back(outer->getArg(2));
  call_args.push_back(outer->getArg(3));
  b_.CreateCall(fn_, call_args);
  // Streaming stores are weakly ordered: a full fence before returning makes them visible to the threads
  // that read the buffer after the join.
  if (!streamed.empty()) b_.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
  b_.CreateRetVoid();
}

}  // namespace

void emit_kernel_llvm(llvm::Module& m, const std::string& symbol, const Kernel& k, const LoweredGraph& lg,
                      const std::vector<int>& args) {
  Emitter(m, k, lg, args).emit(symbol);
}

}  // namespace kiln::inductor
