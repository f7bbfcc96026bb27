// The loop IR printer: kernels, schedules and lowered nodes as text (scheduler.h).
#include "inductor/scheduler.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "inductor/schedule_queries.h"

namespace kiln::inductor {

namespace {

struct Printer {
  const LoweredGraph& lg;
  std::unordered_map<std::string, std::string> names;  // atom key of a variable -> local name
  std::vector<int> args;                                // the kernel's arguments (kernel_args), printed b0, b1, ...
  std::unordered_map<const SNode*, int> ids;
  std::string body;
  std::vector<int> locals;                              // kernel-local buffers, printed l0, l1, ...

  // A buffer's name in the kernel text: bN for the N-th argument, lN for the N-th kernel-local scratch row.
  std::string buffer(int b) {
    auto local = std::find(locals.begin(), locals.end(), b);
    if (local != locals.end()) return fmt::format("l{}", local - locals.begin());
    auto arg = std::find(args.begin(), args.end(), b);
    KILN_CHECK(arg != args.end(), "print_kernel: buffer {} is neither an argument nor kernel-local", b);
    return fmt::format("b{}", arg - args.begin());
  }
  void name_vars(const std::vector<Index>& vars, const char* prefix) {
    int i = 0;
    for (const Index& v : vars) {
      if (!v.is_constant()) names[v.terms[0].first->key] = fmt::format("{}{}", prefix, i);
      ++i;
    }
  }
  std::string index(const Index& ix) {
    std::string s;
    for (const auto& [atom, k] : ix.terms) {
      std::string a;
      if (atom->kind == IndexAtom::Kind::Var) {
        auto it = names.find(atom->key);
        a = it != names.end() ? it->second : atom->key;
      } else {
        a = fmt::format("({}){}{}", index(atom->arg), atom->kind == IndexAtom::Kind::Div ? "//" : "%", atom->divisor);
      }
      if (!s.empty()) s += k < 0 ? " - " : " + ";
      else if (k < 0) s += "-";
      int64_t m = k < 0 ? -k : k;
      s += m == 1 ? a : fmt::format("{}*{}", m, a);
    }
    if (s.empty()) return fmt::format("{}", ix.constant);
    if (ix.constant != 0) s += fmt::format(" {} {}", ix.constant < 0 ? "-" : "+", ix.constant < 0 ? -ix.constant : ix.constant);
    return s;
  }
  std::string expr(const SExpr& e) {
    auto it = ids.find(e.get());
    if (it != ids.end()) return fmt::format("%{}", it->second);
    std::vector<std::string> a;
    for (const SExpr& x : e->args) a.push_back(expr(x));
    std::string rhs;
    switch (e->op) {
      case SOp::Const:
        rhs = is_floating(e->dtype) ? fmt::format("{}", e->fvalue) : fmt::format("{}", e->ivalue);
        break;
      case SOp::Load: rhs = fmt::format("load {}[{}]", buffer(e->buffer), index(e->index)); break;
      case SOp::IndexValue: rhs = fmt::format("index {}", index(e->index)); break;
      case SOp::Helper: rhs = fmt::format("{}({})", e->helper, fmt::join(a, ", ")); break;
      // Parameters beyond the operands are part of the text, which is the kernel cache key.
      case SOp::RoundTo: rhs = fmt::format("RoundTo.{}({})", dtype_name(DType(e->ivalue)), fmt::join(a, ", ")); break;
      case SOp::Fail: rhs = fmt::format("Fail.{}({})", e->ivalue, fmt::join(a, ", ")); break;
      default: rhs = fmt::format("{}({})", sop_name(e->op), fmt::join(a, ", ")); break;
    }
    int id = int(ids.size());
    ids[e.get()] = id;
    body += fmt::format("      %{} = {} : {}\n", id, rhs, dtype_name(e->dtype));
    return fmt::format("%{}", id);
  }
};

}  // namespace

std::string print_kernel(const Kernel& k, const LoweredGraph& lg) {
  Printer p{lg, {}, kernel_args(k, lg), {}, {}, k.local_buffers};
  p.name_vars(k.outer_vars, "o");
  std::string text = fmt::format("kernel outer={} parallel={}:{}\n", shape_str(k.outer), k.parallel_loop, k.parallel_dim);
  int li = 0;
  for (const KernelLoop& l : k.loops) {
    const LoopNode& n = lg.nodes[size_t(l.node)];
    std::vector<Index> inner(l.idx.begin() + int64_t(k.outer_vars.size()), l.idx.end());
    p.name_vars(inner, fmt::format("x{}_", li).c_str());
    p.name_vars(l.ridx, fmt::format("r{}_", li).c_str());
    p.body.clear();
    p.ids.clear();
    std::string v = p.expr(l.value);
    std::string fin;
    if (n.finalize) {
      SExpr acc = s_const(0, l.value->dtype);
      SExpr f = n.finalize(acc);
      fin = fmt::format(" finalize {}", sop_name(f->op));
      if (f->args.size() == 2 && f->args[1]->op == SOp::Const) fin += fmt::format("({})", f->args[1]->fvalue);
    }
    const Buffer& out = lg.buffers[size_t(n.buffer)];
    std::string dest = p.buffer(n.buffer);
    if (n.kind == LoopNode::Kind::Reduction)
      text += fmt::format("  loop {}: reduce {}{} over {} -> {}: {}{}{}\n", li, reduce_op_name(n.reduce),
                          n.nan_insensitive ? " (NaN-insensitive)" : "", shape_str(n.rsizes),
                          dest, dtype_name(out.dtype), shape_str(n.sizes), fin);
    else
      text += fmt::format("  loop {}: pointwise {} -> {}: {}{}{}\n", li, shape_str(n.sizes), dest, dtype_name(out.dtype),
                          l.stream ? " stream" : "",
                          li + 1 == int(k.loops.size()) && k.deferred_host >= 0
                              ? fmt::format(" deferred into loop {}", k.deferred_host) : "");
    text += p.body + fmt::format("      store {}\n", v);
    ++li;
  }
  std::string header;
  for (size_t i = 0; i < p.args.size(); ++i) {
    const Buffer& b = lg.buffers[size_t(p.args[i])];
    header += fmt::format("  b{}: {}{}\n", i, dtype_name(b.dtype), shape_str(b.sizes));
  }
  for (size_t i = 0; i < k.local_buffers.size(); ++i) {
    const Buffer& b = lg.buffers[size_t(k.local_buffers[i])];
    header += fmt::format("  l{}: {}{} kernel-local\n", i, dtype_name(b.dtype), shape_str(b.sizes));
  }
  return text + header;
}

std::string print_nodes(const LoweredGraph& lg) {
  std::string s;
  for (size_t i = 0; i < lg.nodes.size(); ++i) {
    const LoopNode& n = lg.nodes[i];
    if (n.kind == LoopNode::Kind::Extern) {
      s += fmt::format("node {}: extern {} ({})\n", i, n.origin, n.reason);
      continue;
    }
    // The node alone in a kernel without an outer loop: its own loop nest.
    KernelLoop loop;
    loop.node = int(i);
    loop.idx = ix_vars(n.sizes);
    loop.ridx = ix_vars(n.rsizes);
    loop.value = n.body(loop.idx, loop.ridx);
    Kernel k;
    k.loops.push_back(std::move(loop));
    s += fmt::format("node {}: {} = {}", i, n.origin, print_kernel(k, lg));
  }
  return s;
}

std::string print_schedule(const Schedule& s, const LoweredGraph& lg) {
  std::string text;
  for (const Step& st : s.steps) {
    if (st.kind == Step::Kind::Kernel) {
      const Kernel& k = s.kernels[size_t(st.index)];
      text += fmt::format("{}: {}", k.name, print_kernel(k, lg));
    } else {
      const LoopNode& n = lg.nodes[size_t(st.index)];
      text += fmt::format("extern {}: {}\n", n.origin, n.reason);
    }
    if (!st.free_after.empty()) {
      std::vector<std::string> names;
      for (int b : st.free_after) names.push_back(lg.buffers[size_t(b)].name);
      text += fmt::format("  free {}\n", fmt::join(names, ", "));
    }
  }
  return text;
}

}  // namespace kiln::inductor
