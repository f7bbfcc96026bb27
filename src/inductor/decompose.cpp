// The decompose pass (decompose.h): one round copies the graph, replacing each Composite node by the nodes its
// decomposition records on meta tensors (DecompositionRecorder); rounds repeat until nothing changes.
#include "inductor/decompose.h"

#include <unordered_map>

#include "core/bisect.h"
#include "graph/interpreter.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln::inductor {

using graph::Graph;
using graph::Node;
using graph::ValueId;

namespace {

// Records the op calls a decomposition makes on meta tensors standing for graph values as nodes of `out`.
class DecompositionRecorder : public MetaCallRecorder {
 public:
  DecompositionRecorder(Graph& out, std::string name_hint) : out_(out), hint_(std::move(name_hint)) {}

  Tensor bind(ValueId id) {
    const graph::ValueInfo& v = out_.value(id);
    Tensor t = Tensor::meta(v.meta);
    if (v.wrapped_number) t.impl()->wrapped_number = true;
    ids_[t.impl()] = id;
    keep_.push_back(t);
    return t;
  }

  void alias(const Tensor& of, const Tensor& alias) override {
    auto it = ids_.find(of.impl());
    if (it == ids_.end()) return;  // not a graph value: id_of reports it if the decomposition uses it
    ids_[alias.impl()] = it->second;
    keep_.push_back(alias);
  }

  ValueId id_of(const Tensor& t) {
    auto it = ids_.find(t.impl());
    if (it != ids_.end()) return it->second;
    KILN_ASSERT(!t.is_meta(), "decomposition: a meta tensor that is not derived from the graph's values");
    ValueId id = out_.add_constant(out_.fresh_name(hint_ + "_c"), t);
    ids_[t.impl()] = id;
    keep_.push_back(t);
    return id;
  }

  std::vector<Tensor> record(const OpCall& call) override {
    std::vector<graph::Arg> args;
    for (const IValue& v : call.args) {
      if (v.is_none()) args.emplace_back(std::monostate{});
      else if (v.is_tensor()) args.emplace_back(graph::TensorArg{id_of(v.tensor())});
      else if (v.is_tensor_list()) {
        graph::TensorListArg l;
        for (const Tensor& t : v.tensor_list()) l.ids.push_back(t.defined() ? id_of(t) : graph::kNoValue);
        args.emplace_back(l);
      } else if (v.is_scalar()) args.emplace_back(v.scalar());
      else if (v.is_int_list()) args.emplace_back(v.int_list());
      else if (v.is_dtype()) args.emplace_back(v.dtype());
      else args.emplace_back(v.string());
    }
    std::vector<TensorMeta> metas = infer_meta(call);
    std::vector<std::string> names;
    for (size_t i = 0; i < metas.size(); ++i) names.push_back(out_.fresh_name(fmt::format("{}_d{}_", hint_, i)));
    std::vector<ValueId> outs = out_.add_op(call.op->id, std::move(args), names, metas);
    std::vector<Tensor> result;
    for (ValueId id : outs) result.push_back(bind(id));
    return result;
  }

 private:
  Graph& out_;
  std::string hint_;
  std::unordered_map<TensorImpl*, ValueId> ids_;
  std::vector<Tensor> keep_;  // keeps the impls alive, so their addresses stay unique
};

// One round: `g` copied into `out` with every composite node (not random, not refused by the bisection hook)
// replaced by its decomposition. `unrounded` (by value id) marks values computed inside an op that eager runs as
// one kernel: eager does not round those to f16/bf16, so the lowering must not either. It is carried from `g`
// (unrounded_in) to `out` (unrounded_out).
class DecompositionRound {
 public:
  DecompositionRound(const Graph& g, Graph& out, const InjectSpec& inject, const std::vector<bool>& unrounded_in,
                     std::vector<bool>& unrounded_out)
      : g_(g), out_(out), inject_(inject), unrounded_in_(unrounded_in), unrounded_out_(unrounded_out),
        map_(size_t(g.num_values()), graph::kNoValue) {}

  // Whether some node was decomposed.
  bool run() {
    out_.name = g_.name;
    for (ValueId id : g_.inputs()) {
      const graph::ValueInfo& v = g_.value(id);
      map_[size_t(id)] = out_.add_input(v.name, v.meta, v.requires_grad);
    }
    bool changed = false;
    for (const Node& n : g_.nodes()) {
      if (n.kind == graph::NodeKind::Constant) {
        map_[size_t(n.outputs[0])] = out_.add_constant(g_.value(n.outputs[0]).name, n.constant);
      } else if (wants_decomposition(n)) {
        decompose(n);
        changed = true;
      } else {
        copy(n);
      }
    }
    std::vector<ValueId> outs;
    for (ValueId o : g_.outputs()) outs.push_back(mapped(o));
    out_.set_outputs(outs);
    return changed;
  }

 private:
  const Graph& g_;
  Graph& out_;
  const InjectSpec& inject_;
  const std::vector<bool>& unrounded_in_;
  std::vector<bool>& unrounded_out_;
  std::vector<ValueId> map_;  // value of g_ -> value of out_

  ValueId mapped(ValueId id) const { return map_.at(size_t(id)); }
  void carry(ValueId from, ValueId to) {
    if (unrounded_out_.size() <= size_t(to)) unrounded_out_.resize(size_t(to) + 1, false);
    unrounded_out_[size_t(to)] = size_t(from) < unrounded_in_.size() && unrounded_in_[size_t(from)];
  }

  bool wants_decomposition(const Node& n) const {
    const OpInfo& op = n.info();
    return op.kind == OpKind::Composite && op.decomp && !graph::is_random_node(n) &&
           should_run("inductor", "decomposition",
                      [&] { return fmt::format("{} = {}", g_.value(n.outputs[0]).name, op.name); });
  }

  // The node's decomposition in out_: its results mapped, the values it made marked unrounded when eager runs
  // the op as one kernel (its results are rounded like any op's), every new node at the composite's line.
  void decompose(const Node& n) {
    const OpInfo& op = n.info();
    DecompositionRecorder rec(out_, g_.value(n.outputs[0]).name);
    const ValueId first_new = out_.num_values();
    const size_t first_node = out_.nodes().size();
    std::vector<Tensor> results = trace(n, rec);
    map_results(n, rec, results);
    unrounded_out_.resize(size_t(out_.num_values()), false);
    for (ValueId v = first_new; v < out_.num_values(); ++v) unrounded_out_[size_t(v)] = op.kernel != nullptr;
    for (ValueId o : n.outputs) {
      ValueId id = map_[size_t(o)];
      if (id >= first_new) carry(o, id);
    }
    for (size_t i = first_node; i < out_.nodes().size(); ++i) out_.nodes()[i].loc = n.loc;  // errors name the line
  }

  // Runs the op's decomposition on meta tensors bound like an eager call (numbers in Tensor slots become
  // wrapped-number tensors, which the recorder turns into constants), so it sees exactly what eager's
  // dispatcher gives it; with KILN_INJECT's `decomposition` bug for this op, a wrong decomposition.
  std::vector<Tensor> trace(const Node& n, DecompositionRecorder& rec) {
    const OpInfo& op = n.info();
    OpCall call = bind_args(op, graph::node_ivalues(n, [&](ValueId id) { return rec.bind(mapped(id)); }));
    const bool inject = !inject_.empty() && inject_.kind_for(std::string(op.name)) == "decomposition";
    const bool variance = op.id == OpId::var || op.id == OpId::std;
    if (inject && variance) call.args[2] = IValue(Scalar(int64_t(0)));  // the biased estimate
    ScopedMetaCallRecorder on(&rec);
    std::vector<Tensor> results = op.decomp(call);
    if (inject && !variance) results[0] = add(results[0], 1);
    return results;
  }

  // Maps each output of `n` to the value of its result, converted to the graph's dtype where the decomposition
  // gives another (the op's own inference is the contract: e.g. lerp's decomposition promotes a bf16 0-d case
  // to f32).
  void map_results(const Node& n, DecompositionRecorder& rec, std::vector<Tensor>& results) {
    const OpInfo& op = n.info();
    const std::string& name0 = g_.value(n.outputs[0]).name;
    KILN_ASSERT(results.size() == n.outputs.size(), "decomposition of {} returned {} values for {} outputs", op.name,
                results.size(), n.outputs.size());
    for (size_t i = 0; i < results.size(); ++i) {
      const TensorMeta& want = g_.value(n.outputs[i]).meta;
      if (results[i].dtype() != want.dtype && results[i].sizes() == want.sizes) {
        ScopedMetaCallRecorder on(&rec);
        results[i] = to(results[i], want.dtype);
      }
      ValueId id = rec.id_of(results[i]);
      const TensorMeta& got = out_.value(id).meta;
      KILN_ASSERT(got.sizes == want.sizes && got.dtype == want.dtype,
                  "decomposition of {} (%{}) gives {}{} where the graph has {}{}", op.name, name0,
                  dtype_name(got.dtype), shape_str(got.sizes), dtype_name(want.dtype), shape_str(want.sizes));
      map_[size_t(n.outputs[i])] = id;
    }
  }

  // `n` copied with its arguments mapped; its outputs keep their names and their unrounded marks.
  void copy(const Node& n) {
    graph::Node c = n;
    for (graph::Arg& a : c.args) {
      if (auto* t = std::get_if<graph::TensorArg>(&a)) t->id = mapped(t->id);
      if (auto* l = std::get_if<graph::TensorListArg>(&a))
        for (ValueId& id : l->ids)
          if (id != graph::kNoValue) id = mapped(id);
    }
    std::vector<std::string> names;
    std::vector<TensorMeta> metas;
    for (ValueId o : n.outputs) {
      names.push_back(g_.value(o).name);
      metas.push_back(g_.value(o).meta);
    }
    std::vector<ValueId> outs = out_.add_op(n.op, c.args, names, metas);
    out_.nodes().back().loc = n.loc;
    for (size_t i = 0; i < outs.size(); ++i) {
      map_[size_t(n.outputs[i])] = outs[i];
      carry(n.outputs[i], outs[i]);
    }
  }
};

}  // namespace

Graph decompose_composites(const Graph& g, const CompileContext& ctx, std::vector<bool>* unrounded) {
  Graph cur = g;
  std::vector<bool> flags;
  for (int round = 0; round < 8; ++round) {
    Graph next;
    std::vector<bool> next_flags;
    bool changed = DecompositionRound(cur, next, ctx.inject, flags, next_flags).run();
    cur = std::move(next);
    flags = std::move(next_flags);
    if (!changed) break;
  }
  if (unrounded) *unrounded = std::move(flags);
  return cur;
}

}  // namespace kiln::inductor
