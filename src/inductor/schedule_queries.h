// Questions the schedule passes ask of a schedule (who reads a buffer, which variable a loop runs along, ...),
// answered in one place so every pass and the loop-IR verifier agree on them.
#pragma once
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "inductor/scheduler.h"

namespace kiln::inductor {

// The buffers a loop body loads, with the index of each load (kAccumulatorBuffer and other negative ids
// included as they appear).
std::vector<std::pair<int, Index>> loads_of(const KernelLoop& l);
bool loop_reads(const KernelLoop& l, int buffer);

// For each buffer: the kernels whose loops load it, and whether anything else (an extern call, a graph output)
// reads it.
struct Readers {
  std::vector<std::set<int>> kernels;
  std::vector<bool> outside;
};
Readers readers(const Schedule& s, const LoweredGraph& lg);

bool is_local(const Kernel& k, int buffer);

// The buffers kernel `k` takes, in argument order: loop by loop, the buffers its value loads in the order they
// are first read (operands left to right), then the buffer it writes; each once, kernel-local buffers not at
// all. The printer names them b0, b1, ... in this order and both backends pass them in it.
std::vector<int> kernel_args(const Kernel& k, const LoweredGraph& lg);

// The one variable a loop runs along inside a row (its non-constant inner or reduction variable), and its
// extent; nullopt when it has none or several.
std::optional<std::pair<Index, int64_t>> row_variable(const Kernel& k, const KernelLoop& l, const LoweredGraph& lg);

// The position in k.outer_vars of the row variable (the innermost non-constant outer variable), or
// outer_vars.size() when there is none.
size_t row_dim(const Kernel& k);

// The bytes of one row (one outer point) of a buffer written by a loop of kernel `k`.
int64_t row_bytes(const Kernel& k, const LoopNode& n, const Buffer& buf);

}  // namespace kiln::inductor
