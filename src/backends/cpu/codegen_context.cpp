// KernelContext's types and flags, and the small index helpers every codegen part uses (codegen_context.h).
#include "backends/cpu/codegen_context.h"

#include <algorithm>
#include <functional>
#include <set>

#include "backends/cpu/jit.h"
#include "backends/cpu/vector_math.h"
#include "core/options.h"

namespace kiln::inductor::cpu_codegen {

namespace {

// How many distinct nodes of the kernel's loop bodies satisfy `pred`.
int count_nodes(const Kernel& k, const std::function<bool(const SNode&)>& pred) {
  std::set<const SNode*> seen;
  std::function<void(const SExpr&)> visit = [&](const SExpr& e) {
    if (!seen.insert(e.get()).second) return;
    for (const SExpr& a : e->args) visit(a);
  };
  for (const KernelLoop& l : k.loops) visit(l.value);
  return int(std::count_if(seen.begin(), seen.end(), [&](const SNode* n) { return pred(*n); }));
}

}  // namespace

KernelContext::KernelContext(llvm::Module& module, const Kernel& kernel, const LoweredGraph& lowered,
                             const std::vector<int>& arguments)
    : m(module), ctx(module.getContext()), b(ctx), k(kernel), lg(lowered), args(arguments),
      vector_math(runtime::KernelJit::instance().vector_math()),
      fast_exp(runtime::has_fast_vector_math() && opt_bool(Opt::OwnExp) &&
               count_nodes(k, [](const SNode& n) { return n.op == SOp::Exp && n.dtype == DType::F32; }) <= kMaxFastExpSites),
      max_skips_nan(runtime::has_fast_vector_math() &&
                    count_nodes(k, [](const SNode& n) { return n.op == SOp::Max && is_floating(n.dtype); }) == 0) {
  for (size_t i = 0; i < args.size(); ++i) slot[args[i]] = int(i);
}

llvm::Type* KernelContext::compute_type(DType dt) {
  switch (compute_dtype_of(dt)) {
    case DType::Bool: return b.getInt1Ty();
    case DType::I8: case DType::U8: return b.getInt8Ty();
    case DType::I16: return b.getInt16Ty();
    case DType::I32: return b.getInt32Ty();
    case DType::I64: return b.getInt64Ty();
    case DType::F64: return b.getDoubleTy();
    default: return b.getFloatTy();
  }
}

llvm::Type* KernelContext::storage_type(DType dt) {
  switch (dt) {
    case DType::F16: return b.getHalfTy();
    case DType::BF16: return b.getInt16Ty();
    case DType::Bool: return b.getInt8Ty();
    default: return compute_type(dt);
  }
}

llvm::AllocaInst* KernelContext::entry_alloca(llvm::Type* t) {
  llvm::IRBuilder<> eb(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  return eb.CreateAlloca(t);
}

bool is_unsigned(DType dt) { return dt == DType::U8 || dt == DType::Bool; }

size_t innermost(const std::vector<Index>& vars) {
  for (size_t i = vars.size(); i-- > 0;)
    if (!vars[i].is_constant()) return i;
  return vars.size();
}

std::string row_var_key(const std::vector<Index>& vars) {
  for (const Index& v : vars)
    if (!v.is_constant()) return v.terms[0].first->key;
  return "";
}

}  // namespace kiln::inductor::cpu_codegen
