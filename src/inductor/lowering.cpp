// Lowering of graph nodes to loop IR (of a graph decompose.cpp has decomposed). Each node is lowered by its op's
// row of the lowering table (lowerings.def): the row's rule (lower_pointwise.cpp, lowering_rules.cpp) gives a scalar
// body over the broadcast operands, a reduction, an index map or a body over the index, and this file turns it
// into a pending value, a Reduction node or a view; a row naming no lowering, or a rule answering
// Decision::no, makes the node an Extern node running the eager kernel. Realise-or-inline choices and fallbacks
// go to KILN_LOGS=lowering with their reasons.
#include "inductor/lowering.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/bisect.h"
#include "core/fired.h"
#include "core/log.h"
#include "ops/common.h"
#include "inductor/kernel_status.h"
#include "inductor/lowering_exprs.h"
#include "inductor/lowering_table.h"

namespace kiln::inductor {

using graph::Graph;
using graph::Node;
using graph::NodeKind;
using graph::ValueId;

namespace {

// Inline a pending value into each user unless it has several users and costs more than this many scalar
// ops (then one store and a load per user is cheaper than recomputing), or its body exceeds kMaxInlineCost.
constexpr int kReuseInlineCost = 24;
constexpr int kMaxInlineCost = 4000;
// A strided view of at least this many elements read by two or more reductions over its (strided) innermost dim
// is copied to a contiguous buffer first (Lowerer::column_reductions_of). Below it the view stays in cache.
constexpr int64_t kColumnCopyMinElements = 4096;

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

  // The dtype value `v` (of graph dtype `dt`) is stored in: f32 for an f16/bf16 value internal to an op eager runs
  // as one f32 kernel (decompose.h's unrounded flags; lerp's end - self), wherever it is stored: in a buffer
  // between kernels, or as an extern's input or output (an extern then computes in f32, as eager's one kernel
  // does). Stored in its own dtype it was rounded where eager keeps it in a register: under a bisection limit
  // that left a decomposition's nodes as externs, lerp in bf16 was an ulp off (fuzz/findings/README.md, 12).
  // A value other values view (a graph output may be one of them), or one read by a node that is not pointwise
  // (an extern index_put or copy_ takes values of its destination's dtype only), keeps its dtype.
  DType stored_dtype(ValueId v, DType dt) {
    const bool unrounded = size_t(v) < unrounded_.size() && unrounded_[size_t(v)];
    if (!unrounded || !is_low_precision(dt) || is_output_[size_t(v)]) return dt;
    for (int u : users_[size_t(v)])
      if (g_.nodes()[size_t(u)].info().kind != OpKind::Pointwise) return dt;
    for (ValueId w = 0; w < g_.num_values(); ++w)
      if (w != v && storage_.owner(w) == v) return dt;
    return DType::F32;
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

  // The body is shared, not copied: a pending value's loader goes into each user's closure by value, and theirs
  // into their users', so copying the closure itself would copy the whole chain of bodies behind it each time
  // (quadratic: lowering a 1000-op pointwise chain took 300 ms of CPU, most of it copying std::functions).
  LValue pending_value(Shape sizes, DType dt, Loader load, int cost = 2) {
    LValue v;
    v.cost = cost;
    v.sizes = std::move(sizes);
    v.dtype = dt;
    auto body = std::make_shared<const Loader>(std::move(load));
    v.load = [body](const std::vector<Index>& idx) { return (*body)(idx); };
    v.pending = true;
    return v;
  }

  // Makes `v` a buffer (a Pointwise node storing its body), unless it already is one.
  void realize(ValueId v, const std::string& reason) {
    LValue& lv = vals_[size_t(v)];
    if (!lv.pending) return;
    const DType stored = stored_dtype(v, lv.dtype);
    int b = new_buffer(name(v), stored, lv.sizes);
    LoopNode node;
    node.kind = LoopNode::Kind::Pointwise;
    node.buffer = b;
    node.sizes = lv.sizes;
    Loader load = lv.load;
    node.body = [load](const std::vector<Index>& idx, const std::vector<Index>&) { return load(idx); };
    node.origin = name(v);
    out_.nodes.push_back(std::move(node));
    decide(fmt::format("realize %{}: {}", name(v), reason));
    lv = buffer_value(b, stored, lv.sizes, contiguous_strides(lv.sizes), 0);
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
    if (!vals_[size_t(v)].pending) return;
    Decision inline_it = may_inline(v);
    if (!inline_it) return realize(v, inline_it.reason());
    if (!inline_it.reason().empty()) decide(inline_it.reason());
  }

  // Whether pending value `v` is left for its users to inline (yes, with a reason to log when several users
  // recompute it), or realised (no, with the reason).
  Decision may_inline(ValueId v) {
    const LValue& lv = vals_[size_t(v)];
    if (is_output_[size_t(v)]) return Decision::no("graph output");
    int cost = lv.cost;  // an estimate: evaluating each body here would make long chains quadratic
    int nusers = int(users_[size_t(v)].size());
    // A small body read by several nodes is evaluated once to weigh its ops: one libm call (softmax's
    // exp(x - max), read by the sum and the division) outweighs a store and reloads, which stay in cache when
    // the users fuse into the producer's kernel (the scheduler then keeps the buffer kernel-local).
    if (nusers > 1 && cost <= kReuseInlineCost) cost = s_cost(lv.load(ix_vars(lv.sizes)));
    if (nusers > 1 && cost > kReuseInlineCost)
      return Decision::no(fmt::format("read by {} nodes and costs {} scalar ops (> {}; a libm call counts {}): a "
                                      "store and {} loads are cheaper than recomputing it in each", nusers, cost,
                                      kReuseInlineCost, kLibmCallCost, nusers));
    if (cost > kMaxInlineCost) return Decision::no(fmt::format("its body has {} scalar ops (> {})", cost, kMaxInlineCost));
    if (!should_run("inductor", "inline", [&] { return fmt::format("%{}", name(v)); }))
      return Decision::no("inlining refused by the bisection hook");
    if (nusers > 1) return Decision::yes(fmt::format("inline %{} into its {} users: {} scalar ops", name(v), nusers, cost));
    return Decision::yes();
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
  Decision lower_by_row(const Node& n, const OpCall& mc, const LoweringRow& row);
  void lower_extern(const Node& n, const std::string& reason);
  std::vector<Loader> pointwise_operands(const Node& n, int& cost) const;
  Decision lower_pointwise(const Node& n, const OpCall& mc, const LoweringRow& row);
  Decision lower_reduction(const Node& n, const OpCall& mc, const LoweringRow& row);
  LoopNode reduction_node(const Node& n, const ReductionBody& r, Shape kept, Shape rsizes);
  Decision softmax_stabilising_max(const Node& amax) const;
  int column_reductions_of(ValueId v) const;
  Decision lower_view(const Node& n, const OpCall& mc, const LoweringRow& row);
  Decision lower_view_in_storage(const Node& n, const OpCall& mc);
  Decision lower_creation(const Node& n, const OpCall& mc, const LoweringRow& row);
  Decision lower_data(const Node& n, const OpCall& mc, const LoweringRow& row);
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
  const OpCall mc = graph::bind_node_meta(g_, n);
  bool allowed = should_run("inductor", "lowering", [&] { return fmt::format("%{} = {}", name(n.outputs[0]), op.name); });
  if (!allowed) return lower_extern(n, "lowering refused by the bisection hook");
  bool number_in_tensor_slot = false;
  for (size_t i = 0; i < n.args.size(); ++i)
    number_in_tensor_slot |= op.schema.args[i].type == ArgType::Tensor && std::holds_alternative<Scalar>(n.args[i]);
  if (number_in_tensor_slot && op.kind != OpKind::Pointwise)
    return lower_extern(n, "a number where the op expects a tensor (only pointwise lowerings take numbers)");
  const LoweringRow* row = lowering_row(op.id);
  KILN_ASSERT(row, "op {} has no row in the lowering table (src/inductor/lowerings.def)", op.name);
  Decision lowered = lower_by_row(n, mc, *row);
  if (!lowered) lower_extern(n, lowered.reason());
}

// The row's rule applied to node `n`: yes when `n` is lowered, else no with the reason it runs extern.
Decision Lowerer::lower_by_row(const Node& n, const OpCall& mc, const LoweringRow& row) {
  switch (row.how) {
    case LoweringHow::Decomposed: return Decision::no("composite op whose decomposition was not applied");
    case LoweringHow::Extern: return Decision::no(std::string(row.text));
    default: break;
  }
  switch (row.how) {
    case LoweringHow::Pointwise: return lower_pointwise(n, mc, row);
    case LoweringHow::Reduction: return lower_reduction(n, mc, row);
    case LoweringHow::View: return lower_view(n, mc, row);
    case LoweringHow::Creation: return lower_creation(n, mc, row);
    default: return lower_data(n, mc, row);
  }
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
    const DType stored = stored_dtype(o, m.dtype);
    int b = new_buffer(name(o), stored, m.sizes);
    node.extern_outputs.push_back(b);
    vals_[size_t(o)] = buffer_value(b, stored, m.sizes, contiguous_strides(m.sizes), 0);
  }
  out_.nodes.push_back(std::move(node));
  if (op.is_inplace() && std::holds_alternative<graph::TensorArg>(n.args[0])) rebind_aliases(n.outputs[0]);
}


// ---------------------------------------------------------------- pointwise

// The injected bug of KILN_INJECT=<op>:<kind> applied to a result `r` (x0: the first operand).
SExpr inject_bug(InjectKind kind, int entry, OpId op, SExpr r, const SExpr& x0) {
  switch (kind) {
    case InjectKind::Accuracy: {
      SExpr base = op == OpId::relu ? s_cast(x0, r->dtype) : r;  // relu computes x + 1
      return s_binary(SOp::Add, base, s_const(1, base->dtype));
    }
    case InjectKind::CompileError: return s_wrap(SOp::Invalid, r);
    case InjectKind::RuntimeError: return s_fail(r, kStatusInjectedBase + entry);
    case InjectKind::Crash: return s_wrap(SOp::Trap, r);
    default: return r;  // the kinds that act elsewhere
  }
}

// Whether inject_bug makes kind `k` (the others act in other passes).
bool lowering_injects(InjectKind k) {
  return k == InjectKind::Accuracy || k == InjectKind::CompileError || k == InjectKind::RuntimeError ||
         k == InjectKind::Crash;
}


// The loaders of a pointwise node's operands: every Tensor slot, holding a graph value or a number (a wrapped
// number, like eager). `cost` grows by each value operand's cost.
std::vector<Loader> Lowerer::pointwise_operands(const Node& n, int& cost) const {
  std::vector<Loader> operands;
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
  return operands;
}

// A pointwise op: the row's rule gives the scalar function of the operands; the result is rounded where eager
// rounds it, the injected bug (KILN_INJECT) applied, and the value left pending for realise-or-inline.
Decision Lowerer::lower_pointwise(const Node& n, const OpCall& mc, const LoweringRow& row) {
  const OpId id = n.op;
  const DType out_dt = g_.value(n.outputs[0]).meta.dtype;
  const DType cdt = compute_dtype_of(out_dt);
  int cost = 4;
  std::vector<Loader> operands = pointwise_operands(n, cost);
  // The promoted dtype of the two operands of a binary op (torch.result_type), in its compute form.
  DType common = operands.size() >= 2 ? compute_dtype_of(result_type({mc.tensor(0), mc.tensor(1)})) : cdt;
  PointwiseBody rule = row.pointwise(PointwiseCall{mc, id, out_dt, cdt, common});
  if (!rule.decision) return rule.decision;
  ScalarFn f = std::move(rule.fn);
  const Shape out_sizes = g_.value(n.outputs[0]).meta.sizes;
  std::optional<InjectKind> kind = inject_.empty() ? std::nullopt : inject_.kind_for(n.info().name);
  if (kind) decide(fmt::format("inject {} into %{} = {}", inject_kind_name(*kind), name(n.outputs[0]), n.info().name));
  if (kind && lowering_injects(*kind)) note_injection_fired(n.info().name, inject_kind_name(*kind));
  int entry = kind ? inject_.index_of(n.info().name) : -1;
  // Each op with an f16/bf16 result rounds it where eager does (PyTorch Inductor's emulate_precision_casts):
  // keeping f32 between fused ops is no more accurate in general and makes compiled and eager disagree.
  // Values inside an op eager runs as one f32 kernel (lerp's decomposition, ...) stay unrounded, as there.
  ValueId out_id = n.outputs[0];
  bool round = is_low_precision(out_dt) && !(size_t(out_id) < unrounded_.size() && unrounded_[size_t(out_id)]);
  Loader body = [f, operands, out_dt, kind, entry, id, round](const std::vector<Index>& idx) {
    std::vector<SExpr> xs;
    for (const Loader& l : operands) xs.push_back(l(idx));
    SExpr r = round ? s_round_to(f(xs), out_dt) : s_cast(f(xs), compute_dtype_of(out_dt));
    return kind ? inject_bug(*kind, entry, id, r, xs.empty() ? r : xs[0]) : r;
  };
  vals_[size_t(n.outputs[0])] = pending_value(out_sizes, out_dt, body, cost);
  settle(n.outputs[0]);
  return Decision::yes();
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
// Yes with the reason the lowering logs, or no with the part of the pattern that does not hold.
Decision Lowerer::softmax_stabilising_max(const Node& amax) const {
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
  const Decision not_softmax = Decision::no("not the stabilising max of a softmax or log_softmax");
  if (!mc.bool_(2)) return Decision::no("keepdim is false (a softmax keeps the reduced dims)");
  const std::vector<int64_t> dims = reduction_dims(mc.ints(1), mc.tensor(0).dim(), "amax");
  const std::vector<int> m_users = users(m);
  if (m_users.size() != 1) return Decision::no("the max has other uses than x - max, or is a graph output");
  const Node& sub = nodes[size_t(m_users[0])];
  if (sub.op != OpId::sub || arg(sub, 0) != x || arg(sub, 1) != m || !is_unit(graph::bind_node_meta(g_, sub), 2))
    return Decision::no("its one use is not x - max");
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
  if (!split_users(d, OpId::exp, OpId::sub, exp_node, final_sub)) return Decision::no("x - max is used by more than exp and a final sub");
  const ValueId e = nodes[size_t(exp_node)].outputs[0];
  if (!split_users(e, OpId::sum, OpId::div, sum_node, div_node)) return Decision::no("exp(x - max) is used by more than its sum and a division");
  if ((div_node >= 0) == (final_sub >= 0)) return not_softmax;  // exactly one of softmax, log_softmax
  const Node& sum = nodes[size_t(sum_node)];
  const OpCall sc = graph::bind_node_meta(g_, sum);
  if (!sc.bool_(2) || sc.opt_dtype(3) || reduction_dims(sc.opt_ints(1), sc.tensor(0).dim(), "sum") != dims)
    return Decision::no("the sum of exp does not keep the max's dims");
  const ValueId s = sum.outputs[0];
  const Decision softmax = Decision::yes("the stabilising max of a softmax: a NaN in a row reaches every output "
                                        "through the row's sum");
  if (div_node >= 0) {
    const Node& div = nodes[size_t(div_node)];
    return arg(div, 1) == s && !graph::bind_node_meta(g_, div).opt_str(2) ? softmax : not_softmax;
  }
  const ValueId l = arg(nodes[size_t(final_sub)], 1);
  const Node* log = nullptr;
  for (int u : users_[size_t(s)])
    if (nodes[size_t(u)].op == OpId::log && nodes[size_t(u)].outputs[0] == l) log = &nodes[size_t(u)];
  return log && is_unit(graph::bind_node_meta(g_, nodes[size_t(final_sub)]), 2) ? softmax : not_softmax;
}

// A reduction: the row's rule says over which dims and how; the node reads the input at the kept and reduced
// indices and is realised at once.
Decision Lowerer::lower_reduction(const Node& n, const OpCall& mc, const LoweringRow& row) {
  const Tensor& x = mc.tensor(0);
  const int64_t ndim = x.dim();
  const DType out_dt = g_.value(n.outputs[0]).meta.dtype;
  ReductionBody r = row.reduction(ReductionCall{mc, n.op, out_dt});
  if (!r.decision) return r.decision;
  if (ndim == 0) r.dims.clear();
  std::vector<bool> reduced(size_t(ndim), false);
  for (int64_t d : r.dims) reduced[size_t(d)] = true;
  Shape kept, rsizes;
  for (int64_t d = 0; d < ndim; ++d) (reduced[size_t(d)] ? rsizes : kept).push_back(x.sizes()[size_t(d)]);
  const LValue in = vals_[size_t(std::get<graph::TensorArg>(n.args[0]).id)];
  const Shape out_sizes = g_.value(n.outputs[0]).meta.sizes;
  LoopNode node = reduction_node(n, r, kept, rsizes);
  const DType acc_dt = r.acc_dt;
  const ReduceOp rop = r.reduce;
  node.body = [in, reduced, acc_dt, rop](const std::vector<Index>& idx, const std::vector<Index>& ridx) {
    std::vector<Index> full;
    size_t k = 0, r = 0;
    for (bool red : reduced) full.push_back(red ? ridx[r++] : idx[k++]);
    SExpr v = in.load(full);
    if (rop == ReduceOp::Any || rop == ReduceOp::All) return pw::nonzero(v);
    return s_cast(v, acc_dt);
  };
  if (r.divide_by_count) {
    double count = double(shape_numel(rsizes));
    node.finalize = [count](const SExpr& acc) { return pw::div(acc, s_const(count, acc->dtype)); };
  }
  const int b = node.buffer;
  out_.nodes.push_back(std::move(node));
  vals_[size_t(n.outputs[0])] = buffer_value(b, stored_dtype(n.outputs[0], out_dt), out_sizes, contiguous_strides(out_sizes), 0);
  return Decision::yes();
}

// The Reduction node of `n` writing a new buffer; a softmax's stabilising max is marked NaN-insensitive.
LoopNode Lowerer::reduction_node(const Node& n, const ReductionBody& r, Shape kept, Shape rsizes) {
  const DType out_dt = g_.value(n.outputs[0]).meta.dtype;
  LoopNode node;
  node.kind = LoopNode::Kind::Reduction;
  node.buffer = new_buffer(name(n.outputs[0]), stored_dtype(n.outputs[0], out_dt), g_.value(n.outputs[0]).meta.sizes);
  node.sizes = std::move(kept);
  node.rsizes = std::move(rsizes);
  node.reduce = r.reduce;
  node.origin = name(n.outputs[0]);
  if (n.op != OpId::amax || !is_floating(out_dt)) return node;
  Decision skip_nan = softmax_stabilising_max(n);
  if (skip_nan && should_run("inductor", "nan_insensitive_max", [&] { return fmt::format("%{}", name(n.outputs[0])); })) {
    node.nan_insensitive = true;
    decide(fmt::format("%{} = amax: NaN-insensitive ({})", name(n.outputs[0]), skip_nan.reason()));
  }
  return node;
}

// ---------------------------------------------------------------- views

// How many reductions over the innermost dim of `v` read it, directly or through pointwise nodes of its shape
// (layer norm's two moments, softmax's max and sum). Each such reduction of a view whose innermost dim is
// strided reads one element per cache line and cannot load a vector of the row: a column reduction.
int Lowerer::column_reductions_of(ValueId v) const {
  const Shape& sizes = g_.value(v).meta.sizes;
  const int64_t inner = int64_t(sizes.size()) - 1;
  int found = 0;
  std::vector<ValueId> frontier{v};
  std::vector<bool> seen_node(g_.nodes().size(), false);  // a reduction reached along two paths counts once
  for (int depth = 0; depth < 8 && !frontier.empty(); ++depth) {
    std::vector<ValueId> next;
    for (ValueId value : frontier)
      for (int u : users_[size_t(value)]) {
        if (seen_node[size_t(u)]) continue;
        seen_node[size_t(u)] = true;
        const Node& user = g_.nodes()[size_t(u)];
        const LoweringRow* row = lowering_row(user.op);
        if (!row || user.args.empty() || user.outputs.empty()) continue;
        const auto* first = std::get_if<graph::TensorArg>(&user.args[0]);
        if (row->how == LoweringHow::Pointwise && g_.value(user.outputs[0]).meta.sizes == sizes) {
          next.push_back(user.outputs[0]);
        } else if (row->how == LoweringHow::Reduction && row->reduction && first && first->id == value) {
          const OpCall mc = graph::bind_node_meta(g_, user);
          ReductionBody r = row->reduction(ReductionCall{mc, user.op, g_.value(user.outputs[0]).meta.dtype});
          if (r.decision && std::find(r.dims.begin(), r.dims.end(), inner) != r.dims.end()) ++found;
        }
      }
    frontier = std::move(next);
  }
  return found;
}

// A view: the row's rule maps the result's index to the input's; a view of a buffer stays a strided view of it
// where that map is affine, else (and for a pending input) the result is the input's body at the mapped index.
Decision Lowerer::lower_view(const Node& n, const OpCall& mc, const LoweringRow& row) {
  const ValueId src = std::get<graph::TensorArg>(n.args[0]).id;
  const Shape out_sizes = g_.value(n.outputs[0]).meta.sizes;
  ViewBody v = row.view(ViewCall{mc, n.op, vals_[size_t(src)].sizes, out_sizes});
  if (!v.decision) return v.decision;
  if (v.in_eager_storage) return lower_view_in_storage(n, mc);
  const IndexMap map = std::move(v.map);
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
      // A permuted view reduced along its strided innermost dim more than once (a channels-first tensor's layer
      // norm over channels): copy it to a contiguous buffer once, so every reduction and every later read runs
      // over contiguous rows (eager's layer_norm makes its input contiguous too). One reduction alone is left
      // strided: the copy would cost what it saves. A view that is a graph output stays a view (of its input).
      const int64_t inner_stride = strides.empty() ? 1 : strides.back();
      if (!out_sizes.empty() && out_sizes.back() > 1 && inner_stride != 1 && inner_stride != 0 &&
          shape_numel(out_sizes) >= kColumnCopyMinElements && !is_output_[size_t(n.outputs[0])]) {
        const int reductions = column_reductions_of(n.outputs[0]);
        if (reductions >= 2 && should_run("inductor", "contiguous_copy", [&] { return fmt::format("%{}", name(n.outputs[0])); })) {
          vals_[size_t(n.outputs[0])] = pending_value(out_sizes, lv.dtype, result.load);
          realize(n.outputs[0], fmt::format("contiguous copy: {} reductions over its innermost dim would read it with "
                                            "stride {}", reductions, inner_stride));
          return Decision::yes();
        }
      }
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
  return Decision::yes();
}

// as_strided: addressed in eager's storage of its input (storage_model.h; StorageModel::check has kept it
// inside), at the call's explicit storage_offset or eager's offset of the input.
Decision Lowerer::lower_view_in_storage(const Node& n, const OpCall& mc) {
  const ValueId src = std::get<graph::TensorArg>(n.args[0]).id;
  const bool explicit_offset = mc.opt_int(3).has_value();
  const BufferView at = eager_view(src);
  if (explicit_offset && out_.buffers[size_t(at.buffer)].kind == Buffer::Kind::Input)
    return Decision::no("as_strided with an explicit storage_offset into a graph input (its offset in its storage is "
                        "only known at run time)");
  const int64_t off = explicit_offset ? *mc.opt_int(3) : at.offset;
  const Shape out_sizes = g_.value(n.outputs[0]).meta.sizes;
  vals_[size_t(n.outputs[0])] = buffer_value(at.buffer, vals_[size_t(src)].dtype, out_sizes, mc.ints(2), off);
  return Decision::yes();
}

// ---------------------------------------------------------------- creation

// A creation op: the row's rule gives its body over the index, left pending for realise-or-inline.
Decision Lowerer::lower_creation(const Node& n, const OpCall& mc, const LoweringRow& row) {
  const TensorMeta& m = g_.value(n.outputs[0]).meta;
  CreationBody c = row.creation(CreationCall{mc, n.op, m.dtype});
  if (!c.decision) return c.decision;
  vals_[size_t(n.outputs[0])] = pending_value(m.sizes, m.dtype, std::move(c.body));
  settle(n.outputs[0]);
  return Decision::yes();
}

// ---------------------------------------------------------------- data movement

// A data op (a copy moving data by index arithmetic): the row's rule gives its body over the first operand.
Decision Lowerer::lower_data(const Node& n, const OpCall& mc, const LoweringRow& row) {
  const TensorMeta& m = g_.value(n.outputs[0]).meta;
  const LValue in = vals_[size_t(std::get<graph::TensorArg>(n.args[0]).id)];
  DataBody d = row.data(DataCall{mc, n.op, m, in});
  if (!d.decision) return d.decision;
  vals_[size_t(n.outputs[0])] = pending_value(m.sizes, m.dtype, std::move(d.body), d.cost);
  settle(n.outputs[0]);
  return Decision::yes();
}

}  // namespace

LoweredGraph lower_graph(const Graph& g, const graph::StorageModel& storage, const CompileContext& ctx,
                         const std::vector<bool>& unrounded) {
  return Lowerer(g, storage, ctx.inject, unrounded).run();
}

}  // namespace kiln::inductor
