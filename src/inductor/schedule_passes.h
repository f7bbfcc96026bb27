// The inductor's schedule passes: each turns the lowered graph (or the schedule an earlier pass made) into a
// better schedule, and each has one entry point here and its own file. compile.cpp runs them in this order,
// with the backend's placement passes (CodeGenerator::placement_passes, e.g. the CPU's streaming stores) after
// localise:
//   fuse (fuse.cpp) -> localise (localise.cpp) -> [backend placement] -> plan_memory (plan_memory.cpp)
// A pass reads budgets from ctx.target, records every decision with its reason in ctx.decisions (logged on
// its own KILN_LOGS channel), asks the bisection hook before each application, and leaves a schedule the
// loop-IR verifier (verify_schedule.h) accepts. Disabling any application leaves a correct, slower program.
#pragma once
#include "inductor/context.h"
#include "inductor/scheduler.h"

namespace kiln::inductor {

// A pass over a schedule, as the pipeline lists it: its name (the KILN_DEBUG_DIR dump and the Passes log),
// the channel its decisions go to, and its entry point.
struct SchedulePass {
  const char* name;
  LogChannel channel;
  void (*run)(Schedule& s, const LoweredGraph& lg, CompileContext& ctx);
};

// Kernel formation (TorchInductor's scheduler fusion): groups the nodes into kernels, in order. A node joins the
// kernel being built when its iteration space starts with the kernel's outer dims and everything it reads from
// that kernel was written for the same outer point; then each kernel gets its parallel dimension. Extern nodes
// are steps of their own. Every refusal says why (channel `fusion`; bisection site inductor:fusion).
Schedule fuse(const LoweredGraph& lg, CompileContext& ctx);

// Kernel-local buffers (TorchInductor's remove_kernel_local_buffers, Halide's store_at): a pointwise result read
// only by later loops of its own kernel, at the outer point that wrote it, lives in a per-thread scratch row
// within ctx.target's budget instead of a buffer in memory (channel `localise`; site inductor:localise).
void localise(Schedule& s, const LoweredGraph& lg, CompileContext& ctx);

// The memory plan: each intermediate is freed after the last step that reads or writes it (kernel-local buffers
// are never allocated); the host program reuses freed blocks of the same size (channel `memory_plan`).
void plan_memory(Schedule& s, const LoweredGraph& lg, CompileContext& ctx);

}  // namespace kiln::inductor
