// The schedule: what the inductor's schedule passes (schedule_passes.h) build from the lowered graph, and what
// a backend compiles. A kernel is an outer loop nest shared by a sequence of loops, each computing one node for
// the current outer point: a pointwise loop over the node's remaining dims, or a reduction loop over its
// reduced dims. The steps run kernels and extern calls in order and free intermediates after their last use.
// Printers for the loop IR (the kernel cache key, KILN_DEBUG_DIR dumps) are here too (schedule_print.cpp).
#pragma once
#include <string>
#include <vector>

#include "inductor/lowering.h"

namespace kiln::inductor {

struct KernelLoop {
  int node = -1;                  // index into LoweredGraph::nodes
  std::vector<Index> idx, ridx;   // the node's index variables (idx starts with the kernel's outer variables)
  SExpr value;                    // the body at (idx, ridx)
  // Pointwise: the buffer is written with streaming (non-temporal) stores that bypass the caches: it is at least
  // the target's streaming threshold, the loop is not compute-bound and this kernel does not read it back (the
  // CPU's stream pass, backends/cpu/stream.cpp).
  bool stream = false;
};

struct Kernel {
  std::string name;
  Shape outer;
  std::vector<Index> outer_vars;
  std::vector<KernelLoop> loops;
  // The dimension split across threads: (loop -1 = the outer nest, else that loop's idx) and its extent.
  int parallel_loop = -1;
  int parallel_dim = -1;          // -1: the kernel runs on one thread
  int64_t parallel_extent = 1;
  // Intermediates written and read only by this kernel, each read at the outer point that wrote it: they live
  // in a per-thread scratch row (stack memory, in cache) instead of a buffer in memory (the localise pass).
  std::vector<int> local_buffers;
  // The loop that also writes the last loop's row of the previous outer point (-1: none): the last loop runs one
  // row late, inside this one, so its streaming stores drain while this loop computes (the CPU's defer pass).
  int deferred_host = -1;
  // Kernel-local buffers the deferred last loop reads: they hold two rows, by the parity of the row variable.
  std::vector<int> two_row_buffers;
};

struct Step {
  enum class Kind : uint8_t { Kernel, Extern } kind = Kind::Kernel;
  int index = -1;                  // Kernel: into Schedule::kernels; Extern: into LoweredGraph::nodes
  std::vector<int> free_after;     // intermediate buffers whose last use is this step
};

struct Schedule {
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
};

// The loop IR of a kernel as text, with variables and buffers renamed by order of appearance (so equal
// kernels print equally in any graph; the arguments b0, b1, ... in kernel_args order, schedule_queries.h): the
// kernel cache key, and what KILN_DEBUG_DIR receives.
std::string print_kernel(const Kernel& k, const LoweredGraph& lg);
// The whole schedule (kernels and extern calls in order), for dumps.
std::string print_schedule(const Schedule& s, const LoweredGraph& lg);
// Loop IR before fusion: one line per node.
std::string print_nodes(const LoweredGraph& lg);

}  // namespace kiln::inductor
