// The pass manager (run_pipeline) and the cleanup passes: dead-code elimination, common-subexpression
// elimination and constant folding. The rules each pass follows are documented in passes.h; they rewrite in
// place with the rewrite helper's in-place form (rewrite.h: remap_args, erase_nodes), keeping value ids.
#include "graph/passes.h"

#include <algorithm>

#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "core/debug_dir.h"
#include "core/files.h"
#include "core/bisect.h"
#include "core/log.h"
#include "core/options.h"
#include "graph/interpreter.h"
#include "graph/rewrite.h"
#include "graph/storage_model.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln::graph {
namespace {

bool is_inplace_node(const Node& n) { return n.kind == NodeKind::Op && n.info().is_inplace(); }

// Values whose storage an in-place node writes, through the value itself or any alias of it (a view, the
// in-place result, `contiguous` of a contiguous tensor: storage_model.h), as eager shares storages.
std::vector<bool> mutated_values(const Graph& g) {
  std::vector<bool> mutated(size_t(g.num_values()), false);
  bool any = false;
  for (const Node& n : g.nodes()) any |= is_inplace_node(n);
  if (!any) return mutated;
  const StorageModel storage(g);
  for (ValueId id = 0; id < g.num_values(); ++id) mutated[size_t(id)] = storage.written_in_place(id);
  return mutated;
}

// A byte string identifying a node's computation (op, arguments, input values, output metas), or a
// constant's value, for CSE.
class KeyWriter {
 public:
  void u64(uint64_t v) { key_.append(reinterpret_cast<const char*>(&v), 8); }
  void str(std::string_view s) {
    u64(s.size());
    key_.append(s);
  }
  void meta(const TensorMeta& m) {
    u64(uint64_t(m.dtype));
    u64(m.sizes.size());
    for (int64_t s : m.sizes) u64(uint64_t(s));
  }
  std::string take() { return std::move(key_); }

 private:
  std::string key_;
};

std::string node_key(const Graph& g, const Node& n) {
  KeyWriter w;
  if (n.kind == NodeKind::Constant) {
    w.str("constant");
    w.meta(n.constant.meta());
    w.u64(g.value(n.outputs[0]).wrapped_number);
    size_t bytes = size_t(n.constant.numel() * dtype_size(n.constant.dtype()));
    w.str(std::string_view(static_cast<const char*>(n.constant.data_ptr()), bytes));
    return w.take();
  }
  w.u64(uint64_t(n.op));
  for (const Arg& a : n.args) {
    w.u64(a.index());
    std::visit([&](const auto& v) {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<V, TensorArg>) w.u64(uint64_t(v.id));
      else if constexpr (std::is_same_v<V, TensorListArg>) {
        w.u64(v.ids.size());
        for (ValueId id : v.ids) w.u64(uint64_t(id));
      } else if constexpr (std::is_same_v<V, Scalar>) {
        w.u64(uint64_t(v.kind()));
        w.str(v.str());
      } else if constexpr (std::is_same_v<V, IntList>) {
        w.u64(v.size());
        for (int64_t x : v) w.u64(uint64_t(x));
      } else if constexpr (std::is_same_v<V, DType>) w.u64(uint64_t(v));
      else if constexpr (std::is_same_v<V, std::string>) w.str(v);
    }, a);
  }
  for (ValueId id : n.outputs) w.meta(g.value(id).meta);
  return w.take();
}

bool is_unrounded(UnroundedValues unrounded, ValueId v) {
  return unrounded && size_t(v) < unrounded->size() && (*unrounded)[size_t(v)];
}

std::string node_summary(const Graph& g, const Node& n) {
  std::string name = n.outputs.empty() ? "?" : g.value(n.outputs[0]).name;
  return n.kind == NodeKind::Constant ? fmt::format("%{} = constant", name)
                                      : fmt::format("%{} = {}", name, n.info().name);
}

}  // namespace

bool eliminate_dead_code(Graph& g) {
  std::vector<int> uses(size_t(g.num_values()), 0);
  for (const Node& n : g.nodes())
    for (ValueId id : Graph::node_inputs(n)) ++uses[size_t(id)];
  for (ValueId id : g.outputs()) ++uses[size_t(id)];
  const auto& nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  bool random_after = false;  // a kept random node follows the current one
  bool changed = false;
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    bool random = draws_from_generator(n);  // philox_rand is pure: removable when unused
    bool unused = true;
    for (ValueId id : n.outputs) unused &= uses[size_t(id)] == 0;
    if (unused && !is_inplace_node(n) && !(random && random_after)) {
      dead[i] = changed = true;
      KILN_LOG(LogChannel::Passes, "dce: removing unused {}", node_summary(g, n));
      for (ValueId id : Graph::node_inputs(n)) --uses[size_t(id)];
      continue;
    }
    random_after |= random;
  }
  if (changed) erase_nodes(g, dead);
  return changed;
}

bool eliminate_common_subexpressions(Graph& g) { return eliminate_common_subexpressions(g, nullptr); }

bool eliminate_common_subexpressions(Graph& g, UnroundedValues unrounded) {
  const std::vector<bool> mutated = mutated_values(g);
  std::vector<ValueId> remap(size_t(g.num_values()));
  for (ValueId id = 0; id < g.num_values(); ++id) remap[size_t(id)] = id;
  std::unordered_map<std::string, size_t> seen;  // key -> index of the first node computing it
  std::vector<Node>& nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  bool changed = false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    remap_args(n.args, [&](ValueId id) { return remap[size_t(id)]; });
    if (is_inplace_node(n)) {
      seen.clear();  // nothing computed before the mutation may stand in for something computed after it
      continue;
    }
    if (draws_from_generator(n)) continue;  // two draws differ; two philox_rand calls with one state do not
    // Two results written in place later are two storages in eager: merged, one would see the other's writes.
    if (std::any_of(n.outputs.begin(), n.outputs.end(), [&](ValueId o) { return mutated[size_t(o)]; })) continue;
    std::string key = node_key(g, n);
    for (ValueId o : n.outputs) key += is_unrounded(unrounded, o) ? 'u' : 'r';  // never merge the two kinds
    auto [it, inserted] = seen.try_emplace(std::move(key), i);
    if (inserted) continue;
    const Node& first = nodes[it->second];
    KILN_LOG(LogChannel::Passes, "cse: {} is {}", node_summary(g, n), node_summary(g, first));
    for (size_t k = 0; k < n.outputs.size(); ++k) remap[size_t(n.outputs[k])] = first.outputs[k];
    dead[i] = changed = true;
  }
  if (!changed) return false;
  std::vector<ValueId> outs = g.outputs();
  for (ValueId& id : outs) id = remap[size_t(id)];
  g.set_outputs(outs);
  erase_nodes(g, dead);
  return true;
}

bool fold_constants(Graph& g, int64_t max_elements, UnroundedValues unrounded) {
  std::vector<bool> mutated = mutated_values(g);
  std::vector<Tensor> env(size_t(g.num_values()));  // constant values by id
  NoGradGuard no_grad;
  bool changed = false;
  for (Node& n : g.nodes()) {
    if (n.kind == NodeKind::Constant) {
      env[size_t(n.outputs[0])] = n.constant;
      continue;
    }
    if (n.outputs.size() != 1 || is_random_node(n) || is_inplace_node(n) || n.info().is_view()) continue;
    ValueInfo& out = g.value(n.outputs[0]);
    if (shape_numel(out.meta.sizes) > max_elements || mutated[size_t(n.outputs[0])]) continue;
    if (is_unrounded(unrounded, n.outputs[0]) && is_low_precision(out.meta.dtype)) continue;  // eager would round it
    bool all_constant = true;
    for (ValueId id : Graph::node_inputs(n)) all_constant &= env[size_t(id)].defined() && !mutated[size_t(id)];
    if (!all_constant) continue;
    Tensor result;
    try {
      result = dispatch(bind_args(n.info(), node_ivalues(g, n, env))).at(0);
    } catch (const Error& e) {
      KILN_LOG(LogChannel::Passes, "constant_folding: not folding {}: its kernel fails: {}", node_summary(g, n), e.what());
      continue;
    }
    if (result.dtype() != out.meta.dtype || result.sizes() != out.meta.sizes) continue;
    KILN_LOG(LogChannel::Passes, "constant_folding: {} -> {}", node_summary(g, n), result.str());
    Node c;
    c.kind = NodeKind::Constant;
    c.constant = history_free_alias(result.is_contiguous() ? result : contiguous(result));
    c.outputs = n.outputs;
    c.loc = n.loc;
    out.meta = c.constant.meta();
    out.wrapped_number = false;
    env[size_t(n.outputs[0])] = c.constant;
    n = std::move(c);
    changed = true;
  }
  return changed;
}

bool run_pipeline(Graph& g, const Pipeline& pipeline, std::string_view stage, const std::filesystem::path& dump_to) {
  const bool verify = opt_bool(Opt::Verify);
  std::string dump_dir;
  if (!opt_string(Opt::DebugDir).empty()) {
    const std::filesystem::path dir = dump_to.empty() ? claim_debug_dir(stage, g.name) : dump_to;
    create_output_directory(dir.string());
    dump_dir = dir.string();
    save_graph(g, (dir / "00_input.kir").string());
  }
  if (verify) verify_graph(g, fmt::format("<{}: input graph>", stage));
  KILN_LOG(LogChannel::Graph, "{}: graph {} enters the passes:\n{}", stage, g.name, print_graph(g));
  bool any_changed = false;
  for (size_t i = 0; i < pipeline.size(); ++i) {
    const Pass& pass = pipeline[i];
    if (!should_run("passes", pass.name, [&] { return fmt::format("graph {} in {} ({} nodes)", g.name, stage, g.nodes().size()); })) {
      KILN_LOG(LogChannel::Passes, "{}: {} skipped by the bisection hook", stage, pass.name);
      continue;
    }
    size_t before = g.nodes().size();
    bool changed = pass.run(g);
    KILN_LOG(LogChannel::Passes, "{}: {} {} ({} -> {} nodes)", stage, pass.name, changed ? "changed the graph" : "no change",
             before, g.nodes().size());
    if (changed) KILN_LOG(LogChannel::Graph, "after {}:{}\n{}", stage, pass.name, print_graph(g));
    if (changed && verify) {
      try {
        verify_graph(g, fmt::format("<{}: after {}>", stage, pass.name));
      } catch (const Error& e) {
        internal_fail("pass {} (stage {}) produced an invalid graph: {}", pass.name, stage, e.what());
      }
    }
    if (!dump_dir.empty())
      save_graph(g, (std::filesystem::path(dump_dir) / fmt::format("{:02}_{}.kir", i + 1, pass.name)).string());
    any_changed |= changed;
  }
  KILN_LOG(LogChannel::Graph, "{}: graph {} leaves the passes{}:\n{}", stage, g.name,
           any_changed ? "" : " unchanged", print_graph(g));
  return any_changed;
}

Pass dce_pass() { return {"dce", eliminate_dead_code}; }
Pass cse_pass(UnroundedValues unrounded) {
  return {"cse", [unrounded](Graph& g) { return eliminate_common_subexpressions(g, unrounded); }};
}
Pass constant_folding_pass(int64_t max_elements, UnroundedValues unrounded) {
  return {"constant_folding", [max_elements, unrounded](Graph& g) { return fold_constants(g, max_elements, unrounded); }};
}
Pipeline cleanup_pipeline(UnroundedValues unrounded) {
  return {constant_folding_pass(kDefaultFoldLimit, unrounded), cse_pass(unrounded), dce_pass()};
}

}  // namespace kiln::graph
