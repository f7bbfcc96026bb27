// The scheduler (TorchInductor's scheduler.py): groups the lowered nodes into kernels and plans memory.
// A kernel is an outer loop nest shared by a sequence of loops, each computing one node for the current outer
// point: a pointwise loop over the node's remaining dims, or a reduction loop over its reduced dims. A node
// joins the kernel being built when its iteration space starts with the kernel's outer dims and everything it
// reads from that kernel was written for the same outer point (vertical fusion: a reduction's result is then
// read from a register; horizontal fusion: independent nodes over the same space share the outer loop).
// Every refusal records why (KILN_LOGS=fusion). Then four placement passes, each decision logged with its
// reason: intermediates used only inside their kernel become kernel-local scratch rows, large outputs the
// kernel does not read back get streaming stores, and a streamed last loop over rows may be written one row
// late inside an earlier loop of the next row (deferred row writes); and a reduction over the row a pointwise
// loop just wrote is accumulated inside that loop. Memory planning frees each intermediate after its last use and
// reuses freed blocks of the same size.
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
  // the streaming threshold (runtime/host_caches.h), the loop is not compute-bound and this kernel does not read
  // it back (choose_streaming_stores).
  bool stream = false;
  // Reduction: accumulated inside this earlier pointwise loop of the kernel, element by element as that loop
  // writes the row it reduces (-1: runs as its own loop; choose_accumulated_reductions).
  int accumulated_in = -1;
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
  // in a per-thread scratch row (stack memory, in cache) instead of a buffer in memory (localise_buffers).
  std::vector<int> local_buffers;
  // The loop that also writes the last loop's row of the previous outer point (-1: none): the last loop runs one
  // row late, inside this one, so its streaming stores drain while this loop computes (choose_deferred_stores).
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
  std::vector<std::string> decisions;  // fusion decisions and refusals with their reasons
};

Schedule schedule_graph(const LoweredGraph& lg, bool fuse, const InjectSpec& inject);

// The loop IR of a kernel as text, with variables and buffers renamed by order of appearance (so equal
// kernels print equally in any graph): the kernel cache key, and what KILN_DEBUG_DIR receives. `args` gets
// the kernel's buffers in argument order.
std::string print_kernel(const Kernel& k, const LoweredGraph& lg, std::vector<int>* args = nullptr);
// The whole schedule (kernels and extern calls in order), for dumps.
std::string print_schedule(const Schedule& s, const LoweredGraph& lg);
// Loop IR before fusion: one line per node.
std::string print_nodes(const LoweredGraph& lg);

}  // namespace kiln::inductor
