// Row tricks of the CPU code generator (codegen_rows.cpp): kernel-local scratch rows, next-row and streamed
// prefetching, the prefetching element loop, and the rows of deferred row writes.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/codegen_context.h"

namespace kiln::inductor::cpu_codegen {

// A read to prefetch: `buffer` at `index` with its loop variable `var_key` set to the element, moved `ahead`
// elements (the next outer point's row, or kPrefetchAheadBytes ahead).
struct RowRead {
  int buffer;
  Index index;          // the load's index
  std::string var_key;  // its loop variable
  int64_t ahead;        // elements from the line read now to the line to prefetch
};

// Lines to prefetch while a loop runs: `reads` at `locality` (llvm.prefetch: 3 = into L1, 2 = into L2).
struct Prefetch {
  const std::vector<RowRead>* reads = nullptr;
  int locality = 3;
};

// Rows the kernel's first loop reads from memory, one element per step of its only loop variable, and the loop
// that prefetches their next-outer-point lines: the kernel's most expensive pointwise loop after the first
// (with deferred row writes, the host, which may be the first). Only for kernels of several loops over an outer
// nest (layer norm, softmax): the first loop's reads go to memory, the later loops compute from cache, and
// without prefetching the memory sits idle while they do; the most expensive loop (softmax's exp, not its
// division) gives the lines the most time to arrive.
struct RowPlan {
  std::vector<RowRead> next_row_reads;
  int prefetch_loop = -1;
};
RowPlan plan_next_row_reads(const KernelContext& cx);

// Streamed single-loop kernels prefetch each contiguous input this far ahead (into L1): the hardware
// prefetcher alone keeps too few lines in flight for two input streams beside a streaming store
// (docs/inductor.md, step 5).
inline constexpr int64_t kPrefetchAheadBytes = 8192;
std::vector<RowRead> reads_ahead(const KernelContext& cx, const KernelLoop& l, const Index& var);

// Cache lines of the output per prefetched block of the element loop.
inline constexpr int64_t kPrefetchLines = 4;
// The innermost loop of a pointwise loop, body(i) for i in [lo, hi), prefetching `prefetch`'s reads in blocks.
void emit_element_loop(KernelContext& cx, EmitScope& scope, Value* lo, Value* hi, Value* x_offset, int64_t line,
                       const Prefetch& prefetch, const std::function<void(Value*)>& body);

// Scratch rows (64-byte aligned allocas) for the kernel's local buffers, two for its two-row buffers.
void allocate_local_rows(KernelContext& cx);

// The rows one sweep of the row variable (the innermost outer one) runs: [begin, end) when the threads split
// them, else all.
std::pair<Value*, Value*> row_range(KernelContext& cx);

}  // namespace kiln::inductor::cpu_codegen
