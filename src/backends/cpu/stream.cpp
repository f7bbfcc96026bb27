// The CPU's stream pass: streaming (non-temporal) stores for large outputs (placement.h).
// Streaming stores write a buffer without first reading its cache lines and without evicting what the kernel
// reads: for a buffer larger than half the cache this process can count on (host_caches.h), which would not
// stay in cache for its next reader anyway, they save a third of the traffic of a streaming kernel (read a,
// read b, write c moves 3 lines, not 4). Not for buffers the same kernel reads back. Figures: docs/inductor.md.
#include "backends/cpu/placement.h"
#include "core/bisect.h"
#include "inductor/schedule_queries.h"

namespace kiln::cpu {

using namespace inductor;

namespace {

// Beyond this many ops an element (s_cost) a loop is compute-bound on any current x86 core (16 lanes, about two
// vector ops a cycle: 64 ops an element take about as long as moving its bytes), and streaming its stores gains
// nothing while the aligned split costs another copy of its body to compile (chain100: docs/inductor.md).
constexpr int kStreamMaxCost = 64;

bool read_back_later(const Kernel& k, size_t i, int buffer) {
  for (size_t j = i + 1; j < k.loops.size(); ++j)
    if (loop_reads(k.loops[j], buffer)) return true;
  return false;
}

}  // namespace

void stream(Schedule& s, const LoweredGraph& lg, CompileContext& ctx) {
  const int64_t threshold = ctx.target.streaming_threshold_bytes;
  if (threshold <= 0) return;
  for (Kernel& k : s.kernels) {
    for (size_t i = 0; i < k.loops.size(); ++i) {
      const LoopNode& n = lg.nodes[size_t(k.loops[i].node)];
      if (n.kind != LoopNode::Kind::Pointwise) continue;
      const Buffer& buf = lg.buffers[size_t(n.buffer)];
      if (buf.nbytes() < threshold || is_local(k, n.buffer)) continue;
      if (const int cost = s_cost(k.loops[i].value); cost > kStreamMaxCost) {
        ctx.decisions.record(LogChannel::Stream,
                             fmt::format("{}: ordinary stores for {} ({} bytes): its loop costs {} ops an element (> {}), "
                                         "so its time is arithmetic, not memory traffic", k.name, n.origin,
                                         buf.nbytes(), cost, kStreamMaxCost));
        continue;
      }
      if (read_back_later(k, i, n.buffer)) continue;
      if (!should_run("inductor", "stream", [&] { return fmt::format("{} in {}", n.origin, k.name); })) continue;
      k.loops[i].stream = true;
      ctx.decisions.record(LogChannel::Stream,
                           fmt::format("{}: stream the stores of {} ({} bytes >= {} bytes, {}; not read back in this "
                                       "kernel)", k.name, n.origin, buf.nbytes(), threshold,
                                       ctx.target.streaming_threshold_source));
    }
  }
}

}  // namespace kiln::cpu
