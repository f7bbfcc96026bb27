// Kernel formation (fusion), memory planning and the loop IR printer. See scheduler.h.
#include "inductor/scheduler.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "core/bisect.h"
#include "core/log.h"
#include "core/options.h"
#include "backends/cpu/host_caches.h"
#include "backends/cpu/jit.h"

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

struct Builder {
  const LoweredGraph& lg;
  const InjectSpec& inject;
  bool fuse;
  Schedule out;
  std::vector<int> kernel_of_buffer;  // kernel index that writes each buffer (-1: none)

  void decide(const std::string& s) {
    KILN_LOG(LogChannel::Fusion, "{}", s);
    out.decisions.push_back(s);
  }

  // The node's loop at kernel `k` (whose outer vars are fixed), or nullopt with the reason it cannot join.
  std::optional<KernelLoop> place(const Kernel& k, int node_index, std::string& why) {
    const LoopNode& n = lg.nodes[size_t(node_index)];
    KernelLoop loop;
    loop.node = node_index;
    const Shape& O = k.outer;
    if (n.kind == LoopNode::Kind::Reduction) {
      if (n.sizes != O) {
        why = fmt::format("reduction over kept dims {} does not match the kernel's outer loop {}", shape_str(n.sizes), shape_str(O));
        return std::nullopt;
      }
      loop.idx = k.outer_vars;
      loop.ridx = ix_vars(n.rsizes);
    } else {
      if (n.sizes.size() < O.size() || !std::equal(O.begin(), O.end(), n.sizes.begin())) {
        why = fmt::format("iteration space {} does not start with the kernel's outer loop {}", shape_str(n.sizes), shape_str(O));
        return std::nullopt;
      }
      loop.idx = k.outer_vars;
      for (size_t d = O.size(); d < n.sizes.size(); ++d) loop.idx.push_back(n.sizes[d] == 1 ? ix_const(0) : ix_var(n.sizes[d]));
    }
    loop.value = n.body(loop.idx, loop.ridx);
    return loop;
  }

  // Whether every read of a buffer written in kernel `k` is served by the same outer point.
  bool dependencies_ok(const Kernel& k, int kernel_index, const KernelLoop& loop, std::string& why) {
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
        if (!ok && inject.kind_for("fusion") == "accuracy") {
          decide(fmt::format("inject accuracy: fuse {} although it reads {} at another outer point", lg.nodes[size_t(loop.node)].origin, p.origin));
          continue;
        }
      } else {
        int64_t row = shape_numel(Shape(p.sizes.begin() + int64_t(k.outer.size()), p.sizes.end()));
        ok = reads_same_row(index, ix_linear(producer->idx, p.sizes), k.outer_vars, row);
      }
      if (!ok) {
        why = fmt::format("reads %{} (written in this kernel) at another outer point [{}]: it may not be written yet",
                          p.origin, index.str());
        return false;
      }
    }
    return true;
  }

  Kernel start_kernel(int node_index) {
    const LoopNode& n = lg.nodes[size_t(node_index)];
    Kernel k;
    k.name = fmt::format("k{}", out.kernels.size());
    if (n.kind == LoopNode::Kind::Reduction) k.outer = n.sizes;
    else if (n.sizes.size() >= 2) k.outer = Shape(n.sizes.begin(), n.sizes.end() - 1);
    k.outer_vars = ix_vars(k.outer);
    return k;
  }

  void finish(Kernel& k) {
    // Parallelise the first outer dim longer than 1; a kernel without an outer loop splits its only loop.
    for (size_t d = 0; d < k.outer.size(); ++d)
      if (k.outer[d] > 1) {
        k.parallel_loop = -1;
        k.parallel_dim = int(d);
        k.parallel_extent = k.outer[d];
        break;
      }
    if (k.parallel_dim < 0 && k.outer.empty() && k.loops.size() == 1 &&
        lg.nodes[size_t(k.loops[0].node)].kind == LoopNode::Kind::Pointwise) {
      const LoopNode& n = lg.nodes[size_t(k.loops[0].node)];
      for (size_t d = 0; d < n.sizes.size(); ++d)
        if (n.sizes[d] > 1) {
          k.parallel_loop = 0;
          k.parallel_dim = int(d);
          k.parallel_extent = n.sizes[d];
          break;
        }
    }
    Step s;
    s.kind = Step::Kind::Kernel;
    s.index = int(out.kernels.size());
    out.kernels.push_back(std::move(k));
    out.steps.push_back(s);
  }

  void run() {
    kernel_of_buffer.assign(lg.buffers.size(), -1);
    std::optional<Kernel> cur;
    for (int i = 0; i < int(lg.nodes.size()); ++i) {
      const LoopNode& n = lg.nodes[size_t(i)];
      if (n.kind == LoopNode::Kind::Extern) {
        if (cur) finish(*cur), cur.reset();
        Step s;
        s.kind = Step::Kind::Extern;
        s.index = i;
        out.steps.push_back(s);
        continue;
      }
      if (cur) {
        std::string why;
        std::optional<KernelLoop> loop = place(*cur, i, why);
        int kernel_index = int(out.kernels.size());
        bool ok = loop && dependencies_ok(*cur, kernel_index, *loop, why);
        if (ok && cur->outer.empty() && !cur->loops.empty()) {
          why = "the kernel has no outer loop to split across threads: fusing would run both loops on one thread";
          ok = false;
        }
        if (ok && !fuse) {
          why = "fusion is off";
          ok = false;
        }
        if (ok && !should_run("inductor", "fusion", [&] { return fmt::format("{} into {}", n.origin, cur->name); })) {
          why = "refused by the bisection hook";
          ok = false;
        }
        if (ok) {
          decide(fmt::format("fuse {} into {} (outer loop {})", n.origin, cur->name, shape_str(cur->outer)));
          cur->loops.push_back(std::move(*loop));
          kernel_of_buffer[size_t(n.buffer)] = kernel_index;
          continue;
        }
        decide(fmt::format("do not fuse {} into {}: {}", n.origin, cur->name, why));
        finish(*cur);
        cur.reset();
      }
      cur = start_kernel(i);
      std::string why;
      std::optional<KernelLoop> loop = place(*cur, i, why);
      KILN_ASSERT(loop, "scheduler: node {} does not fit its own kernel: {}", n.origin, why);
      cur->loops.push_back(std::move(*loop));
      kernel_of_buffer[size_t(n.buffer)] = int(out.kernels.size());
    }
    if (cur) finish(*cur);
    localise_buffers();
    choose_streaming_stores();
    choose_deferred_stores();
    choose_accumulated_reductions();
    plan_memory();
  }

  // For each buffer: the kernels whose loops load it, and whether anything else (an extern call, a graph
  // output) reads it.
  struct Readers {
    std::vector<std::set<int>> kernels;
    std::vector<bool> outside;
  };
  Readers readers() const {
    Readers r{std::vector<std::set<int>>(lg.buffers.size()), std::vector<bool>(lg.buffers.size(), false)};
    for (size_t k = 0; k < out.kernels.size(); ++k)
      for (const KernelLoop& l : out.kernels[k].loops) {
        std::vector<std::pair<int, Index>> loads;
        s_loads(l.value, loads);
        for (const auto& ld : loads)
          if (ld.first >= 0) r.kernels[size_t(ld.first)].insert(int(k));
      }
    for (const LoopNode& n : lg.nodes)
      for (const BufferView& v : n.extern_inputs)
        if (v.buffer >= 0) r.outside[size_t(v.buffer)] = true;
    for (const BufferView& v : lg.outputs)
      if (v.buffer >= 0) r.outside[size_t(v.buffer)] = true;
    return r;
  }

  // Kernel-local buffers (TorchInductor's remove_kernel_local_buffers, Halide's store_at): a pointwise result
  // read only by later loops of its own kernel, each at the outer point that wrote it (the fusion rule), needs
  // one row per thread, not the whole buffer: softmax's exp(x - max) is computed once per row into scratch
  // that stays in L1/L2, then summed and divided, without a round trip through memory. Only when the outer nest
  // is what the threads split (each call runs whole outer points) and the rows fit the per-kernel budget.
  static constexpr int64_t kMaxLocalRowBytes = 128 << 10;
  static constexpr int64_t kMaxLocalBytesPerKernel = 512 << 10;  // stack memory: well under any thread's stack
  void localise_buffers() {
    Readers r = readers();
    for (size_t ki = 0; ki < out.kernels.size(); ++ki) {
      Kernel& k = out.kernels[ki];
      int64_t used = 0;
      for (const KernelLoop& l : k.loops) {
        const LoopNode& n = lg.nodes[size_t(l.node)];
        const Buffer& buf = lg.buffers[size_t(n.buffer)];
        if (n.kind != LoopNode::Kind::Pointwise || buf.kind != Buffer::Kind::Intermediate || buf.is_output) continue;
        const std::set<int>& kr = r.kernels[size_t(n.buffer)];
        if (r.outside[size_t(n.buffer)] || kr.empty() || kr.size() != 1 || *kr.begin() != int(ki)) continue;
        std::string why;
        if (k.outer.empty() || k.parallel_loop != -1)
          why = "the kernel has no outer loop split across threads";
        int64_t row_bytes = shape_numel(Shape(n.sizes.begin() + int64_t(k.outer.size()), n.sizes.end())) * dtype_size(buf.dtype);
        if (why.empty() && row_bytes > kMaxLocalRowBytes)
          why = fmt::format("a row is {} bytes (> {})", row_bytes, kMaxLocalRowBytes);
        if (why.empty() && used + row_bytes > kMaxLocalBytesPerKernel)
          why = fmt::format("the kernel's scratch would exceed {} bytes", kMaxLocalBytesPerKernel);
        if (why.empty() && !should_run("inductor", "localise", [&] { return fmt::format("{} in {}", n.origin, k.name); }))
          why = "refused by the bisection hook";
        if (!why.empty()) {
          decide(fmt::format("keep {} in memory: read only inside {}, but {}", n.origin, k.name, why));
          continue;
        }
        used += row_bytes;
        k.local_buffers.push_back(n.buffer);
        decide(fmt::format("{}: {} is kernel-local (read only inside the kernel at the outer point that wrote it): "
                           "a {}-byte scratch row per thread instead of {} bytes in memory", k.name, n.origin,
                           row_bytes, buf.nbytes()));
      }
    }
  }

  static bool is_local(const Kernel& k, int buffer) {
    return std::find(k.local_buffers.begin(), k.local_buffers.end(), buffer) != k.local_buffers.end();
  }

  // Streaming (non-temporal) stores write a buffer without first reading its cache lines and without evicting
  // what the kernel reads: for a buffer larger than half the cache this process can count on
  // (runtime/host_caches.h), which would not stay in cache for its next reader anyway, they save a third of the
  // traffic of a streaming kernel (read a, read b, write c moves 3 lines, not 4). Not for buffers the same kernel
  // reads back. On the 2-core development VM (260 MB of host LLC reported, 8 MB counted) a 4096x4096 layer norm
  // written in C ran at 0.6-0.67 of a streaming copy's bandwidth with ordinary stores and 1.0-1.07 with streaming ones.
  // Beyond this many ops an element (s_cost) a loop is compute-bound on any current x86 core (16 lanes, about
  // two vector ops a cycle: 64 ops an element take about as long as moving its bytes), and streaming its stores
  // gains nothing while the aligned split costs another copy of its body to compile: chain100 (cost 764, 34 libm
  // calls, 4 MB, at the development VM's streaming threshold) took 60-65 ms to build streamed, 19-23 ms not.
  static constexpr int kStreamMaxCost = 64;
  void choose_streaming_stores() {
    const int64_t threshold = runtime::streaming_threshold_bytes();
    auto why_threshold = [] {
      return opt_int(Opt::StreamMinBytes) > 0
                 ? std::string("KILN_STREAM_MIN_BYTES")
                 : fmt::format("half the cache this process can count on: {}", runtime::host_caches().str());
    };
    for (Kernel& k : out.kernels) {
      for (size_t i = 0; i < k.loops.size(); ++i) {
        const LoopNode& n = lg.nodes[size_t(k.loops[i].node)];
        if (n.kind != LoopNode::Kind::Pointwise) continue;
        const Buffer& buf = lg.buffers[size_t(n.buffer)];
        if (buf.nbytes() < threshold || is_local(k, n.buffer)) continue;
        if (const int cost = s_cost(k.loops[i].value); cost > kStreamMaxCost) {
          decide(fmt::format("{}: ordinary stores for {} ({} bytes): its loop costs {} ops an element (> {}), so its "
                             "time is arithmetic, not memory traffic", k.name, n.origin, buf.nbytes(), cost,
                             kStreamMaxCost));
          continue;
        }
        bool read_back = false;
        for (size_t j = i + 1; j < k.loops.size() && !read_back; ++j) {
          std::vector<std::pair<int, Index>> loads;
          s_loads(k.loops[j].value, loads);
          for (const auto& ld : loads) read_back = read_back || ld.first == n.buffer;
        }
        if (read_back) continue;
        if (!should_run("inductor", "stream", [&] { return fmt::format("{} in {}", n.origin, k.name); })) continue;
        k.loops[i].stream = true;
        decide(fmt::format("{}: stream the stores of {} ({} bytes >= {} bytes, {}; not read back in this kernel)",
                           k.name, n.origin, buf.nbytes(), threshold, why_threshold()));
      }
    }
  }

  // Deferred row writes. In a kernel of several loops over rows (softmax, layer norm), the last loop writes its
  // row with streaming stores after the row's other loops have run: a burst the core can only wait out (a dozen
  // lines in flight at a time) with nothing to compute meanwhile. Instead the last loop runs one row late,
  // inside the next row's most expensive pointwise, non-streamed loop over the same row length (the host; ties
  // go to the later loop), so its stores drain while the host computes, as a copy's stores drain while it
  // loads; each sweep of the row variable writes its last row after its loop.
  // Softmax 4096x4096 on the development machine, hand-written in C: 0.60-0.67 of copy bandwidth without,
  // 0.74 with. Returns why a kernel does not qualify ("" when it does, with the host in `host`).
  std::string deferral_refusal(const Kernel& k, int& host, std::vector<int>& two_rows) const {
    if (k.loops.size() < 2) return "a single loop";
    if (k.parallel_loop != -1) return "the threads split a loop, not the rows";
    // Rows run along the innermost outer variable; each sweep of it (one per point of the outer variables
    // before it) starts without a previous row and ends by writing its last row (codegen).
    size_t rows = k.outer_vars.size();
    for (size_t d = 0; d < k.outer_vars.size(); ++d)
      if (!k.outer_vars[d].is_constant()) rows = d;
    if (rows == k.outer_vars.size()) return "no row variable";
    std::set<std::string> outer_keys;
    for (const Index& v : k.outer_vars)
      if (!v.is_constant()) outer_keys.insert(v.terms[0].first->key);
    const KernelLoop& last = k.loops.back();
    const LoopNode& ln = lg.nodes[size_t(last.node)];
    if (ln.kind != LoopNode::Kind::Pointwise || !last.stream) return "the last loop is not a streamed pointwise loop";
    auto along = row_variable(k, last);
    if (!along) return "the last loop does not run along one variable";
    const Index at = ix_linear(last.idx, ln.sizes);
    if (ix_coefficient(at, along->first) != 1) return "the last loop does not write its row contiguously";
    const Index row_start = ix_add(at, ix_scale(along->first, -1));
    const int64_t element = dtype_size(lg.buffers[size_t(ln.buffer)].dtype);
    bool aligned = row_start.constant * element % runtime::kStreamAlignment == 0;
    for (const auto& [atom, coefficient] : row_start.terms)
      aligned = aligned && outer_keys.count(atom->key) && coefficient * element % runtime::kStreamAlignment == 0;
    if (!aligned) return "its rows do not start on 64-byte boundaries";
    // What the last loop reads from this kernel must still hold the previous row's values: kernel-local rows
    // (two of them in codegen, within the kernel's scratch budget) or results stored once per row.
    std::vector<std::pair<int, Index>> loads;
    s_loads(last.value, loads);
    int64_t scratch = 0;
    two_rows.clear();
    for (int b : k.local_buffers) {
      int64_t row_bytes = lg.buffers[size_t(b)].nbytes() / std::max<int64_t>(shape_numel(k.outer), 1);
      scratch += row_bytes;
      if (std::any_of(loads.begin(), loads.end(), [&](const auto& ld) { return ld.first == b; })) {
        two_rows.push_back(b);
        scratch += row_bytes;
      }
    }
    if (scratch > kMaxLocalBytesPerKernel)
      return fmt::format("two rows of its kernel-local buffers would exceed {} bytes of scratch", kMaxLocalBytesPerKernel);
    for (const auto& [buffer, ix] : loads)
      for (size_t i = 0; i + 1 < k.loops.size(); ++i) {
        const KernelLoop& w = k.loops[i];
        const LoopNode& wn = lg.nodes[size_t(w.node)];
        if (wn.buffer != buffer || is_local(k, buffer)) continue;
        const Index wat = ix_linear(w.idx, wn.sizes);
        bool per_row = ix_coefficient(wat, k.outer_vars[rows]) != 0;
        for (const auto& [atom, coefficient] : wat.terms) per_row = per_row && outer_keys.count(atom->key);
        if (!per_row) return fmt::format("it reads {}, written in memory by more than one point per row", wn.origin);
      }
    int best = -1;
    host = -1;
    for (size_t i = 0; i + 1 < k.loops.size(); ++i) {
      auto v = row_variable(k, k.loops[i]);
      // Only pointwise hosts: they carry the next-row prefetch (codegen), which a reduction host would lose;
      // layer norm deferred into its variance loop ran at 0.55 of copy bandwidth instead of 0.76-0.81.
      const bool pointwise = lg.nodes[size_t(k.loops[i].node)].kind == LoopNode::Kind::Pointwise;
      if (!v || !pointwise || v->second != along->second || k.loops[i].stream) continue;
      int cost = s_cost(k.loops[i].value);
      if (cost >= best) {  // ties: the later loop, whose data is in cache
        best = cost;
        host = int(i);
      }
    }
    return host < 0 ? "no earlier pointwise loop runs along a row of the same length" : "";
  }
  // The one variable a loop runs along inside a row (its non-constant inner or reduction variable), and its
  // extent; nullopt when it has none or several.
  std::optional<std::pair<Index, int64_t>> row_variable(const Kernel& k, const KernelLoop& l) const {
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
  void choose_deferred_stores() {
    for (Kernel& k : out.kernels) {
      if (k.loops.empty() || !k.loops.back().stream) continue;
      int host = -1;
      std::vector<int> two_rows;
      std::string why = deferral_refusal(k, host, two_rows);
      const std::string& origin = lg.nodes[size_t(k.loops.back().node)].origin;
      if (why.empty() && !should_run("inductor", "defer", [&] { return fmt::format("{} in {}", origin, k.name); }))
        why = "refused by the bisection hook";
      if (!why.empty()) {
        decide(fmt::format("{}: write {} in its own loop: {}", k.name, origin, why));
        continue;
      }
      k.deferred_host = host;
      k.two_row_buffers = std::move(two_rows);
      decide(fmt::format("{}: write {} one row late, during loop {} of the next row (its streaming stores drain while "
                         "that loop computes)", k.name, origin, host));
    }
  }

  // Accumulated reductions. A sum or product over the row the previous loop of the kernel (pointwise) has just
  // written, reading it at the element being written (softmax's sum of exp(x - max)), is accumulated inside that
  // loop while the element is in a register: one pass over the row instead of two, and its adds overlap the
  // memory traffic of that loop (next-row prefetch, deferred row writes). Softmax 4096x4096 in C on the
  // development VM: 0.77-0.78 of copy bandwidth with a separate sum loop, 0.77-0.85 accumulated; in kiln no
  // difference outside that VM's noise.
  // Returns why loop i does not qualify ("" when it does); not a candidate at all when `candidate` is false.
  std::string accumulation_refusal(const Kernel& k, size_t i, bool& candidate) const {
    const KernelLoop& r = k.loops[i];
    const LoopNode& rn = lg.nodes[size_t(r.node)];
    const KernelLoop& p = k.loops[i - 1];
    const LoopNode& pn = lg.nodes[size_t(p.node)];
    std::vector<std::pair<int, Index>> loads;
    s_loads(r.value, loads);
    candidate = rn.kind == LoopNode::Kind::Reduction && pn.kind == LoopNode::Kind::Pointwise &&
                std::any_of(loads.begin(), loads.end(), [&](const auto& ld) { return ld.first == pn.buffer; });
    if (!candidate) return "not a reduction of the previous loop's values";
    if (rn.reduce != ReduceOp::Sum && rn.reduce != ReduceOp::Prod) return "only sums and products are accumulated";
    if (k.parallel_loop != -1) return "the threads split a loop, not the rows";
    auto rv = row_variable(k, r), pv = row_variable(k, p);
    if (!rv || !pv) return "a loop does not run along one variable";
    if (rv->second != pv->second) return "the loops run over rows of different lengths";
    if (rn.reduce == ReduceOp::Sum && is_floating(r.value->dtype) && rv->second > kSumBlock)
      return fmt::format("a float sum over rows of {} elements (> {}) is added in blocks into an f64 total, which the "
                         "producer's loop does not do", rv->second, kSumBlock);
    const Index at = ix_linear(p.idx, pn.sizes);
    const int64_t c = ix_coefficient(at, pv->first);
    const Index at_rest = ix_add(at, ix_scale(pv->first, -c));
    for (const auto& [buffer, ix] : loads) {
      if (buffer != pn.buffer) continue;
      const Index rest = ix_add(ix, ix_scale(rv->first, -c));
      if (c == 0 || ix_coefficient(ix, rv->first) != c || ix_depends_on(rest, rv->first) ||
          ix_depends_on(at_rest, pv->first) || !(rest == at_rest))
        return fmt::format("it reads {} at other elements than the one being written", pn.origin);
    }
    return "";
  }
  void choose_accumulated_reductions() {
    for (Kernel& k : out.kernels)
      for (size_t i = 1; i < k.loops.size(); ++i) {
        bool candidate = false;
        std::string why = accumulation_refusal(k, i, candidate);
        if (!candidate) continue;
        const std::string& origin = lg.nodes[size_t(k.loops[i].node)].origin;
        if (why.empty() && !should_run("inductor", "accumulate", [&] { return fmt::format("{} in {}", origin, k.name); }))
          why = "refused by the bisection hook";
        if (!why.empty()) {
          decide(fmt::format("{}: reduce {} in its own loop: {}", k.name, origin, why));
          continue;
        }
        k.loops[i].accumulated_in = int(i) - 1;
        decide(fmt::format("{}: accumulate {} inside loop {}, as it writes the elements {} reduces", k.name, origin,
                           i - 1, origin));
      }
  }

  // Frees each intermediate buffer after the last step that reads or writes it.
  void plan_memory() {
    std::vector<int> last(lg.buffers.size(), -1);
    for (int s = 0; s < int(out.steps.size()); ++s) {
      const Step& st = out.steps[size_t(s)];
      auto touch = [&](int b) {
        if (b >= 0) last[size_t(b)] = s;
      };
      if (st.kind == Step::Kind::Kernel) {
        for (const KernelLoop& l : out.kernels[size_t(st.index)].loops) {
          touch(lg.nodes[size_t(l.node)].buffer);
          std::vector<std::pair<int, Index>> loads;
          s_loads(l.value, loads);
          for (const auto& ld : loads) touch(ld.first);
        }
      } else {
        const LoopNode& n = lg.nodes[size_t(st.index)];
        for (const BufferView& v : n.extern_inputs) touch(v.buffer);
        for (int b : n.extern_outputs) touch(b);
      }
    }
    for (const Kernel& k : out.kernels)
      for (int b : k.local_buffers) last[size_t(b)] = -1;  // never allocated
    for (size_t b = 0; b < lg.buffers.size(); ++b) {
      const Buffer& buf = lg.buffers[b];
      if (buf.kind == Buffer::Kind::Intermediate && !buf.is_output && last[b] >= 0)
        out.steps[size_t(last[b])].free_after.push_back(int(b));
    }
  }
};

// ---------------------------------------------------------------- printing

struct Printer {
  const LoweredGraph& lg;
  std::unordered_map<std::string, std::string> names;  // atom key of a variable -> local name
  std::map<int, int> buffer_slot;                       // buffer id -> local argument index
  std::vector<int> args;
  std::unordered_map<const SNode*, int> ids;
  std::string body;
  std::vector<int> locals;                              // kernel-local buffers, printed l0, l1, ...

  // A buffer's name in the kernel text: bN for the N-th argument, lN for the N-th kernel-local scratch row.
  std::string buffer(int b) {
    auto local = std::find(locals.begin(), locals.end(), b);
    if (local != locals.end()) return fmt::format("l{}", local - locals.begin());
    auto [it, inserted] = buffer_slot.emplace(b, int(args.size()));
    if (inserted) args.push_back(b);
    return fmt::format("b{}", it->second);
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

Schedule schedule_graph(const LoweredGraph& lg, bool fuse, const InjectSpec& inject) {
  Builder b{lg, inject, fuse, {}, {}};
  b.run();
  return std::move(b.out);
}

std::string print_kernel(const Kernel& k, const LoweredGraph& lg, std::vector<int>* args) {
  Printer p{lg, {}, {}, {}, {}, {}, k.local_buffers};
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
      text += fmt::format("  loop {}: reduce {}{} over {} -> {}: {}{}{}{}\n", li, reduce_op_name(n.reduce),
                          n.nan_insensitive ? " (NaN-insensitive)" : "", shape_str(n.rsizes),
                          dest, dtype_name(out.dtype), shape_str(n.sizes), fin,
                          l.accumulated_in >= 0 ? fmt::format(" accumulated in loop {}", l.accumulated_in) : "");
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
  if (args) *args = p.args;
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
