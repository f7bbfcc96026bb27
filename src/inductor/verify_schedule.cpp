// The loop-IR verifier (verify_schedule.h). One function per invariant; each appends "<invariant>: ..." lines.
#include "inductor/verify_schedule.h"

#include <algorithm>
#include <atomic>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <set>

#include "core/error.h"
#include "core/options.h"
#include "inductor/schedule_queries.h"

namespace kiln::inductor {

namespace {

std::atomic<bool> g_forced{false};

struct Checker {
  const Schedule& s;
  const LoweredGraph& lg;
  std::vector<std::string> problems;

  template <class... A>
  void problem(const char* invariant, fmt::format_string<A...> f, A&&... a) {
    problems.push_back(fmt::format("{}: {}", invariant, fmt::format(f, std::forward<A>(a)...)));
  }
  const LoopNode& node(const KernelLoop& l) const { return lg.nodes[size_t(l.node)]; }

  // steps: every kernel runs in one step, every extern node in one extern step, every other node in one kernel
  // loop, and nodes run in their lowered order (so a producer runs before its consumers).
  void steps() {
    std::vector<int> kernel_steps(s.kernels.size(), 0), node_runs(lg.nodes.size(), 0);
    int previous = -1;
    auto ran = [&](int n, const std::string& where) {
      if (n < 0 || n >= int(lg.nodes.size())) return problem("steps", "{} runs node {}, which does not exist", where, n);
      ++node_runs[size_t(n)];
      if (n <= previous) problem("steps", "{} runs node {} after node {}: nodes run in their lowered order", where, n, previous);
      previous = n;
    };
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const Step& st = s.steps[i];
      if (st.kind == Step::Kind::Extern) {
        ran(st.index, fmt::format("step {}", i));
        if (st.index >= 0 && st.index < int(lg.nodes.size()) && lg.nodes[size_t(st.index)].kind != LoopNode::Kind::Extern)
          problem("steps", "step {} runs node {} as an extern call, but it is not an extern node", i, st.index);
        continue;
      }
      if (st.index < 0 || st.index >= int(s.kernels.size())) {
        problem("steps", "step {} runs kernel {}, which does not exist", i, st.index);
        continue;
      }
      ++kernel_steps[size_t(st.index)];
      for (const KernelLoop& l : s.kernels[size_t(st.index)].loops) {
        ran(l.node, s.kernels[size_t(st.index)].name);
        if (l.node >= 0 && l.node < int(lg.nodes.size()) && node(l).kind == LoopNode::Kind::Extern)
          problem("steps", "kernel {} has a loop for extern node {}", s.kernels[size_t(st.index)].name, l.node);
      }
    }
    for (size_t k = 0; k < s.kernels.size(); ++k)
      if (kernel_steps[k] != 1) problem("steps", "kernel {} runs in {} steps, not one", s.kernels[k].name, kernel_steps[k]);
    for (size_t n = 0; n < lg.nodes.size(); ++n)
      if (node_runs[n] != 1) problem("steps", "node {} ({}) runs {} times, not once", n, lg.nodes[n].origin, node_runs[n]);
  }

  // loop-shape: a loop's index starts with its kernel's outer variables and covers the node's dims; a
  // reduction's kept dims are the kernel's outer loop.
  void loop_shape(const Kernel& k, const KernelLoop& l) {
    const LoopNode& n = node(l);
    if (l.idx.size() != n.sizes.size() || l.ridx.size() != n.rsizes.size())
      return problem("loop-shape", "{}: the loop of {} has {}+{} index variables for dims {} and reduced dims {}", k.name,
                     n.origin, l.idx.size(), l.ridx.size(), shape_str(n.sizes), shape_str(n.rsizes));
    if (l.idx.size() < k.outer_vars.size() || !std::equal(k.outer_vars.begin(), k.outer_vars.end(), l.idx.begin()))
      problem("loop-shape", "{}: the loop of {} does not start with the kernel's outer variables", k.name, n.origin);
    if (n.kind == LoopNode::Kind::Reduction && n.sizes != k.outer)
      problem("loop-shape", "{}: reduction {} keeps dims {}, not the kernel's outer loop {}", k.name, n.origin,
              shape_str(n.sizes), shape_str(k.outer));
    if (!l.value) problem("loop-shape", "{}: the loop of {} has no body", k.name, n.origin);
  }

  // bound-variables: every index variable a loop's body uses is an outer variable of its kernel or one of the
  // loop's own (codegen binds no others).
  void bound_variables(const Kernel& k, const KernelLoop& l) {
    std::set<std::string> bound;
    for (const auto* vars : {&k.outer_vars, &l.idx, &l.ridx})
      for (const Index& v : *vars)
        if (!v.is_constant()) bound.insert(v.terms[0].first->key);
    std::set<std::string> unbound;
    std::function<void(const Index&)> walk = [&](const Index& ix) {
      for (const auto& [atom, coefficient] : ix.terms) {
        if (atom->kind == IndexAtom::Kind::Var && !bound.count(atom->key)) unbound.insert(atom->key);
        if (atom->kind != IndexAtom::Kind::Var) walk(atom->arg);
      }
    };
    std::vector<const SNode*> stack{l.value.get()};
    std::set<const SNode*> seen;
    while (!stack.empty()) {
      const SNode* e = stack.back();
      stack.pop_back();
      if (!e || !seen.insert(e).second) continue;
      walk(e->index);
      for (const SExpr& a : e->args) stack.push_back(a.get());
    }
    if (!unbound.empty())
      problem("bound-variables", "{}: the loop of {} uses index variables {} that are not bound in the kernel", k.name,
              node(l).origin, fmt::join(unbound, ", "));
  }

  // parallel-dim: the dimension split across threads exists and its extent is that dimension's.
  void parallel_dim(const Kernel& k) {
    if (k.parallel_dim < 0) {
      if (k.parallel_extent != 1) problem("parallel-dim", "{}: runs on one thread but has extent {}", k.name, k.parallel_extent);
      return;
    }
    if (k.parallel_loop < -1 || k.parallel_loop >= int(k.loops.size()))
      return problem("parallel-dim", "{}: splits loop {}, which does not exist", k.name, k.parallel_loop);
    const Shape& dims = k.parallel_loop == -1 ? k.outer : lg.nodes[size_t(k.loops[size_t(k.parallel_loop)].node)].sizes;
    if (k.parallel_dim >= int(dims.size()) || dims[size_t(k.parallel_dim)] != k.parallel_extent)
      problem("parallel-dim", "{}: splits dim {} of {} with extent {}", k.name, k.parallel_dim, shape_str(dims),
              k.parallel_extent);
  }

  // kernel-local: a kernel-local buffer is an intermediate (not an output) that a pointwise loop of its kernel
  // writes and nothing outside the kernel reads, in a kernel whose threads split the outer nest.
  void kernel_local(size_t ki, const Kernel& k, const Readers& r) {
    for (int b : k.local_buffers) {
      if (b < 0 || b >= int(lg.buffers.size())) {
        problem("kernel-local", "{}: kernel-local buffer {} does not exist", k.name, b);
        continue;
      }
      const Buffer& buf = lg.buffers[size_t(b)];
      const bool written = std::any_of(k.loops.begin(), k.loops.end(), [&](const KernelLoop& l) {
        return node(l).buffer == b && node(l).kind == LoopNode::Kind::Pointwise;
      });
      if (buf.kind != Buffer::Kind::Intermediate || buf.is_output)
        problem("kernel-local", "{}: %{} is kernel-local but is an input, a constant or an output", k.name, buf.name);
      if (!written) problem("kernel-local", "{}: %{} is kernel-local but no pointwise loop of the kernel writes it", k.name, buf.name);
      const bool other_kernel = std::any_of(r.kernels[size_t(b)].begin(), r.kernels[size_t(b)].end(),
                                            [&](int reader) { return reader != int(ki); });
      if (r.outside[size_t(b)] || other_kernel)
        problem("kernel-local", "{}: %{} is kernel-local but is read outside the kernel", k.name, buf.name);
      if (k.outer.empty() || k.parallel_loop != -1)
        problem("kernel-local", "{}: has kernel-local %{} but its threads do not split an outer loop", k.name, buf.name);
    }
  }

  // stream: only pointwise loops stream, into buffers in memory that their kernel does not read back.
  void stream(const Kernel& k) {
    for (size_t i = 0; i < k.loops.size(); ++i) {
      const KernelLoop& l = k.loops[i];
      if (!l.stream) continue;
      const LoopNode& n = node(l);
      if (n.kind != LoopNode::Kind::Pointwise) problem("stream", "{}: loop {} streams but is not pointwise", k.name, i);
      if (is_local(k, n.buffer)) problem("stream", "{}: loop {} streams into kernel-local %{}", k.name, i, lg.buffers[size_t(n.buffer)].name);
      for (size_t j = i + 1; j < k.loops.size(); ++j)
        if (loop_reads(k.loops[j], n.buffer))
          problem("stream", "{}: loop {} streams %{}, which loop {} reads back", k.name, i, lg.buffers[size_t(n.buffer)].name, j);
    }
  }

  // defer: a deferred last loop is a streamed pointwise loop, its host an earlier pointwise loop, and the
  // two-row buffers are kernel-local buffers of a deferred kernel.
  void defer(const Kernel& k) {
    if (k.deferred_host < 0) {
      if (!k.two_row_buffers.empty()) problem("defer", "{}: has two-row buffers but no deferred loop", k.name);
      return;
    }
    if (k.deferred_host + 1 >= int(k.loops.size()))
      return problem("defer", "{}: host loop {} is not before the last loop", k.name, k.deferred_host);
    if (node(k.loops[size_t(k.deferred_host)]).kind != LoopNode::Kind::Pointwise)
      problem("defer", "{}: host loop {} is not pointwise", k.name, k.deferred_host);
    const KernelLoop& last = k.loops.back();
    if (node(last).kind != LoopNode::Kind::Pointwise || !last.stream)
      problem("defer", "{}: the deferred last loop is not a streamed pointwise loop", k.name);
    for (int b : k.two_row_buffers)
      if (!is_local(k, b)) problem("defer", "{}: two-row buffer {} is not kernel-local", k.name, b);
  }

  // memory-plan: only intermediates that are not outputs or kernel-local are freed, each once, and no step after
  // the free touches the buffer.
  void memory_plan() {
    std::set<int> local;
    for (const Kernel& k : s.kernels) local.insert(k.local_buffers.begin(), k.local_buffers.end());
    std::vector<int> freed_at(lg.buffers.size(), -1);
    for (size_t i = 0; i < s.steps.size(); ++i)
      for (int b : s.steps[i].free_after) {
        if (b < 0 || b >= int(lg.buffers.size())) {
          problem("memory-plan", "step {} frees buffer {}, which does not exist", i, b);
          continue;
        }
        const Buffer& buf = lg.buffers[size_t(b)];
        if (buf.kind != Buffer::Kind::Intermediate || buf.is_output || local.count(b))
          problem("memory-plan", "step {} frees %{}, which is an input, a constant, an output or kernel-local", i, buf.name);
        if (freed_at[size_t(b)] >= 0) problem("memory-plan", "%{} is freed twice (steps {} and {})", buf.name, freed_at[size_t(b)], i);
        freed_at[size_t(b)] = int(i);
      }
    for (size_t i = 0; i < s.steps.size(); ++i)
      for (int b : touched(s.steps[i]))
        if (b >= 0 && b < int(lg.buffers.size()) && freed_at[size_t(b)] >= 0 && freed_at[size_t(b)] < int(i))
          problem("memory-plan", "step {} uses %{} after step {} freed it", i, lg.buffers[size_t(b)].name, freed_at[size_t(b)]);
  }
  std::vector<int> touched(const Step& st) const {
    std::vector<int> out;
    if (st.kind == Step::Kind::Extern) {
      if (st.index < 0 || st.index >= int(lg.nodes.size())) return out;
      const LoopNode& n = lg.nodes[size_t(st.index)];
      for (const BufferView& v : n.extern_inputs) out.push_back(v.buffer);
      out.insert(out.end(), n.extern_outputs.begin(), n.extern_outputs.end());
      return out;
    }
    if (st.index < 0 || st.index >= int(s.kernels.size())) return out;
    for (const KernelLoop& l : s.kernels[size_t(st.index)].loops) {
      out.push_back(node(l).buffer);
      for (const auto& ld : loads_of(l)) out.push_back(ld.first);
    }
    return out;
  }

  void run() {
    steps();
    if (!problems.empty()) return;  // the per-kernel checks index nodes through the steps
    const Readers r = readers(s, lg);
    for (size_t ki = 0; ki < s.kernels.size(); ++ki) {
      const Kernel& k = s.kernels[ki];
      for (const KernelLoop& l : k.loops) {
        loop_shape(k, l);
        if (l.value) bound_variables(k, l);
      }
      parallel_dim(k);
      kernel_local(ki, k, r);
      stream(k);
      defer(k);
    }
    memory_plan();
  }
};

}  // namespace

std::vector<std::string> schedule_problems(const Schedule& s, const LoweredGraph& lg) {
  Checker c{s, lg, {}};
  c.run();
  return std::move(c.problems);
}

void verify_schedule(const Schedule& s, const LoweredGraph& lg, std::string_view after_pass) {
  const std::vector<std::string> problems = schedule_problems(s, lg);
  if (!problems.empty())
    internal_fail("inductor pass {} produced an invalid schedule:\n  {}", after_pass, fmt::join(problems, "\n  "));
}

bool schedule_verifier_enabled() { return g_forced.load() || opt_bool(Opt::Verify); }
void force_schedule_verifier(bool on) { g_forced.store(on); }

}  // namespace kiln::inductor
