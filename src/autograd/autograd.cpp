// The eager autograd engine. Recording: each differentiable op call with an input that requires grad becomes
// an OpNode that saves the call and runs the op's VJP in backward. Execution: nodes run in reverse creation
// order once all their gradient inputs are in (a dependency count over the reachable graph).
#include "autograd/autograd.h"

#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "ops/api.h"
#include "ops/device_fallback.h"
#include "ops/dispatch.h"

namespace kiln {

namespace {

uint64_t next_sequence_nr() { return next_node_sequence_nr(); }

// A shallow alias without history: what nodes save of their outputs (saving the outputs themselves would
// make a cycle output -> grad_fn -> output).
Tensor saved_alias(const Tensor& t) { return history_free_alias(t); }

// `call` with each tensor argument replaced by f(tensor, its index in call.flat_tensors()).
template <class F>
OpCall map_tensors(OpCall call, F f) {
  size_t k = 0;
  for (size_t i = 0; i < call.args.size(); ++i) {
    ArgType type = call.op->schema.args[i].type;
    if (type == ArgType::Tensor) {
      if (!call.args[i].is_none()) call.args[i] = IValue(f(call.args[i].tensor(), k));
      ++k;
    } else if (type == ArgType::TensorList || type == ArgType::OptTensorList) {
      for (Tensor& x : call.args[i].tensor_list()) x = f(x, k++);
    }
  }
  return call;
}

// What a node keeps of an input (PyTorch's SavedVariable): a leaf that requires grad itself (it has no
// history to hold), anything else as a history-free alias (shared storage, no grad_fn, no view base). The
// input's history stays in the node's edge to it and is put back for a differentiable backward
// (with_saved_history). Saving the input itself would close a cycle whenever its history is later rewritten to
// lead back to this node: an in-place write through a view makes the base's new history reach every node
// that saved the base or a view of it (base -> CopySlices -> node -> saved view -> view base), and an in-place
// op saves its own target (self -> node -> saved self).
Tensor saved_input(const Tensor& t, size_t) {
  if (!t.defined() || (t.requires_grad() && !t.grad_fn())) return t;
  return history_free_alias(t);
}

bool is_accumulator(const Node* n);

class OpNode : public Node {
 public:
  OpNode(const OpCall& call, const std::vector<Tensor>& outputs) : call_(map_tensors(call, saved_input)) {
    for (const Tensor& o : outputs) outputs_.push_back(saved_alias(o));
    for (const Tensor& t : call_.flat_tensors()) {
      input_metas_.push_back(t.defined() ? t.meta() : TensorMeta{});
      saved_versions_.push_back(t.defined() && t.storage() ? t.storage()->version() : 0);
    }
  }

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    KILN_CHECK(!released_, "backward through {} a second time: its saved values were freed after the first "
               "backward; pass retain_graph=true to the first backward if you need to run it again", name());
    std::vector<Tensor> flat = call_.flat_tensors();
    for (size_t i = 0; i < flat.size(); ++i) {
      if (!flat[i].defined() || !flat[i].storage()) continue;
      KILN_CHECK(flat[i].storage()->version() == saved_versions_[i],
                 "{}: input {} ({}) was modified by an in-place operation after it was saved for backward "
                 "(version {} now, {} when saved); clone it before modifying it",
                 name(), i, flat[i].str(), flat[i].storage()->version(), saved_versions_[i]);
    }
    std::vector<bool> needs(next_edges.size());
    for (size_t i = 0; i < needs.size(); ++i) needs[i] = next_edges[i].valid();
    const OpCall call = grad_mode_enabled() ? with_saved_history() : call_;  // create_graph: a graph of the VJP
    VjpCall vc{call, outputs_, grads, needs};
    std::vector<Tensor> out = call_.op->vjp(vc);
    KILN_CHECK(out.size() == next_edges.size(), "{}: VJP returned {} gradients for {} tensor inputs", name(),
               out.size(), next_edges.size());
    for (size_t i = 0; i < out.size(); ++i) {
      if (!needs[i] || !out[i].defined()) continue;
      const TensorMeta& m = input_metas_[i];
      KILN_CHECK(out[i].sizes() == m.sizes, "{}: VJP returned a gradient of shape {} for input {} of shape {}", name(),
                 shape_str(out[i].sizes()), i, shape_str(m.sizes));
      if (out[i].dtype() != m.dtype) out[i] = to(out[i], m.dtype);
    }
    return out;
  }
  std::string name() const override { return std::string(call_.op->name) + "Backward"; }
  // The saved call with each saved alias given back the history its edge holds, so that a VJP run under
  // grad mode records its ops against the inputs' histories.
  OpCall with_saved_history() const {
    return map_tensors(call_, [&](const Tensor& t, size_t i) {
      if (!t.defined() || t.requires_grad() || i >= next_edges.size() || !next_edges[i].valid() ||
          is_accumulator(next_edges[i].fn.get()))
        return t;
      Tensor alias = history_free_alias(t);
      AutogradMeta& m = autograd_meta(alias);
      m.requires_grad = true;
      m.grad_fn = next_edges[i].fn;
      m.output_nr = next_edges[i].input_nr;
      return alias;
    });
  }
  void release_saved() override {
    released_ = true;
    call_.args.clear();
    outputs_.clear();
  }

 private:
  OpCall call_;
  std::vector<Tensor> outputs_;
  std::vector<TensorMeta> input_metas_;
  std::vector<uint64_t> saved_versions_;
  bool released_ = false;
};

// Accumulates into a leaf's .grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    Tensor leaf(leaf_);
    Tensor g = grads.at(0);
    for (const GradHook& h : leaf_->autograd->leaf_hooks) {
      Tensor r = h(g);
      if (r.defined()) g = r;
    }
    Tensor prev = stored_grad(leaf);
    if (!prev.defined()) {
      set_grad_raw(leaf, grad_mode_enabled() ? g : history_free_alias(clone(g)));
    } else if (grad_mode_enabled()) {
      set_grad_raw(leaf, add(prev, g));
    } else {
      add_(prev, g);
    }
    return {};
  }
  std::string name() const override { return "AccumulateGrad"; }
  std::shared_ptr<TensorImpl> leaf_;
};

bool is_accumulator(const Node* n) { return dynamic_cast<const AccumulateGrad*>(n) != nullptr; }

// The history of a base after an in-place write through one of its views: the gradient of the base passes
// through unchanged outside the view's region; inside it, it goes through the in-place op's VJP.
class CopySlices : public Node {
 public:
  CopySlices(TensorMeta base_meta, int64_t base_offset, TensorMeta view_meta, int64_t view_offset,
             std::shared_ptr<Node> fn)
      : base_meta_(std::move(base_meta)), base_offset_(base_offset), view_meta_(std::move(view_meta)),
        view_offset_(view_offset), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    Tensor result = clone(grads.at(0));
    KILN_CHECK(result.is_contiguous() && base_meta_.strides == contiguous_strides(base_meta_.sizes),
               "in-place write through a view of a non-contiguous base is not supported by autograd yet");
    Tensor region = as_strided(result, view_meta_.sizes, view_meta_.strides, view_offset_ - base_offset_);
    std::vector<Tensor> res = fn_->apply({clone(region)});
    std::vector<Tensor> out(next_edges.size());
    if (res.at(0).defined()) copy_(region, res[0]);
    else zero_(region);
    out[0] = result;
    for (size_t i = 1; i < res.size() && i < out.size(); ++i) out[i] = res[i];
    return out;
  }
  std::string name() const override { return "CopySlices(" + fn_->name() + ")"; }
  void release_saved() override { fn_->release_saved(); }

 private:
  TensorMeta base_meta_;
  int64_t base_offset_;
  TensorMeta view_meta_;
  int64_t view_offset_;
  std::shared_ptr<Node> fn_;
};

// A node whose edges come from `call`'s inputs. It saves `saved` when given (the same call with history-free
// aliases, where saving the inputs themselves would make a reference cycle), else `call`.
std::shared_ptr<Node> make_op_node(const OpCall& call, const std::vector<Tensor>& outputs, const OpCall* saved = nullptr) {
  auto node = std::make_shared<OpNode>(saved ? *saved : call, outputs);
  node->sequence_nr = next_sequence_nr();
  for (const Tensor& t : call.flat_tensors()) node->next_edges.push_back(t.defined() && t.requires_grad() ? gradient_edge(t) : Edge{});
  for (const Tensor& o : outputs) node->output_metas.push_back(o.meta());
  node->pre_hooks.resize(outputs.size());
  return node;
}

}  // namespace

uint64_t next_node_sequence_nr() {
  static thread_local uint64_t n = 0;
  return ++n;
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& node, uint32_t output_nr) {
  AutogradMeta& m = autograd_meta(t);
  m.requires_grad = true;
  m.grad_fn = node;
  m.output_nr = output_nr;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.impl()->autograd) return {};
  AutogradMeta& m = *t.impl()->autograd;
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  if (!m.requires_grad) return {};
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    acc->output_metas.push_back(t.meta());
    acc->pre_hooks.resize(1);
    m.grad_accumulator = acc;
  }
  return {acc, 0};
}

void record_op(const OpCall& call, std::vector<Tensor>& outputs) {
  // A kernel may return one of its inputs (contiguous() of a contiguous tensor, to() to the same dtype): the
  // output gets its own handle so recording its history leaves the input's alone.
  for (Tensor& o : outputs)
    for (const Tensor& in : call.flat_tensors())
      if (in.defined() && o.same(in)) o = make_view(in, in.sizes(), in.strides(), in.offset());
  auto node = make_op_node(call, outputs);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (is_floating(outputs[i].dtype())) set_history(outputs[i], node, uint32_t(i));
}

std::vector<Tensor> run_inplace_recorded(const OpCall& call) {
  const Tensor& self = call.tensor(0);
  KILN_CHECK(!(self.is_leaf() && self.requires_grad()),
             "{}: a leaf tensor that requires grad ({}) cannot be modified in place; modify a clone, or do it "
             "under NoGradGuard", call.name(), self.str());
  std::shared_ptr<TensorImpl> base = self.impl()->view_base;
  if (base) {
    Tensor b(base);
    KILN_CHECK(!(b.is_leaf() && b.requires_grad()),
               "{}: {} is a view of a leaf tensor that requires grad, and cannot be modified in place", call.name(),
               self.str());
    KILN_CHECK(is_floating(b.dtype()), "{}: cannot record gradients through a {} base", call.name(), b.str());
  }
  // The node saves a snapshot of `self` as it was before the write, with self's old history.
  OpCall saved = call;
  {
    NoGradGuard no_grad;
    Tensor snapshot = clone(self);
    if (self.impl()->autograd) {
      AutogradMeta& sm = autograd_meta(snapshot);
      sm.requires_grad = self.requires_grad();
      sm.grad_fn = self.grad_fn();
      sm.output_nr = self.impl()->autograd->output_nr;
    }
    saved.args[0] = IValue(snapshot);
  }
  std::vector<Tensor> outs;
  {
    NoGradGuard no_grad;
    outs = run_eager_kernel(call);  // writes into self (through a host copy for a device tensor)
  }
  self.storage()->bump_version();
  // Edges from the snapshot's history; the node keeps the snapshot without it (its history can lead back to
  // self's base, which will point at this node).
  OpCall saved_plain = saved;
  saved_plain.args[0] = IValue(history_free_alias(saved.tensor(0)));
  auto node = make_op_node(saved, outs, &saved_plain);
  if (!base) {
    set_history(self, node, 0);
    return {self};
  }
  // Write through a view: the base gets CopySlices, and the view becomes a view of the new base history.
  Tensor b(base);
  auto copy_slices = std::make_shared<CopySlices>(b.meta(), b.offset(), self.meta(), self.offset(), node);
  copy_slices->sequence_nr = next_sequence_nr();
  copy_slices->next_edges.push_back(gradient_edge(b));
  for (size_t i = 1; i < node->next_edges.size(); ++i) copy_slices->next_edges.push_back(node->next_edges[i]);
  // CopySlices routes the view's gradient itself; the op node's own edge to the view's old history is never
  // followed, and holding it would close a cycle (base -> CopySlices -> node -> view history -> base).
  static const std::shared_ptr<Node> unused_edge_target = std::make_shared<AccumulateGrad>(nullptr);
  node->next_edges[0] = Edge{unused_edge_target, 0};
  copy_slices->output_metas.push_back(b.meta());
  copy_slices->pre_hooks.resize(1);
  set_history(b, copy_slices, 0);
  OpCall view_call = bind_args(op_info(OpId::as_strided), {b, self.sizes(), self.strides(), self.offset()});
  OpCall view_saved = view_call;  // the as_strided VJP needs the base's geometry, not its history
  view_saved.args[0] = IValue(history_free_alias(b));
  auto view_node = make_op_node(view_call, {self}, &view_saved);
  set_history(self, view_node, 0);
  return {self};
}

// ---------------------------------------------------------------- the engine
namespace {

struct GraphTask {
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  // torch.autograd.grad: gradients captured at (node, input_nr) instead of flowing on.
  std::map<std::pair<Node*, uint32_t>, size_t> captures;
  std::vector<Edge> capture_edges;  // keeps captured nodes alive (a leaf's AccumulateGrad is held only weakly)
  std::vector<Tensor> captured;
};

void accumulate(std::vector<Tensor>& buf, size_t slot, const Tensor& g) {
  if (buf.size() <= slot) buf.resize(slot + 1);
  buf[slot] = buf[slot].defined() ? add(buf[slot], g) : g;
}

void execute(GraphTask& task, const std::vector<Edge>& root_edges, const std::vector<Tensor>& root_grads,
             bool retain_graph, bool accumulate_leaves) {
  // Dependency counts over everything reachable from the roots.
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const Edge& e : root_edges)
    if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      task.dependencies[e.fn.get()]++;
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }
  auto later_first = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
    return a->sequence_nr < b->sequence_nr;
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, decltype(later_first)> ready(later_first);
  for (size_t i = 0; i < root_edges.size(); ++i) accumulate(task.buffers[root_edges[i].fn.get()], root_edges[i].input_nr, root_grads[i]);
  std::unordered_set<Node*> queued;
  for (const Edge& e : root_edges)
    if (task.dependencies[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push(e.fn);

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(task.buffers[node.get()]);
    task.buffers.erase(node.get());
    grads.resize(node->output_metas.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      if (i < node->pre_hooks.size())
        for (const GradHook& h : node->pre_hooks[i]) {
          if (!grads[i].defined()) break;
          Tensor r = h(grads[i]);
          if (r.defined()) grads[i] = r;
        }
      auto cap = task.captures.find({node.get(), uint32_t(i)});
      if (cap != task.captures.end()) task.captured[cap->second] = grads[i];
    }
    bool is_leaf_acc = dynamic_cast<AccumulateGrad*>(node.get()) != nullptr;
    if (is_leaf_acc && !accumulate_leaves) continue;
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) {
        const TensorMeta& m = node->output_metas[i];
        grads[i] = zeros(m.sizes, m.dtype);
      }
    std::vector<Tensor> outs = node->apply(grads);
    if (!retain_graph) node->release_saved();
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      if (i < outs.size() && outs[i].defined()) accumulate(task.buffers[e.fn.get()], e.input_nr, outs[i]);
      if (--task.dependencies[e.fn.get()] == 0) ready.push(e.fn);
    }
  }
}

std::vector<Edge> root_edges_of(const std::vector<Tensor>& roots) {
  std::vector<Edge> edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge e = gradient_edge(roots[i]);
    KILN_CHECK(e.valid(), "backward: output {} ({}) does not require grad and has no grad_fn; did you forget "
               "set_requires_grad(true) on an input, or compute it under NoGradGuard?", i, roots[i].str());
    edges.push_back(e);
  }
  return edges;
}

std::vector<Tensor> checked_root_grads(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < roots.size(); ++i) {
    Tensor g = i < grads.size() ? grads[i] : Tensor();
    if (!g.defined()) {
      KILN_CHECK(roots[i].numel() == 1, "backward: a gradient can be created implicitly only for single-element "
                 "outputs, but output {} is {}", i, roots[i].str());
      g = ones_like(roots[i]);
    }
    KILN_CHECK(g.sizes() == roots[i].sizes(), "backward: gradient {} has shape {} but output {} has shape {}", i,
               shape_str(g.sizes()), i, shape_str(roots[i].sizes()));
    out.push_back(g);
  }
  return out;
}

}  // namespace

namespace {

// The tensors of an engine call as one list (`groups` in order, undefined entries left out) and back: the inputs
// of the eager region a captured engine call becomes.
struct PackedTensors {
  std::vector<Tensor> flat;
  std::vector<std::vector<bool>> defined;
  explicit PackedTensors(const std::vector<const std::vector<Tensor>*>& groups) {
    for (const std::vector<Tensor>* g : groups) {
      defined.emplace_back();
      for (const Tensor& t : *g) {
        defined.back().push_back(t.defined());
        if (t.defined()) flat.push_back(t);
      }
    }
  }
  static std::vector<std::vector<Tensor>> unpack(const std::vector<std::vector<bool>>& defined,
                                                 const std::vector<Tensor>& flat) {
    std::vector<std::vector<Tensor>> out;
    size_t k = 0;
    for (const std::vector<bool>& group : defined) {
      out.emplace_back();
      for (bool d : group) out.back().push_back(d ? flat.at(k++) : Tensor());
    }
    return out;
  }
};

void run_backward_now(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
                      bool create_graph) {
  EnableGradGuard mode(create_graph);
  GraphTask task;
  execute(task, root_edges_of(roots), checked_root_grads(roots, grads), retain_graph || create_graph, true);
}

std::vector<Tensor> grad_now(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph);

}  // namespace

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
                  bool create_graph, std::source_location where) {
  PackedTensors packed({&roots, &grads});
  run_autograd_call("Tensor::backward()", where, [defined = packed.defined, retain_graph, create_graph](const std::vector<Tensor>& flat) {
    std::vector<std::vector<Tensor>> in = PackedTensors::unpack(defined, flat);
    run_backward_now(in[0], in[1], retain_graph, create_graph);
    return std::vector<Tensor>{};
  }, packed.flat);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph,
                         std::source_location where) {
  PackedTensors packed({&outputs, &inputs, &grad_outputs});
  return run_autograd_call("kiln::grad()", where, [defined = packed.defined, retain_graph, create_graph](const std::vector<Tensor>& flat) {
    std::vector<std::vector<Tensor>> in = PackedTensors::unpack(defined, flat);
    return grad_now(in[0], in[1], in[2], retain_graph, create_graph);
  }, packed.flat);
}

namespace {

std::vector<Tensor> grad_now(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph) {
  EnableGradGuard mode(create_graph);
  GraphTask task;
  task.captured.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    KILN_CHECK(e.valid(), "grad: input {} ({}) does not require grad", i, inputs[i].str());
    task.captures[{e.fn.get(), e.input_nr}] = i;
    task.capture_edges.push_back(e);
  }
  execute(task, root_edges_of(outputs), checked_root_grads(outputs, grad_outputs), retain_graph || create_graph,
          false);
  return task.captured;
}

}  // namespace

// ---------------------------------------------------------------- Tensor members that need ops
void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph, std::source_location where) const {
  KILN_CHECK(gradient.defined() || numel() == 1, "backward: a gradient can be created implicitly only for "
             "single-element outputs, but this output is {}; pass a gradient of the same shape", str());
  run_backward({*this}, {gradient}, retain_graph, create_graph, where);  // the engine makes the implicit ones
}

namespace {
void retain_grad_now(const Tensor& t) {
  if (t.is_leaf()) return;  // leaves keep their gradient anyway
  if (t.impl()->autograd->retains_grad) return;
  t.impl()->autograd->retains_grad = true;
  std::weak_ptr<TensorImpl> weak = t.impl_ptr();
  register_hook_raw(t, [weak](const Tensor& g) {
    if (auto impl = weak.lock()) {
      Tensor self(impl);
      Tensor prev = stored_grad(self);
      set_grad_raw(self, prev.defined() ? add(prev, g) : clone(g));
    }
    return Tensor();
  });
}

// A read or change of `self`'s autograd state by user code: inside a function being captured, an eager region
// (break kind `autograd`), so each compiled call repeats it on that call's tensor instead of the trace keeping the
// first call's tensor or state; elsewhere it runs at once. `change` returns the tensor the call returns (an
// undefined one when none).
Tensor autograd_state_call(std::string_view what, const std::source_location& where, const Tensor& self,
                           std::function<Tensor(const Tensor&)> change) {
  std::vector<Tensor> out = run_autograd_call(what, where, [change = std::move(change)](const std::vector<Tensor>& in) {
    Tensor r = change(in[0]);
    return r.defined() ? std::vector<Tensor>{r} : std::vector<Tensor>{};
  }, {self}, AutogradCallKind::State);
  return out.empty() ? Tensor() : out[0];
}
}  // namespace

void Tensor::retain_grad(std::source_location where) const {
  autograd_state_call("Tensor::retain_grad()", where, *this, [](const Tensor& t) { return retain_grad_now(t), Tensor(); });
}

Tensor& Tensor::set_requires_grad(bool r, std::source_location where) {
  autograd_state_call("Tensor::set_requires_grad()", where, *this, [r](const Tensor& t) {
    set_requires_grad_raw(t, r);
    return t;
  });
  return *this;
}

Tensor Tensor::grad(std::source_location where) const {
  return autograd_state_call("Tensor::grad()", where, *this, [](const Tensor& t) { return stored_grad(t); });
}

void Tensor::set_grad(const Tensor& g, std::source_location where) {
  if (!g.defined()) {  // clearing: the region has the one input
    autograd_state_call("Tensor::set_grad()", where, *this, [](const Tensor& t) { return set_grad_raw(t, {}), Tensor(); });
    return;
  }
  run_autograd_call("Tensor::set_grad()", where, [](const std::vector<Tensor>& in) {
    set_grad_raw(in[0], in[1]);
    return std::vector<Tensor>{};
  }, {*this, g}, AutogradCallKind::State);
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook, std::source_location where) const {
  autograd_state_call("Tensor::register_hook()", where, *this, [hook = std::move(hook)](const Tensor& t) {
    register_hook_raw(t, hook);
    return t;
  });
}

// ---------------------------------------------------------------- the dispatcher's hook
namespace {
class EngineHook final : public AutogradHook {
 public:
  void record_op(const OpCall& call, std::vector<Tensor>& outputs) override { kiln::record_op(call, outputs); }
  std::vector<Tensor> run_inplace_recorded(const OpCall& call) override { return kiln::run_inplace_recorded(call); }
};
EngineHook g_engine_hook;
[[maybe_unused]] const bool g_engine_hook_installed = (set_autograd_hook(&g_engine_hook), true);
}  // namespace

}  // namespace kiln

// CMakeLists.txt tells the linker to keep this symbol, so every program linking libkiln links this file and
// the dispatcher's hook above is installed (a static library would otherwise drop an unreferenced object).
extern "C" const int kiln_autograd_link_anchor = 0;
