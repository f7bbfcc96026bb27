// Lowering of graph nodes to loop IR. One function per op kind: pointwise ops build a scalar body over their
// broadcast operands (with the eager kernels' dtype rules: floating math computes in f32 for f16/bf16 inputs),
// reductions become Reduction nodes, views rewrite indices, creation ops are bodies over the index, and the
// rest run their eager kernel as Extern nodes. Decisions and their reasons go to KILN_LOGS=lowering.
#include "inductor/lowering.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/bisect.h"
#include "core/log.h"
#include "graph/rewrite.h"
#include "graph/interpreter.h"
#include "ops/common.h"
#include "backends/cpu/jit.h"

namespace kiln::inductor {

using graph::Graph;
using graph::Node;
using graph::NodeKind;
using graph::ValueId;

// ---------------------------------------------------------------- decomposition

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

// `unrounded` (by value id) marks values computed inside an op that eager runs as one kernel: eager does not
// round those to f16/bf16, so the lowering must not either. It is carried from `g` to `out`.
struct UnroundedFlags {
  const std::vector<bool>& in;
  std::vector<bool>& out;
  void carry(ValueId from, ValueId to) {
    if (out.size() <= size_t(to)) out.resize(size_t(to) + 1, false);
    out[size_t(to)] = size_t(from) < in.size() && in[size_t(from)];
  }
};

bool should_decompose(const Graph& g, const Node& n) {
  if (n.kind != NodeKind::Op) return false;
  const OpInfo& op = n.info();
  const std::string& name0 = g.value(n.outputs[0]).name;
  return op.kind == OpKind::Composite && op.decomp && !graph::is_random_node(n) &&
         should_run("inductor", "decomposition", [&] { return fmt::format("{} = {}", name0, op.name); });
}

// Appends the nodes of n's decomposition to c.out() and maps n's outputs to its results.
void decompose_node(const Graph& g, const Node& n, graph::GraphCloner& c, const InjectSpec& inject,
                    UnroundedFlags& unrounded) {
  const OpInfo& op = n.info();
  const std::string& name0 = g.value(n.outputs[0]).name;
  Graph& out = c.out();
  DecompositionRecorder rec(out, name0);
  const ValueId first_new = out.num_values();
  const size_t first_node = out.nodes().size();
  // Bound like an eager call (numbers in Tensor slots become wrapped-number tensors, which the recorder
  // turns into constants), so the decomposition sees exactly what eager's dispatcher gives it.
  OpCall call = bind_args(op, graph::node_ivalues(n, [&](ValueId id) { return rec.bind(c[id]); }));
  std::string kind = inject.empty() ? "" : inject.kind_for(std::string(op.name));
  if (kind == "decomposition" && (op.id == OpId::var || op.id == OpId::std)) call.args[2] = IValue(Scalar(int64_t(0)));
  std::vector<Tensor> results;
  {
    ScopedMetaCallRecorder on(&rec);
    results = op.decomp(call);
  }
  if (kind == "decomposition" && op.id != OpId::var && op.id != OpId::std) {
    ScopedMetaCallRecorder on(&rec);
    results[0] = add(results[0], 1);
  }
  KILN_ASSERT(results.size() == n.outputs.size(), "decomposition of {} returned {} values for {} outputs", op.name,
             results.size(), n.outputs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const TensorMeta& want = g.value(n.outputs[i]).meta;
    if (results[i].dtype() != want.dtype && results[i].sizes() == want.sizes) {
      // The op's own inference is the contract (e.g. lerp's decomposition promotes a bf16 0-d case to
      // f32); convert rather than change the graph's dtype.
      ScopedMetaCallRecorder on(&rec);
      results[i] = to(results[i], want.dtype);
    }
    ValueId id = rec.id_of(results[i]);
    KILN_ASSERT(out.value(id).meta.sizes == want.sizes && out.value(id).meta.dtype == want.dtype,
               "decomposition of {} (%{}) gives {}{} where the graph has {}{}", op.name, name0,
               dtype_name(out.value(id).meta.dtype), shape_str(out.value(id).meta.sizes), dtype_name(want.dtype),
               shape_str(want.sizes));
    c.map(n.outputs[i], id);
  }
  // Values the decomposition made are internal to the op: unrounded when eager runs the op as one kernel
  // (its results are rounded like any op's).
  unrounded.out.resize(size_t(out.num_values()), false);
  for (ValueId v = first_new; v < out.num_values(); ++v) unrounded.out[size_t(v)] = op.kernel != nullptr;
  for (ValueId o : n.outputs)
    if (c[o] >= first_new) unrounded.carry(o, c[o]);
  for (size_t i = first_node; i < out.nodes().size(); ++i) out.nodes()[i].loc = n.loc;  // errors name the line
}

// One round: every composite node the bisection hook allows replaced by its decomposition (the rewrite
// helper's clone, graph/rewrite.h); returns whether any was.
bool decompose_once(const Graph& g, Graph& out, const InjectSpec& inject, const std::vector<bool>& unrounded_in,
                    std::vector<bool>& unrounded_out) {
  bool changed = false;
  UnroundedFlags unrounded{unrounded_in, unrounded_out};
  out = graph::clone_graph(g, [&](const Node& n, graph::GraphCloner& c) {
    if (n.kind == NodeKind::Constant) return false;
    if (should_decompose(g, n)) {
      decompose_node(g, n, c, inject, unrounded);
      changed = true;
      return true;
    }
    std::vector<ValueId> outs = c.copy_node(n);
    for (size_t i = 0; i < outs.size(); ++i) unrounded.carry(n.outputs[i], outs[i]);
    return true;
  });
  return changed;
}

}  // namespace

Graph decompose_composites(const Graph& g, const InjectSpec& inject, std::vector<bool>* unrounded) {
  Graph cur = g;
  std::vector<bool> flags;
  for (int round = 0; round < 8; ++round) {
    Graph next;
    std::vector<bool> next_flags;
    bool changed = decompose_once(cur, next, inject, flags, next_flags);
    cur = std::move(next);
    flags = std::move(next_flags);
    if (!changed) break;
  }
  if (unrounded) *unrounded = std::move(flags);
  return cur;
}

// ---------------------------------------------------------------- lowering

namespace {

// Inline a pending value into each user unless it has several users and costs more than this many scalar
// ops (then one store and a load per user is cheaper than recomputing), or its body exceeds kMaxInlineCost.
constexpr int kReuseInlineCost = 24;
constexpr int kMaxInlineCost = 4000;

using Loader = std::function<SExpr(const std::vector<Index>&)>;

struct LValue {
  Shape sizes;
  DType dtype = DType::F32;
  Loader load;
  bool pending = false;  // an unrealised pointwise value: users inline its body
  int cost = 1;          // estimated scalar ops of its body (a buffer load costs 1)
  // A realised value: a view of a buffer.
  int buffer = -1;
  Shape strides;
  int64_t offset = 0;
};

std::vector<Index> broadcast_index(const std::vector<Index>& idx, const Shape& in_sizes) {
  std::vector<Index> in(in_sizes.size());
  size_t lead = idx.size() - in_sizes.size();
  for (size_t k = 0; k < in_sizes.size(); ++k) in[k] = in_sizes[k] == 1 ? ix_const(0) : idx[lead + k];
  return in;
}

bool is_unsigned_int(DType dt) { return dt == DType::U8; }

class Lowerer {
 public:
  Lowerer(const Graph& g, const graph::StorageModel& storage, const InjectSpec& inject, const std::vector<bool>& unrounded)
      : g_(g), storage_(storage), inject_(inject), unrounded_(unrounded), users_(g.users()) {}

  LoweredGraph run();

 private:
  const Graph& g_;
  const graph::StorageModel& storage_;
  const InjectSpec& inject_;
  const std::vector<bool>& unrounded_;
  std::vector<std::vector<int>> users_;
  LoweredGraph out_;
  std::vector<LValue> vals_;
  std::vector<bool> is_output_;

  void decide(const std::string& what) {
    KILN_LOG(LogChannel::Lowering, "{}", what);
    out_.decisions.push_back(what);
  }
  const std::string& name(ValueId v) const { return g_.value(v).name; }

  int new_buffer(const std::string& name, DType dt, const Shape& sizes) {
    Buffer b;
    b.kind = Buffer::Kind::Intermediate;
    b.name = name;
    b.dtype = dt;
    b.sizes = sizes;
    b.strides = contiguous_strides(sizes);
    out_.buffers.push_back(b);
    return int(out_.buffers.size()) - 1;
  }

  static LValue buffer_value(int b, DType dt, Shape sizes, Shape strides, int64_t offset) {
    LValue v;
    v.sizes = std::move(sizes);
    v.dtype = dt;
    v.buffer = b;
    v.strides = std::move(strides);
    v.offset = offset;
    Shape st = v.strides;
    int64_t off = offset;
    v.load = [b, dt, st, off](const std::vector<Index>& idx) { return s_load(b, ix_strided(idx, st, off), dt); };
    return v;
  }

  LValue pending_value(Shape sizes, DType dt, Loader load, int cost = 2) {
    LValue v;
    v.cost = cost;
    v.sizes = std::move(sizes);
    v.dtype = dt;
    v.load = std::move(load);
    v.pending = true;
    return v;
  }

  // Makes `v` a buffer (a Pointwise node storing its body), unless it already is one.
  void realize(ValueId v, const std::string& reason) {
    LValue& lv = vals_[size_t(v)];
    if (!lv.pending) return;
    int b = new_buffer(name(v), lv.dtype, lv.sizes);
    LoopNode node;
    node.kind = LoopNode::Kind::Pointwise;
    node.buffer = b;
    node.sizes = lv.sizes;
    Loader load = lv.load;
    node.body = [load](const std::vector<Index>& idx, const std::vector<Index>&) { return load(idx); };
    node.origin = name(v);
    out_.nodes.push_back(std::move(node));
    decide(fmt::format("realize %{}: {}", name(v), reason));
    lv = buffer_value(b, lv.dtype, lv.sizes, contiguous_strides(lv.sizes), 0);
  }

  BufferView view_of(ValueId v, const std::string& reason) {
    realize(v, reason);
    const LValue& lv = vals_[size_t(v)];
    return BufferView{lv.buffer, lv.sizes, lv.strides, lv.offset};
  }

  // Where eager keeps `v`: a view of the buffer of the value owning its storage (realised first), at eager's
  // offset and strides (storage_model.h). Every owner's buffer is laid out as eager's storage (the result's
  // strides, contiguous for every op that allocates); should one not be, the graph is refused with a
  // CompileError rather than writing or viewing a copy.
  BufferView eager_view(ValueId v) {
    const ValueId owner = storage_.owner(v);
    realize(owner, fmt::format("%{} is addressed in its storage", name(v)));
    const LValue& base = vals_[size_t(owner)];
    const TensorMeta& m = g_.value(owner).meta;
    if (base.pending || base.offset != 0 || (base.strides != m.strides && shape_numel(m.sizes) > 1))
      throw CompileError(fmt::format("graph {}: the inductor cannot address %{} in eager's storage: %{}, which owns "
                                     "it, has strides {} in eager but {} in the compiled program; run the graph "
                                     "with the eager backend", g_.name, name(v), name(owner), shape_str(m.strides),
                                     shape_str(base.strides)));
    const StorageSpan s = storage_.span(v);
    return BufferView{base.buffer, s.sizes, s.strides, s.offset};
  }

  // After an in-place write into the storage of `written`: every value lowered so far that lives in that
  // storage reads it from now on (as eager's aliases see the write), not a copy made before it.
  void rebind_aliases(ValueId written) {
    const ValueId owner = storage_.owner(written);
    for (ValueId v = 0; v < ValueId(vals_.size()); ++v) {
      if (!vals_[size_t(v)].load || storage_.owner(v) != owner) continue;
      const BufferView at = eager_view(v);
      vals_[size_t(v)] = buffer_value(at.buffer, g_.value(v).meta.dtype, at.sizes, at.strides, at.offset);
    }
  }

  // Called when a pointwise value is defined: realise it now, or leave it for its users to inline.
  void settle(ValueId v) {
    LValue& lv = vals_[size_t(v)];
    if (!lv.pending) return;
    if (is_output_[size_t(v)]) return realize(v, "graph output");
    int cost = lv.cost;  // an estimate: evaluating each body here would make long chains quadratic
    int nusers = int(users_[size_t(v)].size());
    // A small body read by several nodes is evaluated once to weigh its ops: one libm call (softmax's
    // exp(x - max), read by the sum and the division) outweighs a store and reloads, which stay in cache when
    // the users fuse into the producer's kernel (the scheduler then keeps the buffer kernel-local).
    if (nusers > 1 && cost <= kReuseInlineCost) cost = s_cost(lv.load(ix_vars(lv.sizes)));
    if (nusers > 1 && cost > kReuseInlineCost)
      return realize(v, fmt::format("read by {} nodes and costs {} scalar ops (> {}; a libm call counts {}): a store "
                                    "and {} loads are cheaper than recomputing it in each", nusers, cost,
                                    kReuseInlineCost, kLibmCallCost, nusers));
    if (cost > kMaxInlineCost) return realize(v, fmt::format("its body has {} scalar ops (> {})", cost, kMaxInlineCost));
    if (!should_run("inductor", "inline", [&] { return fmt::format("%{}", name(v)); }))
      return realize(v, "inlining refused by the bisection hook");
    if (nusers > 1) decide(fmt::format("inline %{} into its {} users: {} scalar ops", name(v), nusers, cost));
  }

  // Flushes every pending value into a buffer (before a node that mutates memory).
  void realize_all_pending(const std::string& reason) {
    for (size_t v = 0; v < vals_.size(); ++v)
      if (vals_[v].pending && vals_[v].load) realize(ValueId(v), reason);
  }

  SExpr load_broadcast(ValueId v, const std::vector<Index>& idx) const {
    const LValue& lv = vals_[size_t(v)];
    return lv.load(broadcast_index(idx, lv.sizes));
  }

  void lower_node(const Node& n);
  void lower_extern(const Node& n, const std::string& reason);
  bool lower_pointwise(const Node& n, const OpCall& mc, std::string& why);
  bool lower_reduction(const Node& n, const OpCall& mc, std::string& why);
  bool softmax_stabilising_max(const Node& amax) const;
  bool lower_view(const Node& n, const OpCall& mc, std::string& why);
  bool lower_creation(const Node& n, const OpCall& mc, std::string& why);
  bool lower_data(const Node& n, const OpCall& mc, std::string& why);
};

LoweredGraph Lowerer::run() {
  vals_.resize(size_t(g_.num_values()));
  is_output_.assign(size_t(g_.num_values()), false);
  for (ValueId o : g_.outputs()) is_output_[size_t(o)] = true;
  for (size_t i = 0; i < g_.inputs().size(); ++i) {
    ValueId id = g_.inputs()[i];
    const graph::ValueInfo& v = g_.value(id);
    Buffer b;
    b.kind = Buffer::Kind::Input;
    b.name = v.name;
    b.dtype = v.meta.dtype;
    b.sizes = v.meta.sizes;
    b.strides = v.meta.strides;
    b.input_index = int(i);
    out_.buffers.push_back(b);
    vals_[size_t(id)] = buffer_value(int(out_.buffers.size()) - 1, b.dtype, b.sizes, b.strides, 0);
  }
  out_.num_inputs = int(g_.inputs().size());
  for (const Node& n : g_.nodes()) {
    if (n.kind == NodeKind::Constant) {
      ValueId id = n.outputs[0];
      const Tensor& c = n.constant;
      if (c.numel() == 1) {  // a number: folded into the bodies that use it
        Scalar s = c.item();
        DType dt = c.dtype();
        SExpr k = is_floating(dt) ? s_const(s.to_double(), dt) : s_iconst(s.to_int(), dt);
        vals_[size_t(id)] = pending_value(c.sizes(), dt, [k](const std::vector<Index>&) { return k; });
        if (is_output_[size_t(id)]) realize(id, "graph output");
        continue;
      }
      Buffer b;
      b.kind = Buffer::Kind::Constant;
      b.name = name(id);
      b.dtype = c.dtype();
      b.sizes = c.sizes();
      b.strides = contiguous_strides(c.sizes());
      b.constant = c;
      out_.buffers.push_back(b);
      vals_[size_t(id)] = buffer_value(int(out_.buffers.size()) - 1, b.dtype, b.sizes, b.strides, 0);
      continue;
    }
    lower_node(n);
  }
  for (ValueId o : g_.outputs()) out_.outputs.push_back(view_of(o, "graph output"));
  for (const BufferView& v : out_.outputs) out_.buffers[size_t(v.buffer)].is_output = true;
  return std::move(out_);
}

void Lowerer::lower_node(const Node& n) {
  const OpInfo& op = n.info();
  std::string why;
  OpCall mc = graph::bind_node_meta(g_, n);
  bool allowed = should_run("inductor", "lowering", [&] { return fmt::format("%{} = {}", name(n.outputs[0]), op.name); });
  if (!allowed) return lower_extern(n, "lowering refused by the bisection hook");
  bool done = false;
  bool number_in_tensor_slot = false;
  for (size_t i = 0; i < n.args.size(); ++i)
    number_in_tensor_slot |= op.schema.args[i].type == ArgType::Tensor && std::holds_alternative<Scalar>(n.args[i]);
  if (number_in_tensor_slot && op.kind != OpKind::Pointwise)
    return lower_extern(n, "a number where the op expects a tensor (only pointwise lowerings take numbers)");
  switch (op.kind) {
    case OpKind::Pointwise: done = lower_pointwise(n, mc, why); break;
    case OpKind::Reduction: done = lower_reduction(n, mc, why); break;
    case OpKind::View: done = lower_view(n, mc, why); break;
    case OpKind::Creation: done = lower_creation(n, mc, why); break;
    case OpKind::Data: done = lower_data(n, mc, why); break;
    case OpKind::Extern: why = op.id == OpId::mm || op.id == OpId::bmm || op.id == OpId::addmm
                                   ? "matrix product: runs BLAS (extern kernel)"
                                   : "convolution/pooling: not lowered, runs the eager kernel"; break;
    case OpKind::Random: why = "random op: runs its eager kernel so compiled and eager draw the same Philox stream"; break;
    case OpKind::InPlace: why = "in-place op: runs its eager kernel on the buffer it mutates"; break;
    case OpKind::Composite: why = "composite op whose decomposition was not applied"; break;
    case OpKind::Backward: why = "backward helper: runs its eager kernel"; break;
  }
  if (!done) lower_extern(n, why);
}

void Lowerer::lower_extern(const Node& n, const std::string& reason) {
  const OpInfo& op = n.info();
  decide(fmt::format("extern %{} = {}: {}", name(n.outputs[0]), op.name, reason));
  if (op.is_inplace()) realize_all_pending(fmt::format("%{} = {} mutates memory", name(n.outputs[0]), op.name));
  LoopNode node;
  node.kind = LoopNode::Kind::Extern;
  node.graph_node = int(&n - g_.nodes().data());
  node.reason = reason;
  node.origin = name(n.outputs[0]);
  // One view per tensor argument slot, in argument order (lists flattened); buffer -1 for None.
  std::vector<ValueId> ids;
  for (const graph::Arg& a : n.args) {
    if (auto* t = std::get_if<graph::TensorArg>(&a)) ids.push_back(t->id);
    if (auto* l = std::get_if<graph::TensorListArg>(&a)) ids.insert(ids.end(), l->ids.begin(), l->ids.end());
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const ValueId id = ids[i];
    // Constants are handed to the eager kernel as they are (compile.cpp), keeping number semantics.
    bool constant = id != graph::kNoValue && g_.value(id).producer >= 0 &&
                    g_.nodes()[size_t(g_.value(id).producer)].kind == NodeKind::Constant;
    if (id == graph::kNoValue || constant) {
      node.extern_inputs.push_back(BufferView{});
      continue;
    }
    // What an in-place op writes and what as_strided views are eager's storage itself, not a copy of the value.
    const bool in_storage = i == 0 && std::holds_alternative<graph::TensorArg>(n.args[0]) &&
                            (op.is_inplace() || op.id == OpId::as_strided);
    node.extern_inputs.push_back(in_storage ? eager_view(id) : view_of(id, fmt::format("input of extern {}", op.name)));
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    ValueId o = n.outputs[i];
    const TensorMeta& m = g_.value(o).meta;
    if (op.is_inplace() && i == 0 && std::holds_alternative<graph::TensorArg>(n.args[0])) {  // the mutated argument
      vals_[size_t(o)] = vals_[size_t(std::get<graph::TensorArg>(n.args[0]).id)];
      node.extern_outputs.push_back(-1);
      continue;
    }
    int b = new_buffer(name(o), m.dtype, m.sizes);
    node.extern_outputs.push_back(b);
    vals_[size_t(o)] = buffer_value(b, m.dtype, m.sizes, contiguous_strides(m.sizes), 0);
  }
  out_.nodes.push_back(std::move(node));
  if (op.is_inplace() && std::holds_alternative<graph::TensorArg>(n.args[0])) rebind_aliases(n.outputs[0]);
}


// ---------------------------------------------------------------- pointwise

// The injected bug of KILN_INJECT=<op>:<kind> applied to a result `r` (x0: the first operand).
SExpr inject_bug(const std::string& kind, int entry, OpId op, SExpr r, const SExpr& x0) {
  if (kind == "accuracy") {
    SExpr base = op == OpId::relu ? s_cast(x0, r->dtype) : r;  // relu computes x + 1
    return s_binary(SOp::Add, base, s_const(1, base->dtype));
  }
  if (kind == "compile_error") return s_wrap(SOp::Invalid, r);
  if (kind == "runtime_error") return s_fail(r, runtime::kStatusInjectedBase + entry);
  if (kind == "crash") return s_wrap(SOp::Trap, r);
  return r;
}

namespace pw {

SExpr c(double v, DType dt) { return s_const(v, dt); }
SExpr add(const SExpr& a, const SExpr& b) { return s_binary(SOp::Add, a, b); }
SExpr sub(const SExpr& a, const SExpr& b) { return s_binary(SOp::Sub, a, b); }
SExpr mul(const SExpr& a, const SExpr& b) { return s_binary(SOp::Mul, a, b); }
SExpr div(const SExpr& a, const SExpr& b) { return s_binary(SOp::Div, a, b); }
SExpr un(SOp op, const SExpr& a) { return s_unary(op, a); }
SExpr nonzero(const SExpr& x) { return x->dtype == DType::Bool ? x : s_binary(SOp::Ne, x, s_const(0, x->dtype)); }

// 1 / (1 + exp(-x))
SExpr sigmoid(const SExpr& x) { return div(c(1, x->dtype), add(c(1, x->dtype), un(SOp::Exp, un(SOp::Neg, x)))); }

}  // namespace pw

bool Lowerer::lower_pointwise(const Node& n, const OpCall& mc, std::string& why) {
  using namespace pw;
  const OpId id = n.op;
  const DType out_dt = g_.value(n.outputs[0]).meta.dtype;
  const DType cdt = compute_dtype_of(out_dt);
  // The operands: every Tensor slot, holding a graph value or a number (a wrapped number, like eager).
  std::vector<Loader> operands;
  int cost = 4;
  const Schema& schema = n.info().schema;
  for (size_t i = 0; i < n.args.size(); ++i) {
    if (schema.args[i].type != ArgType::Tensor) continue;
    if (auto* t = std::get_if<graph::TensorArg>(&n.args[i])) {
      LValue lv = vals_[size_t(t->id)];
      cost += lv.cost;
      operands.push_back([lv](const std::vector<Index>& idx) { return lv.load(broadcast_index(idx, lv.sizes)); });
    } else if (auto* sc = std::get_if<Scalar>(&n.args[i])) {
      Scalar v = *sc;
      SExpr k = v.is_float() ? s_const(v.to_double(), DType::F64) : v.is_bool() ? s_iconst(v.to_bool(), DType::Bool)
                                                                                : s_iconst(v.to_int(), DType::I64);
      operands.push_back([k](const std::vector<Index>&) { return k; });
    }
  }
  // The promoted dtype of the two operands of a binary op (torch.result_type), in its compute form.
  DType common = operands.size() >= 2 ? compute_dtype_of(result_type({mc.tensor(0), mc.tensor(1)})) : cdt;
  using Fn = std::function<SExpr(const std::vector<SExpr>&)>;
  Fn f;
  // Unary ops compute in the result's compute dtype (ints become f32 for float-valued ops, as in eager).
  auto float_unary = [&](std::function<SExpr(const SExpr&)> g) {
    return Fn([g, cdt](const std::vector<SExpr>& x) { return g(s_cast(x[0], cdt)); });
  };
  auto& same_unary = float_unary;
  auto binary = [&](DType in_dt, std::function<SExpr(const SExpr&, const SExpr&)> g) {
    return Fn([g, in_dt](const std::vector<SExpr>& x) { return g(s_cast(x[0], in_dt), s_cast(x[1], in_dt)); });
  };
  const bool fl = is_floating(cdt);
  switch (id) {
    case OpId::exp: f = float_unary([](auto x) { return un(SOp::Exp, x); }); break;
    case OpId::exp2: f = float_unary([](auto x) { return un(SOp::Exp2, x); }); break;
    case OpId::log: f = float_unary([](auto x) { return un(SOp::Log, x); }); break;
    case OpId::log2: f = float_unary([](auto x) { return un(SOp::Log2, x); }); break;
    case OpId::log1p: f = float_unary([](auto x) { return un(SOp::Log1p, x); }); break;
    case OpId::expm1: f = float_unary([](auto x) { return un(SOp::Expm1, x); }); break;
    case OpId::sqrt: f = float_unary([](auto x) { return un(SOp::Sqrt, x); }); break;
    case OpId::rsqrt: f = float_unary([](auto x) { return div(c(1, x->dtype), un(SOp::Sqrt, x)); }); break;
    case OpId::sin: f = float_unary([](auto x) { return un(SOp::Sin, x); }); break;
    case OpId::cos: f = float_unary([](auto x) { return un(SOp::Cos, x); }); break;
    case OpId::tan: f = float_unary([](auto x) { return un(SOp::Tan, x); }); break;
    case OpId::tanh: f = float_unary([](auto x) { return un(SOp::Tanh, x); }); break;
    case OpId::asin: f = float_unary([](auto x) { return un(SOp::Asin, x); }); break;
    case OpId::acos: f = float_unary([](auto x) { return un(SOp::Acos, x); }); break;
    case OpId::atan: f = float_unary([](auto x) { return un(SOp::Atan, x); }); break;
    case OpId::sinh: f = float_unary([](auto x) { return un(SOp::Sinh, x); }); break;
    case OpId::cosh: f = float_unary([](auto x) { return un(SOp::Cosh, x); }); break;
    case OpId::erf: f = float_unary([](auto x) { return un(SOp::Erf, x); }); break;
    case OpId::sigmoid: f = float_unary([](auto x) { return sigmoid(x); }); break;
    case OpId::reciprocal: f = float_unary([](auto x) { return div(c(1, x->dtype), x); }); break;
    case OpId::silu:
      f = float_unary([](auto x) { return div(x, add(c(1, x->dtype), un(SOp::Exp, un(SOp::Neg, x)))); });
      break;
    case OpId::gelu:
      if (mc.str(1) == "tanh") {
        f = float_unary([](auto x) {
          DType d = x->dtype;
          SExpr inner = mul(c(0.797884560802865355880, d), add(x, mul(c(0.044715, d), mul(mul(x, x), x))));
          return mul(mul(c(0.5, d), x), add(c(1, d), un(SOp::Tanh, inner)));
        });
      } else {
        f = float_unary([](auto x) {
          DType d = x->dtype;
          return mul(mul(x, c(0.5, d)), add(c(1, d), un(SOp::Erf, mul(x, c(M_SQRT1_2, d)))));
        });
      }
      break;
    case OpId::neg: f = same_unary([](auto x) { return un(SOp::Neg, x); }); break;
    case OpId::abs:
      f = same_unary([](auto x) { return is_unsigned_int(x->dtype) ? x : un(SOp::Abs, x); });
      break;
    case OpId::relu:
      f = same_unary([](auto x) {
        if (is_unsigned_int(x->dtype)) return x;
        return s_where(s_binary(SOp::Lt, x, c(0, x->dtype)), c(0, x->dtype), x);
      });
      break;
    case OpId::sign:
      f = same_unary([](auto x) {
        DType d = x->dtype;
        if (d == DType::Bool) return x;
        if (is_unsigned_int(d)) return s_cast(nonzero(x), d);
        return sub(s_cast(s_binary(SOp::Lt, c(0, d), x), d), s_cast(s_binary(SOp::Lt, x, c(0, d)), d));
      });
      break;
    case OpId::floor: case OpId::ceil: case OpId::trunc: case OpId::round: {
      SOp rop = id == OpId::floor ? SOp::Floor : id == OpId::ceil ? SOp::Ceil : id == OpId::trunc ? SOp::Trunc : SOp::RoundEven;
      int64_t decimals = id == OpId::round ? mc.int_(1) : 0;
      f = same_unary([rop, decimals](auto x) {
        if (!is_floating(x->dtype)) return x;
        if (decimals == 0) return un(rop, x);
        double scale = std::pow(10.0, double(decimals < 0 ? -decimals : decimals));
        SExpr k = c(scale, x->dtype);
        return decimals < 0 ? mul(un(rop, div(x, k)), k) : div(un(rop, mul(x, k)), k);
      });
      break;
    }
    case OpId::logical_not: f = [](const std::vector<SExpr>& x) { return un(SOp::Not, nonzero(x[0])); }; break;
    case OpId::isnan:
      f = [](const std::vector<SExpr>& x) { return is_floating(x[0]->dtype) ? un(SOp::IsNan, x[0]) : s_iconst(0, DType::Bool); };
      break;
    case OpId::isinf:
      f = [](const std::vector<SExpr>& x) { return is_floating(x[0]->dtype) ? un(SOp::IsInf, x[0]) : s_iconst(0, DType::Bool); };
      break;
    case OpId::add: case OpId::sub: {
      Scalar alpha = mc.scalar(2);
      bool subtract = id == OpId::sub;
      double ad = subtract ? -alpha.to_double() : alpha.to_double();
      int64_t ai = subtract ? -alpha.to_int() : alpha.to_int();
      f = binary(common, [ad, ai](const SExpr& x, const SExpr& y) {
        DType d = x->dtype;
        if (d == DType::Bool) return ad == 1.0 ? s_binary(SOp::Or, x, y) : s_binary(SOp::Or, x, s_binary(SOp::And, y, s_iconst(ai != 0, d)));
        if (ad == 1.0) return add(x, y);
        if (ad == -1.0) return sub(x, y);
        if (is_floating(d)) return s_mul_add(c(ad, d), y, x);  // rounded once, as eager and PyTorch
        return add(x, mul(s_iconst(ai, d), y));
      });
      break;
    }
    case OpId::mul:
      f = binary(common, [](const SExpr& x, const SExpr& y) {
        return x->dtype == DType::Bool ? s_binary(SOp::And, x, y) : mul(x, y);
      });
      break;
    case OpId::div: {
      std::optional<std::string> mode = mc.opt_str(2);
      if (!mode) {
        f = binary(cdt, [](const SExpr& x, const SExpr& y) { return div(x, y); });
      } else if (fl) {
        bool floor_mode = *mode == "floor";
        f = binary(cdt, [floor_mode](const SExpr& x, const SExpr& y) {
          if (floor_mode) return s_helper(x->dtype == DType::F64 ? "kiln_rt_div_floor_f64" : "kiln_rt_div_floor_f32", x->dtype, {x, y});
          return un(SOp::Trunc, div(x, y));
        });
      } else {
        std::string helper = *mode == "floor" ? "kiln_rt_idiv_floor" : "kiln_rt_idiv_trunc";
        f = binary(cdt, [helper](const SExpr& x, const SExpr& y) {
          if (x->dtype == DType::Bool) return x;
          return s_cast(s_helper(helper, DType::I64, {s_cast(x, DType::I64), s_cast(y, DType::I64)}), x->dtype);
        });
      }
      break;
    }
    case OpId::remainder:
      f = binary(cdt, [](const SExpr& x, const SExpr& y) {
        DType d = x->dtype;
        if (is_floating(d)) return s_helper(d == DType::F64 ? "kiln_rt_remainder_f64" : "kiln_rt_remainder_f32", d, {x, y});
        return s_cast(s_helper("kiln_rt_iremainder", DType::I64, {s_cast(x, DType::I64), s_cast(y, DType::I64)}), d);
      });
      break;
    case OpId::pow: {
      const Tensor& base = mc.tensor(0);
      const Tensor& expo = mc.tensor(1);
      if (expo.is_wrapped_number() || base.is_wrapped_number()) {
        why = "pow with a number operand has eager special cases (exponent 0, 1, 1/2, 2, ...) that are not lowered";
        return false;
      }
      f = binary(cdt, [](const SExpr& x, const SExpr& y) {
        if (is_floating(x->dtype)) return s_binary(SOp::Pow, x, y);
        if (x->dtype == DType::Bool) return x;
        return s_cast(s_helper("kiln_rt_ipow", DType::I64, {s_cast(x, DType::I64), s_cast(y, DType::I64)}), x->dtype);
      });
      break;
    }
    case OpId::maximum: case OpId::minimum: {
      bool is_max = id == OpId::maximum;
      f = binary(cdt, [is_max](const SExpr& x, const SExpr& y) {
        if (x->dtype == DType::Bool) return s_binary(is_max ? SOp::Or : SOp::And, x, y);
        if (is_floating(x->dtype)) return s_binary(is_max ? SOp::Max : SOp::Min, x, y);
        return is_max ? s_where(s_binary(SOp::Lt, x, y), y, x) : s_where(s_binary(SOp::Lt, y, x), y, x);
      });
      break;
    }
    case OpId::atan2: f = binary(cdt, [](const SExpr& x, const SExpr& y) { return s_binary(SOp::Atan2, x, y); }); break;
    case OpId::eq: case OpId::ne: case OpId::lt: case OpId::le: case OpId::gt: case OpId::ge: {
      SOp cmp = id == OpId::eq ? SOp::Eq : id == OpId::ne ? SOp::Ne : id == OpId::lt ? SOp::Lt
                : id == OpId::le ? SOp::Le : id == OpId::gt ? SOp::Gt : SOp::Ge;
      f = binary(common, [cmp](const SExpr& x, const SExpr& y) { return s_binary(cmp, x, y); });
      break;
    }
    case OpId::logical_and: case OpId::logical_or: case OpId::logical_xor: {
      SOp lop = id == OpId::logical_and ? SOp::And : id == OpId::logical_or ? SOp::Or : SOp::Xor;
      f = [lop](const std::vector<SExpr>& x) { return s_binary(lop, nonzero(x[0]), nonzero(x[1])); };
      break;
    }
    case OpId::bitwise_and: case OpId::bitwise_or: case OpId::bitwise_xor: {
      SOp bop = id == OpId::bitwise_and ? SOp::And : id == OpId::bitwise_or ? SOp::Or : SOp::Xor;
      f = binary(cdt, [bop](const SExpr& x, const SExpr& y) { return s_binary(bop, x, y); });
      break;
    }
    case OpId::where:
      f = [cdt](const std::vector<SExpr>& x) { return s_where(nonzero(x[0]), s_cast(x[1], cdt), s_cast(x[2], cdt)); };
      break;
    case OpId::clamp: {
      std::optional<Scalar> lo = mc.opt_scalar(1), hi = mc.opt_scalar(2);
      // Bounds as the dtype sees them (f16/bf16 round them to their own precision first, as eager does).
      auto bound = [&](const Scalar& s) {
        if (!is_floating(cdt)) return s_iconst(s.to_int(), cdt);
        Tensor t = to(Tensor::scalar(s, DType::F64), out_dt);
        return s_const(t.item().to_double(), cdt);
      };
      std::optional<SExpr> lo_e, hi_e;
      if (lo) lo_e = bound(*lo);
      if (hi) hi_e = bound(*hi);
      bool nan_bound = (lo && std::isnan(lo->to_double())) || (hi && std::isnan(hi->to_double()));
      if (nan_bound && lo && hi) {
        f = [cdt](const std::vector<SExpr>&) { return s_const(NAN, cdt); };
        break;
      }
      f = [cdt, lo_e, hi_e](const std::vector<SExpr>& x) {
        SExpr r = s_cast(x[0], cdt);
        if (lo_e) r = s_where(s_binary(SOp::Lt, r, *lo_e), *lo_e, r);
        if (hi_e) r = s_where(s_binary(SOp::Gt, r, *hi_e), *hi_e, r);
        return r;
      };
      break;
    }
    case OpId::to: f = [cdt](const std::vector<SExpr>& x) { return s_cast(x[0], cdt); }; break;
    default:
      why = fmt::format("no pointwise lowering for {}", n.info().name);
      return false;
  }
  const Shape out_sizes = g_.value(n.outputs[0]).meta.sizes;
  std::string kind = inject_.empty() ? "" : inject_.kind_for(std::string(n.info().name));
  if (!kind.empty()) decide(fmt::format("inject {} into %{} = {}", kind, name(n.outputs[0]), n.info().name));
  int entry = kind.empty() ? -1 : inject_.index_of(std::string(n.info().name));
  // Each op with an f16/bf16 result rounds it where eager does (PyTorch Inductor's emulate_precision_casts):
  // keeping f32 between fused ops is no more accurate in general and makes compiled and eager disagree.
  // Values inside an op eager runs as one f32 kernel (lerp's decomposition, ...) stay unrounded, as there.
  ValueId out_id = n.outputs[0];
  bool round = is_low_precision(out_dt) && !(size_t(out_id) < unrounded_.size() && unrounded_[size_t(out_id)]);
  Loader body = [f, operands, out_dt, kind, entry, id, round](const std::vector<Index>& idx) {
    std::vector<SExpr> xs;
    for (const Loader& l : operands) xs.push_back(l(idx));
    SExpr r = round ? s_round_to(f(xs), out_dt) : s_cast(f(xs), compute_dtype_of(out_dt));
    return kind.empty() ? r : inject_bug(kind, entry, id, r, xs.empty() ? r : xs[0]);
  };
  vals_[size_t(n.outputs[0])] = pending_value(out_sizes, out_dt, body, cost);
  settle(n.outputs[0]);
  return true;
}

// ---------------------------------------------------------------- reductions

// Whether float amax node `amax` (m = amax(x, dims, keepdim)) is the stabilising max of a softmax or log_softmax,
// and so may ignore NaN: a row holding a NaN then gives NaN in every value computed from m, whatever m is,
// because each goes through the row's sum of exp (NaN in, NaN out), and a row without NaN gets the exact max.
// The pattern (what ops/nn.cpp's decompositions build, or a user writes by hand), with m, d and e used nowhere else
// and not graph outputs:
//   d = sub(x, m);  e = exp(d);  s = sum(e, dims, keepdim);  then e's other use is div(e, s) (softmax), or d's
//   other use is sub(d, log(s)) (log_softmax). s and what is computed from it may be used anywhere.
// (A row of zeros of both signs may then get -0 for its max where the exact max is +0: x - m and exp come out
// the same; only log_softmax's single-element rows can differ, in the sign of a zero.)
bool Lowerer::softmax_stabilising_max(const Node& amax) const {
  const auto& nodes = g_.nodes();
  auto arg = [&](const Node& n, size_t i) {
    const auto* t = i < n.args.size() ? std::get_if<graph::TensorArg>(&n.args[i]) : nullptr;
    return t ? t->id : graph::kNoValue;
  };
  // The nodes reading v (each once), or nothing when v is a graph output.
  auto users = [&](ValueId v) {
    std::vector<int> u = users_[size_t(v)];
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    return is_output_[size_t(v)] ? std::vector<int>{} : u;
  };
  auto is_unit = [](const OpCall& c, int i) { return c.scalar(i).to_double() == 1.0; };
  const ValueId x = arg(amax, 0), m = amax.outputs[0];
  const OpCall mc = graph::bind_node_meta(g_, amax);
  if (!mc.bool_(2)) return false;
  const std::vector<int64_t> dims = reduction_dims(mc.ints(1), mc.tensor(0).dim(), "amax");
  const std::vector<int> m_users = users(m);
  if (m_users.size() != 1) return false;
  const Node& sub = nodes[size_t(m_users[0])];
  if (sub.op != OpId::sub || arg(sub, 0) != x || arg(sub, 1) != m || !is_unit(graph::bind_node_meta(g_, sub), 2))
    return false;
  const ValueId d = sub.outputs[0];
  // v's users: one `first` op and at most one `second` op reading v as its first argument, nothing else.
  auto split_users = [&](ValueId v, OpId first, OpId second, int& first_node, int& second_node) {
    first_node = second_node = -1;
    for (int u : users(v)) {
      const Node& un = nodes[size_t(u)];
      if (un.op == first && first_node < 0) first_node = u;
      else if (un.op == second && arg(un, 0) == v && second_node < 0) second_node = u;
      else return false;
    }
    return first_node >= 0;
  };
  // d's users: exp, and for log_softmax the final sub (checked once s is known); e's: the sum, and for softmax
  // the division.
  int exp_node, final_sub, sum_node, div_node;
  if (!split_users(d, OpId::exp, OpId::sub, exp_node, final_sub)) return false;
  const ValueId e = nodes[size_t(exp_node)].outputs[0];
  if (!split_users(e, OpId::sum, OpId::div, sum_node, div_node)) return false;
  if ((div_node >= 0) == (final_sub >= 0)) return false;  // exactly one of softmax, log_softmax
  const Node& sum = nodes[size_t(sum_node)];
  const OpCall sc = graph::bind_node_meta(g_, sum);
  if (!sc.bool_(2) || sc.opt_dtype(3) || reduction_dims(sc.opt_ints(1), sc.tensor(0).dim(), "sum") != dims) return false;
  const ValueId s = sum.outputs[0];
  if (div_node >= 0) {
    const Node& div = nodes[size_t(div_node)];
    return arg(div, 1) == s && !graph::bind_node_meta(g_, div).opt_str(2);
  }
  const ValueId l = arg(nodes[size_t(final_sub)], 1);
  const Node* log = nullptr;
  for (int u : users_[size_t(s)])
    if (nodes[size_t(u)].op == OpId::log && nodes[size_t(u)].outputs[0] == l) log = &nodes[size_t(u)];
  return log && is_unit(graph::bind_node_meta(g_, nodes[size_t(final_sub)]), 2);
}

bool Lowerer::lower_reduction(const Node& n, const OpCall& mc, std::string& why) {
  const OpId id = n.op;
  const Tensor& x = mc.tensor(0);
  const int64_t ndim = x.dim();
  const DType out_dt = g_.value(n.outputs[0]).meta.dtype;
  std::vector<int64_t> dims;
  ReduceOp rop;
  DType acc_dt;
  switch (id) {
    case OpId::sum: case OpId::mean:
      dims = reduction_dims(mc.opt_ints(1), ndim, n.info().name);
      rop = ReduceOp::Sum;
      acc_dt = compute_dtype_of(out_dt);
      break;
    case OpId::prod: {
      std::optional<int64_t> d = mc.opt_int(1);
      dims = d ? reduction_dims(IntList{*d}, ndim, "prod") : reduction_dims(std::nullopt, ndim, "prod");
      rop = ReduceOp::Prod;
      acc_dt = compute_dtype_of(out_dt);
      break;
    }
    case OpId::amax: case OpId::amin:
      dims = reduction_dims(mc.ints(1), ndim, n.info().name);
      rop = id == OpId::amax ? ReduceOp::Max : ReduceOp::Min;
      acc_dt = compute_dtype_of(out_dt);
      break;
    case OpId::argmax: case OpId::argmin: {
      std::optional<int64_t> d = mc.opt_int(1);
      dims = d ? reduction_dims(IntList{*d}, ndim, n.info().name) : reduction_dims(std::nullopt, ndim, n.info().name);
      rop = id == OpId::argmax ? ReduceOp::ArgMax : ReduceOp::ArgMin;
      acc_dt = compute_dtype_of(x.dtype());
      if (x.numel() == 0) {
        why = "arg-reduction of an empty tensor (the eager kernel reports the error)";
        return false;
      }
      break;
    }
    case OpId::any: case OpId::all:  // an explicit empty dim list reduces nothing (as eager)
      dims = reduction_dims(mc.opt_ints(1), ndim, n.info().name, !mc.opt_ints(1).has_value());
      rop = id == OpId::any ? ReduceOp::Any : ReduceOp::All;
      acc_dt = DType::Bool;
      break;
    default:
      why = fmt::format("no reduction lowering for {}", n.info().name);
      return false;
  }
  if (ndim == 0) dims.clear();
  std::vector<bool> reduced(size_t(ndim), false);
  for (int64_t d : dims) reduced[size_t(d)] = true;
  Shape kept, rsizes;
  for (int64_t d = 0; d < ndim; ++d) (reduced[size_t(d)] ? rsizes : kept).push_back(x.sizes()[size_t(d)]);
  const LValue in = vals_[size_t(std::get<graph::TensorArg>(n.args[0]).id)];
  const Shape out_sizes = g_.value(n.outputs[0]).meta.sizes;
  int b = new_buffer(name(n.outputs[0]), out_dt, out_sizes);
  LoopNode node;
  node.kind = LoopNode::Kind::Reduction;
  node.buffer = b;
  node.sizes = kept;
  node.rsizes = rsizes;
  node.reduce = rop;
  node.origin = name(n.outputs[0]);
  if (id == OpId::amax && is_floating(out_dt) && softmax_stabilising_max(n) &&
      should_run("inductor", "nan_insensitive_max", [&] { return fmt::format("%{}", name(n.outputs[0])); })) {
    node.nan_insensitive = true;
    decide(fmt::format("%{} = amax: NaN-insensitive (the stabilising max of a softmax: a NaN in a row reaches every "
                       "output through the row's sum)", name(n.outputs[0])));
  }
  node.body = [in, reduced, acc_dt, rop](const std::vector<Index>& idx, const std::vector<Index>& ridx) {
    std::vector<Index> full;
    size_t k = 0, r = 0;
    for (bool red : reduced) full.push_back(red ? ridx[r++] : idx[k++]);
    SExpr v = in.load(full);
    if (rop == ReduceOp::Any || rop == ReduceOp::All) return pw::nonzero(v);
    return s_cast(v, acc_dt);
  };
  if (id == OpId::mean) {
    double count = double(shape_numel(rsizes));
    node.finalize = [count](const SExpr& acc) { return pw::div(acc, s_const(count, acc->dtype)); };
  }
  out_.nodes.push_back(std::move(node));
  vals_[size_t(n.outputs[0])] = buffer_value(b, out_dt, out_sizes, contiguous_strides(out_sizes), 0);
  return true;
}

// ---------------------------------------------------------------- views

bool Lowerer::lower_view(const Node& n, const OpCall& mc, std::string& why) {
  const ValueId src = std::get<graph::TensorArg>(n.args[0]).id;
  const Shape in_sizes = vals_[size_t(src)].sizes;
  const Shape out_sizes = g_.value(n.outputs[0]).meta.sizes;
  const int64_t ndim = int64_t(in_sizes.size());
  using Map = std::function<std::vector<Index>(const std::vector<Index>&)>;
  Map map;
  switch (n.op) {
    case OpId::view: {
      Shape in = in_sizes, out = out_sizes;
      map = [in, out](const std::vector<Index>& idx) { return ix_unravel(ix_linear(idx, out), in); };
      break;
    }
    case OpId::permute: {
      std::vector<int64_t> dims;
      for (int64_t d : mc.ints(1)) dims.push_back(wrap_dim(d, ndim, "permute"));
      map = [dims](const std::vector<Index>& idx) {
        std::vector<Index> in(dims.size());
        for (size_t k = 0; k < dims.size(); ++k) in[size_t(dims[k])] = idx[k];
        return in;
      };
      break;
    }
    case OpId::transpose: {
      int64_t d0 = ndim == 0 ? 0 : wrap_dim(mc.int_(1), ndim, "transpose");
      int64_t d1 = ndim == 0 ? 0 : wrap_dim(mc.int_(2), ndim, "transpose");
      map = [d0, d1](std::vector<Index> idx) {
        if (!idx.empty()) std::swap(idx[size_t(d0)], idx[size_t(d1)]);
        return idx;
      };
      break;
    }
    case OpId::expand: {
      Shape in = in_sizes;
      map = [in](const std::vector<Index>& idx) { return broadcast_index(idx, in); };
      break;
    }
    case OpId::slice: {
      int64_t dim = wrap_dim(mc.int_(1), ndim, "slice");
      int64_t size = in_sizes[size_t(dim)];
      int64_t start = mc.opt_int(2).value_or(0);
      if (start < 0) start += size;
      start = std::clamp<int64_t>(start, 0, size);
      int64_t step = mc.int_(4);
      map = [dim, start, step](std::vector<Index> idx) {
        idx[size_t(dim)] = ix_add(ix_scale(idx[size_t(dim)], step), ix_const(start));
        return idx;
      };
      break;
    }
    case OpId::select: {
      int64_t dim = wrap_dim(mc.int_(1), ndim, "select");
      int64_t index = mc.int_(2);
      if (index < 0) index += in_sizes[size_t(dim)];
      map = [dim, index](std::vector<Index> idx) {
        idx.insert(idx.begin() + dim, ix_const(index));
        return idx;
      };
      break;
    }
    case OpId::squeeze: case OpId::unsqueeze: {
      // Both only add or drop size-1 dims: map the non-1 dims in order, size-1 input dims read index 0.
      Shape in = in_sizes, out = out_sizes;
      map = [in, out](const std::vector<Index>& idx) {
        std::vector<Index> kept;
        for (size_t k = 0; k < out.size(); ++k)
          if (out[k] != 1) kept.push_back(idx[k]);
        std::vector<Index> r;
        size_t j = 0;
        for (int64_t s : in) r.push_back(s == 1 ? ix_const(0) : kept[j++]);
        return r;
      };
      break;
    }
    case OpId::diagonal: {
      int64_t offset = mc.int_(1);
      int64_t d1 = wrap_dim(mc.int_(2), ndim, "diagonal"), d2 = wrap_dim(mc.int_(3), ndim, "diagonal");
      map = [offset, d1, d2, ndim](const std::vector<Index>& idx) {
        std::vector<Index> src_idx(static_cast<size_t>(ndim));
        size_t k = 0;
        for (int64_t d = 0; d < ndim; ++d)
          if (d != d1 && d != d2) src_idx[size_t(d)] = idx[k++];
        const Index& i = idx.back();
        src_idx[size_t(d1)] = ix_add(i, ix_const(offset < 0 ? -offset : 0));
        src_idx[size_t(d2)] = ix_add(i, ix_const(offset > 0 ? offset : 0));
        return src_idx;
      };
      break;
    }
    case OpId::as_strided: {
      // Addressed in eager's storage of the source (storage_model.h; StorageModel::check has kept it inside).
      const bool explicit_offset = mc.opt_int(3).has_value();
      const BufferView at = eager_view(src);
      if (explicit_offset && out_.buffers[size_t(at.buffer)].kind == Buffer::Kind::Input) {
        why = "as_strided with an explicit storage_offset into a graph input (its offset in its storage is only "
              "known at run time)";
        return false;
      }
      const int64_t off = explicit_offset ? *mc.opt_int(3) : at.offset;
      vals_[size_t(n.outputs[0])] = buffer_value(at.buffer, vals_[size_t(src)].dtype, out_sizes, mc.ints(2), off);
      return true;
    }
    default:
      why = fmt::format("no view lowering for {}", n.info().name);
      return false;
  }
  LValue& lv = vals_[size_t(src)];
  LValue result;
  if (!lv.pending) {
    // A view of a buffer stays a strided view when the map is affine: find strides by probing each dim.
    std::vector<Index> vars = ix_vars(out_sizes);
    Index flat = ix_strided(map(vars), lv.strides, lv.offset);
    bool affine = true;
    Shape strides(out_sizes.size(), 0);
    for (const auto& [atom, k] : flat.terms)
      if (atom->kind != IndexAtom::Kind::Var) affine = false;
    if (affine) {
      for (size_t d = 0; d < vars.size(); ++d)
        if (!vars[d].is_constant()) strides[d] = ix_coefficient(flat, vars[d]);
      result = buffer_value(lv.buffer, lv.dtype, out_sizes, strides, flat.constant);
    } else {
      Loader inner = lv.load;
      result = pending_value(out_sizes, lv.dtype, [inner, map](const std::vector<Index>& idx) { return inner(map(idx)); }, lv.cost + 1);
    }
  } else {
    Loader inner = lv.load;
    result = pending_value(out_sizes, lv.dtype, [inner, map](const std::vector<Index>& idx) { return inner(map(idx)); }, lv.cost + 1);
  }
  vals_[size_t(n.outputs[0])] = result;
  settle(n.outputs[0]);
  return true;
}

// ---------------------------------------------------------------- creation

bool Lowerer::lower_creation(const Node& n, const OpCall& mc, std::string& why) {
  const TensorMeta& m = g_.value(n.outputs[0]).meta;
  const DType dt = m.dtype, cdt = compute_dtype_of(dt);
  auto value_const = [&](const Scalar& s) {
    Tensor t = to(Tensor::scalar(s, s.is_float() ? DType::F64 : s.is_bool() ? DType::Bool : DType::I64), dt);
    Scalar v = t.item();
    return is_floating(cdt) ? s_const(v.to_double(), cdt) : s_iconst(v.to_int(), cdt);
  };
  Loader body;
  switch (n.op) {
    case OpId::full: case OpId::full_like: {
      SExpr k = value_const(mc.scalar(1));
      body = [k](const std::vector<Index>&) { return k; };
      break;
    }
    case OpId::zeros: case OpId::zeros_like: case OpId::ones: case OpId::ones_like: {
      SExpr k = s_const(n.op == OpId::ones || n.op == OpId::ones_like ? 1 : 0, cdt);
      body = [k](const std::vector<Index>&) { return k; };
      break;
    }
    case OpId::eye: {
      body = [cdt](const std::vector<Index>& idx) {
        return s_cast(s_binary(SOp::Eq, s_index_value(idx[0]), s_index_value(idx[1])), cdt);
      };
      break;
    }
    case OpId::arange: {
      if (is_integral(dt, true)) {
        int64_t start = mc.scalar(0).to_int(), step = mc.scalar(2).to_int();
        body = [start, step, cdt](const std::vector<Index>& idx) {
          return s_cast(s_index_value(ix_add(ix_scale(idx[0], step), ix_const(start))), cdt);
        };
      } else {
        double start = mc.scalar(0).to_double(), step = mc.scalar(2).to_double();
        body = [start, step, cdt](const std::vector<Index>& idx) {
          SExpr i = s_cast(s_index_value(idx[0]), DType::F64);
          return s_cast(pw::add(s_const(start, DType::F64), pw::mul(i, s_const(step, DType::F64))), cdt);
        };
      }
      break;
    }
    default:
      why = fmt::format("no creation lowering for {}", n.info().name);
      return false;
  }
  vals_[size_t(n.outputs[0])] = pending_value(m.sizes, dt, body);
  settle(n.outputs[0]);
  return true;
}

// ---------------------------------------------------------------- data movement

bool Lowerer::lower_data(const Node& n, const OpCall& mc, std::string& why) {
  const TensorMeta& m = g_.value(n.outputs[0]).meta;
  switch (n.op) {
    case OpId::contiguous: case OpId::clone: {
      LValue in = vals_[size_t(std::get<graph::TensorArg>(n.args[0]).id)];
      vals_[size_t(n.outputs[0])] = pending_value(m.sizes, m.dtype, in.load, in.cost);
      settle(n.outputs[0]);
      return true;
    }
    case OpId::flip: {
      LValue in = vals_[size_t(std::get<graph::TensorArg>(n.args[0]).id)];
      std::vector<bool> flipped(std::max<size_t>(m.sizes.size(), 1), false);  // a 0-d tensor accepts dim 0
      for (int64_t d : mc.ints(1)) flipped[size_t(wrap_dim(d, int64_t(m.sizes.size()), "flip"))] = true;
      Shape sizes = m.sizes;
      vals_[size_t(n.outputs[0])] = pending_value(m.sizes, m.dtype, [in, flipped, sizes](std::vector<Index> idx) {
        for (size_t d = 0; d < idx.size(); ++d)
          if (flipped[d]) idx[d] = ix_add(ix_const(sizes[d] - 1), ix_scale(idx[d], -1));
        return in.load(idx);
      });
      settle(n.outputs[0]);
      return true;
    }
    case OpId::tril: case OpId::triu: {
      LValue in = vals_[size_t(std::get<graph::TensorArg>(n.args[0]).id)];
      int64_t diag = mc.int_(1);
      bool lower = n.op == OpId::tril;
      DType cdt = compute_dtype_of(m.dtype);
      vals_[size_t(n.outputs[0])] = pending_value(m.sizes, m.dtype, [in, diag, lower, cdt](const std::vector<Index>& idx) {
        size_t r = idx.size() - 2, c = idx.size() - 1;
        SExpr d = s_index_value(ix_add(idx[c], ix_scale(idx[r], -1)));  // col - row
        SExpr keep = s_binary(lower ? SOp::Le : SOp::Ge, d, s_iconst(diag, DType::I64));
        return s_where(keep, in.load(idx), s_const(0, cdt));
      });
      settle(n.outputs[0]);
      return true;
    }
    case OpId::repeat: {
      LValue in = vals_[size_t(std::get<graph::TensorArg>(n.args[0]).id)];
      Shape in_sizes = in.sizes;
      vals_[size_t(n.outputs[0])] = pending_value(m.sizes, m.dtype, [in, in_sizes](const std::vector<Index>& idx) {
        std::vector<Index> src(in_sizes.size());
        size_t lead = idx.size() - in_sizes.size();
        for (size_t d = 0; d < in_sizes.size(); ++d) src[d] = in_sizes[d] == 0 ? ix_const(0) : ix_mod(idx[lead + d], in_sizes[d]);
        return in.load(src);
      });
      settle(n.outputs[0]);
      return true;
    }
    default:
      why = fmt::format("{} moves data by indices or shape-dependent ranges and is not lowered; runs the eager kernel",
                        n.info().name);
      return false;
  }
}

}  // namespace

LoweredGraph lower_graph(const Graph& g, const graph::StorageModel& storage, const InjectSpec& inject,
                         const std::vector<bool>& unrounded) {
  return Lowerer(g, storage, inject, unrounded).run();
}

}  // namespace kiln::inductor
