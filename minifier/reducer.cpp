// The reducer: moves as lazy candidate generators, a verdict cache, and the fx_minifier-style driver
// (see reducer.h for the rules).
#include "minifier/reducer.h"

#include <algorithm>
#include <unordered_map>

#include "graph/interpreter.h"
#include "graph/rewrite.h"
#include "graph/verify.h"
#include "minifier/simpler_op.h"

namespace kiln::minify {

std::vector<std::optional<Verdict>> Oracle::test_batch(const std::vector<const Candidate*>& batch) {
  std::vector<std::optional<Verdict>> out(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    out[i] = test(*batch[i]);
    if (out[i]->fails) break;
  }
  return out;
}

Measure measure(const graph::Graph& g) {
  int64_t const_elems = 0, input_elems = 0;
  int ops = 0, not_f32 = 0, simplifiable = 0;
  for (const graph::Node& n : g.nodes()) {
    if (n.kind == graph::NodeKind::Op) ++ops, simplifiable += simpler_op(n.op).has_value();
    else const_elems += n.constant.numel();
  }
  for (graph::ValueId id : g.inputs()) {
    const TensorMeta& m = g.value(id).meta;
    input_elems += shape_numel(m.sizes);
    not_f32 += is_floating(m.dtype) && m.dtype != DType::F32;
  }
  return {ops, int(g.outputs().size()), int(g.inputs().size()), const_elems, input_elems, not_f32, simplifiable};
}

namespace {

std::vector<int64_t> contiguous_of(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = s;
    s *= std::max<int64_t>(sizes[i], 1);
  }
  return st;
}

}  // namespace

namespace {

// The nodes of `cur` that a move keeps (live) and the values the result needs, walking backwards from the
// move's outputs: converted nodes' outputs become inputs; an in-place node stays while the value it mutates
// is read after it; a random node stays while a later random node does (removing it would shift their draws).
void mark_live(const graph::Graph& cur, const Move& m, std::vector<char>& needed, std::vector<char>& live) {
  using graph::NodeKind; using graph::ValueId;
  const auto& nodes = cur.nodes();
  needed.assign(size_t(cur.num_values()), 0);
  live.assign(nodes.size(), 0);
  for (ValueId id : m.outputs) needed[size_t(id)] = 1;
  bool random_after = false;
  for (size_t i = nodes.size(); i-- > 0;) {
    const graph::Node& n = nodes[i];
    if (n.kind == NodeKind::Op && !m.to_input.empty() && m.to_input[i]) continue;  // its outputs become inputs
    bool use = false;
    for (ValueId o : n.outputs) use |= bool(needed[size_t(o)]);
    if (n.kind == NodeKind::Op) {
      if (n.info().is_inplace())
        for (ValueId v : graph::Graph::node_inputs(n)) { use |= bool(needed[size_t(v)]); break; }
      if (random_after && graph::is_random_node(n)) use = true;
    }
    if (!use) continue;
    live[i] = 1;
    if (n.kind == NodeKind::Op) {
      for (ValueId v : graph::Graph::node_inputs(n)) needed[size_t(v)] = 1;
      if (graph::is_random_node(n)) random_after = true;
    }
  }
}

}  // namespace

graph::Graph apply_move(const graph::Graph& cur, const Move& m) {
  using graph::NodeKind; using graph::ValueId;
  std::vector<char> needed, live;
  mark_live(cur, m, needed, live);
  std::vector<char> to_const(size_t(cur.num_values()), 0);
  for (ValueId id : m.to_constant) to_const[size_t(id)] = 1;
  graph::GraphCloner c(cur, {.keep_locations = false, .infer_metas = false});
  std::vector<const TensorMeta*> retyped(size_t(cur.num_values()), nullptr);
  for (const auto& [id, meta] : m.retype) retyped[size_t(id)] = &meta;
  for (ValueId id : cur.inputs()) {
    if (!needed[size_t(id)] || to_const[size_t(id)]) continue;
    if (retyped[size_t(id)]) c.input_as(id, *retyped[size_t(id)]);
    else c.copy_input(id);
  }
  bool restrided = false;  // an input made from a node got contiguous strides its value did not have
  for (size_t i = 0; i < cur.nodes().size(); ++i) {
    if (m.to_input.empty() || !m.to_input[i] || cur.nodes()[i].kind != NodeKind::Op) continue;
    for (ValueId o : cur.nodes()[i].outputs) {
      if (!needed[size_t(o)]) continue;
      TensorMeta meta = cur.value(o).meta;
      std::vector<int64_t> st = contiguous_of(meta.sizes);  // recorded values are contiguous
      restrided |= meta.strides != st;
      meta.strides = st;
      c.input_as(o, meta);
    }
  }
  for (size_t k = 0; k < m.to_constant.size(); ++k)
    if (needed[size_t(m.to_constant[k])]) c.constant_as(m.to_constant[k], m.constants[k]);
  // downstream metas follow the new strides, sizes and ops
  const bool reinfer = !m.retype.empty() || !m.replace_op.empty();
  c.options().infer_metas = restrided || reinfer;
  std::vector<std::optional<OpId>> new_op(cur.nodes().size());
  for (const auto& [node, op] : m.replace_op) new_op[node] = op;
  for (size_t i = 0; i < cur.nodes().size(); ++i) {
    if (!live[i]) continue;
    if (!new_op[i]) { c.copy_node(cur.nodes()[i]); continue; }
    graph::Node swapped = cur.nodes()[i];
    swapped.op = *new_op[i];
    c.copy_node(swapped);
  }
  c.set_outputs(m.outputs);
  graph::Graph out = c.take();
  if (reinfer) graph::verify_graph(out);  // re-inference took every op; the rest of the rules hold too
  for (const auto& [node, op] : m.replace_op)  // a swap keeps every value's meta (a checkpoint can be resumed)
    for (ValueId o : cur.nodes()[node].outputs)
      if (std::optional<ValueId> now = out.find_value(cur.value(o).name))
        if (out.value(*now).meta.dtype != cur.value(o).meta.dtype || out.value(*now).meta.sizes != cur.value(o).meta.sizes)
          fail("%{}: {} computes another dtype or shape than {}", cur.value(o).name, op_info(op).name,
               cur.nodes()[node].info().name);
  return out;
}

uint64_t candidate_key(const graph::Graph& g) {
  uint64_t h = g.structural_hash();
  for (graph::ValueId id : g.inputs())
    for (char c : g.value(id).name) h = (h ^ uint64_t(uint8_t(c))) * 0x100000001b3ull;
  return h;
}

namespace {

using Generator = std::function<std::optional<Move>()>;

class Driver {
 public:
  Driver(Candidate start, Oracle& oracle, const ReduceOptions& opts, ReduceStats& stats)
      : cur_(std::move(start)), oracle_(oracle), opts_(opts), stats_(stats), t0_(std::chrono::steady_clock::now()),
        base_seconds_(stats.seconds) {
    stats_.ops = std::get<0>(measure(cur_.graph));
    if (stats_.start_ops == 0) stats_.start_ops = stats_.ops;
  }

  Candidate run() {
    for (;;) {
      if (opts_.max_steps >= 0 && stats_.accepted >= opts_.max_steps) break;
      int n = std::max(1, num_ops());
      int G = 1;
      while (G * 2 <= n) G *= 2;
      if (try_granularity(G, true)) continue;
      bool progress = false;
      for (int g = G / 2; g >= 1 && !progress; g /= 2) progress = try_granularity(g, false);
      if (progress) continue;
      if (try_moves("outputs", 1, remove_outputs(1))) continue;
      if (try_moves("constant", 1, constants())) continue;
      if (opts_.shape_moves && try_moves("shrink", 1, shrink())) continue;
      if (opts_.shape_moves && try_moves("dtype", 1, dtypes())) continue;
      if (try_moves("simplify", 1, simplify())) continue;
      break;
    }
    tick();
    return cur_;
  }

 private:
  int num_ops() const { return std::get<0>(measure(cur_.graph)); }

  std::vector<int> op_indices() const {
    std::vector<int> ops;
    for (size_t i = 0; i < cur_.graph.nodes().size(); ++i)
      if (cur_.graph.nodes()[i].kind == graph::NodeKind::Op) ops.push_back(int(i));
    return ops;
  }

  bool try_granularity(int G, bool non_granular) {
    int n = num_ops();
    if (int(cur_.graph.outputs().size()) > n / 2 && try_moves("outputs", G, remove_outputs(G))) return true;
    if (non_granular && try_moves("dce", G, dce())) return true;
    if (try_moves("truncate", G, truncate(G))) return true;
    return try_moves("window", G, window(G));
  }

  Generator dce() {
    bool done = false;
    return [this, done]() mutable -> std::optional<Move> {
      if (done) return std::nullopt;
      done = true;
      Move m;
      m.outputs = cur_.graph.outputs();
      m.what = "dead code and unused inputs";
      return m;
    };
  }

  // Prefixes of L = G, 3G, 5G, ... op nodes (shorter than the graph), shortest first.
  Generator truncate(int G) {
    std::vector<int> ops = op_indices();
    int k = 1;
    return [this, ops, G, k]() mutable -> std::optional<Move> {
      int L = G * k;
      if (L >= int(ops.size())) return std::nullopt;
      k += 2;
      Move m;
      m.outputs = cur_.graph.nodes()[size_t(ops[size_t(L - 1)])].outputs;
      m.what = fmt::format("truncate after op {} of {} (G={})", L, ops.size(), G);
      return m;
    };
  }

  // Windows [s, s+G) of op nodes turned into inputs.
  Generator window(int G) {
    std::vector<int> ops = op_indices();
    int s = 0;
    return [this, ops, G, s]() mutable -> std::optional<Move> {
      if (s >= int(ops.size())) return std::nullopt;
      Move m;
      m.to_input.assign(cur_.graph.nodes().size(), 0);
      int e = std::min<int>(int(ops.size()), s + G);
      for (int i = s; i < e; ++i) m.to_input[size_t(ops[size_t(i)])] = 1;
      m.outputs = cur_.graph.outputs();
      m.what = fmt::format("ops {}..{} of {} into inputs (G={})", s, e - 1, ops.size(), G);
      s += G;
      return m;
    };
  }

  // Runs of max(1, G/2) outputs removed, outputs ordered by where they are defined (like fx_minifier).
  Generator remove_outputs(int G) {
    std::vector<graph::ValueId> outs = cur_.graph.outputs();
    const graph::Graph& g = cur_.graph;
    std::stable_sort(outs.begin(), outs.end(), [&](graph::ValueId a, graph::ValueId b) {
      return g.value(a).producer < g.value(b).producer;
    });
    int step = std::max(1, G / 2);
    size_t i = 0;
    return [this, outs, step, i]() mutable -> std::optional<Move> {
      if (outs.size() <= 1 || i >= outs.size()) return std::nullopt;
      Move m;
      for (size_t k = 0; k < outs.size(); ++k)
        if (k < i || k >= i + size_t(step)) m.outputs.push_back(outs[k]);
      m.what = fmt::format("remove outputs {}..{} of {}", i, std::min(outs.size(), i + step) - 1, outs.size());
      i += size_t(step);
      return m;
    };
  }

  // All small inputs at once, then each alone.
  Generator constants() {
    std::vector<std::pair<graph::ValueId, Tensor>> cands;
    if (opts_.constant_value)
      for (graph::ValueId id : cur_.graph.inputs())
        if (auto v = opts_.constant_value(cur_.graph, id)) cands.emplace_back(id, *v);
    int k = cands.size() > 1 ? -1 : 0;
    return [this, cands, k]() mutable -> std::optional<Move> {
      if (k >= int(cands.size())) return std::nullopt;
      Move m;
      m.outputs = cur_.graph.outputs();
      if (k < 0) {
        for (auto& [id, t] : cands) m.to_constant.push_back(id), m.constants.push_back(t);
        m.what = fmt::format("{} small inputs into constants", cands.size());
      } else {
        m.to_constant = {cands[size_t(k)].first};
        m.constants = {cands[size_t(k)].second};
        m.what = fmt::format("input %{} into a constant", cur_.graph.value(cands[size_t(k)].first).name);
      }
      ++k;
      return m;
    };
  }

  // Smaller sizes, boldest first: every input dimension made 1 (when the inputs have several sizes > 1); then for
  // each size S > 1, largest first, every input dimension of size S made 1, then ceil(S/2). A failure that does
  // not depend on its sizes takes one step; one that does halves towards the size it needs.
  Generator shrink() {
    std::vector<int64_t> sizes;
    for (graph::ValueId id : cur_.graph.inputs())
      for (int64_t s : cur_.graph.value(id).meta.sizes)
        if (s > 1 && std::find(sizes.begin(), sizes.end(), s) == sizes.end()) sizes.push_back(s);
    std::sort(sizes.rbegin(), sizes.rend());
    std::vector<std::pair<int64_t, int64_t>> steps;  // (from, to); from 0: every size > 1
    if (sizes.size() > 1) steps.emplace_back(0, 1);
    for (int64_t s : sizes) {
      steps.emplace_back(s, 1);
      if ((s + 1) / 2 > 1) steps.emplace_back(s, (s + 1) / 2);
    }
    size_t k = 0;
    return [this, steps, k]() mutable -> std::optional<Move> {
      if (k >= steps.size()) return std::nullopt;
      const auto [from, to] = steps[k++];
      Move m;
      m.outputs = cur_.graph.outputs();
      for (graph::ValueId id : cur_.graph.inputs()) {
        TensorMeta meta = cur_.graph.value(id).meta;
        bool changed = false;
        for (int64_t& s : meta.sizes)
          if (from == 0 ? s > 1 : s == from) s = to, changed = true;
        if (!changed) continue;
        meta.strides = contiguous_of(meta.sizes);
        m.retype.emplace_back(id, meta);
      }
      m.what = from == 0 ? "every input size -> 1" : fmt::format("size {} -> {} in every input", from, to);
      return m;
    };
  }

  // Floating inputs that are not f32 made f32: all at once, then each.
  Generator dtypes() {
    std::vector<graph::ValueId> ids;
    for (graph::ValueId id : cur_.graph.inputs()) {
      DType d = cur_.graph.value(id).meta.dtype;
      if (is_floating(d) && d != DType::F32) ids.push_back(id);
    }
    int k = ids.size() > 1 ? -1 : 0;
    return [this, ids, k]() mutable -> std::optional<Move> {
      if (k >= int(ids.size())) return std::nullopt;
      Move m;
      m.outputs = cur_.graph.outputs();
      auto to_f32 = [&](graph::ValueId id) {
        TensorMeta meta = cur_.graph.value(id).meta;
        meta.dtype = DType::F32;
        m.retype.emplace_back(id, meta);
      };
      if (k < 0) {
        for (graph::ValueId id : ids) to_f32(id);
        m.what = fmt::format("{} floating inputs to f32", ids.size());
      } else {
        to_f32(ids[size_t(k)]);
        m.what = fmt::format("input %{} to f32", cur_.graph.value(ids[size_t(k)]).name);
      }
      ++k;
      return m;
    };
  }

  // Op nodes given their simpler op (simpler_op.h): all at once, then each, in graph order.
  Generator simplify() {
    std::vector<std::pair<size_t, OpId>> swaps;
    const auto& nodes = cur_.graph.nodes();
    for (size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i].kind == graph::NodeKind::Op && !graph::is_random_node(nodes[i]))
        if (std::optional<OpId> to = simpler_op(nodes[i].op)) swaps.emplace_back(i, *to);
    int k = swaps.size() > 1 ? -1 : 0;
    return [this, swaps, k]() mutable -> std::optional<Move> {
      if (k >= int(swaps.size())) return std::nullopt;
      Move m;
      m.outputs = cur_.graph.outputs();
      auto what = [&](const std::pair<size_t, OpId>& s) {
        const graph::Node& n = cur_.graph.nodes()[s.first];
        return fmt::format("%{}: {} -> {}", cur_.graph.value(n.outputs[0]).name, n.info().name, op_info(s.second).name);
      };
      if (k < 0) {
        m.replace_op = swaps;
        m.what = fmt::format("{} ops to simpler ones", swaps.size());
      } else {
        m.replace_op = {swaps[size_t(k)]};
        m.what = what(swaps[size_t(k)]);
      }
      ++k;
      return m;
    };
  }

  bool try_moves(const std::string& name, int G, Generator gen) {
    stats_.strategy = name;
    stats_.granularity = G;
    const Measure before = measure(cur_.graph);
    const int width = std::max(1, oracle_.parallelism());
    bool exhausted = false;
    while (!exhausted) {
      std::vector<Candidate> batch;
      std::vector<uint64_t> keys;
      while (int(batch.size()) < width) {
        std::optional<Move> m = gen();
        if (!m) { exhausted = true; break; }
        Candidate c;
        try {
          c = Candidate{apply_move(cur_.graph, *m), m->what};
        } catch (const Error&) {  // a retyped input or a swapped op that an op does not take: no candidate
          if (m->retype.empty() && m->replace_op.empty()) throw;
          continue;
        }
        if (!(measure(c.graph) < before)) continue;  // no progress: not worth a query
        uint64_t key = candidate_key(c.graph);
        auto hit = cache_.find(key);
        if (hit != cache_.end() && !hit->second) { ++stats_.cache_hits; continue; }
        if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
        batch.push_back(std::move(c));
        keys.push_back(key);
      }
      if (batch.empty()) continue;
      std::vector<const Candidate*> ptrs;
      std::vector<std::optional<Verdict>> verdicts(batch.size());
      for (size_t i = 0; i < batch.size(); ++i) {
        auto hit = cache_.find(keys[i]);
        if (hit != cache_.end()) {  // cached as failing (seen in a parallel batch, not yet confirmed)
          ++stats_.cache_hits;
          verdicts[i] = Verdict{true, {}};
        }
      }
      for (size_t i = 0; i < batch.size(); ++i)
        if (!verdicts[i]) ptrs.push_back(&batch[i]);
      if (!ptrs.empty()) {
        std::vector<std::optional<Verdict>> got = oracle_.test_batch(ptrs);
        size_t j = 0;
        for (size_t i = 0; i < batch.size(); ++i) {
          if (verdicts[i]) continue;
          verdicts[i] = got[j++];
          if (verdicts[i]) {
            ++stats_.oracle_calls;
            ++stats_.observed[verdicts[i]->observed.kind];
            cache_[keys[i]] = verdicts[i]->fails;
          }
        }
        tick();
      }
      for (size_t i = 0; i < batch.size(); ++i) {
        if (!verdicts[i]) {  // not evaluated: an earlier one failed; evaluate later ones one by one
          Verdict v = oracle_.test(batch[i]);
          ++stats_.oracle_calls;
          ++stats_.observed[v.observed.kind];
          cache_[keys[i]] = v.fails;
          verdicts[i] = v;
          tick();
        }
        if (!verdicts[i]->fails) continue;
        Verdict sure = oracle_.confirm(batch[i]);
        ++stats_.oracle_calls;
        tick();
        if (!sure.fails) {
          cache_[keys[i]] = false;
          ++stats_.rejected_on_confirm;
          continue;
        }
        accept(std::move(batch[i]), name);
        return true;
      }
    }
    return false;
  }

  void accept(Candidate c, const std::string& move) {
    cur_ = std::move(c);
    ++stats_.accepted;
    ++stats_.accepted_moves[move];
    stats_.ops = num_ops();
    tick();
    if (opts_.on_accept) opts_.on_accept(cur_, stats_);
  }

  void tick() {
    stats_.seconds = base_seconds_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (opts_.on_progress) opts_.on_progress(stats_);
  }

  Candidate cur_;
  Oracle& oracle_;
  const ReduceOptions& opts_;
  ReduceStats& stats_;
  std::chrono::steady_clock::time_point t0_;
  double base_seconds_;
  std::unordered_map<uint64_t, bool> cache_;
};

}  // namespace

Candidate reduce(Candidate start, Oracle& oracle, const ReduceOptions& opts, ReduceStats& stats) {
  return Driver(std::move(start), oracle, opts, stats).run();
}

}  // namespace kiln::minify
