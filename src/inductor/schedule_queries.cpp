// Questions the schedule passes ask of a schedule (schedule_queries.h).
#include "inductor/schedule_queries.h"

#include <algorithm>
#include <functional>

namespace kiln::inductor {

std::vector<std::pair<int, Index>> loads_of(const KernelLoop& l) {
  std::vector<std::pair<int, Index>> loads;
  s_loads(l.value, loads);
  return loads;
}

bool loop_reads(const KernelLoop& l, int buffer) {
  const auto loads = loads_of(l);
  return std::any_of(loads.begin(), loads.end(), [&](const auto& ld) { return ld.first == buffer; });
}

Readers readers(const Schedule& s, const LoweredGraph& lg) {
  Readers r{std::vector<std::set<int>>(lg.buffers.size()), std::vector<bool>(lg.buffers.size(), false)};
  for (size_t k = 0; k < s.kernels.size(); ++k)
    for (const KernelLoop& l : s.kernels[k].loops)
      for (const auto& ld : loads_of(l))
        if (ld.first >= 0) r.kernels[size_t(ld.first)].insert(int(k));
  for (const LoopNode& n : lg.nodes)
    for (const BufferView& v : n.extern_inputs)
      if (v.buffer >= 0) r.outside[size_t(v.buffer)] = true;
  for (const BufferView& v : lg.outputs)
    if (v.buffer >= 0) r.outside[size_t(v.buffer)] = true;
  return r;
}

std::vector<int> kernel_args(const Kernel& k, const LoweredGraph& lg) {
  std::vector<int> args;
  auto add = [&](int b) {
    if (!is_local(k, b) && std::find(args.begin(), args.end(), b) == args.end()) args.push_back(b);
  };
  std::set<const SNode*> seen;
  std::function<void(const SExpr&)> visit = [&](const SExpr& e) {
    if (!seen.insert(e.get()).second) return;
    for (const SExpr& a : e->args) visit(a);
    if (e->op == SOp::Load) add(e->buffer);
  };
  for (const KernelLoop& l : k.loops) {
    seen.clear();
    visit(l.value);
    add(lg.nodes[size_t(l.node)].buffer);
  }
  return args;
}

bool is_local(const Kernel& k, int buffer) {
  return std::find(k.local_buffers.begin(), k.local_buffers.end(), buffer) != k.local_buffers.end();
}

std::optional<std::pair<Index, int64_t>> row_variable(const Kernel& k, const KernelLoop& l, const LoweredGraph& lg) {
  const LoopNode& n = lg.nodes[size_t(l.node)];
  std::optional<std::pair<Index, int64_t>> found;
  auto consider = [&](const std::vector<Index>& vars, const Shape& sizes, size_t from) {
    for (size_t d = from; d < vars.size(); ++d) {
      if (vars[d].is_constant()) continue;
      if (found) return false;
      found = std::make_pair(vars[d], sizes[d]);
    }
    return true;
  };
  if (!consider(l.idx, n.sizes, k.outer_vars.size())) return std::nullopt;
  if (n.kind == LoopNode::Kind::Reduction && !consider(l.ridx, n.rsizes, 0)) return std::nullopt;
  return found;
}

size_t row_dim(const Kernel& k) {
  size_t rows = k.outer_vars.size();
  for (size_t d = 0; d < k.outer_vars.size(); ++d)
    if (!k.outer_vars[d].is_constant()) rows = d;
  return rows;
}

int64_t row_bytes(const Kernel& k, const LoopNode& n, const Buffer& buf) {
  return shape_numel(Shape(n.sizes.begin() + int64_t(k.outer.size()), n.sizes.end())) * dtype_size(buf.dtype);
}

}  // namespace kiln::inductor
