// Loops for the CPU code generator: the plain header/body/latch loop (SROA, loop rotation, LICM and the loop
// vectoriser of the JIT's O2 pipeline do the rest), nests of loops over index variables, and the vectoriser's
// interleave hint.
#include "backends/cpu/codegen_loops.h"

#include <algorithm>

namespace kiln::inductor::cpu_codegen {

namespace {

// A loop over the parallel slice [begin, end) of a dim with fewer elements than this is neither vectorised nor
// unrolled at run time. Its inner loops, of constant extent, are unrolled first; the vectoriser then widened the
// slice loop itself, tail-folded with masks and gathers, 32 or 64 lanes for a loop of at most 15 iterations:
// a 27-element bool kernel took 1.2 s to compile, and such kernels were a third of `kiln fuzz`'s compile time
// (docs/fuzz.md, Figures).
constexpr int64_t kMinVectorisedParallelExtent = 16;

llvm::MDNode* scalar_loop_hint(KernelContext& cx) {
  auto flag = [&](const char* name, llvm::Metadata* value) -> llvm::Metadata* {
    return value ? llvm::MDNode::get(cx.ctx, {llvm::MDString::get(cx.ctx, name), value})
                 : llvm::MDNode::get(cx.ctx, {llvm::MDString::get(cx.ctx, name)});
  };
  llvm::Metadata* ops[] = {nullptr, flag("llvm.loop.vectorize.enable", llvm::ConstantAsMetadata::get(cx.b.getFalse())),
                           flag("llvm.loop.unroll.runtime.disable", nullptr)};
  llvm::MDNode* md = llvm::MDNode::getDistinct(cx.ctx, ops);
  md->replaceOperandWith(0, md);
  return md;
}

}  // namespace

// for (iv = lo; iv < hi; iv += step) body(iv). `hints` (optional): loop metadata for the vectoriser.
void emit_loop(KernelContext& cx, Value* lo, Value* hi, const std::function<void(Value*)>& body, llvm::MDNode* hints,
          int64_t step) {
  if (lo == cx.begin && hi == cx.end && cx.k.parallel_extent < kMinVectorisedParallelExtent) hints = scalar_loop_hint(cx);
  llvm::BasicBlock* pre = cx.b.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(cx.ctx, "loop", cx.fn);
  auto* inner = llvm::BasicBlock::Create(cx.ctx, "body", cx.fn);
  auto* exit = llvm::BasicBlock::Create(cx.ctx, "exit", cx.fn);
  cx.b.CreateBr(header);
  cx.b.SetInsertPoint(header);
  llvm::PHINode* iv = cx.b.CreatePHI(cx.i64(), 2);
  iv->addIncoming(lo, pre);
  cx.b.CreateCondBr(cx.b.CreateICmpSLT(iv, hi), inner, exit);
  cx.b.SetInsertPoint(inner);
  body(iv);
  Value* next = cx.b.CreateAdd(iv, cx.c64(step), "", true, true);
  iv->addIncoming(next, cx.b.GetInsertBlock());
  llvm::BranchInst* latch = cx.b.CreateBr(header);
  if (hints) latch->setMetadata(llvm::LLVMContext::MD_loop, hints);
  cx.b.SetInsertPoint(exit);
}

// Loops over each non-constant variable of vars[from, until) (extents in `sizes`), then calls `body`;
// `parallel` (-1: none) runs [begin, end). `innermost_hints` go on the innermost loop.
void emit_nest(KernelContext& cx, EmitScope& scope, const std::vector<Index>& vars, const Shape& sizes, size_t from,
          int parallel, const std::function<void()>& body, size_t until, llvm::MDNode* innermost_hints) {
  until = std::min(until, vars.size());
  if (from == until) return body();
  if (vars[from].is_constant()) return emit_nest(cx, scope, vars, sizes, from + 1, parallel, body, until, innermost_hints);
  bool par = int(from) == parallel;
  emit_loop(cx, par ? cx.begin : cx.c64(0), par ? cx.end : cx.c64(sizes[from]), [&](Value* iv) {
    scope.vars[vars[from].terms[0].first->key] = iv;
    emit_nest(cx, scope, vars, sizes, from + 1, parallel, body, until, innermost_hints);
  }, from == innermost(vars) ? innermost_hints : nullptr);
}

// Loop metadata forcing an interleave count: a reduction's vector loop then keeps `count` independent
// accumulators, so it runs at the adder's throughput instead of its latency (4 cycles per vector add).
llvm::MDNode* interleave_hint(KernelContext& cx, int count) {
  llvm::Metadata* ops[] = {nullptr, llvm::MDNode::get(cx.ctx, {llvm::MDString::get(cx.ctx, "llvm.loop.interleave.count"),
                                                             llvm::ConstantAsMetadata::get(cx.b.getInt32(uint32_t(count)))})};
  llvm::MDNode* md = llvm::MDNode::getDistinct(cx.ctx, ops);
  md->replaceOperandWith(0, md);
  return md;
}

}  // namespace kiln::inductor::cpu_codegen
