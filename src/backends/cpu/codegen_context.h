// What every part of one kernel's LLVM code generation shares (codegen_llvm.cpp drives the parts): the kernel
// being emitted and its LLVM function (KernelContext, fixed once the function's entry is built), and the
// bindings that change while a loop body is emitted (EmitScope: index variables, emitted values, reduction
// results in registers). Each part takes these explicitly; a body emitted for another row (the deferred last
// loop) gets a scope of its own instead of saving and restoring the current one.
#pragma once
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "inductor/scheduler.h"

namespace kiln::inductor::cpu_codegen {

using llvm::Value;

struct KernelContext {
  KernelContext(llvm::Module& module, const Kernel& kernel, const LoweredGraph& lowered, const std::vector<int>& arguments);

  llvm::Module& m;
  llvm::LLVMContext& ctx;
  llvm::IRBuilder<> b;
  const Kernel& k;
  const LoweredGraph& lg;
  const std::vector<int>& args;  // the kernel's buffers in argument order
  std::map<int, int> slot;       // buffer -> its argument position
  std::vector<Value*> ptrs;      // the body's buffer arguments
  Value* status = nullptr;       // int32* status word (runtime errors)
  Value* begin = nullptr;        // the parallel range [begin, end)
  Value* end = nullptr;
  llvm::Function* fn = nullptr;  // the kernel's body function
  std::map<int, Value*> local_rows;  // kernel-local buffer -> its scratch row (an alloca in the body's entry)
  std::map<int, Value*> odd_rows;    // Kernel::two_row_buffers -> the odd rows' scratch (local_rows: even)

  // With libmvec the vectoriser turns expf/tanhf calls into vector calls: smaller code than the inline
  // polynomials (codegen_math.h), which remain for machines without it, and at least as fast
  // (docs/inductor.md, step 5).
  const bool vector_math;
  // On AVX-512 hosts f32 e^x is kiln's own vector polynomial (vector_math.h), inlined at every vectorised call
  // site at a cost in code-generation time: kernels with more than kMaxFastExpSites f32 exps call libmvec's
  // instead (docs/inductor.md, step 5, has the figures). KILN_OWN_EXP=0 turns it off.
  static constexpr int kMaxFastExpSites = 2;
  const bool fast_exp;
  // NaN-insensitive max reductions (LoopNode::nan_insensitive) as llvm.maximum recurrences, which the JIT turns
  // into the host's one-instruction max (runtime::lower_max_skipping_nan). That pass changes every vector
  // llvm.maximum of the module, so kernels that also compute a pointwise float maximum (SOp::Max, which must
  // propagate NaN) keep FloatExtremes; so do hosts without AVX-512.
  const bool max_skips_nan;
  bool used_max_skipping_nan = false;  // set when a reduction used it (the module is then marked for the pass)

  llvm::Type* i64() { return b.getInt64Ty(); }
  Value* c64(int64_t v) { return b.getInt64(uint64_t(v)); }
  Value* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }
  llvm::Type* compute_type(DType dt);  // the register type a value of dtype `dt` computes in
  llvm::Type* storage_type(DType dt);  // the type it is stored as
  llvm::AllocaInst* entry_alloca(llvm::Type* t);  // a slot in the body's entry block (SROA promotes it)
  const LoopNode& node_of(const KernelLoop& l) const { return lg.nodes[size_t(l.node)]; }
};

// The bindings of the code being emitted: index variables, the memo of emitted scalar values (cleared per
// element body), the reduction results of the current outer point (same-point reads come from registers), the
// accumulator while a finalize expression is emitted, and the parity of the current row (two-row buffers).
struct EmitScope {
  std::unordered_map<std::string, Value*> vars;
  std::unordered_map<const SNode*, Value*> memo;
  std::map<int, std::pair<std::string, Value*>> registers;
  Value* acc = nullptr;
  Value* row_is_odd = nullptr;
  bool previous_row = false;  // two-row buffers give the previous row (the deferred last loop's body)
};

bool is_unsigned(DType dt);
// Position of the last non-constant variable of `vars` (the innermost loop), or vars.size() when none.
size_t innermost(const std::vector<Index>& vars);
// The key of the first non-constant variable of `vars` ("" when none).
std::string row_var_key(const std::vector<Index>& vars);

}  // namespace kiln::inductor::cpu_codegen
