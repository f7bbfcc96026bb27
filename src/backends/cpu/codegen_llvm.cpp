// LLVM IR emission for fused kernels (see codegen_llvm.h): the driver. It builds the kernel's body function and
// entry point, runs the outer loop nest, and at each outer point emits the kernel's loops in order: pointwise
// loops here (with their streamed stores and the deferred last loop of double-buffered kernels), reductions in
// codegen_reduction.cpp. The parts it uses, each with explicit state (codegen_context.h):
//   codegen_scalar.cpp     one element's scalar code, loads and stores
//   codegen_math.cpp       libm calls and the inline f32 polynomials
//   codegen_loops.cpp      loops and loop nests
//   codegen_reduction.cpp  accumulators, blocked sums, float extremes
//   codegen_rows.cpp       kernel-local rows, prefetching, the row range of deferred writes
//   codegen_groups.cpp     consecutive pointwise loops that share one element loop
// Loops are emitted in the plain header/body/latch form; SROA, loop rotation, LICM and the loop vectoriser of
// the O2 pipeline (run in jit.cpp) do the rest. Accumulators live in allocas that SROA promotes to registers.
#include "backends/cpu/codegen_llvm.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "backends/cpu/codegen_context.h"
#include "backends/cpu/codegen_groups.h"
#include "backends/cpu/codegen_loops.h"
#include "backends/cpu/codegen_reduction.h"
#include "backends/cpu/codegen_rows.h"
#include "backends/cpu/codegen_scalar.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/vector_math.h"
#include "core/error.h"

namespace kiln::inductor {

namespace {

using namespace cpu_codegen;

// What an element of the host loop emits after its own store with deferred row writes: the last loop's body
// for the previous row at that element (the CPU's defer pass, backends/cpu/defer.cpp). Empty elsewhere.
using DeferredBody = std::function<void(Value*)>;

class KernelEmitter {
 public:
  KernelEmitter(llvm::Module& m, const Kernel& k, const LoweredGraph& lg, const std::vector<int>& args)
      : cx_(m, k, lg, args) {}

  void emit(const std::string& symbol);

 private:
  KernelContext cx_;
  RowPlan rows_;             // next-row prefetching (codegen_rows.h)
  std::vector<ElementGroup> groups_;  // loops sharing an element loop (codegen_groups.h)
  std::string row_key_;      // with deferred row writes: the outer variable the rows run along
  int outer_parallel_ = -1;  // the outer dim split across threads (-1: a loop of the kernel is split instead)

  bool deferred() const { return cx_.k.deferred_host >= 0; }
  void begin_body_function(const std::string& symbol);
  void emit_outer_nest(EmitScope& scope);
  void emit_deferred_outer_nest(EmitScope& scope);
  void emit_row(EmitScope& scope);
  void emit_pointwise(EmitScope& scope, const KernelLoop& l, int parallel, bool prefetch_next_row,
                      const DeferredBody& deferred = {});
  void emit_group(EmitScope& scope, const ElementGroup& g);
  void emit_group_element(EmitScope& scope, const ElementGroup& g);
  void emit_streamed_elements(EmitScope& scope, const KernelLoop& l, const Index& var, Value* lo, Value* hi,
                              const Prefetch& prefetch, const std::function<void(Value*)>& element);
  void emit_host(EmitScope& scope, const KernelLoop& l, int parallel, bool prefetch, Value* first);
  void emit_last_loop_body(const EmitScope& host, Value* x);
  void emit_entry_point(const std::string& symbol);
};

void KernelEmitter::emit(const std::string& symbol) {
  begin_body_function(symbol);
  const Kernel& k = cx_.k;
  if (deferred()) row_key_ = k.outer_vars[innermost(k.outer_vars)].terms[0].first->key;
  allocate_local_rows(cx_);
  rows_ = plan_next_row_reads(cx_);
  groups_ = plan_element_groups(cx_.k, cx_.lg);
  const int last = int(k.loops.size()) - 1;
  if (deferred() && rows_.prefetch_loop == last) rows_.prefetch_loop = k.deferred_host;  // the last loop runs in the host
  const size_t n = cx_.args.size();
  cx_.begin = cx_.fn->getArg(unsigned(n));
  cx_.end = cx_.fn->getArg(unsigned(n + 1));
  cx_.status = cx_.fn->getArg(unsigned(n + 2));
  outer_parallel_ = k.parallel_loop == -1 ? k.parallel_dim : -1;
  EmitScope scope;
  if (deferred()) emit_deferred_outer_nest(scope);
  else emit_outer_nest(scope);
  cx_.b.CreateRetVoid();
  if (cx_.used_max_skipping_nan) runtime::mark_max_skipping_nan(cx_.m);
  emit_entry_point(symbol);
}

// The body function `symbol`_body: each buffer as its own noalias pointer, then begin, end and the status
// word; the builder is left in its entry block.
void KernelEmitter::begin_body_function(const std::string& symbol) {
  llvm::IRBuilder<>& b = cx_.b;
  llvm::Type* ptr = b.getPtrTy();
  const size_t n = cx_.args.size();
  // The entry point unpacks the array and calls the body (always inlined), which tells the vectoriser the
  // buffers do not overlap.
  std::vector<llvm::Type*> params(n, ptr);
  params.push_back(cx_.i64());
  params.push_back(cx_.i64());
  params.push_back(ptr);
  auto* body_ty = llvm::FunctionType::get(b.getVoidTy(), params, false);
  cx_.fn = llvm::Function::Create(body_ty, llvm::Function::InternalLinkage, symbol + "_body", cx_.m);
  cx_.fn->addFnAttr(llvm::Attribute::AlwaysInline);
  cx_.fn->addFnAttr(llvm::Attribute::NoUnwind);
  for (size_t i = 0; i < n + 3; ++i)
    if (i < n || i == n + 2) cx_.fn->addParamAttr(unsigned(i), llvm::Attribute::NoAlias);
  b.SetInsertPoint(llvm::BasicBlock::Create(cx_.ctx, "entry", cx_.fn));
  for (size_t i = 0; i < n; ++i) cx_.ptrs.push_back(cx_.fn->getArg(unsigned(i)));
}

void KernelEmitter::emit_outer_nest(EmitScope& scope) {
  emit_nest(cx_, scope, cx_.k.outer_vars, cx_.k.outer, 0, outer_parallel_, [&] { emit_row(scope); });
}

// With deferred row writes: the outer variables before the row variable as usual; each sweep of the row
// variable, then the last row's deferred loop.
void KernelEmitter::emit_deferred_outer_nest(EmitScope& scope) {
  const Kernel& k = cx_.k;
  llvm::IRBuilder<>& b = cx_.b;
  emit_nest(cx_, scope, k.outer_vars, k.outer, 0, outer_parallel_, [&] {
    auto [first, end] = row_range(cx_);
    emit_loop(cx_, first, end, [&](Value* r) {
      scope.vars[row_key_] = r;
      scope.row_is_odd = b.CreateTrunc(r, b.getInt1Ty());
      emit_row(scope);
    });
    auto* write = llvm::BasicBlock::Create(cx_.ctx, "last_row", cx_.fn);
    auto* done = llvm::BasicBlock::Create(cx_.ctx, "done", cx_.fn);
    b.CreateCondBr(b.CreateICmpSLT(first, end), write, done);
    b.SetInsertPoint(write);
    scope.vars[row_key_] = b.CreateSub(end, cx_.c64(1));
    scope.row_is_odd = b.CreateTrunc(scope.vars[row_key_], b.getInt1Ty());
    scope.registers.clear();
    emit_pointwise(scope, k.loops.back(), -1, false);
    b.CreateBr(done);
    b.SetInsertPoint(done);
  }, innermost(k.outer_vars));
}

// The kernel's loops at one outer point; with deferred row writes the last loop runs in the host.
void KernelEmitter::emit_row(EmitScope& scope) {
  const Kernel& k = cx_.k;
  const int last = int(k.loops.size()) - 1;
  scope.registers.clear();
  ReductionEmitter reductions(cx_, scope);
  auto group = groups_.begin();
  for (size_t i = 0; i < k.loops.size(); ++i) {
    if (group != groups_.end() && group->first == i) {
      emit_group(scope, *group);
      i = group++->end - 1;
      continue;
    }
    const KernelLoop& l = k.loops[i];
    const int par = k.parallel_loop == int(i) ? k.parallel_dim - int(k.outer.size()) : -1;
    if (deferred() && int(i) == last) continue;  // written one row late, by the host
    const bool prefetched = int(i) == rows_.prefetch_loop;
    if (deferred() && int(i) == k.deferred_host) emit_host(scope, l, par, prefetched, row_range(cx_).first);
    else if (cx_.node_of(l).kind == LoopNode::Kind::Reduction) reductions.emit_reduction(l);
    else emit_pointwise(scope, l, par, prefetched);
  }
}

// Pointwise loop `l` at the current outer point: its element loop stores the value (prefetching the next row's
// lines when `prefetch_next_row`), then emits `deferred` (the host loop); a streamed store runs in aligned
// elements.
void KernelEmitter::emit_pointwise(EmitScope& scope, const KernelLoop& l, int parallel, bool prefetch_next_row,
                                   const DeferredBody& deferred) {
  const Kernel& k = cx_.k;
  const LoopNode& n = cx_.node_of(l);
  std::vector<Index> inner(l.idx.begin() + int64_t(k.outer_vars.size()), l.idx.end());
  Shape inner_sizes(n.sizes.begin() + int64_t(k.outer.size()), n.sizes.end());
  const Index at = ix_linear(l.idx, n.sizes);
  const size_t last = innermost(inner);
  const Index* element_var = last == inner.size() ? nullptr : &inner[last];
  auto body = [&] {
    scope.memo.clear();
    ScalarEmitter s(cx_, scope, element_var);
    s.store(n.buffer, at, s.value(l.value), l.value->dtype);
  };
  if (!element_var) {  // a single point per outer point
    emit_nest(cx_, scope, inner, inner_sizes, 0, parallel, body);
    scope.memo.clear();
    return;
  }
  const std::string& key = inner[last].terms[0].first->key;
  const bool par = int(last) == parallel;
  const int64_t line = std::max<int64_t>(1, 64 / dtype_size(cx_.lg.buffers[size_t(n.buffer)].dtype));
  Index row_start = ix_add(at, ix_scale(inner[last], -1));
  const bool stream = l.stream && ix_coefficient(at, inner[last]) == 1 && !ix_depends_on(row_start, inner[last]);
  const Prefetch next_row{&rows_.next_row_reads, 2};
  std::vector<RowRead> ahead = stream && k.loops.size() == 1 ? reads_ahead(cx_, l, inner[last]) : std::vector<RowRead>{};
  const Prefetch prefetch = prefetch_next_row ? next_row : ahead.empty() ? Prefetch{} : Prefetch{&ahead, 3};
  emit_nest(cx_, scope, inner, inner_sizes, 0, parallel, [&] {
    Value* lo = par ? cx_.begin : cx_.c64(0);
    Value* hi = par ? cx_.end : cx_.c64(inner_sizes[last]);
    if (stream) {
      return emit_streamed_elements(scope, l, inner[last], lo, hi, prefetch, [&](Value* x) {
        scope.vars[key] = x;
        body();
      });
    }
    emit_element_loop(cx_, scope, lo, hi, cx_.c64(0), line, prefetch_next_row ? next_row : Prefetch{}, [&](Value* x) {
      scope.vars[key] = x;
      body();
      if (deferred) deferred(x);
    });
  }, last);
  scope.memo.clear();
}

// The loops of group `g` in one element loop over the first loop's variables (prefetching the next row when one
// of them is the prefetching loop).
void KernelEmitter::emit_group(EmitScope& scope, const ElementGroup& g) {
  const KernelLoop& lead = cx_.k.loops[g.first];
  const std::vector<Index> inner = inner_vars(cx_.k, lead);
  const Shape& sizes = cx_.node_of(lead).sizes;
  const Shape inner_sizes(sizes.begin() + int64_t(cx_.k.outer.size()), sizes.end());
  const size_t last = innermost(inner);
  const bool prefetch = rows_.prefetch_loop >= int(g.first) && rows_.prefetch_loop < int(g.end);
  const Prefetch next_row{&rows_.next_row_reads, 2};
  const int64_t line = std::max<int64_t>(1, 64 / dtype_size(cx_.lg.buffers[size_t(cx_.node_of(lead).buffer)].dtype));
  auto element = [&](Value* x) {
    scope.vars[inner[last].terms[0].first->key] = x;
    emit_group_element(scope, g);
  };
  emit_nest(cx_, scope, inner, inner_sizes, 0, -1, [&] {
    emit_element_loop(cx_, scope, cx_.c64(0), cx_.c64(inner_sizes[last]), cx_.c64(0), line,
                      prefetch ? next_row : Prefetch{}, element);
  }, last);
  scope.memo.clear();
}

// One element of group `g`: each loop with its variables bound to the lead loop's, its reads of what earlier
// loops of the group wrote served from registers (codegen_groups.h guarantees they read this element), its
// store skipped when nothing else reads the buffer.
void KernelEmitter::emit_group_element(EmitScope& scope, const ElementGroup& g) {
  const Kernel& k = cx_.k;
  const std::vector<Index> lead = inner_vars(k, k.loops[g.first]);
  std::map<int, Value*> written;  // buffer -> its value at this element, as a load of it would give
  for (size_t i = g.first; i < g.end; ++i) {
    const KernelLoop& l = k.loops[i];
    const LoopNode& n = cx_.node_of(l);
    const std::vector<Index> inner = inner_vars(k, l);
    for (size_t p = 0; p < inner.size(); ++p)
      if (!inner[p].is_constant()) scope.vars[inner[p].terms[0].first->key] = scope.vars.at(lead[p].terms[0].first->key);
    std::vector<std::pair<int, Index>> loads;
    s_loads(l.value, loads);
    for (const auto& [b, ix] : loads)
      if (auto w = written.find(b); w != written.end()) scope.registers[b] = {ix.str(), w->second};
    scope.memo.clear();
    ScalarEmitter s(cx_, scope, &inner[innermost(inner)]);
    Value* v = s.value(l.value);
    const DType dt = cx_.lg.buffers[size_t(n.buffer)].dtype;
    if (!g.unstored.count(n.buffer)) s.store(n.buffer, ix_linear(l.idx, n.sizes), v, l.value->dtype);
    written[n.buffer] = s.from_storage(s.to_storage(s.cast(v, l.value->dtype, dt), dt), dt);
  }
  for (const auto& w : written) scope.registers.erase(w.first);
}

// A streamed store's elements [lo, hi): split where the output address reaches a 64-byte boundary; the second
// part runs over the element index L = row_start + x from a multiple of the cache line, so the vectoriser's
// stores are provably aligned, which the JIT's streaming-store pass needs (jit.cpp) to make them non-temporal.
void KernelEmitter::emit_streamed_elements(EmitScope& scope, const KernelLoop& l, const Index& var, Value* lo,
                                           Value* hi, const Prefetch& prefetch,
                                           const std::function<void(Value*)>& element) {
  llvm::IRBuilder<>& b = cx_.b;
  const LoopNode& n = cx_.node_of(l);
  const int64_t line = std::max<int64_t>(1, 64 / dtype_size(cx_.lg.buffers[size_t(n.buffer)].dtype));
  const Index row_start = ix_add(ix_linear(l.idx, n.sizes), ix_scale(var, -1));
  Value* c = ScalarEmitter(cx_, scope).index(row_start);
  Value* aligned = b.CreateAnd(b.CreateAdd(c, b.CreateAdd(lo, cx_.c64(line - 1))), cx_.c64(-line));
  emit_loop(cx_, lo, b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, hi, b.CreateSub(aligned, c)),
            [&](Value* x) { element(x); });
  emit_element_loop(cx_, scope, aligned, b.CreateAdd(c, hi), c, line, prefetch,
                    [&](Value* linear) { element(b.CreateSub(linear, c)); });
}

// The host loop of the current row (pointwise: the loop-IR verifier's `defer` invariant): twice, with the
// previous row's writes (row > first) and without (a thread's first row).
void KernelEmitter::emit_host(EmitScope& scope, const KernelLoop& l, int parallel, bool prefetch, Value* first) {
  llvm::IRBuilder<>& b = cx_.b;
  auto* with = llvm::BasicBlock::Create(cx_.ctx, "host_deferred", cx_.fn);
  auto* without = llvm::BasicBlock::Create(cx_.ctx, "host_first_row", cx_.fn);
  auto* join = llvm::BasicBlock::Create(cx_.ctx, "host_join", cx_.fn);
  b.CreateCondBr(b.CreateICmpSGT(scope.vars.at(row_key_), first), with, without);
  for (bool deferring : {true, false}) {
    b.SetInsertPoint(deferring ? with : without);
    int deferred_bodies = 0;
    DeferredBody deferred_body;
    if (deferring) deferred_body = [&](Value* x) {
      ++deferred_bodies;
      emit_last_loop_body(scope, x);
    };
    emit_pointwise(scope, l, parallel, prefetch, deferred_body);
    // The host's element loop is where the body goes (not its streamed or single-point forms, which the
    // scheduler excludes); without it the rows would silently go unwritten.
    KILN_CHECK(!deferring || deferred_bodies > 0, "codegen: kernel {}: host loop {} did not emit the deferred last "
               "loop", cx_.k.name, cx_.k.deferred_host);
    b.CreateBr(join);
  }
  b.SetInsertPoint(join);
  scope.memo.clear();
}

// The last loop's body at element `x` of the previous row, in a scope of its own: the host's index variables
// with the row variable one less, no registers (the previous row's reduction results are loaded from memory;
// the host's registers are the current row's), its own memo, two-row buffers giving the previous row.
void KernelEmitter::emit_last_loop_body(const EmitScope& host, Value* x) {
  const KernelLoop& last = cx_.k.loops.back();
  const LoopNode& n = cx_.node_of(last);
  EmitScope previous;
  previous.vars = host.vars;
  previous.vars[row_key_] = cx_.b.CreateSub(host.vars.at(row_key_), cx_.c64(1), "", true, true);
  previous.row_is_odd = host.row_is_odd;
  previous.previous_row = true;
  const std::vector<Index> inner(last.idx.begin() + int64_t(cx_.k.outer_vars.size()), last.idx.end());
  previous.vars[row_var_key(inner)] = x;
  const size_t element = innermost(inner);
  ScalarEmitter s(cx_, previous, element < inner.size() ? &inner[element] : nullptr);
  s.store(n.buffer, ix_linear(last.idx, n.sizes), s.value(last.value), last.value->dtype);
}

// The entry point `symbol` with the runtime::KernelFn ABI: unpacks the buffer array (marking streamed outputs
// for the JIT's streaming-store pass) and calls the body.
void KernelEmitter::emit_entry_point(const std::string& symbol) {
  llvm::IRBuilder<>& b = cx_.b;
  llvm::Type* ptr = b.getPtrTy();
  auto* entry_ty = llvm::FunctionType::get(b.getVoidTy(), {ptr, cx_.i64(), cx_.i64(), ptr}, false);
  llvm::Function* outer = llvm::Function::Create(entry_ty, llvm::Function::ExternalLinkage, symbol, cx_.m);
  outer->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(cx_.ctx, "entry", outer));
  std::vector<Value*> call_args;
  std::set<int> streamed;
  for (const KernelLoop& l : cx_.k.loops)
    if (l.stream) streamed.insert(cx_.node_of(l).buffer);
  for (size_t i = 0; i < cx_.args.size(); ++i) {
    llvm::LoadInst* p = b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, outer->getArg(0), i));
    if (streamed.count(cx_.args[i])) {
      // What the JIT's streaming-store pass looks for (jit.cpp); the host program allocates written buffers
      // 64-byte aligned (and checks it for these).
      p->setMetadata(runtime::kStreamMetadata, llvm::MDNode::get(cx_.ctx, {}));
      p->setMetadata(llvm::LLVMContext::MD_align,
                     llvm::MDNode::get(cx_.ctx, {llvm::ConstantAsMetadata::get(b.getInt64(runtime::kStreamAlignment))}));
    }
    call_args.push_back(p);
  }
  for (unsigned i = 1; i <= 3; ++i) call_args.push_back(outer->getArg(i));
  b.CreateCall(cx_.fn, call_args);
  // Streaming stores are weakly ordered: a full fence before returning makes them visible to the threads that
  // read the buffer after the join.
  if (!streamed.empty()) b.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
  b.CreateRetVoid();
}

}  // namespace

void emit_kernel_llvm(llvm::Module& m, const std::string& symbol, const Kernel& k, const LoweredGraph& lg,
                      const std::vector<int>& args) {
  KernelEmitter(m, k, lg, args).emit(symbol);
}

}  // namespace kiln::inductor
