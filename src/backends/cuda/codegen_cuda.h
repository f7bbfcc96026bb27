// CUDA C code generation: one __global__ function per fused kernel of the schedule, from the same loop IR the
// CPU backend compiles. Two shapes (docs/cuda.md):
//   flat  a kernel of one pointwise loop: a grid-stride loop over all its elements, one element a thread;
//   rows  anything else: a block per outer point (grid-stride over the outer nest); each pointwise loop spreads
//         the point's elements over the block's threads, each reduction accumulates a strided share per thread
//         and combines them with warp shuffles and a block reduction; the block synchronises between loops, so
//         a loop may read what an earlier loop wrote for the same outer point. Persistent rows: when every loop
//         runs over the same row of at most 16K elements, the loops are unrolled slots of the same elements per
//         thread, and what two loops touch (an input row, a kernel-local intermediate) stays in registers, so
//         the row is read from memory once; other kernel-local rows live in shared memory. Split
//         reductions: one long reduction at few outer points spreads each row over many blocks; the last block
//         of a row to finish combines their partials.
// Index arithmetic is 32-bit where every index expression and loop bound of the kernel provably fits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "inductor/scheduler.h"

namespace kiln::cuda {

struct CudaKernel {
  std::string source;        // CUDA C, with the prelude (prelude.h)
  std::string entry;         // the __global__ function's name
  bool rows = false;         // the rows shape (else flat)
  bool persistent = false;   // rows held on chip across the kernel's loops (one read of each input)
  int64_t work = 0;          // flat: elements; rows: outer points (0: nothing to launch)
  int block = 256;           // threads per block
  bool index32 = false;      // 32-bit index arithmetic
  int64_t shared_bytes = 0;  // dynamic shared memory a block needs (kernel-local rows not held in registers)
  // Split reduction: blocks per row (work counts them all), and the device workspace the kernel takes after the
  // status word (the partials, then a zeroed arrival count per row, which the kernel leaves zeroed).
  int64_t split = 0;
  int64_t workspace_bytes = 0;
  // Per argument: the element range [first, last] the kernel touches (empty when first > last), and whether it
  // writes the argument.
  std::vector<std::pair<int64_t, int64_t>> spans;
  std::vector<bool> written;
};

// Kernel `k`'s CUDA C; `args` are its buffers in argument order (kernel_args). Throws kiln::CompileError for
// what this code generator does not handle yet (kernel-local rows, deferred writes: the CPU's placement passes).
// Choices of the code generator that benchmarks compare (bench_inductor_cuda's variants); the defaults are what
// kiln compiles with.
struct CodegenVariant {
  int persistent_slots = 16;     // the elements of a persistent row a thread holds at most (rows up to 1024x this)
  bool prefetch_next_row = false;  // persistent rows prefetch the next row into L2 (slower on an H100: off)
};
void set_codegen_variant_for_benchmarks(const CodegenVariant& v);

// A launch shape for one kernel, other than the code generator's own (max-autotune's candidates, autotune.h). Every
// choice computes the same values: only how elements are spread over threads changes (and so the order in which a
// reduction's per-thread partials are combined). Zero / true: the default.
struct LaunchChoice {
  int block = 0;             // threads a block of a flat or a non-persistent rows kernel (a power of two, 32-1024)
  int persistent_slots = 0;  // persistent rows: the elements a thread holds at most (the block follows from it)
  bool persistent = true;    // false: a rows kernel that would hold its rows on chip reads them in each loop instead
  bool operator==(const LaunchChoice&) const = default;
};

CudaKernel emit_kernel_cuda(const inductor::Kernel& k, const inductor::LoweredGraph& lg, const std::vector<int>& args,
                            const LaunchChoice& choice = {});

}  // namespace kiln::cuda
