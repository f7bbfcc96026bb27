// The fuse pass: kernel formation and each kernel's parallel dimension (schedule_passes.h).
#include <optional>

#include "core/bisect.h"
#include "core/fired.h"
#include "core/error.h"
#include "inductor/decision.h"
#include "inductor/schedule_passes.h"

namespace kiln::inductor {

namespace {

// Whether a load of a pointwise buffer at `load` (in kernel variables) stays inside the row the producer wrote
// for the current outer point: same coefficients on the outer variables as the producer's store, and the rest
// within the row.
bool reads_same_row(const Index& load, const Index& store, const std::vector<Index>& outer_vars, int64_t row_size) {
  Index rest = load;
  for (const Index& v : outer_vars) {
    if (v.is_constant()) continue;
    int64_t k = ix_coefficient(store, v);
    if (ix_coefficient(load, v) != k) return false;
    rest = ix_add(rest, ix_scale(v, -k));
  }
  for (const Index& v : outer_vars)
    if (!v.is_constant() && ix_depends_on(rest, v)) return false;
  auto [lo, hi] = ix_range(rest);
  return lo >= 0 && hi < row_size;
}

// A node's loop in a kernel, or the Decision::no saying why it cannot be placed there.
struct Placement {
  Decision decision;
  KernelLoop loop;
};

struct Fuser {
  const LoweredGraph& lg;
  CompileContext& ctx;
  Schedule out;
  std::vector<int> kernel_of_buffer;  // kernel index that writes each buffer (-1: none)

  void decide(std::string s) { ctx.decisions.record(LogChannel::Fusion, std::move(s)); }

  // The node's loop at kernel `k` (whose outer vars are fixed), or the reason it cannot join.
  Placement place(const Kernel& k, int node_index) const {
    const LoopNode& n = lg.nodes[size_t(node_index)];
    KernelLoop loop;
    loop.node = node_index;
    const Shape& O = k.outer;
    if (n.kind == LoopNode::Kind::Reduction) {
      if (n.sizes != O)
        return {Decision::no(fmt::format("reduction over kept dims {} does not match the kernel's outer loop {}",
                                         shape_str(n.sizes), shape_str(O))), {}};
      loop.idx = k.outer_vars;
      loop.ridx = ix_vars(n.rsizes);
    } else {
      if (n.sizes.size() < O.size() || !std::equal(O.begin(), O.end(), n.sizes.begin()))
        return {Decision::no(fmt::format("iteration space {} does not start with the kernel's outer loop {}",
                                         shape_str(n.sizes), shape_str(O))), {}};
      loop.idx = k.outer_vars;
      for (size_t d = O.size(); d < n.sizes.size(); ++d) loop.idx.push_back(n.sizes[d] == 1 ? ix_const(0) : ix_var(n.sizes[d]));
    }
    loop.value = n.body(loop.idx, loop.ridx);
    return {Decision::yes(), std::move(loop)};
  }

  // Whether every read of a buffer written in kernel `k` is served by the same outer point.
  Decision dependencies_ok(const Kernel& k, int kernel_index, const KernelLoop& loop) {
    std::vector<std::pair<int, Index>> loads;
    s_loads(loop.value, loads);
    for (const auto& [b, index] : loads) {
      if (b < 0 || kernel_of_buffer[size_t(b)] != kernel_index) continue;
      const KernelLoop* producer = nullptr;
      for (const KernelLoop& l : k.loops)
        if (lg.nodes[size_t(l.node)].buffer == b) producer = &l;
      const LoopNode& p = lg.nodes[size_t(producer->node)];
      bool ok;
      if (p.kind == LoopNode::Kind::Reduction) {
        ok = index == ix_linear(producer->idx, p.sizes);
        if (!ok && ctx.inject.wants("fusion", InjectKind::Accuracy)) {
          note_injection_fired("fusion", "accuracy");
          decide(fmt::format("inject accuracy: fuse {} although it reads {} at another outer point", lg.nodes[size_t(loop.node)].origin, p.origin));
          continue;
        }
      } else {
        int64_t row = shape_numel(Shape(p.sizes.begin() + int64_t(k.outer.size()), p.sizes.end()));
        ok = reads_same_row(index, ix_linear(producer->idx, p.sizes), k.outer_vars, row);
      }
      if (!ok)
        return Decision::no(fmt::format("reads %{} (written in this kernel) at another outer point [{}]: it may not "
                                        "be written yet", p.origin, index.str()));
    }
    return Decision::yes();
  }

  Kernel start_kernel(int node_index) {
    const LoopNode& n = lg.nodes[size_t(node_index)];
    Kernel k;
    k.name = fmt::format("k{}", out.kernels.size());
    if (n.kind == LoopNode::Kind::Reduction) k.outer = n.sizes;
    else if (n.sizes.size() >= 2) k.outer = Shape(n.sizes.begin(), n.sizes.end() - 1);
    k.outer_vars = ix_vars(k.outer);
    Placement own = place(k, node_index);
    KILN_ASSERT(own.decision, "scheduler: node {} does not fit its own kernel: {}", n.origin, own.decision.reason());
    k.loops.push_back(std::move(own.loop));
    kernel_of_buffer[size_t(n.buffer)] = int(out.kernels.size());
    return k;
  }

  // Parallelises the first outer dim longer than 1; a kernel without an outer loop splits its only loop.
  void choose_parallel_dim(Kernel& k) const {
    for (size_t d = 0; d < k.outer.size(); ++d)
      if (k.outer[d] > 1) {
        k.parallel_loop = -1;
        k.parallel_dim = int(d);
        k.parallel_extent = k.outer[d];
        return;
      }
    if (!k.outer.empty() || k.loops.size() != 1 || lg.nodes[size_t(k.loops[0].node)].kind != LoopNode::Kind::Pointwise)
      return;
    const LoopNode& n = lg.nodes[size_t(k.loops[0].node)];
    for (size_t d = 0; d < n.sizes.size(); ++d)
      if (n.sizes[d] > 1) {
        k.parallel_loop = 0;
        k.parallel_dim = int(d);
        k.parallel_extent = n.sizes[d];
        return;
      }
  }

  void finish(Kernel& k) {
    choose_parallel_dim(k);
    Step s;
    s.kind = Step::Kind::Kernel;
    s.index = int(out.kernels.size());
    out.kernels.push_back(std::move(k));
    out.steps.push_back(s);
  }

  // Node `i`'s loop in the kernel being built, or why it does not join it.
  Placement join(const Kernel& cur, int i) {
    const LoopNode& n = lg.nodes[size_t(i)];
    Placement p = place(cur, i);
    if (!p.decision) return p;
    if (Decision d = dependencies_ok(cur, int(out.kernels.size()), p.loop); !d) return {std::move(d), {}};
    if (cur.outer.empty() && !cur.loops.empty())
      return {Decision::no("the kernel has no outer loop to split across threads: fusing would run both loops on "
                           "one thread"), {}};
    if (!ctx.options.fuse) return {Decision::no("fusion is off"), {}};
    if (!should_run("inductor", "fusion", [&] { return fmt::format("{} into {}", n.origin, cur.name); }))
      return {Decision::no("refused by the bisection hook"), {}};
    return p;
  }

  void run() {
    kernel_of_buffer.assign(lg.buffers.size(), -1);
    std::optional<Kernel> cur;
    for (int i = 0; i < int(lg.nodes.size()); ++i) {
      const LoopNode& n = lg.nodes[size_t(i)];
      if (n.kind == LoopNode::Kind::Extern) {
        if (cur) finish(*cur), cur.reset();
        out.steps.push_back(Step{Step::Kind::Extern, i, {}});
        continue;
      }
      if (cur) {
        Placement joined = join(*cur, i);
        if (joined.decision) {
          decide(fmt::format("fuse {} into {} (outer loop {})", n.origin, cur->name, shape_str(cur->outer)));
          cur->loops.push_back(std::move(joined.loop));
          kernel_of_buffer[size_t(n.buffer)] = int(out.kernels.size());
          continue;
        }
        decide(fmt::format("do not fuse {} into {}: {}", n.origin, cur->name, joined.decision.reason()));
        finish(*cur);
        cur.reset();
      }
      cur = start_kernel(i);
    }
    if (cur) finish(*cur);
  }
};

}  // namespace

Schedule fuse(const LoweredGraph& lg, CompileContext& ctx) {
  Fuser f{lg, ctx, {}, {}};
  f.run();
  return std::move(f.out);
}

}  // namespace kiln::inductor
