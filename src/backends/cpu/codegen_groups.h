// Shared element loops of the CPU code generator (codegen_groups.cpp): consecutive pointwise loops of a kernel
// over the same inner iteration space, where each reads what the earlier ones wrote only at the element being
// computed, run as ONE element loop. The later loops take those values from registers instead of loading them,
// and a kernel-local row nothing else reads is not stored at all.
//
// Why: a backward graph fused into one kernel is a chain of short loops (each recomputed forward value another
// loop's input and the gradient loop's), and LLVM's cost is per loop (vectoriser, strength reduction,
// instruction selection of each vector body): chain100's backward is 40 loops and took 4-5x its forward's
// compile time. Why not all of them: one element of a long group is a dependency chain through many libm calls
// that the core cannot overlap with the next element's, so groups stop at a few calls (kMaxGroupCost, with the
// measurements) and at a few values kept in registers (kMaxLiveForwardedValues). docs/aot.md, "Cold compile".
#pragma once
#include <optional>
#include <set>
#include <vector>

#include "inductor/scheduler.h"

namespace kiln::inductor::cpu_codegen {

struct ElementGroup {
  size_t first = 0, end = 0;  // the kernel's loops [first, end), at least two
  std::set<int> unstored;     // kernel-local buffers written in the group and read only by its later loops
};

// The kernel's groups, in loop order (loops in none are emitted alone). None in deferred kernels, kernels that
// split a loop across threads, and around streamed, single-point and reduction loops.
std::vector<ElementGroup> plan_element_groups(const Kernel& k, const LoweredGraph& lg);

// A loop's inner index variables (its idx after the kernel's outer ones).
std::vector<Index> inner_vars(const Kernel& k, const KernelLoop& l);

// `ix` (over variables `from`) over variables `to` instead, position by position; nullopt when a div/mod atom
// of `ix` depends on one of `from`.
std::optional<Index> in_vars_of(const Index& ix, const std::vector<Index>& from, const std::vector<Index>& to);

}  // namespace kiln::inductor::cpu_codegen
