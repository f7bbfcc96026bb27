// The trace tree (see trace_tree.h).
#include "capture/trace_tree.h"

#include <sstream>

#include "capture/recorder.h"
#include "core/trace.h"
#include "graph/text.h"
#include "ops/api.h"

namespace kiln::capture {

namespace {

// The node for the trace's steps from `pos` to its next branch point (or the end), with its subtree.
std::unique_ptr<TreeNode> build_node(Trace& trace, size_t pos, const Compiler& compiler, int& graph_number) {
  auto node = std::make_unique<TreeNode>();
  size_t end = pos;
  while (end < trace.steps.size() && trace.steps[end].kind != Step::Kind::Branch) ++end;
  for (const auto& [step, value] : trace.introduced)
    if (size_t(step) >= pos && size_t(step) <= end) {
      node->introduced.emplace_back(int(size_t(step) - pos), trace.values[size_t(value)]);
      node->introduced_ids.push_back(value);
    }
  for (size_t i = pos; i < end; ++i) {
    const Step& s = trace.steps[i];
    if (s.kind == Step::Kind::Graph) {
      Segment& seg = trace.segments[size_t(s.index)];
      std::string label = fmt::format("graph {} of {}", ++graph_number, compiler.function);
      GraphProgram program = compile_segment(compiler.backend, seg, label);
      trace_event("graph_compiled", {{"function", compiler.function}, {"graph", seg.graph.name},
                                     {"number", graph_number}, {"nodes", seg.graph.num_op_nodes()}});
      seg.example_inputs.clear();
      seg.input_values.clear();
      node->steps.push_back({Step::Kind::Graph, int(node->segments.size())});
      node->segments.push_back({std::move(seg), std::move(program)});
    } else {
      node->steps.push_back({Step::Kind::Eager, int(node->eager.size())});
      node->eager.push_back(std::move(trace.eager[size_t(s.index)]));
    }
  }
  if (end == trace.steps.size()) {
    node->outputs = trace.outputs;
    node->output_lengths = trace.output_lengths;
    return node;
  }
  node->is_exit = false;
  node->branch = trace.branches[size_t(trace.steps[end].index)];
  node->children.emplace_back(node->branch.observed, build_node(trace, end + 1, compiler, graph_number));
  return node;
}

void collect_written_back(const Trace& trace, std::vector<int>& out) {
  for (const Segment& s : trace.segments)
    for (const auto& [index, value] : s.writebacks)
      if (std::find(out.begin(), out.end(), value) == out.end()) out.push_back(value);
}

std::string key_str(const std::vector<Scalar>& key) {
  std::vector<std::string> parts;
  for (const Scalar& s : key) parts.push_back(s.str());
  return key.size() == 1 ? parts[0] : fmt::format("[{}]", fmt::join(parts, ", "));
}

// The first line where two graphs print differently.
std::string first_graph_difference(const graph::Graph& cached, const graph::Graph& now) {
  std::istringstream a(graph::print_graph(cached)), b(graph::print_graph(now));
  std::string la, lb;
  while (true) {
    bool ha = bool(std::getline(a, la)), hb = bool(std::getline(b, lb));
    if (!ha && !hb) return "the graphs differ";
    if (la != lb || ha != hb) return fmt::format("cached `{}`, now `{}`", ha ? la : "(end)", hb ? lb : "(end)");
  }
}

// "" when the trace's steps from `pos` (to its next branch point) are the ones `node` replays.
// `eager_outputs` is set when the one difference is an eager region's output metas.
std::string piece_difference(const TreeNode& node, const Trace& trace, size_t pos, size_t end, bool& eager_outputs) {
  if (end - pos != node.steps.size())
    return fmt::format("the cached trace has {} graphs and eager regions here, this call {}", node.steps.size(),
                       end - pos);
  for (size_t i = 0; i < node.steps.size(); ++i) {
    const Step& mine = node.steps[i];
    const Step& theirs = trace.steps[pos + i];
    if (mine.kind != theirs.kind) return "a graph and an eager region changed places";
    if (mine.kind == Step::Kind::Graph) {
      const Segment& a = node.segments[size_t(mine.index)].segment;
      const Segment& b = trace.segments[size_t(theirs.index)];
      if (a.graph.structural_hash() != b.graph.structural_hash() || a.inputs != b.inputs || a.outputs != b.outputs)
        return fmt::format("{}: {}", a.graph.name, first_graph_difference(a.graph, b.graph));
    } else {
      const EagerRegion& a = node.eager[size_t(mine.index)];
      const EagerRegion& b = trace.eager[size_t(theirs.index)];
      eager_outputs = a.kind == b.kind && a.site == b.site && a.inputs == b.inputs && a.output_metas != b.output_metas;
      if (a.kind != b.kind || a.site != b.site || a.inputs != b.inputs || a.output_metas != b.output_metas)
        return fmt::format("the {} region at {} differs from the cached {} region at {}", break_kind_name(b.kind),
                           b.site.str(), break_kind_name(a.kind), a.site.str());
    }
  }
  return "";
}

std::string exit_difference(const TreeNode& node, const Trace& trace) {
  if (node.outputs.size() != trace.outputs.size() || node.output_lengths != trace.output_lengths)
    return "the result's structure differs";
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const OutputLeaf& a = node.outputs[i];
    const OutputLeaf& b = trace.outputs[i];
    if (a.value != b.value || !(a.number == b.number))
      return a.value < 0 && b.value < 0
                 ? fmt::format("result {} is the number {} in the cached trace, {} now", i, a.number.str(), b.number.str())
                 : fmt::format("result {} comes from another value than in the cached trace", i);
  }
  return "";
}

}  // namespace

std::unique_ptr<CacheEntry> make_entry(Trace trace, GuardSet guards, const Compiler& compiler, int id) {
  auto entry = std::make_unique<CacheEntry>(std::move(guards));
  entry->id = id;
  for (size_t v = 0; v < trace.values.size(); ++v)
    if (trace.values[v].source == ValueSource::Argument) entry->arguments.emplace_back(int(v), trace.values[v].leaf);
  entry->num_values = int(trace.values.size());
  collect_written_back(trace, entry->written_back);
  entry->may_miss_midway = !trace.branches.empty() || !trace.eager.empty();
  int graph_number = 0;
  entry->root = build_node(trace, 0, compiler, graph_number);
  return entry;
}

MergeOutcome merge_trace(CacheEntry& entry, Trace& trace, const Compiler& compiler) {
  using Kind = MergeOutcome::Kind;
  TreeNode* node = entry.root.get();
  size_t pos = 0;
  while (true) {
    size_t end = pos;
    while (end < trace.steps.size() && trace.steps[end].kind != Step::Kind::Branch) ++end;
    bool eager_outputs = false;
    if (std::string d = piece_difference(*node, trace, pos, end, eager_outputs); !d.empty())
      return {eager_outputs ? Kind::EagerOutputsDiffer : Kind::Differs, d};
    if (node->is_exit != (end == trace.steps.size()))
      return {Kind::Differs, node->is_exit ? fmt::format("this call breaks the graph at {} where the cached trace ended",
                                         trace.branches[size_t(trace.steps[end].index)].site.str())
                           : fmt::format("this call ends where the cached trace breaks the graph at {}",
                                         node->branch.site.str())};
    if (node->is_exit) {
      std::string d = exit_difference(*node, trace);
      return {d.empty() ? Kind::Merged : Kind::Differs, d};
    }
    const BranchPoint& b = trace.branches[size_t(trace.steps[end].index)];
    if (b.kind != node->branch.kind || b.site != node->branch.site || b.value != node->branch.value)
      return {Kind::Differs, fmt::format("this call breaks the graph at {} ({}), the cached trace at {} ({})",
                                         b.site.str(), break_kind_name(b.kind), node->branch.site.str(),
                                         break_kind_name(node->branch.kind))};
    TreeNode* next = nullptr;
    for (auto& [key, child] : node->children)
      if (key == b.observed) next = child.get();
    if (!next) {
      int graph_number = count_graphs(entry);
      std::vector<Scalar> key = b.observed;
      node->children.emplace_back(key, build_node(trace, end + 1, compiler, graph_number));
      entry.num_values = std::max(entry.num_values, int(trace.values.size()));
      collect_written_back(trace, entry.written_back);
      entry.may_miss_midway = true;
      return {};
    }
    node = next;
    pos = end + 1;
  }
}

namespace {

int count_node_graphs(const TreeNode& n) {
  int count = int(n.segments.size());
  for (const auto& [key, child] : n.children) count += count_node_graphs(*child);
  return count;
}

// Binds a captured or constant value where a replay first reads it; "" or why the cached trace does not apply.
std::string bind_introduced(const TraceValue& tv, int id, std::vector<Tensor>& env) {
  if (tv.source == ValueSource::Constant) {
    env[size_t(id)] = tv.constant;
    return "";
  }
  std::shared_ptr<TensorImpl> impl = tv.captured.lock();
  if (!impl)
    return fmt::format("captured tensor '{}' ({}{}) was replaced by another object: the one the trace read is gone",
                       tv.name, dtype_name(tv.meta.dtype), shape_str(tv.meta.sizes));
  Tensor t(impl);
  if (std::string m = tensor_mismatch("captured tensor", tv.name, tv.meta, t); !m.empty()) return m;
  env[size_t(id)] = t;
  return "";
}

std::string run_graph_step(const TreeNode::CompiledSegment& cs, std::vector<Tensor>& env) {
  std::vector<Tensor> inputs;
  inputs.reserve(cs.segment.inputs.size());
  for (int v : cs.segment.inputs) inputs.push_back(env[size_t(v)]);
  std::vector<Tensor> outputs = cs.program(inputs);
  for (size_t k = 0; k < cs.segment.outputs.size(); ++k) env[size_t(cs.segment.outputs[k])] = outputs.at(k);
  for (const auto& [index, root] : cs.segment.writebacks) {
    Tensor& target = env[size_t(root)];
    const Tensor& result = outputs.at(size_t(index));
    if (!result.same(target) && result.data_ptr() != target.data_ptr()) {
      NoGradGuard no_grad;
      ScopedNoRecording off;
      copy_(target, result);
    }
    env[size_t(cs.segment.outputs[size_t(index)])] = target;
  }
  return "";
}

std::string run_eager_step(const EagerRegion& r, std::vector<Tensor>& env) {
  std::vector<Tensor> inputs;
  for (int v : r.inputs) inputs.push_back(env[size_t(v)]);
  std::vector<Tensor> outputs = r.run(inputs);
  if (outputs.size() != r.outputs.size())
    return fmt::format("the {} region at {} returned {} tensors, the trace saw {}", break_kind_name(r.kind),
                       r.site.str(), outputs.size(), r.outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::string what = fmt::format("output {} of the {} region at {}", k, break_kind_name(r.kind), r.site.str());
    if (std::string m = tensor_mismatch(what, "", r.output_metas[k], outputs[k]); !m.empty()) return m;
    env[size_t(r.outputs[k])] = outputs[k];
  }
  return "";
}

std::vector<Scalar> branch_key(const BranchPoint& b, const Tensor& t) {
  ScopedNoRecording off;
  std::vector<Scalar> key;
  if (b.kind == BreakKind::Elements) {
    for (double d : t.to_double_vector()) key.push_back(Scalar(d));
  } else {
    Scalar s = t.item();
    key.push_back(b.kind == BreakKind::Bool ? Scalar(s.to_bool()) : s);
  }
  return key;
}

// Runs the path; "" on reaching the exit (outputs in `out`), else why the cache missed.
std::string run_path(const CacheEntry& entry, std::vector<Tensor>& env, Flat& out) {
  const TreeNode* node = entry.root.get();
  while (true) {
    size_t next_intro = 0;
    auto bind_until = [&](size_t step) -> std::string {
      for (; next_intro < node->introduced.size() && size_t(node->introduced[next_intro].first) <= step; ++next_intro)
        if (std::string why = bind_introduced(node->introduced[next_intro].second, node->introduced_ids[next_intro], env);
            !why.empty())
          return why;
      return "";
    };
    for (size_t i = 0; i < node->steps.size(); ++i) {
      if (std::string why = bind_until(i); !why.empty()) return why;
      const Step& s = node->steps[i];
      std::string why = s.kind == Step::Kind::Graph ? run_graph_step(node->segments[size_t(s.index)], env)
                                                    : run_eager_step(node->eager[size_t(s.index)], env);
      if (!why.empty()) return why;
    }
    if (std::string why = bind_until(node->steps.size()); !why.empty()) return why;
    if (node->is_exit) {
      for (const OutputLeaf& o : node->outputs) {
        if (o.value < 0) {
          out.leaves.push_back(Leaf{false, {}, o.number});
          continue;
        }
        const Tensor& t = env[size_t(o.value)];
        out.leaves.push_back(Leaf{true, t, {}});
      }
      out.lengths = node->output_lengths;
      return "";
    }
    std::vector<Scalar> key = branch_key(node->branch, env[size_t(node->branch.value)]);
    const TreeNode* next = nullptr;
    for (const auto& [k, child] : node->children)
      if (k == key) next = child.get();
    if (!next) {
      std::vector<std::string> seen;
      for (const auto& [k, child] : node->children) seen.push_back(key_str(k));
      return fmt::format("the value read at {} ({}) is {}; the cached traces saw {}", node->branch.site.str(),
                         break_kind_name(node->branch.kind), key_str(key), fmt::join(seen, ", "));
    }
    node = next;
  }
}

}  // namespace

int count_graphs(const CacheEntry& entry) { return count_node_graphs(*entry.root); }

ReplayResult replay(const CacheEntry& entry, const Flat& args) {
  std::vector<Tensor> env(size_t(entry.num_values));
  for (const auto& [value, leaf] : entry.arguments) env[size_t(value)] = args.leaves[size_t(leaf)].tensor;
  // Tensors updated in place before a possible miss are restored on a miss (the re-trace runs from the start).
  std::vector<std::pair<int, Tensor>> saved;
  if (entry.may_miss_midway)
    for (int v : entry.written_back)
      if (env[size_t(v)].defined()) {
        ScopedNoRecording off;
        NoGradGuard no_grad;
        saved.emplace_back(v, clone(env[size_t(v)]));
      }
  ReplayResult result;
  result.miss_reason = run_path(entry, env, result.outputs);
  result.hit = result.miss_reason.empty();
  if (!result.hit) {
    ScopedNoRecording off;
    NoGradGuard no_grad;
    for (auto& [v, copy] : saved) copy_(env[size_t(v)], copy);
  }
  return result;
}

}  // namespace kiln::capture
