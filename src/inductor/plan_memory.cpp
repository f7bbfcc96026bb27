// The plan_memory pass: when each intermediate buffer can be freed (schedule_passes.h).
#include "inductor/schedule_passes.h"
#include "inductor/schedule_queries.h"

namespace kiln::inductor {

namespace {

// The last step that reads or writes each buffer (-1: none, or a kernel-local buffer, which is never allocated).
std::vector<int> last_uses(const Schedule& s, const LoweredGraph& lg) {
  std::vector<int> last(lg.buffers.size(), -1);
  for (int i = 0; i < int(s.steps.size()); ++i) {
    const Step& st = s.steps[size_t(i)];
    auto touch = [&](int b) {
      if (b >= 0) last[size_t(b)] = i;
    };
    if (st.kind == Step::Kind::Kernel) {
      for (const KernelLoop& l : s.kernels[size_t(st.index)].loops) {
        touch(lg.nodes[size_t(l.node)].buffer);
        for (const auto& ld : loads_of(l)) touch(ld.first);
      }
    } else {
      const LoopNode& n = lg.nodes[size_t(st.index)];
      for (const BufferView& v : n.extern_inputs) touch(v.buffer);
      for (int b : n.extern_outputs) touch(b);
    }
  }
  for (const Kernel& k : s.kernels)
    for (int b : k.local_buffers) last[size_t(b)] = -1;
  return last;
}

}  // namespace

void plan_memory(Schedule& s, const LoweredGraph& lg, CompileContext& ctx) {
  const std::vector<int> last = last_uses(s, lg);
  for (size_t b = 0; b < lg.buffers.size(); ++b) {
    const Buffer& buf = lg.buffers[b];
    if (buf.kind != Buffer::Kind::Intermediate || buf.is_output || last[b] < 0) continue;
    s.steps[size_t(last[b])].free_after.push_back(int(b));
    KILN_LOG(LogChannel::MemoryPlan, "free %{} ({} bytes) after step {}, its last use", buf.name, buf.nbytes(), last[b]);
  }
  (void)ctx;  // the plan takes no decision the bisection hook or the target could change
}

}  // namespace kiln::inductor
