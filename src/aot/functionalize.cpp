// Functionalization (functionalize.h). Every value that aliases another's storage (a view, an in-place op's
// result, an op eager answers with its input) is kept as a path from its root (the value owning the storage,
// graph/storage_model.h): its parent and the view node that made it. Each root has a current functional value
// and a version. An in-place write computes the functional op on the target's current value; writing a root
// replaces its value, writing through a view scatters the new elements into the root's value (index positions
// worked out from the storage model). Reading an alias after its root changed regenerates it by replaying its
// view nodes on the root's current value. Mutated graph inputs become extra outputs (the copy-back epilogue).
#include "aot/functionalize.h"

#include <fmt/format.h>

#include "aot/expand.h"
#include "graph/interpreter.h"
#include "graph/meta_trace.h"
#include "graph/rewrite.h"
#include "graph/storage_model.h"
#include "ops/api.h"

namespace kiln::aot {

using graph::Graph;
using graph::Node;
using graph::NodeKind;
using graph::ValueId;

bool has_mutations(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.kind == NodeKind::Op && n.info().is_inplace()) return true;
  return false;
}

namespace {

class Functionalizer {
 public:
  explicit Functionalizer(const Graph& g)
      : g_(g), model_(g), map_(size_t(g.num_values()), graph::kNoValue), parent_(size_t(g.num_values()), graph::kNoValue),
        via_(size_t(g.num_values()), -1), version_(size_t(g.num_values()), 0), seen_version_(size_t(g.num_values()), 0),
        rec_(out_, "fn") {
    out_.name = g.name;
  }

  FunctionalGraph run() {
    for (ValueId in : g_.inputs()) map_[size_t(in)] = out_.add_input(g_.value(in).name, g_.value(in).meta, g_.value(in).requires_grad);
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      const Node& n = g_.nodes()[i];
      if (n.kind == NodeKind::Op && n.info().is_inplace()) write(n);
      else copy(n, int(i));
    }
    FunctionalGraph f;
    std::vector<ValueId> outs;
    for (ValueId o : g_.outputs()) outs.push_back(current(o));
    f.num_outputs = int(outs.size());
    for (size_t i = 0; i < g_.inputs().size(); ++i) {
      ValueId in = g_.inputs()[i];
      if (version_[size_t(in)] == 0) continue;
      f.mutations.push_back({int(i), int(outs.size())});
      outs.push_back(current(in));
    }
    out_.set_outputs(outs);
    f.graph = std::move(out_);
    return f;
  }

 private:
  ValueId root(ValueId v) const {
    while (parent_[size_t(v)] != graph::kNoValue) v = parent_[size_t(v)];
    return v;
  }

  // The functional value standing for `v` now: regenerated from its root when the root changed since.
  ValueId current(ValueId v) {
    ValueId p = parent_[size_t(v)];
    if (p == graph::kNoValue || seen_version_[size_t(v)] == version_[size_t(root(v))]) return map_[size_t(v)];
    ValueId from = current(p);
    if (via_[size_t(v)] < 0) {
      map_[size_t(v)] = from;
    } else {
      const Node& n = g_.nodes()[size_t(via_[size_t(v)])];
      std::vector<graph::Arg> args = n.args;
      graph::remap_args(args, [&](ValueId id) { return id == p ? from : map_[size_t(id)]; });
      map_[size_t(v)] = out_.add_op(n.op, std::move(args), {out_.fresh_name(g_.value(v).name + "_regen")})[0];
    }
    seen_version_[size_t(v)] = version_[size_t(root(v))];
    return map_[size_t(v)];
  }

  // Which tensor input of `n` the output `o` aliases (kNoValue: none; it owns its storage).
  ValueId aliased_input(const Node& n, ValueId o) const {
    if (model_.owner(o) == o || model_.owner(o) == graph::kNoValue) return graph::kNoValue;
    for (ValueId in : Graph::node_inputs(n))
      if (model_.owner(in) == model_.owner(o)) return in;
    return graph::kNoValue;
  }

  void copy(const Node& n, int index) {
    if (n.kind == NodeKind::Constant) {
      ValueId id = out_.add_constant(out_.fresh_name(g_.value(n.outputs[0]).name), n.constant);
      out_.value(id).wrapped_number = g_.value(n.outputs[0]).wrapped_number;
      map_[size_t(n.outputs[0])] = id;
      return;
    }
    std::vector<graph::Arg> args = n.args;
    graph::remap_args(args, [&](ValueId id) { return current(id); });
    std::vector<std::string> names;
    for (ValueId o : n.outputs) names.push_back(out_.fresh_name(g_.value(o).name));
    std::vector<ValueId> outs = out_.add_op(n.op, std::move(args), names);
    out_.nodes().back().loc = n.loc;
    for (size_t k = 0; k < outs.size(); ++k) {
      ValueId o = n.outputs[k];
      map_[size_t(o)] = outs[k];
      ValueId in = aliased_input(n, o);
      if (in == graph::kNoValue) continue;
      parent_[size_t(o)] = in;
      via_[size_t(o)] = n.info().is_view() ? index : -1;  // other aliasing ops (contiguous of a contiguous value) are identities
      seen_version_[size_t(o)] = version_[size_t(root(o))];
    }
  }

  // The functional form of an in-place op on `self`'s current value, with self's dtype and shape.
  Tensor functional_value(const Node& n, const OpCall& call) {
    const Tensor& self = call.tensor(0);
    Tensor r;
    switch (n.op) {
      case OpId::add_: r = add(self, call.tensor(1), call.scalar(2)); break;
      case OpId::mul_: r = mul(self, call.tensor(1)); break;
      case OpId::copy_: r = call.tensor(1); break;  // made a new dense value below
      case OpId::fill_: r = full_like(self, call.scalar(1)); break;
      case OpId::zero_: r = zeros_like(self); break;
      default: fail("aot: functionalization does not know the in-place op {} yet", n.info().name);
    }
    if (r.dtype() != self.dtype()) r = to(r, self.dtype());
    if (r.sizes() != self.sizes()) r = expand(r, self.sizes());
    // copy_'s value is a new dense tensor, never the source nor a broadcast of it: the source may be a view of a
    // graph input that a later write mutates (and the copy-back epilogue overwrites) while the copied-to tensor
    // keeps the old elements, and a broadcast source has zero strides where self is dense (a later `view` of
    // the copied-to tensor must work as it does in eager).
    if (n.op == OpId::copy_) r = clone(r);
    return r;
  }

  // Row-major positions, inside root `r`'s elements, of the elements of `v` (a value in r's storage).
  std::vector<int64_t> positions_in_root(ValueId v, ValueId r) const {
    const StorageSpan rs = model_.span(r), vs = model_.span(v);
    std::unordered_map<int64_t, int64_t> index_of;  // storage offset -> r's row-major index
    for_each_offset(rs, [&](int64_t offset, int64_t i) {
      KILN_CHECK(index_of.emplace(offset, i).second, "aot: functionalization of writes into {} (%{}): its elements "
                 "overlap in memory (an expanded input)", g_.name, g_.value(r).name);
    });
    std::vector<int64_t> out;
    for_each_offset(vs, [&](int64_t offset, int64_t) {
      auto it = index_of.find(offset);
      KILN_CHECK(it != index_of.end(), "aot: functionalization of {}: %{} reaches outside the tensor %{} it views",
                 g_.name, g_.value(v).name, g_.value(r).name);
      out.push_back(it->second);
    });
    return out;
  }

  template <class F>
  static void for_each_offset(const StorageSpan& s, F f) {
    int64_t numel = 1;
    for (int64_t d : s.sizes) numel *= d;
    std::vector<int64_t> idx(s.sizes.size(), 0);
    for (int64_t i = 0; i < numel; ++i) {
      int64_t offset = s.offset;
      for (size_t d = 0; d < idx.size(); ++d) offset += idx[d] * s.strides[d];
      f(offset, i);
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < s.sizes[d]) break;
        idx[d] = 0;
      }
    }
  }

  void write(const Node& n) {
    const ValueId self = std::get<graph::TensorArg>(n.args[0]).id;
    const ValueId r = root(self);
    rec_.set_name_hint(g_.value(n.outputs[0]).name);
    OpCall call = bind_args(n.info(), graph::node_ivalues(n, [&](ValueId id) { return rec_.bind(current(id)); }));
    ValueId new_root;
    ValueId new_self;
    {
      ScopedMetaCallRecorder on(&rec_);
      Tensor updated = functional_value(n, call);
      new_self = rec_.id_of(updated);
      if (self == r) {
        new_root = new_self;
      } else {
        std::vector<int64_t> pos = positions_in_root(self, r);
        Tensor index = Tensor::from_vector<int64_t>(pos, {int64_t(pos.size())});
        Tensor flat = reshape(rec_.bind(current(r)), {-1});
        Tensor src = reshape(contiguous(updated), {-1});
        new_root = rec_.id_of(reshape(scatter(flat, 0, index, src), g_.value(r).meta.sizes));
      }
    }
    ++version_[size_t(r)];
    map_[size_t(r)] = new_root;
    seen_version_[size_t(r)] = version_[size_t(r)];
    if (self != r) {
      map_[size_t(self)] = new_self;
      seen_version_[size_t(self)] = version_[size_t(r)];
    }
    // The op's result is `self` after the write.
    ValueId o = n.outputs[0];
    parent_[size_t(o)] = self;
    via_[size_t(o)] = -1;
    map_[size_t(o)] = new_self;
    seen_version_[size_t(o)] = version_[size_t(r)];
  }

  const Graph& g_;
  graph::StorageModel model_;
  Graph out_;
  std::vector<ValueId> map_;           // value -> its functional value (valid at seen_version_)
  std::vector<ValueId> parent_;        // aliases: the value they alias
  std::vector<int> via_;               // aliases: the view node that made them (-1: the same elements)
  std::vector<int> version_;           // roots: writes so far
  std::vector<int> seen_version_;      // aliases: the root's version map_ holds
  graph::MetaGraphRecorder rec_;
};

}  // namespace

FunctionalGraph functionalize(const Graph& g) {
  if (!has_mutations(g)) {
    FunctionalGraph f;
    f.graph = g;
    f.num_outputs = int(g.outputs().size());
    return f;
  }
  // Composite ops may answer with a view of their input (reshape, flatten): expanded, their views are visible
  // to the storage model, so writes through them reach the base as in eager.
  Graph expanded = expand_nodes(g, [](const Graph&) -> NodePick {
    return [](const Node& n) { return n.info().kind == OpKind::Composite && !graph::is_random_node(n); };
  }, "functionalization expands composite ops");
  return Functionalizer(expanded).run();
}

Graph with_copy_back(const FunctionalGraph& f) {
  Graph g = f.graph;
  std::vector<ValueId> outs = g.outputs();
  for (auto [input, output] : f.mutations) {
    ValueId dst = g.inputs()[size_t(input)];
    g.add_op(OpId::copy_, {graph::TensorArg{dst}, graph::TensorArg{outs[size_t(output)]}}, {g.fresh_name("copy_back")});
  }
  outs.resize(size_t(f.num_outputs));
  g.set_outputs(outs);
  return g;
}

}  // namespace kiln::aot
