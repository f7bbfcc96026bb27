// Shared element loops of the CPU code generator (see codegen_groups.h): which consecutive pointwise loops of a
// kernel run as one element loop.
#include "backends/cpu/codegen_groups.h"


#include <algorithm>
#include <map>

#include "backends/cpu/codegen_context.h"

namespace kiln::inductor::cpu_codegen {

namespace {

Shape inner_sizes(const Kernel& k, const LoopNode& n) { return Shape(n.sizes.begin() + int64_t(k.outer.size()), n.sizes.end()); }

// A pointwise loop with an element loop of its own (not streamed: streamed stores run in aligned pieces).
bool groupable(const Kernel& k, const LoweredGraph& lg, const KernelLoop& l) {
  const std::vector<Index> inner = inner_vars(k, l);
  return lg.nodes[size_t(l.node)].kind == LoopNode::Kind::Pointwise && !l.stream && innermost(inner) < inner.size();
}

// Values the group keeps in registers from the loop that writes them to the last loop that reads them, at most
// this many at any loop: each is live across the later loops' bodies, and their libm calls clobber every vector
// register, so more would be spilled and reloaded around each call (a guard, not tuned: chain100's gradient
// loop, reading all 39 recomputed rows, stays out of the group before it by kMaxGroupCost already; a chain of
// loops each reading the one before keeps one).
constexpr int kMaxLiveForwardedValues = 4;

// The most work one element of a group does (s_cost: a libm call counts kLibmCallCost): one element is a
// dependency chain the core cannot overlap with the next element's once it spans several libm calls, where
// separate loops run many elements of one short body in flight. chain100's backward (1 thread, `kiln run`
// CPU time, 40 loops unmerged: 74 ms): all pointwise loops merged compiled in a third of the time but ran
// 81-88 ms; groups of at most 4 calls ran 75 ms and compiled in 0.65 of the time, 8 calls 80 ms.
constexpr int kMaxGroupCost = 4 * kLibmCallCost;

// A group being formed: loops [first, next), the loop writing each of its buffers, the last loop reading each
// from registers so far, and how many such values are live into each loop.
struct GroupBuilder {
  GroupBuilder(const Kernel& kernel, const LoweredGraph& lowered) : k(kernel), lg(lowered) {}
  const Kernel& k;
  const LoweredGraph& lg;
  size_t first = 0;
  std::map<int, size_t> writer, last_read;
  std::vector<int> live;  // by loop - first
  int cost = 0;

  const LoopNode& node(const KernelLoop& l) const { return lg.nodes[size_t(l.node)]; }

  void start(size_t j) {
    first = j;
    writer = {{node(k.loops[j]).buffer, j}};
    last_read.clear();
    live.assign(1, 0);
    cost = s_cost(k.loops[j].value);
  }

  // Adds loop `j` when it may join: the same inner iteration space, every read of a buffer the group writes is
  // of the element being computed, and the values kept in registers stay within kMaxLiveForwardedValues.
  bool join(size_t j) {
    const KernelLoop& l = k.loops[j];
    if (!groupable(k, lg, k.loops[first]) || !groupable(k, lg, l) ||
        inner_sizes(k, node(l)) != inner_sizes(k, node(k.loops[first])))
      return false;
    std::vector<std::pair<int, Index>> loads;
    s_loads(l.value, loads);
    const std::vector<Index> inner = inner_vars(k, l);
    std::vector<int> extended = live;
    extended.push_back(0);
    std::map<int, size_t> reads = last_read;
    for (const auto& [b, ix] : loads) {
      auto w = writer.find(b);
      if (w == writer.end()) continue;
      const KernelLoop& producer = k.loops[w->second];
      std::optional<Index> at = in_vars_of(ix_linear(producer.idx, node(producer).sizes), inner_vars(k, producer), inner);
      if (!at || at->str() != ix.str()) return false;
      auto [r, fresh] = reads.emplace(b, w->second);
      for (size_t p = r->second + 1; p <= j; ++p) ++extended[p - first];
      r->second = j;
    }
    if (*std::max_element(extended.begin(), extended.end()) > kMaxLiveForwardedValues) return false;
    if (cost + s_cost(l.value) > kMaxGroupCost) return false;
    cost += s_cost(l.value);
    live = std::move(extended);
    last_read = std::move(reads);
    writer[node(l).buffer] = j;
    return true;
  }
};

// Kernel-local buffers the group writes that no loop after it reads (its own later loops take them from
// registers).
std::set<int> unstored_buffers(const Kernel& k, const LoweredGraph& lg, const ElementGroup& g) {
  std::set<int> out;
  for (size_t i = g.first; i < g.end; ++i) {
    const int b = lg.nodes[size_t(k.loops[i].node)].buffer;
    if (std::find(k.local_buffers.begin(), k.local_buffers.end(), b) != k.local_buffers.end()) out.insert(b);
  }
  for (size_t j = g.end; j < k.loops.size(); ++j) {
    std::vector<std::pair<int, Index>> loads;
    s_loads(k.loops[j].value, loads);
    for (const auto& load : loads) out.erase(load.first);
  }
  return out;
}

}  // namespace

std::vector<Index> inner_vars(const Kernel& k, const KernelLoop& l) {
  return std::vector<Index>(l.idx.begin() + int64_t(k.outer_vars.size()), l.idx.end());
}

std::optional<Index> in_vars_of(const Index& ix, const std::vector<Index>& from, const std::vector<Index>& to) {
  Index out = ix_const(ix.constant);
  for (const auto& [atom, coefficient] : ix.terms) {
    Index term;
    term.terms = {{atom, 1}};
    for (size_t p = 0; p < from.size(); ++p) {
      if (from[p].is_constant()) continue;
      if (atom->kind == IndexAtom::Kind::Var && atom->key == from[p].terms[0].first->key) term = to[p];
      else if (atom->kind != IndexAtom::Kind::Var && ix_depends_on(term, from[p])) return std::nullopt;
    }
    out = ix_add(out, ix_scale(term, coefficient));
  }
  return out;
}

std::vector<ElementGroup> plan_element_groups(const Kernel& k, const LoweredGraph& lg) {
  std::vector<ElementGroup> groups;
  if (k.deferred_host >= 0 || k.parallel_loop != -1 || k.loops.empty()) return groups;
  GroupBuilder group(k, lg);
  auto close = [&](size_t end) {
    if (end - group.first < 2) return;
    ElementGroup g{group.first, end, {}};
    g.unstored = unstored_buffers(k, lg, g);
    groups.push_back(std::move(g));
  };
  group.start(0);
  for (size_t j = 1; j < k.loops.size(); ++j) {
    if (group.join(j)) continue;
    close(j);
    group.start(j);
  }
  close(k.loops.size());
  return groups;
}

}  // namespace kiln::inductor::cpu_codegen
