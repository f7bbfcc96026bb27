// The accumulate pass: reductions accumulated inside the loop that writes what they reduce
// (schedule_passes.h). A sum or product over the row the previous loop of the kernel (pointwise) has just
// written, reading it at the element being written (softmax's sum of exp(x - max)), is accumulated inside that
// loop while the element is in a register: one pass over the row instead of two, and its adds overlap the
// memory traffic of that loop (next-row prefetch, deferred row writes). Figures: docs/benchmarks.md.
#include "core/bisect.h"
#include "inductor/schedule_passes.h"
#include "inductor/schedule_queries.h"

namespace kiln::inductor {

namespace {

// Whether loop i reduces what loop i - 1 writes (a reduction of a pointwise loop's values).
bool is_candidate(const Kernel& k, size_t i, const LoweredGraph& lg) {
  const LoopNode& rn = lg.nodes[size_t(k.loops[i].node)];
  const LoopNode& pn = lg.nodes[size_t(k.loops[i - 1].node)];
  return rn.kind == LoopNode::Kind::Reduction && pn.kind == LoopNode::Kind::Pointwise &&
         loop_reads(k.loops[i], pn.buffer);
}

// Why candidate loop i cannot be accumulated in loop i - 1 ("" when it can).
std::string refusal(const Kernel& k, size_t i, const LoweredGraph& lg) {
  const KernelLoop& r = k.loops[i];
  const LoopNode& rn = lg.nodes[size_t(r.node)];
  const KernelLoop& p = k.loops[i - 1];
  const LoopNode& pn = lg.nodes[size_t(p.node)];
  if (rn.reduce != ReduceOp::Sum && rn.reduce != ReduceOp::Prod) return "only sums and products are accumulated";
  if (k.parallel_loop != -1) return "the threads split a loop, not the rows";
  auto rv = row_variable(k, r, lg), pv = row_variable(k, p, lg);
  if (!rv || !pv) return "a loop does not run along one variable";
  if (rv->second != pv->second) return "the loops run over rows of different lengths";
  if (rn.reduce == ReduceOp::Sum && is_floating(r.value->dtype) && rv->second > kSumBlock)
    return fmt::format("a float sum over rows of {} elements (> {}) is added in blocks into an f64 total, which the "
                       "producer's loop does not do", rv->second, kSumBlock);
  const Index at = ix_linear(p.idx, pn.sizes);
  const int64_t c = ix_coefficient(at, pv->first);
  const Index at_rest = ix_add(at, ix_scale(pv->first, -c));
  for (const auto& [buffer, ix] : loads_of(r)) {
    if (buffer != pn.buffer) continue;
    const Index rest = ix_add(ix, ix_scale(rv->first, -c));
    if (c == 0 || ix_coefficient(ix, rv->first) != c || ix_depends_on(rest, rv->first) ||
        ix_depends_on(at_rest, pv->first) || !(rest == at_rest))
      return fmt::format("it reads {} at other elements than the one being written", pn.origin);
  }
  return "";
}

}  // namespace

void accumulate(Schedule& s, const LoweredGraph& lg, CompileContext& ctx) {
  for (Kernel& k : s.kernels)
    for (size_t i = 1; i < k.loops.size(); ++i) {
      if (!is_candidate(k, i, lg)) continue;
      std::string why = refusal(k, i, lg);
      const std::string& origin = lg.nodes[size_t(k.loops[i].node)].origin;
      if (why.empty() && !should_run("inductor", "accumulate", [&] { return fmt::format("{} in {}", origin, k.name); }))
        why = "refused by the bisection hook";
      if (!why.empty()) {
        ctx.decisions.record(LogChannel::Accumulate, fmt::format("{}: reduce {} in its own loop: {}", k.name, origin, why));
        continue;
      }
      k.loops[i].accumulated_in = int(i) - 1;
      ctx.decisions.record(LogChannel::Accumulate,
                           fmt::format("{}: accumulate {} inside loop {}, as it writes the elements {} reduces",
                                       k.name, origin, i - 1, origin));
    }
}

}  // namespace kiln::inductor
