// The CPU backend's placement passes: schedule passes only the CPU wants, run by the inductor's pipeline after
// localise (CpuCodeGenerator::placement_passes). Their contracts are those of inductor/schedule_passes.h.
#pragma once
#include "inductor/schedule_passes.h"

namespace kiln::cpu {

// Streaming (non-temporal) stores: a pointwise output at least ctx.target.streaming_threshold_bytes, that the
// same kernel does not read back and whose loop is not compute-bound, is written with stores that bypass the
// caches (KernelLoop::stream; channel `stream`; site inductor:stream).
void stream(inductor::Schedule& s, const inductor::LoweredGraph& lg, inductor::CompileContext& ctx);

// Deferred row writes: a streamed last loop over rows runs one row late, inside the next row's most expensive
// pointwise loop (Kernel::deferred_host), so its stores drain while that loop computes (channel `defer`;
// site inductor:defer). Runs after stream.
void defer(inductor::Schedule& s, const inductor::LoweredGraph& lg, inductor::CompileContext& ctx);

}  // namespace kiln::cpu
