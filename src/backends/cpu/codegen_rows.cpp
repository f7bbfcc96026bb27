// Row tricks of the CPU code generator: the kernel-local scratch rows (and the two rows of a deferred kernel's
// double-buffered buffers), the rows a kernel's loops prefetch (the next outer point's row, or a streamed
// loop's inputs some bytes ahead), the prefetching element loop, and the row range of deferred row writes.
#include "backends/cpu/codegen_rows.h"

#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <set>

#include "backends/cpu/codegen_loops.h"
#include "backends/cpu/codegen_scalar.h"

namespace kiln::inductor::cpu_codegen {

void allocate_local_rows(KernelContext& cx) {
  for (int b : cx.k.local_buffers) {
    const Buffer& buf = cx.lg.buffers[size_t(b)];
    int64_t outer = shape_numel(Shape(buf.sizes.begin(), buf.sizes.begin() + int64_t(cx.k.outer.size())));
    int64_t row_elements = shape_numel(buf.sizes) / std::max<int64_t>(outer, 1);
    auto scratch_row = [&] {
      auto* row = cx.b.CreateAlloca(llvm::ArrayType::get(cx.storage_type(buf.dtype), uint64_t(row_elements)));
      row->setAlignment(llvm::Align(64));
      return row;
    };
    cx.local_rows[b] = scratch_row();
    if (std::find(cx.k.two_row_buffers.begin(), cx.k.two_row_buffers.end(), b) != cx.k.two_row_buffers.end())
      cx.odd_rows[b] = scratch_row();
  }
}

// Single-loop kernels that stream their output (at least the streaming threshold) read their inputs from memory
// one line after another: each contiguous input is prefetched (into L1) kPrefetchAheadBytes ahead.
std::vector<RowRead> reads_ahead(const KernelContext& cx, const KernelLoop& l, const Index& var) {
  std::vector<std::pair<int, Index>> loads;
  s_loads(l.value, loads);
  std::vector<RowRead> reads;
  std::set<int> seen;
  for (const auto& [b, ix] : loads) {
    if (b < 0 || cx.local_rows.count(b) || !cx.slot.count(b) || ix_coefficient(ix, var) != 1 || !seen.insert(b).second) continue;
    reads.push_back({b, ix, var.terms[0].first->key, kPrefetchAheadBytes / dtype_size(cx.lg.buffers[size_t(b)].dtype)});
  }
  return reads;
}

RowPlan plan_next_row_reads(const KernelContext& cx) {
  RowPlan plan;
  size_t o = innermost(cx.k.outer_vars);
  if (cx.k.loops.size() < 2 || o == cx.k.outer_vars.size() || cx.k.parallel_loop != -1) return plan;
  const KernelLoop& first = cx.k.loops[0];
  std::vector<Index> vars(first.idx.begin() + int64_t(cx.k.outer_vars.size()), first.idx.end());
  vars.insert(vars.end(), first.ridx.begin(), first.ridx.end());
  std::vector<Index> loop_vars;
  for (const Index& v : vars)
    if (!v.is_constant()) loop_vars.push_back(v);
  if (loop_vars.size() != 1) return plan;
  const Index& v = loop_vars[0];
  std::vector<std::pair<int, Index>> loads;
  s_loads(first.value, loads);
  std::set<int> written, seen;
  for (const KernelLoop& l : cx.k.loops) written.insert(cx.lg.nodes[size_t(l.node)].buffer);
  for (const auto& [b, ix] : loads) {
    if (b < 0 || written.count(b) || cx.local_rows.count(b) || !cx.slot.count(b) || !seen.insert(b).second) continue;
    int64_t step = ix_coefficient(ix, cx.k.outer_vars[o]);
    if (ix_coefficient(ix, v) != 1 || step == 0) continue;
    plan.next_row_reads.push_back({b, ix, v.terms[0].first->key, step});
  }
  if (plan.next_row_reads.empty()) return plan;
  int best_cost = -1;
  for (size_t i = 1; i < cx.k.loops.size(); ++i) {
    const LoopNode& n = cx.lg.nodes[size_t(cx.k.loops[i].node)];
    int cost = s_cost(cx.k.loops[i].value);
    if (n.kind == LoopNode::Kind::Pointwise && cost > best_cost) {
      best_cost = cost;
      plan.prefetch_loop = int(i);
    }
  }
  return plan;
}

// for (i = lo; i < hi; ++i) body(i), the innermost loop of a pointwise loop. With prefetching, in blocks
// of kPrefetchLines cache lines of the output (`line` elements each): first prefetch each read's lines for the
// block (x = i - x_offset in its index, moved by its `ahead` elements; one prefetch per 64 bytes of that
// read, so an input wider than the output gets more per block), then run the block's elements in a loop of
// constant trip count (vectorised and unrolled without runtime checks; one line per step cost layer norm a
// fifth of its time in loop control once vectors were 16 floats); the last partial block runs as a plain loop.
void emit_element_loop(KernelContext& cx, EmitScope& scope, Value* lo, Value* hi, Value* x_offset, int64_t line,
                       const Prefetch& prefetch, const std::function<void(Value*)>& body) {
  if (!prefetch.reads) return emit_loop(cx, lo, hi, body);
  const int64_t block = kPrefetchLines * line;
  Value* full = cx.b.CreateMul(cx.b.CreateSDiv(cx.b.CreateSub(hi, lo), cx.c64(block)), cx.c64(block));
  Value* blocks_end = cx.b.CreateSelect(cx.b.CreateICmpSGT(hi, lo), cx.b.CreateAdd(lo, full), lo);
  emit_loop(cx, lo, blocks_end, [&](Value* start) {
    for (const RowRead& r : *prefetch.reads) {
      const int64_t read_line = std::max<int64_t>(1, 64 / dtype_size(cx.lg.buffers[size_t(r.buffer)].dtype));
      for (int64_t e = 0; e < block; e += read_line) {
        scope.vars[r.var_key] = cx.b.CreateSub(cx.b.CreateAdd(start, cx.c64(e)), x_offset);
        Value* at = cx.b.CreateAdd(ScalarEmitter(cx, scope).index(r.index), cx.c64(r.ahead));
        const Buffer& buf = cx.lg.buffers[size_t(r.buffer)];
        // Not inbounds: the line ahead may lie past the buffer's end (a prefetch never faults).
        Value* ptr = cx.b.CreateGEP(cx.storage_type(buf.dtype), cx.ptrs.at(size_t(cx.slot.at(r.buffer))), at);
        // llvm.prefetch(address, read, locality, data)
        cx.b.CreateIntrinsic(llvm::Intrinsic::prefetch, {cx.b.getPtrTy()},
                           {ptr, cx.b.getInt32(0), cx.b.getInt32(uint32_t(prefetch.locality)), cx.b.getInt32(1)});
      }
    }
    emit_loop(cx, cx.c64(0), cx.c64(block), [&](Value* j) { body(cx.b.CreateAdd(start, j, "", true, true)); });
  }, nullptr, block);
  emit_loop(cx, blocks_end, hi, body);
}

std::pair<Value*, Value*> row_range(KernelContext& cx) {
  const size_t r = innermost(cx.k.outer_vars);
  return cx.k.parallel_loop == -1 && cx.k.parallel_dim == int(r) ? std::make_pair(cx.begin, cx.end)
                                                             : std::make_pair(cx.c64(0), cx.c64(cx.k.outer[r]));
}

}  // namespace kiln::inductor::cpu_codegen
