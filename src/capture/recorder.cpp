// The recorder (see recorder.h).
#include "capture/recorder.h"

#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "core/options.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/rewrite.h"

namespace kiln::capture {

namespace {
// A graph break: on KILN_LOGS=graph_breaks and in the trace (core/trace.h), with the user's line.
void note_graph_break(const std::string& function, const SourceSite& site, const std::string& reason) {
  KILN_LOG(LogChannel::GraphBreaks, "graph break in {} at {}: {}", function, site.str(), reason);
  trace_event("graph_break", {{"function", function}, {"site", site.str()}, {"reason", reason}});
}
}  // namespace

namespace {
thread_local Recorder* t_current = nullptr;
}  // namespace

std::string_view break_kind_name(BreakKind k) {
  switch (k) {
    case BreakKind::Item: return "item";
    case BreakKind::Bool: return "bool";
    case BreakKind::Elements: return "elements";
    case BreakKind::Disable: return "disable";
    case BreakKind::Print: return "print";
    case BreakKind::UnsupportedOp: return "unsupported_op";
    case BreakKind::Autograd: return "autograd";
  }
  return "?";
}

ScopedNoRecording::ScopedNoRecording()
    : calls_(set_eager_call_observer(nullptr)), reads_(set_tensor_read_observer(nullptr)) {}
ScopedNoRecording::~ScopedNoRecording() {
  set_eager_call_observer(calls_);
  set_tensor_read_observer(reads_);
}

Recorder::Recorder(const Flat& args, const std::vector<std::string>& leaf_names, RecordOptions options)
    : options_(std::move(options)), keep_input_values_(!opt_string(Opt::DebugDir).empty()) {
  for (size_t i = 0; i < args.leaves.size(); ++i) {
    const Leaf& leaf = args.leaves[i];
    if (!leaf.is_tensor) continue;
    KILN_CHECK(leaf.tensor.defined(), "kiln::compile: argument '{}' is an undefined tensor", leaf_names.at(i));
    KILN_CHECK(!leaf.tensor.is_meta(), "kiln::compile: argument '{}' is a meta tensor (it has no data to run on)",
               leaf_names.at(i));
    if (known_.count(leaf.tensor.impl())) continue;  // the same tensor twice: the first leaf stands for both
    int v = new_value(ValueSource::Argument, leaf_names.at(i), leaf.tensor.meta());
    trace_.values[size_t(v)].leaf = int(i);
    bind(leaf.tensor, v);
  }
  previous_calls_ = set_eager_call_observer(this);
  previous_reads_ = set_tensor_read_observer(this);
  t_current = this;
}

Recorder::~Recorder() {
  set_eager_call_observer(previous_calls_);
  set_tensor_read_observer(previous_reads_);
  t_current = nullptr;
}

Recorder* Recorder::current() { return t_current; }

int Recorder::new_value(ValueSource source, const std::string& name, const TensorMeta& meta) {
  TraceValue v;
  v.source = source;
  v.name = name.empty() ? fmt::format("t{}", trace_.values.size()) : name;
  v.meta = meta;
  trace_.values.push_back(std::move(v));
  return int(trace_.values.size()) - 1;
}

void Recorder::bind(const Tensor& t, int value) { known_[t.impl()] = Known{t.impl_ptr(), value}; }

// The trace value `t` stands for: a known one, or a tensor the function read from elsewhere (captured
// weights, or tensors it made without an op; finish() tells them apart).
int Recorder::value_of(const Tensor& t) {
  auto it = known_.find(t.impl());
  if (it != known_.end() && !it->second.impl.expired()) return it->second.value;
  int v = new_value(ValueSource::Captured, "", t.meta());
  trace_.values[size_t(v)].name = fmt::format("captured{}", held_.size());
  held_.emplace_back(v, t);
  trace_.introduced.emplace_back(int(trace_.steps.size()), v);
  bind(t, v);
  return v;
}

graph::ValueId Recorder::graph_value(const Tensor& t) {
  int value = value_of(t);
  auto it = in_open_.find(value);
  if (it != in_open_.end()) return it->second;
  const TraceValue& tv = trace_.values[size_t(value)];
  graph::ValueId id = open_.graph.add_input(tv.name, tv.meta);
  open_.inputs.push_back(value);
  open_.example_inputs.push_back(t);
  if (keep_input_values_) {
    ScopedNoRecording off;
    open_.input_values.push_back(graph::layout_preserving_copy(t, t.dtype()));
  }
  in_open_[value] = id;
  return id;
}

graph::Arg Recorder::graph_arg(const IValue& v) {
  if (v.is_none()) return std::monostate{};
  if (v.is_tensor()) {
    const Tensor& t = v.tensor();
    if (!t.defined()) return std::monostate{};
    if (t.is_wrapped_number()) {
      ScopedNoRecording off;
      return t.item();
    }
    return graph::TensorArg{graph_value(t)};
  }
  if (v.is_tensor_list()) {
    graph::TensorListArg list;
    for (const Tensor& t : v.tensor_list()) list.ids.push_back(t.defined() ? graph_value(t) : graph::kNoValue);
    return list;
  }
  if (v.is_scalar()) return v.scalar();
  if (v.is_int_list()) return v.int_list();
  if (v.is_dtype()) return v.dtype();
  return v.string();
}

void Recorder::check_fullgraph(std::string_view reason, const SourceSite& site) {
  if (options_.fullgraph)
    fail("fullgraph: graph break in {} at {}: {} (fullgraph = true asks for one graph; remove the break or set "
         "fullgraph = false)",
         options_.function, site.str(), reason);
}

// Why `call` cannot go into a graph ("" when it can): graphs carry autograd history only on backends that
// compile them with AOT autograd (RecordOptions::differentiable_graphs), and an op whose output shape shape
// inference cannot tell from the input shapes depends on data.
std::string Recorder::unsupported_reason(const OpCall& call) {
  const OpInfo& op = *call.op;
  if (grad_mode_enabled() && op.differentiable && !options_.differentiable_graphs)
    for (const Tensor& t : call.flat_tensors())
      if (t.defined() && t.requires_grad())
        return fmt::format("{} needs autograd (an input requires grad, grad mode is on): captured graphs do not "
                           "record autograd history on this backend (aot_eager, aot_eager_decomp_partition and inductor do)",
                           op.name);
  return "";
}

namespace {
bool is_an_input(const OpCall& call, const Tensor& t) {
  for (const Tensor& in : call.flat_tensors())
    if (in.defined() && in.same(t)) return true;
  return false;
}
}  // namespace

void Recorder::observe(const OpCall& call, const std::vector<Tensor>& outputs) {
  const OpInfo& op = *call.op;
  std::string reason = unsupported_reason(call);
  if (!reason.empty()) return record_unsupported(call, outputs, reason);
  std::vector<graph::Arg> args;
  for (const IValue& v : call.args) args.push_back(graph_arg(v));
  std::vector<graph::ValueId> ids;
  try {
    // Graph values take the names of the trace values they become (t<id>), given here: a value renamed after
    // it is added is not found by name (Graph::find_value), which the minifier relies on.
    std::vector<std::string> names;
    for (size_t i = 0; i < outputs.size(); ++i) names.push_back(fmt::format("t{}", trace_.values.size() + i));
    ids = open_.graph.add_op(op.id, std::move(args), std::move(names));
  } catch (const Error& e) {
    return record_unsupported(call, outputs, fmt::format("{}: shape inference failed ({})", op.name, e.what()));
  }
  for (size_t i = 0; i < ids.size() && i < outputs.size(); ++i) {
    const TensorMeta& m = open_.graph.value(ids[i]).meta;
    if (m.dtype != outputs[i].dtype() || m.sizes != outputs[i].sizes()) {
      std::vector<bool> dead(open_.graph.nodes().size(), false);
      dead.back() = true;  // the node just added: its values stay unused
      graph::erase_nodes(open_.graph, dead);
      return record_unsupported(call, outputs,
                                fmt::format("{}: its output shape depends on the data (eager gave {}{}, shape "
                                            "inference {}{})",
                                            op.name, dtype_name(outputs[i].dtype()), shape_str(outputs[i].sizes()),
                                            dtype_name(m.dtype), shape_str(m.sizes)));
    }
  }
  const SourceSite site = SourceSite::of_call(call);
  if (call.where.line() > 0)
    open_.graph.nodes().back().loc = {int(call.where.line()), int(call.where.column()), call.where.file_name()};
  ++trace_.recorded_ops;
  int mutated = op.is_inplace() ? value_of(call.tensor(0)) : -1;
  for (size_t i = 0; i < ids.size(); ++i) {
    int v = new_value(ValueSource::Op, open_.graph.value(ids[i]).name, open_.graph.value(ids[i]).meta);
    in_open_[v] = ids[i];
    defined_in_open_.push_back(v);
    // An op eager answers with its input object (contiguous of a contiguous tensor, `to` its own dtype) leaves
    // that object's value as it was: rebinding it would make a later in-place write through it a write to the
    // op's value, never written back to the argument it is.
    if (i < outputs.size() && (op.is_inplace() || !is_an_input(call, outputs[i]))) bind(outputs[i], v);
    if (i == 0 && mutated >= 0) {
      // A new version of an argument or captured tensor: written back after a run (Segment::writebacks).
      int root = mutated;
      while (trace_.values[size_t(root)].written_back_to >= 0) root = trace_.values[size_t(root)].written_back_to;
      ValueSource s = trace_.values[size_t(root)].source;
      if (s == ValueSource::Argument || s == ValueSource::Captured) trace_.values[size_t(v)].written_back_to = root;
    }
  }
  KILN_LOG(LogChannel::CaptureOps, "{}: recorded {} at {} (graph {}, op {})", options_.function, op.name, site.str(),
           trace_.segments.size() + 1, open_.graph.num_op_nodes());
}

std::vector<Tensor> Recorder::autograd_call(std::string_view what, AutogradCallKind kind,
                                            const std::source_location& where, const Region& run,
                                            const std::vector<Tensor>& inputs) {
  std::string reason =
      kind == AutogradCallKind::Engine
          ? fmt::format("{} runs the autograd engine, which a graph cannot hold: it runs eagerly on every call "
                        "(compute the loss in the compiled function and call backward() outside it to keep one graph)",
                        what)
          : fmt::format("{} reads or changes a tensor's autograd state, which a graph cannot hold: it runs eagerly "
                        "on every call, on that call's tensor (call it outside the compiled function to keep one graph)",
                        what);
  return eager_region(BreakKind::Autograd, std::move(reason), SourceSite::from(where), run, inputs);
}

void Recorder::record_unsupported(const OpCall& call, const std::vector<Tensor>& outputs, const std::string& reason) {
  const SourceSite site = SourceSite::of_call(call);
  check_fullgraph(reason, site);
  // The op runs eagerly on every call with the arguments of this call (tensors replaced by the call's).
  graph::Node template_node;
  template_node.op = call.op->id;
  std::vector<Tensor> inputs;
  for (const IValue& v : call.args) {
    if (v.is_tensor() && v.tensor().defined() && !v.tensor().is_wrapped_number()) {
      template_node.args.push_back(graph::TensorArg{graph::ValueId(inputs.size())});
      inputs.push_back(v.tensor());
    } else if (v.is_tensor_list()) {
      graph::TensorListArg list;
      for (const Tensor& t : v.tensor_list()) {
        list.ids.push_back(t.defined() ? graph::ValueId(inputs.size()) : graph::kNoValue);
        if (t.defined()) inputs.push_back(t);
      }
      template_node.args.push_back(list);
    } else {
      template_node.args.push_back(graph_arg(v));  // not a graph value: a number, list, dtype, string or None
    }
  }
  auto run = [template_node](const std::vector<Tensor>& in) {
    return dispatch(bind_args(template_node.info(),
                              graph::node_ivalues(template_node, [&](graph::ValueId i) { return in.at(size_t(i)); })));
  };
  std::vector<int> input_values;
  for (const Tensor& t : inputs) input_values.push_back(value_of(t));
  close_segment();
  EagerRegion region{BreakKind::UnsupportedOp, reason, site, run, input_values, {}, {}};
  for (const Tensor& t : outputs) {
    int v = new_value(ValueSource::Eager, "", t.meta());
    region.outputs.push_back(v);
    region.output_metas.push_back(t.meta());
    bind(t, v);
  }
  note_graph_break(options_.function, site, reason);
  trace_.steps.push_back({Step::Kind::Eager, int(trace_.eager.size())});
  trace_.eager.push_back(std::move(region));
}

void Recorder::read(const Tensor& t, TensorRead kind, const std::source_location& where) {
  SourceSite site = SourceSite::from(where);
  std::string reason = kind == TensorRead::Item   ? "Tensor.item(): the trace needs the tensor's value"
                       : kind == TensorRead::Bool ? "data-dependent branch: a tensor converted to bool (is_nonzero)"
                                                  : "the tensor's elements are read on the host (to_double_vector)";
  check_fullgraph(reason, site);
  int value = value_of(t);
  BranchPoint branch{BreakKind::Item, reason, site, value, {}};
  {
    ScopedNoRecording off;
    if (kind == TensorRead::Elements) {
      branch.kind = BreakKind::Elements;
      for (double d : t.to_double_vector()) branch.observed.push_back(Scalar(d));
    } else {
      KILN_CHECK(t.numel() == 1, "{}: a tensor with {} elements cannot be converted to a {}", site.str(), t.numel(),
                 kind == TensorRead::Bool ? "bool" : "number");
      Scalar s = t.item();
      branch.kind = kind == TensorRead::Bool ? BreakKind::Bool : BreakKind::Item;
      branch.observed.push_back(kind == TensorRead::Bool ? Scalar(s.to_bool()) : s);
    }
  }
  close_segment();
  note_graph_break(options_.function, site, reason);
  trace_.steps.push_back({Step::Kind::Branch, int(trace_.branches.size())});
  trace_.branches.push_back(std::move(branch));
}

std::vector<Tensor> Recorder::eager_region(BreakKind kind, std::string reason, SourceSite site,
                                           std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run,
                                           const std::vector<Tensor>& inputs) {
  check_fullgraph(reason, site);
  std::vector<int> input_values;
  for (const Tensor& t : inputs) {
    KILN_CHECK(t.defined(), "{}: an input of a {} region is an undefined tensor", site.str(), break_kind_name(kind));
    input_values.push_back(value_of(t));
  }
  close_segment();
  std::vector<Tensor> outputs;
  {
    ScopedNoRecording off;
    Recorder* self = t_current;
    t_current = nullptr;  // a compiled function called inside runs as it would outside
    struct Restore {
      Recorder* r;
      ~Restore() { t_current = r; }
    } restore{self};
    outputs = run(inputs);
  }
  EagerRegion region{kind, reason, site, std::move(run), input_values, {}, {}};
  for (const Tensor& t : outputs) {
    KILN_CHECK(t.defined(), "{}: a {} region returned an undefined tensor", site.str(), break_kind_name(kind));
    int v = new_value(ValueSource::Eager, "", t.meta());
    region.outputs.push_back(v);
    region.output_metas.push_back(t.meta());
    bind(t, v);
  }
  note_graph_break(options_.function, site, reason);
  trace_.steps.push_back({Step::Kind::Eager, int(trace_.eager.size())});
  trace_.eager.push_back(std::move(region));
  return outputs;
}

// Ends the open graph segment: its outputs are the values it defined that are still alive (a later part
// of the function may read them), or at the end exactly the values the result needs, plus new versions of
// arguments and captured tensors (in-place updates are kept and written back).
void Recorder::close_segment(const std::vector<int>* final_outputs) {
  if (open_.graph.num_op_nodes() > 0) {
    std::vector<int> outs;
    std::unordered_map<int, bool> alive;
    for (const auto& [impl, known] : known_)
      if (!known.impl.expired()) alive[known.value] = true;
    for (int v : defined_in_open_) {
      bool needed = final_outputs ? std::find(final_outputs->begin(), final_outputs->end(), v) != final_outputs->end()
                                  : alive.count(v) > 0;
      bool written_back = trace_.values[size_t(v)].written_back_to >= 0 && alive.count(v) > 0;
      if (needed || written_back) outs.push_back(v);
    }
    std::vector<graph::ValueId> ids;
    for (int v : outs) {
      if (trace_.values[size_t(v)].written_back_to >= 0)
        open_.writebacks.emplace_back(int(ids.size()), trace_.values[size_t(v)].written_back_to);
      ids.push_back(in_open_.at(v));
    }
    open_.graph.set_outputs(ids);
    open_.outputs = outs;
    open_.graph.name = fmt::format("graph{}", trace_.segments.size() + 1);
    trace_.steps.push_back({Step::Kind::Graph, int(trace_.segments.size())});
    trace_.segments.push_back(std::move(open_));
  }
  for (auto it = known_.begin(); it != known_.end();) it = it->second.impl.expired() ? known_.erase(it) : std::next(it);
  open_ = Segment{};
  in_open_.clear();
  defined_in_open_.clear();
}

Trace Recorder::finish(const Flat& result) {
  std::vector<int> needed;
  for (const Leaf& leaf : result.leaves) {
    OutputLeaf out;
    if (leaf.is_tensor) {
      KILN_CHECK(leaf.tensor.defined(), "kiln::compile: {} returned an undefined tensor", options_.function);
      out.value = value_of(leaf.tensor);
      needed.push_back(out.value);
    } else {
      out.number = leaf.number;
    }
    trace_.outputs.push_back(out);
  }
  trace_.output_lengths = result.lengths;
  close_segment(&needed);
  // A tensor read from elsewhere that nothing but the trace (and the result) holds now was made by the
  // function itself: a constant. One something else holds (a captured weight) is bound by identity.
  for (auto& [v, t] : held_) {
    long ours = 1;
    for (const Leaf& leaf : result.leaves) ours += leaf.is_tensor && leaf.tensor.same(t);
    for (const Segment& s : trace_.segments)
      for (const Tensor& e : s.example_inputs) ours += e.same(t);
    TraceValue& tv = trace_.values[size_t(v)];
    if (t.impl_ptr().use_count() <= ours) {
      tv.source = ValueSource::Constant;
      ScopedNoRecording off;
      tv.constant = t;
    } else {
      tv.captured = t.impl_ptr();
    }
  }
  held_.clear();
  return std::move(trace_);
}

}  // namespace kiln::capture
