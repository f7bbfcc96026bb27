// The CPU's defer pass: deferred row writes (placement.h). In a kernel of several loops over rows (softmax,
// layer norm), the last loop writes its row with streaming stores after the row's other loops have run: a
// burst the core can only wait out (a dozen lines in flight at a time) with nothing to compute meanwhile.
// Instead the last loop runs one row late, inside the next row's most expensive pointwise, non-streamed loop
// over the same row length (the host; ties go to the later loop), so its stores drain while the host computes,
// as a copy's stores drain while it loads; each sweep of the row variable writes its last row after its loop.
// Figures: docs/inductor.md (Deferred row writes).
#include <algorithm>

#include "backends/cpu/placement.h"
#include "core/bisect.h"
#include "inductor/decision.h"
#include "inductor/schedule_queries.h"

namespace kiln::cpu {

using namespace inductor;

namespace {

struct Deferral {
  const Kernel& k;
  const LoweredGraph& lg;
  const Target& target;
  std::set<std::string> outer_keys;  // the atom keys of the kernel's outer variables
  int host = -1;
  std::vector<int> two_rows;

  // Whether the last loop writes rows that start on the target's streaming alignment.
  bool rows_aligned(const Index& row_start, int64_t element) const {
    const int64_t a = target.streaming_alignment;
    bool aligned = row_start.constant * element % a == 0;
    for (const auto& [atom, coefficient] : row_start.terms)
      aligned = aligned && outer_keys.count(atom->key) && coefficient * element % a == 0;
    return aligned;
  }

  // What the last loop reads from this kernel must still hold the previous row's values: kernel-local rows
  // (two of them in codegen, within the kernel's scratch budget) or results stored once per row.
  Decision previous_row_kept(const KernelLoop& last, size_t rows) {
    const auto loads = loads_of(last);
    int64_t scratch = 0;
    for (int b : k.local_buffers) {
      int64_t bytes = lg.buffers[size_t(b)].nbytes() / std::max<int64_t>(shape_numel(k.outer), 1);
      scratch += bytes;
      if (std::any_of(loads.begin(), loads.end(), [&](const auto& ld) { return ld.first == b; })) {
        two_rows.push_back(b);
        scratch += bytes;
      }
    }
    if (scratch > target.max_local_bytes_per_kernel)
      return Decision::no(fmt::format("two rows of its kernel-local buffers would exceed {} bytes of scratch",
                                      target.max_local_bytes_per_kernel));
    for (const auto& [buffer, ix] : loads)
      for (size_t i = 0; i + 1 < k.loops.size(); ++i) {
        const KernelLoop& w = k.loops[i];
        const LoopNode& wn = lg.nodes[size_t(w.node)];
        if (wn.buffer != buffer || is_local(k, buffer)) continue;
        const Index wat = ix_linear(w.idx, wn.sizes);
        bool per_row = ix_coefficient(wat, k.outer_vars[rows]) != 0;
        for (const auto& [atom, coefficient] : wat.terms) per_row = per_row && outer_keys.count(atom->key);
        if (!per_row)
          return Decision::no(fmt::format("it reads {}, written in memory by more than one point per row", wn.origin));
      }
    return Decision::yes();
  }

  // The host: the most expensive earlier pointwise, non-streamed loop along a row of `length` (ties: the later
  // loop, whose data is in cache). Only pointwise hosts: they carry the next-row prefetch (codegen), which a
  // reduction host would lose (layer norm: docs/inductor.md).
  void choose_host(int64_t length) {
    int best = -1;
    for (size_t i = 0; i + 1 < k.loops.size(); ++i) {
      auto v = row_variable(k, k.loops[i], lg);
      const bool pointwise = lg.nodes[size_t(k.loops[i].node)].kind == LoopNode::Kind::Pointwise;
      if (!v || !pointwise || v->second != length || k.loops[i].stream) continue;
      int cost = s_cost(k.loops[i].value);
      if (cost >= best) {
        best = cost;
        host = int(i);
      }
    }
  }

  // Whether the kernel's last loop can be deferred (then host and two_rows are set), or why not.
  Decision decide() {
    if (k.loops.size() < 2) return Decision::no("a single loop");
    if (k.parallel_loop != -1) return Decision::no("the threads split a loop, not the rows");
    // Rows run along the innermost outer variable; each sweep of it (one per point of the outer variables
    // before it) starts without a previous row and ends by writing its last row (codegen).
    const size_t rows = row_dim(k);
    if (rows == k.outer_vars.size()) return Decision::no("no row variable");
    for (const Index& v : k.outer_vars)
      if (!v.is_constant()) outer_keys.insert(v.terms[0].first->key);
    const KernelLoop& last = k.loops.back();
    const LoopNode& ln = lg.nodes[size_t(last.node)];
    if (ln.kind != LoopNode::Kind::Pointwise || !last.stream)
      return Decision::no("the last loop is not a streamed pointwise loop");
    auto along = row_variable(k, last, lg);
    if (!along) return Decision::no("the last loop does not run along one variable");
    const Index at = ix_linear(last.idx, ln.sizes);
    if (ix_coefficient(at, along->first) != 1) return Decision::no("the last loop does not write its row contiguously");
    const Index row_start = ix_add(at, ix_scale(along->first, -1));
    if (!rows_aligned(row_start, dtype_size(lg.buffers[size_t(ln.buffer)].dtype)))
      return Decision::no(fmt::format("its rows do not start on {}-byte boundaries", target.streaming_alignment));
    if (Decision kept = previous_row_kept(last, rows); !kept) return kept;
    choose_host(along->second);
    if (host < 0) return Decision::no("no earlier pointwise loop runs along a row of the same length");
    return Decision::yes();
  }
};

}  // namespace

void defer(Schedule& s, const LoweredGraph& lg, CompileContext& ctx) {
  for (Kernel& k : s.kernels) {
    if (k.loops.empty() || !k.loops.back().stream) continue;
    Deferral d{k, lg, ctx.target, {}, -1, {}};
    Decision deferred = d.decide();
    const std::string& origin = lg.nodes[size_t(k.loops.back().node)].origin;
    if (deferred && !should_run("inductor", "defer", [&] { return fmt::format("{} in {}", origin, k.name); }))
      deferred = Decision::no("refused by the bisection hook");
    if (!deferred) {
      ctx.decisions.record(LogChannel::Defer,
                           fmt::format("{}: write {} in its own loop: {}", k.name, origin, deferred.reason()));
      continue;
    }
    k.deferred_host = d.host;
    k.two_row_buffers = std::move(d.two_rows);
    ctx.decisions.record(LogChannel::Defer,
                         fmt::format("{}: write {} one row late, during loop {} of the next row (its streaming stores "
                                     "drain while that loop computes)", k.name, origin, d.host));
  }
}

}  // namespace kiln::cpu
