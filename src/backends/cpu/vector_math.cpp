// kiln's vector math for AVX-512 hosts (see vector_math.h): e^x on f32 as a degree-5 polynomial scaled by
// vscalefps, in scalar, 8- and 16-lane versions the loop vectoriser picks between; NaN-skipping max; libm
// functions through one libmvec variant on every path.
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

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
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

constexpr const char* kLibmWrapperPrefix = "kiln_vm_";

void mark_pure(llvm::Function* fn) {
  fn->setDoesNotThrow();
  fn->setWillReturn();
  fn->setMemoryEffects(llvm::MemoryEffects::none());
}

// glibc's vector-function ISA letter for this host's widest vectors, and the lanes of an f32 variant.
std::pair<char, unsigned> libmvec_isa() {
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  if (features.lookup("avx512f")) return {'e', 16};
  if (features.lookup("avx2")) return {'d', 8};
  return {'b', 4};
}

// kiln_vm_<scalar> (lanes 1, of type t) or kiln_vm_<scalar>_v<lanes> (<lanes x t>), defined on first use: pads
// each argument with 1.0 (inside every function's domain, so no lane takes libmvec's slow path for special
// values) to the variant's lanes, calls it and keeps the first `lanes` results.
llvm::Function* libm_wrapper(llvm::Module& m, const std::string& scalar, llvm::Type* t, int arity,
                             const LibmvecVariant& variant, unsigned lanes) {
  const std::string name = kLibmWrapperPrefix + scalar + (lanes == 1 ? "" : "_v" + std::to_string(lanes));
  if (llvm::Function* fn = m.getFunction(name)) return fn;
  llvm::Type* type = lanes == 1 ? t : llvm::FixedVectorType::get(t, lanes);
  auto* native = llvm::FixedVectorType::get(t, variant.lanes);
  llvm::FunctionCallee callee = m.getOrInsertFunction(
      variant.name, llvm::FunctionType::get(native, std::vector<llvm::Type*>(size_t(arity), native), false));
  mark_pure(llvm::cast<llvm::Function>(callee.getCallee()));
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(type, std::vector<llvm::Type*>(size_t(arity), type), false),
                                    llvm::GlobalValue::InternalLinkage, name, m);
  mark_pure(fn);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(m.getContext(), "entry", fn));
  llvm::Value* ones = llvm::ConstantFP::get(native, 1.0);
  std::vector<int> pad(variant.lanes, int(lanes)), first(lanes);  // lane `lanes` of the shuffle: a 1.0
  for (unsigned i = 0; i < lanes; ++i) pad[i] = first[i] = int(i);
  std::vector<llvm::Value*> args;
  for (llvm::Argument& a : fn->args()) {
    if (lanes == 1) args.push_back(b.CreateInsertElement(ones, &a, uint64_t(0)));
    else if (lanes == variant.lanes) args.push_back(&a);
    else args.push_back(b.CreateShuffleVector(&a, llvm::ConstantFP::get(type, 1.0), pad));
  }
  llvm::Value* r = b.CreateCall(callee, args);
  if (lanes == 1) r = b.CreateExtractElement(r, uint64_t(0));
  else if (lanes != variant.lanes) r = b.CreateShuffleVector(r, first);
  b.CreateRet(r);
  return fn;
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

std::optional<LibmvecVariant> libmvec_variant(const std::string& base, bool f32, int arity) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, bool, int>, std::optional<LibmvecVariant>> known;
  std::lock_guard lock(mutex);
  auto [it, fresh] = known.try_emplace({base, f32, arity});
  if (!fresh) return it->second;
  static void* const libmvec = ::dlopen("libmvec.so.1", RTLD_LAZY);  // what the JIT links kernels against
  if (!libmvec) return std::nullopt;
  const auto [isa, f32_lanes] = libmvec_isa();
  const unsigned lanes = f32 ? f32_lanes : f32_lanes / 2;
  std::string name = fmt::format("_ZGV{}N{}{}_{}{}", isa, lanes, std::string(size_t(arity), 'v'), base, f32 ? "f" : "");
  if (::dlsym(libmvec, name.c_str())) it->second = LibmvecVariant{std::move(name), lanes};
  return it->second;
}

int libmvec_variant_count() {
  int count = 0;
  for (const char* f : {"sin", "cos", "tan", "exp", "log", "tanh", "erf", "sinh", "cosh", "asin", "acos", "atan",
                        "expm1", "log1p", "log2", "exp2"})
    for (bool f32 : {true, false}) count += bool(libmvec_variant(f, f32, 1));
  for (const char* f : {"pow", "atan2"})
    for (bool f32 : {true, false}) count += bool(libmvec_variant(f, f32, 2));
  return count;
}

llvm::Value* emit_libm_call(llvm::IRBuilderBase& b, llvm::Module& m, const std::string& base,
                            llvm::ArrayRef<llvm::Value*> args) {
  llvm::Type* t = args[0]->getType();
  const int arity = int(args.size());
  const std::string scalar = t->isFloatTy() ? base + "f" : base;
  const std::optional<LibmvecVariant> variant = libmvec_variant(base, t->isFloatTy(), arity);
  if (!variant) {
    llvm::FunctionCallee f =
        m.getOrInsertFunction(scalar, llvm::FunctionType::get(t, std::vector<llvm::Type*>(size_t(arity), t), false));
    mark_pure(llvm::cast<llvm::Function>(f.getCallee()));
    return b.CreateCall(f, args);
  }
  const bool defined = m.getFunction(kLibmWrapperPrefix + scalar) != nullptr;
  llvm::Function* fn = libm_wrapper(m, scalar, t, arity, *variant, 1);
  std::string abi;
  std::vector<llvm::GlobalValue*> vectors;
  for (unsigned lanes = 2; lanes <= variant->lanes; lanes *= 2) {
    llvm::Function* vector = libm_wrapper(m, scalar, t, arity, *variant, lanes);
    vectors.push_back(vector);
    abi += fmt::format("{}_ZGV_LLVM_N{}{}_{}({})", abi.empty() ? "" : ",", lanes, std::string(size_t(arity), 'v'),
                       fn->getName().str(), vector->getName().str());
  }
  if (!defined) {
    fn->addFnAttr(llvm::Attribute::NoInline);  // its calls, with their variant attribute, must reach the vectoriser
    llvm::appendToCompilerUsed(m, vectors);    // nothing calls them before vectorisation
  }
  llvm::CallInst* call = b.CreateCall(fn, args);
  call->addFnAttr(llvm::Attribute::get(m.getContext(), "vector-function-abi-variant", abi));
  return call;
}

void inline_vector_math(llvm::Module& m) {
  std::vector<llvm::Function*> functions;
  for (const char* name : {kScalarExp, kVectorExp[0], kVectorExp[1]})
    if (llvm::Function* fn = m.getFunction(name)) functions.push_back(fn);
  for (llvm::Function& fn : m)
    if (fn.getName().starts_with(kLibmWrapperPrefix) && !fn.isDeclaration()) functions.push_back(&fn);
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
