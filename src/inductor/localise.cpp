// The localise pass: kernel-local scratch rows instead of buffers in memory (schedule_passes.h). Softmax's
// exp(x - max) is computed once per row into scratch that stays in L1/L2, then summed and divided, without a
// round trip through memory. Only when the outer nest is what the threads split (each call runs whole outer
// points) and the rows fit ctx.target's scratch budget.
#include "core/bisect.h"
#include "inductor/decision.h"
#include "inductor/schedule_passes.h"
#include "inductor/schedule_queries.h"

namespace kiln::inductor {

namespace {

// Whether a pointwise result read only inside kernel `k` may be kernel-local, given the scratch `used` so far;
// if not, why it must stay in memory.
Decision may_localise(const Kernel& k, const LoopNode& n, int64_t bytes, int64_t used, const Target& target) {
  if (k.outer.empty() || k.parallel_loop != -1) return Decision::no("the kernel has no outer loop split across threads");
  if (bytes > target.max_local_row_bytes)
    return Decision::no(fmt::format("a row is {} bytes (> {})", bytes, target.max_local_row_bytes));
  if (used + bytes > target.max_local_bytes_per_kernel)
    return Decision::no(fmt::format("the kernel's scratch would exceed {} bytes", target.max_local_bytes_per_kernel));
  if (!should_run("inductor", "localise", [&] { return fmt::format("{} in {}", n.origin, k.name); }))
    return Decision::no("refused by the bisection hook");
  return Decision::yes();
}

}  // namespace

void localise(Schedule& s, const LoweredGraph& lg, CompileContext& ctx) {
  const Readers r = readers(s, lg);
  for (size_t ki = 0; ki < s.kernels.size(); ++ki) {
    Kernel& k = s.kernels[ki];
    int64_t used = 0;
    for (const KernelLoop& l : k.loops) {
      const LoopNode& n = lg.nodes[size_t(l.node)];
      const Buffer& buf = lg.buffers[size_t(n.buffer)];
      if (n.kind != LoopNode::Kind::Pointwise || buf.kind != Buffer::Kind::Intermediate || buf.is_output) continue;
      const std::set<int>& kr = r.kernels[size_t(n.buffer)];
      if (r.outside[size_t(n.buffer)] || kr.size() != 1 || *kr.begin() != int(ki)) continue;
      const int64_t bytes = row_bytes(k, n, buf);
      if (const Decision local = may_localise(k, n, bytes, used, ctx.target); !local) {
        ctx.decisions.record(LogChannel::Localise, fmt::format("keep {} in memory: read only inside {}, but {}",
                                                               n.origin, k.name, local.reason()));
        continue;
      }
      used += bytes;
      k.local_buffers.push_back(n.buffer);
      ctx.decisions.record(LogChannel::Localise,
                           fmt::format("{}: {} is kernel-local (read only inside the kernel at the outer point that "
                                       "wrote it): a {}-byte scratch row per thread instead of {} bytes in memory",
                                       k.name, n.origin, bytes, buf.nbytes()));
    }
  }
}

}  // namespace kiln::inductor
