// kiln's vector math for AVX-512 hosts (see vector_math.h): e^x on f32 as a degree-5 polynomial scaled by
// vscalefps, in scalar, 8- and 16-lane versions the loop vectoriser picks between; NaN-skipping max.
#include "backends/cpu/vector_math.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <algorithm>
#include <string>
#include <vector>

namespace kiln::runtime {
namespace {

constexpr const char* kScalarExp = "kiln_expf";
constexpr const char* kVectorExp[] = {"kiln_expf_v8", "kiln_expf_v16"};

// e^x for `x` of type float, <8 x float> or <16 x float>. Range reduction x = n ln2 + r with n = round(x / ln2)
// (to nearest, ties to even) and ln2 in two parts (r exact to a few ulp of r), e^r - 1 by the minimax
// polynomial of Arm's optimized-routines expf (degree 5, 1.45 ulp), and 2^n applied by vscalefps, which also
// rounds overflow to inf and underflow through the subnormals to 0. x is first clamped to [-104, 88.8] (e^x
// is 0 or inf beyond, and r stays finite for +-inf); the clamps keep NaN, so NaN comes out.
llvm::Value* expf_body(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* t = x->getType();
  auto c = [&](float v) { return llvm::ConstantFP::get(t, double(v)); };
  auto fma = [&](llvm::Value* a, llvm::Value* m, llvm::Value* add) {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {a, m, add});
  };
  x = b.CreateSelect(b.CreateFCmpOLT(x, c(-104.0f)), c(-104.0f), x);  // NaN: the compare is false, x stays
  x = b.CreateSelect(b.CreateFCmpOGT(x, c(88.8f)), c(88.8f), x);
  // n by the shifter S = 1.5 * 2^23: fma(x, 1/ln2, S) rounds the exact product to an integer (|x / ln2| < 2^22
  // after the clamps) and subtracting S gives that integer back exactly; NaN stays NaN. Two vector operations
  // where a multiply and vrndscaleps take three micro-ops (vrndscaleps is two, both on port 0, which vscalefps
  // also needs): one micro-op fewer a vector, two fewer on port 0 (softmax 4096x4096 ran faster in every
  // alternating pair; the figure: docs/benchmarks.md, "Figures behind code comments").
  llvm::Value* n = b.CreateFSub(fma(x, c(0x1.715476p+0f), c(0x1.8p23f)), c(0x1.8p23f));
  llvm::Value* r = fma(n, c(-0x1.62e4p-1f), x);
  r = fma(n, c(-0x1.7f7d1cp-20f), r);
  llvm::Value* p = c(0x1.0e4020p-7f);
  for (float coefficient : {0x1.573e2ep-5f, 0x1.555e66p-3f, 0x1.fffdb6p-2f, 0x1.ffffecp-1f, 1.0f})
    p = fma(p, r, c(coefficient));
  llvm::Type* f32 = b.getFloatTy();
  if (!t->isVectorTy()) {  // vscalefss works on the low lane of a 4-lane vector
    auto* v4 = llvm::FixedVectorType::get(f32, 4);
    llvm::Value* zero = llvm::Constant::getNullValue(v4);
    llvm::Value* pv = b.CreateInsertElement(zero, p, uint64_t(0));
    llvm::Value* nv = b.CreateInsertElement(zero, n, uint64_t(0));
    llvm::Value* s = b.CreateIntrinsic(llvm::Intrinsic::x86_avx512_mask_scalef_ss, {},
                                       {pv, nv, zero, b.getInt8(0xff), b.getInt32(4)});
    return b.CreateExtractElement(s, uint64_t(0));
  }
  llvm::Value* passthru = llvm::Constant::getNullValue(t);
  if (llvm::cast<llvm::FixedVectorType>(t)->getNumElements() == 16)
    return b.CreateIntrinsic(llvm::Intrinsic::x86_avx512_mask_scalef_ps_512, {},
                             {p, n, passthru, b.getInt16(0xffff), b.getInt32(4)});  // 4: the current rounding mode
  return b.CreateIntrinsic(llvm::Intrinsic::x86_avx512_mask_scalef_ps_256, {}, {p, n, passthru, b.getInt8(0xff)});
}

llvm::Function* define(llvm::Module& m, const char* name, llvm::Type* t) {
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(t, {t}, false), llvm::GlobalValue::InternalLinkage, name, m);
  fn->setDoesNotThrow();
  fn->setWillReturn();
  fn->setMemoryEffects(llvm::MemoryEffects::none());
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(m.getContext(), "entry", fn));
  b.CreateRet(expf_body(b, fn->getArg(0)));
  return fn;
}

// The scalar function and its vector variants, defined on first use. The scalar one is noinline so that its
// calls (with their variant attribute) reach the vectoriser; the vector ones are held by llvm.compiler.used
// until inline_vector_math, since nothing calls them before vectorisation.
llvm::Function* expf_function(llvm::Module& m) {
  if (llvm::Function* fn = m.getFunction(kScalarExp)) return fn;
  llvm::Type* f32 = llvm::Type::getFloatTy(m.getContext());
  llvm::Function* scalar = define(m, kScalarExp, f32);
  scalar->addFnAttr(llvm::Attribute::NoInline);
  std::vector<llvm::GlobalValue*> vectors;
  for (unsigned lanes : {8u, 16u})
    vectors.push_back(define(m, kVectorExp[lanes == 16], llvm::FixedVectorType::get(f32, lanes)));
  llvm::appendToCompilerUsed(m, vectors);
  return scalar;
}

constexpr const char* kMaxSkippingNan = "kiln.max_skipping_nan";

// The x86 max instruction for a vector type, or none (scalars and other widths keep llvm.maximum).
llvm::Intrinsic::ID x86_max(llvm::Type* t) {
  auto* v = llvm::dyn_cast<llvm::FixedVectorType>(t);
  if (!v) return llvm::Intrinsic::not_intrinsic;
  const bool f32 = v->getElementType()->isFloatTy();
  if (!f32 && !v->getElementType()->isDoubleTy()) return llvm::Intrinsic::not_intrinsic;
  switch (v->getPrimitiveSizeInBits().getFixedValue()) {
    case 128: return f32 ? llvm::Intrinsic::x86_sse_max_ps : llvm::Intrinsic::x86_sse2_max_pd;
    case 256: return f32 ? llvm::Intrinsic::x86_avx_max_ps_256 : llvm::Intrinsic::x86_avx_max_pd_256;
    case 512: return f32 ? llvm::Intrinsic::x86_avx512_max_ps_512 : llvm::Intrinsic::x86_avx512_max_pd_512;
    default: return llvm::Intrinsic::not_intrinsic;
  }
}

}  // namespace

void mark_max_skipping_nan(llvm::Module& m) { m.getOrInsertNamedMetadata(kMaxSkippingNan); }

int lower_max_skipping_nan(llvm::Module& m) {
  if (!m.getNamedMetadata(kMaxSkippingNan)) return 0;
  std::vector<llvm::IntrinsicInst*> calls;
  for (llvm::Function& f : m)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb)
        if (auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i);
            call && call->getIntrinsicID() == llvm::Intrinsic::maximum && x86_max(call->getType()))
          calls.push_back(call);
  for (llvm::IntrinsicInst* call : calls) {
    llvm::IRBuilder<> b(call);
    const llvm::Intrinsic::ID id = x86_max(call->getType());
    std::vector<llvm::Value*> args = {call->getArgOperand(0), call->getArgOperand(1)};
    if (id == llvm::Intrinsic::x86_avx512_max_ps_512 || id == llvm::Intrinsic::x86_avx512_max_pd_512)
      args.push_back(b.getInt32(4));  // the current rounding mode
    call->replaceAllUsesWith(b.CreateIntrinsic(id, {}, args));
    call->eraseFromParent();
  }
  return int(calls.size());
}

bool has_fast_vector_math() {
  static const bool has = [] {
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    return features.lookup("avx512f") && features.lookup("avx512vl");
  }();
  return has;
}

llvm::Value* emit_fast_expf(llvm::IRBuilderBase& b, llvm::Module& m, llvm::Value* x) {
  llvm::CallInst* call = b.CreateCall(expf_function(m), {x});
  call->addFnAttr(llvm::Attribute::get(m.getContext(), "vector-function-abi-variant",
                                       std::string("_ZGV_LLVM_N8v_") + kScalarExp + "(" + kVectorExp[0] + ")," +
                                           "_ZGV_LLVM_N16v_" + kScalarExp + "(" + kVectorExp[1] + ")"));
  return call;
}

void inline_vector_math(llvm::Module& m) {
  std::vector<llvm::Function*> functions;
  for (const char* name : {kScalarExp, kVectorExp[0], kVectorExp[1]})
    if (llvm::Function* fn = m.getFunction(name)) functions.push_back(fn);
  if (functions.empty()) return;
  llvm::removeFromUsedLists(m, [&](llvm::Constant* c) {
    return std::find(functions.begin(), functions.end(), c) != functions.end();
  });
  for (llvm::Function* fn : functions) {
    fn->removeDeadConstantUsers();  // the llvm.compiler.used array removeFromUsedLists replaced
    std::vector<llvm::CallBase*> calls;
    for (llvm::User* user : fn->users())
      if (auto* call = llvm::dyn_cast<llvm::CallBase>(user)) calls.push_back(call);
    for (llvm::CallBase* call : calls) {
      llvm::InlineFunctionInfo info;
      llvm::InlineFunction(*call, info);
    }
    if (fn->use_empty()) fn->eraseFromParent();
  }
}

}  // namespace kiln::runtime
