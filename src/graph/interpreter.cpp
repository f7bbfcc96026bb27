// The reference interpreter. Preparation binds every node's non-tensor arguments once (bind_args on meta
// tensors, so a run does no schema work) and records which argument slots take which values and when each
// value can be released; a run then fills the slots, dispatches, checks the result metas and moves on.
#include "graph/interpreter.h"

#include <optional>

#include "core/log.h"
#include "graph/inputs.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln::graph {
namespace {

// One tensor slot of a node's argument template: call.args[arg] (list_pos < 0) or its list entry list_pos.
struct Slot {
  int arg;
  int list_pos;
  ValueId id;
};

std::string meta_str(const TensorMeta& m) { return fmt::format("{}{}", dtype_name(m.dtype), shape_str(m.sizes)); }

Tensor upcast_if_floating(const Tensor& t) {
  if (!is_floating(t.dtype()) || t.dtype() == DType::F64) return t;
  Tensor u = layout_preserving_copy(t, DType::F64);  // as_strided of an input reads its layout
  if (t.is_wrapped_number()) u.impl()->wrapped_number = true;
  return u;
}

// With autograd on, a value that requires grad is upcast through `to`, so its gradient reaches the caller's tensor.
Tensor upcast(const Tensor& t, bool autograd) {
  if (autograd && t.requires_grad() && is_floating(t.dtype()) && t.dtype() != DType::F64) return to(t, DType::F64);
  return upcast_if_floating(t);
}

}  // namespace

std::string node_label(const Graph& g, const Node& n) {
  std::string out = n.outputs.empty() ? std::string("node") : "%" + g.value(n.outputs[0]).name;
  for (size_t i = 1; i < n.outputs.size(); ++i) out += ", %" + g.value(n.outputs[i]).name;
  out += n.kind == NodeKind::Constant ? std::string(" = constant") : fmt::format(" = {}", n.info().name);
  if (n.loc.known() && n.loc.file) out += fmt::format(" (at {}:{})", n.loc.file, n.loc.line);  // captured from C++
  else if (n.loc.known()) out += fmt::format(" (line {}:{})", n.loc.line, n.loc.col);
  return out;
}

bool is_random_node(const Node& n) {
  if (n.kind != NodeKind::Op) return false;
  if (n.info().kind == OpKind::Random) return true;
  if (n.op == OpId::dropout) {
    const auto* train = std::get_if<Scalar>(&n.args.at(2));
    return !train || train->to_bool();
  }
  return false;
}

bool draws_from_generator(const Node& n) { return is_random_node(n) && n.op != OpId::philox_rand; }

struct Interpreter::Plan {
  struct NodePlan {
    OpCall call;                  // Op nodes: the argument template
    std::vector<Slot> slots;      // tensor slots filled from the environment
    Tensor constant;              // Constant nodes: the value (upcast in fp64 mode)
    std::vector<ValueId> release;  // values whose last use is this node
  };
  std::vector<NodePlan> nodes;
  std::vector<ValueId> release_after_inputs;  // inputs nothing reads
};

Interpreter::Interpreter(const Graph& g, InterpretOptions opts) : graph_(g), opts_(std::move(opts)), plan_(new Plan) {
  const auto& nodes = g.nodes();
  // Meta tensors standing for every value, to bind each node's arguments once.
  std::vector<Tensor> meta_env(size_t(g.num_values()));
  for (ValueId id = 0; id < g.num_values(); ++id) {
    const ValueInfo& v = g.value(id);
    meta_env[size_t(id)] = Tensor::meta(v.meta);
    if (v.wrapped_number) meta_env[size_t(id)].impl()->wrapped_number = true;
  }
  std::vector<int> last_use(size_t(g.num_values()), -1);
  std::vector<bool> is_output(size_t(g.num_values()), false);
  for (ValueId id : g.outputs()) is_output[size_t(id)] = true;
  plan_->nodes.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    Plan::NodePlan& p = plan_->nodes[i];
    for (ValueId id : n.outputs) last_use[size_t(id)] = int(i);
    if (n.kind == NodeKind::Constant) {
      p.constant = opts_.fp64 ? upcast_if_floating(n.constant) : n.constant;
      continue;
    }
    try {
      p.call = bind_args(n.info(), node_ivalues(g, n, meta_env));
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", node_label(g, n), e.what()), e.internal());
    }
    for (size_t a = 0; a < n.args.size(); ++a) {
      if (const auto* t = std::get_if<TensorArg>(&n.args[a])) {
        p.slots.push_back({int(a), -1, t->id});
        last_use[size_t(t->id)] = int(i);
      } else if (const auto* l = std::get_if<TensorListArg>(&n.args[a])) {
        for (size_t k = 0; k < l->ids.size(); ++k) {
          if (l->ids[k] == kNoValue) continue;
          p.slots.push_back({int(a), int(k), l->ids[k]});
          last_use[size_t(l->ids[k])] = int(i);
        }
      }
    }
    if (opts_.fp64) {
      const Schema& s = n.info().schema;
      bool random = is_random_node(n);
      for (size_t a = 0; a < s.args.size(); ++a) {
        if (s.args[a].type != ArgType::DType) continue;
        IValue& v = p.call.args[a];
        if (random && v.is_none() && n.outputs.size() == 1) v = IValue(g.value(n.outputs[0]).meta.dtype);
        else if (!random && v.is_dtype() && is_floating(v.dtype())) v = IValue(DType::F64);
      }
    }
    for (Slot& s : p.slots) {  // drop the meta placeholders; run() fills the slots
      if (s.list_pos < 0) p.call.args[size_t(s.arg)] = IValue(Tensor());
      else p.call.args[size_t(s.arg)].tensor_list()[size_t(s.list_pos)] = Tensor();
    }
  }
  for (ValueId id = 0; id < g.num_values(); ++id) {
    if (is_output[size_t(id)]) continue;
    if (last_use[size_t(id)] >= 0) plan_->nodes[size_t(last_use[size_t(id)])].release.push_back(id);
  }
  for (ValueId id : g.inputs())
    if (last_use[size_t(id)] < 0 && !is_output[size_t(id)]) plan_->release_after_inputs.push_back(id);
}

Interpreter::~Interpreter() = default;
Interpreter::Interpreter(Interpreter&&) noexcept = default;

std::vector<Tensor> Interpreter::run(const std::vector<Tensor>& inputs) {
  const Graph& g = graph_;
  const bool fp64 = opts_.fp64;
  const bool log = log_enabled(LogChannel::Interpreter);
  KILN_CHECK(inputs.size() == g.inputs().size(), "graph {} takes {} inputs ({}), but {} were given", g.name,
             g.inputs().size(), fmt::join([&] {
               std::vector<std::string> names;
               for (ValueId id : g.inputs()) names.push_back("%" + g.value(id).name + ": " + meta_str(g.value(id).meta));
               return names;
             }(), ", "), inputs.size());
  std::optional<NoGradGuard> no_grad;
  if (!opts_.autograd) no_grad.emplace();
  std::vector<Tensor> env(size_t(g.num_values()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo& v = g.value(g.inputs()[i]);
    const Tensor& t = inputs[i];
    KILN_CHECK(t.defined(), "graph {}: input {} (%{}) is an undefined tensor; expected {}", g.name, i, v.name,
               meta_str(v.meta));
    KILN_CHECK(t.dtype() == v.meta.dtype && t.sizes() == v.meta.sizes,
               "graph {}: input {} (%{}) is {}, but the graph declares {}", g.name, i, v.name, t.str(),
               meta_str(v.meta));
    env[size_t(g.inputs()[i])] = fp64 ? upcast(t, opts_.autograd) : t;
    if (opts_.on_value) opts_.on_value(g.inputs()[i], env[size_t(g.inputs()[i])]);
  }
  for (ValueId id : plan_->release_after_inputs) env[size_t(id)] = Tensor();

  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    Plan::NodePlan& p = plan_->nodes[i];
    if (n.kind == NodeKind::Constant) {
      env[size_t(n.outputs[0])] = p.constant;
      if (opts_.on_value) opts_.on_value(n.outputs[0], p.constant);
      continue;
    }
    for (const Slot& s : p.slots) {
      if (s.list_pos < 0) p.call.args[size_t(s.arg)] = IValue(env[size_t(s.id)]);
      else p.call.args[size_t(s.arg)].tensor_list()[size_t(s.list_pos)] = env[size_t(s.id)];
    }
    std::vector<Tensor> outs;
    try {
      outs = dispatch(p.call);
    } catch (const Error& e) {
      for (const Slot& s : p.slots) {
        if (s.list_pos < 0) p.call.args[size_t(s.arg)] = IValue(Tensor());
        else p.call.args[size_t(s.arg)].tensor_list()[size_t(s.list_pos)] = Tensor();
      }
      throw Error(fmt::format("{}: {}", node_label(g, n), e.what()), e.internal());
    }
    for (const Slot& s : p.slots) {
      if (s.list_pos < 0) p.call.args[size_t(s.arg)] = IValue(Tensor());
      else p.call.args[size_t(s.arg)].tensor_list()[size_t(s.list_pos)] = Tensor();
    }
    KILN_ASSERT(outs.size() == n.outputs.size(), "{}: the kernel returned {} results, the graph expects {}",
               node_label(g, n), outs.size(), n.outputs.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      ValueId id = n.outputs[k];
      const TensorMeta& want = g.value(id).meta;
      if (opts_.check_meta) {
        bool dtype_ok = outs[k].dtype() == want.dtype ||
                        (fp64 && is_floating(want.dtype) && is_floating(outs[k].dtype()));
        KILN_CHECK(dtype_ok && outs[k].sizes() == want.sizes,
                   "{}: result {} is {}, but the graph records {} (the graph's metadata disagrees with the "
                   "kernel; re-infer it with `kiln verify`)", node_label(g, n), k, outs[k].str(), meta_str(want));
      }
      if (fp64) outs[k] = upcast(outs[k], opts_.autograd);
      if (log) KILN_LOG(LogChannel::Interpreter, "{} -> {}", node_label(g, n), outs[k].str());
      if (opts_.on_value) opts_.on_value(id, outs[k]);
      env[size_t(id)] = std::move(outs[k]);
    }
    for (ValueId id : p.release) env[size_t(id)] = Tensor();
  }
  std::vector<Tensor> results;
  results.reserve(g.outputs().size());
  for (ValueId id : g.outputs()) results.push_back(env[size_t(id)]);
  return results;
}

std::vector<Tensor> run_graph(const Graph& g, const std::vector<Tensor>& inputs, const InterpretOptions& opts) {
  return Interpreter(g, opts).run(inputs);
}

std::vector<Tensor> run_graph_all_values(const Graph& g, const std::vector<Tensor>& inputs,
                                         const InterpretOptions& opts) {
  std::vector<Tensor> values(size_t(g.num_values()));
  InterpretOptions o = opts;
  o.on_value = [&](ValueId id, const Tensor& t) {
    values[size_t(id)] = t;
    if (opts.on_value) opts.on_value(id, t);
  };
  Interpreter(g, o).run(inputs);
  return values;
}

}  // namespace kiln::graph
