// The host program of a compiled graph (program.h): inputs bound, then each step of the schedule (a kernel the
// backend launches, or an extern call to an eager kernel) and the frees of the memory plan after it; and the
// run under the repro hook.
#include "inductor/program.h"

#include "eager/device_copy.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/trace.h"
#include "eager/loops.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln {

using namespace inductor;

namespace {

// A tensor over `storage` with the given view (offset in elements).
Tensor tensor_on(const std::shared_ptr<Storage>& storage, DType dt, const Shape& sizes, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage;
  impl->dtype = dt;
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  return Tensor(impl);
}

// Blocks returned after their last use, reused for later buffers of the same size (the memory plan's reuse).
class BufferPool {
 public:
  std::shared_ptr<Storage> take(int64_t nbytes) {
    auto it = free_.find(nbytes);
    if (it == free_.end()) return Storage::allocate(std::max<int64_t>(nbytes, 1));
    std::shared_ptr<Storage> s = std::move(it->second);
    free_.erase(it);
    return s;
  }
  void give(std::shared_ptr<Storage> s, int64_t nbytes) {
    if (s.use_count() == 1) free_.emplace(nbytes, std::move(s));  // not aliased by an output or extern result
  }

 private:
  std::multimap<int64_t, std::shared_ptr<Storage>> free_;
};

// The eager kernel's non-tensor argument `a` as an IValue.
IValue scalar_arg(const graph::Arg& a) {
  return std::visit([](const auto& v) -> IValue {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, std::monostate> || std::is_same_v<V, graph::TensorArg> ||
                  std::is_same_v<V, graph::TensorListArg>)
      return IValue();
    else
      return IValue(v);
  }, a);
}

}  // namespace

// What one run of the host program holds: a tensor per buffer (undefined until written) and the pool.
struct CompiledGraph::Impl::RunState {
  std::vector<Tensor> bufs;
  BufferPool pool;
  // Recording runs fill each buffer with NaN bytes when a kernel first takes it, so a read of memory no step
  // wrote gives the same (NaN) value on every run instead of what the last run left there.
  bool poison_fresh_buffers = false;
};

// The inputs, each in the layout the kernels index (copied when its strides differ), and the constants.
void CompiledGraph::Impl::bind_inputs(RunState& rs, const std::vector<Tensor>& inputs) const {
  const LoweredGraph& lg = lowered;
  KILN_CHECK(int(inputs.size()) == lg.num_inputs, "compiled graph {}: expected {} inputs, got {}", graph.name,
             lg.num_inputs, inputs.size());
  rs.bufs.resize(lg.buffers.size());
  for (size_t b = 0; b < lg.buffers.size(); ++b) {
    const Buffer& buf = lg.buffers[b];
    if (buf.kind == Buffer::Kind::Constant) rs.bufs[b] = buf.constant;
    if (buf.kind != Buffer::Kind::Input) continue;
    const Tensor& t = inputs[size_t(buf.input_index)];
    KILN_CHECK(t.dtype() == buf.dtype && t.sizes() == buf.sizes, "compiled graph {}: input %{} must be {}{}, got {}",
               graph.name, buf.name, dtype_name(buf.dtype), shape_str(buf.sizes), t.str());
    if (t.strides() == buf.strides || t.numel() <= 1) {
      rs.bufs[b] = t;
    } else {  // the kernels index the compiled layout
      Tensor copy = Tensor::empty_strided(buf.sizes, buf.strides, buf.dtype);
      copy_into(copy, t);
      rs.bufs[b] = copy;
    }
  }
}

// A kernel over its buffers (intermediates allocated from the pool at their first write); its status word
// becomes eager's error (integer division by zero) or names the injected runtime error.
void CompiledGraph::Impl::run_kernel(RunState& rs, int kernel) const {
  const Kernel& k = schedule.kernels[size_t(kernel)];
  std::vector<char*> ptrs;
  for (int b : kernels->args(kernel)) {
    if (!rs.bufs[size_t(b)].defined()) {
      const Buffer& buf = lowered.buffers[size_t(b)];
      rs.bufs[size_t(b)] = tensor_on(rs.pool.take(buf.nbytes()), buf.dtype, buf.sizes, buf.strides, 0);
      if (rs.poison_fresh_buffers && buf.nbytes() > 0) std::memset(rs.bufs[size_t(b)].data_ptr(), 0xff, size_t(buf.nbytes()));
    }
    ptrs.push_back(static_cast<char*>(rs.bufs[size_t(b)].data_ptr()));
  }
  const int32_t status = kernels->launch(kernel, ptrs.data());
  if (status == kStatusZeroDivision)
    fail("compiled graph {}: ZeroDivisionError: integer division by zero in kernel {} (computing {})", graph.name,
         k.name, lowered.nodes[size_t(k.loops.back().node)].origin);
  if (status >= kStatusInjectedBase && size_t(status - kStatusInjectedBase) < inject.entries.size())
    fail("compiled graph {}: kernel {} reported an injected runtime error (KILN_INJECT={}:runtime_error)",
         graph.name, k.name, inject.entries[size_t(status - kStatusInjectedBase)].target);
  if (status != 0) fail("compiled graph {}: kernel {} reported runtime error code {}", graph.name, k.name, status);
}

// The arguments of extern node `node`'s eager kernel: views of its input buffers, constants, scalars.
std::vector<IValue> CompiledGraph::Impl::extern_args(const std::vector<Tensor>& bufs, int node) const {
  const LoopNode& n = lowered.nodes[size_t(node)];
  const graph::Node& gn = graph.nodes()[size_t(n.graph_node)];
  const std::vector<Tensor>& consts = extern_constants[size_t(node)];
  size_t slot = 0;
  auto view = [&]() -> Tensor {
    size_t i = slot++;
    if (consts[i].defined()) return consts[i];
    const BufferView& v = n.extern_inputs[i];
    if (v.buffer < 0) return Tensor();
    const Tensor& base = bufs[size_t(v.buffer)];
    return tensor_on(base.storage(), base.dtype(), v.sizes, v.strides, base.offset() + v.offset);
  };
  std::vector<IValue> args;
  for (const graph::Arg& a : gn.args) {
    if (std::holds_alternative<graph::TensorArg>(a)) {
      args.emplace_back(view());
    } else if (auto* l = std::get_if<graph::TensorListArg>(&a)) {
      TensorList list;
      for (size_t j = 0; j < l->ids.size(); ++j) list.push_back(view());
      args.emplace_back(list);
    } else {
      args.push_back(scalar_arg(a));
    }
  }
  return args;
}

// An extern node: its eager kernel, its errors named as the interpreter names the node; results that are not
// contiguous or not the buffer's dtype are copied into the buffer's layout.
std::vector<Tensor> CompiledGraph::Impl::call_extern(const std::vector<Tensor>& bufs, int node) const {
  const LoopNode& n = lowered.nodes[size_t(node)];
  const graph::Node& gn = graph.nodes()[size_t(n.graph_node)];
  std::vector<Tensor> outs;
  try {
    outs = dispatch(bind_args(gn.info(), extern_args(bufs, node)));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", node_labels(gn), e.what()), e.internal());
  }
  std::vector<Tensor> results(n.extern_outputs.size());
  for (size_t i = 0; i < n.extern_outputs.size(); ++i) {
    int b = n.extern_outputs[i];
    if (b < 0) continue;
    const Buffer& buf = lowered.buffers[size_t(b)];
    Tensor r = outs.at(i);
    if (!r.is_contiguous() || r.dtype() != buf.dtype) {
      Tensor c = Tensor::empty(buf.sizes, buf.dtype);
      copy_into(c, r);
      r = c;
    }
    results[i] = r;
  }
  return results;
}

void CompiledGraph::Impl::run_extern(RunState& rs, int node) const {
  const LoopNode& n = lowered.nodes[size_t(node)];
  std::vector<Tensor> results = call_extern(rs.bufs, node);
  for (size_t i = 0; i < n.extern_outputs.size(); ++i)
    if (n.extern_outputs[i] >= 0) rs.bufs[size_t(n.extern_outputs[i])] = results[i];
}

// The memory plan: buffers whose last use was this step go back to the pool.
void CompiledGraph::Impl::free_after(RunState& rs, const Step& st) const {
  for (int b : st.free_after) {
    rs.pool.give(rs.bufs[size_t(b)].storage(), lowered.buffers[size_t(b)].nbytes());
    rs.bufs[size_t(b)] = Tensor();
  }
}

std::vector<Tensor> CompiledGraph::Impl::collect_outputs(const RunState& rs) const {
  std::vector<Tensor> outs;
  for (const BufferView& v : lowered.outputs) {
    const Tensor& base = rs.bufs.at(size_t(v.buffer));
    if (v.sizes == base.sizes() && v.strides == base.strides() && v.offset == 0) outs.push_back(base);
    else outs.push_back(tensor_on(base.storage(), base.dtype(), v.sizes, v.strides, base.offset() + v.offset));
  }
  return outs;
}

// Copies of the buffers step `st` wrote: a kernel's loop outputs other than its kernel-local rows, or an extern
// call's results.
void CompiledGraph::Impl::record_step(const RunState& rs, const Step& st, std::vector<Materialised>& out) const {
  std::vector<int> written;
  if (st.kind == Step::Kind::Kernel) {
    const Kernel& k = schedule.kernels[size_t(st.index)];
    for (const KernelLoop& l : k.loops) {
      int b = lowered.nodes[size_t(l.node)].buffer;
      if (std::find(k.local_buffers.begin(), k.local_buffers.end(), b) == k.local_buffers.end()) written.push_back(b);
    }
  } else {
    for (int b : lowered.nodes[size_t(st.index)].extern_outputs)
      if (b >= 0) written.push_back(b);
  }
  const std::string step = st.kind == Step::Kind::Kernel ? schedule.kernels[size_t(st.index)].name : "extern";
  for (int b : written) {
    if (b < 0 || !rs.bufs[size_t(b)].defined()) continue;
    const std::string& name = lowered.buffers[size_t(b)].name;
    graph::SourceLoc loc;
    if (std::optional<graph::ValueId> v = graph.find_value(name); v && graph.value(*v).producer >= 0)
      loc = graph.nodes()[size_t(graph.value(*v).producer)].loc;
    out.push_back({name, step, clone(rs.bufs[size_t(b)]), loc});
  }
}

// The host program: inputs bound, then each step (a kernel or an extern call) and the frees after it.
std::vector<Tensor> CompiledGraph::Impl::run(const std::vector<Tensor>& inputs, std::vector<Materialised>* record) const {
  // KILN_TRACE_RUNTIME: each step of the host program timed (a device backend's own runner, CUDA's, records only
  // the call).
  const bool traced = trace_runtime_enabled();
  if (!record)
    if (std::optional<std::vector<Tensor>> outs = kernels->run_program(*this, inputs)) return std::move(*outs);
  if (std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && !t.is_meta() && is_cuda(t); })) {
    KILN_CHECK(record, "compiled graph {} runs on the host (it was compiled for the CPU), but an input is a CUDA "
               "tensor; compile it for the GPU (--backend inductor_cuda) or move the inputs with to(cpu)", graph.name);
    std::vector<Tensor> host;  // recording runs copy every buffer to the host anyway
    for (const Tensor& t : inputs) host.push_back(t.defined() ? to_device(t, Device{}) : t);
    return run(host, record);
  }
  RunState rs;
  rs.poison_fresh_buffers = record != nullptr;
  bind_inputs(rs, inputs);
  NoGradGuard no_grad;
  for (const Step& st : schedule.steps) {
    const int64_t start = traced ? trace_clock_us() : 0;
    if (st.kind == Step::Kind::Kernel) run_kernel(rs, st.index);
    else run_extern(rs, st.index);
    if (traced) {
      const bool kernel = st.kind == Step::Kind::Kernel;
      trace_event_for(compile_id, "launch", {{"graph", graph.name}, {"kind", kernel ? "kernel" : "extern"},
                                             {"name", kernel ? schedule.kernels[size_t(st.index)].name
                                                             : lowered.nodes[size_t(st.index)].origin},
                                             {"start_us", start}, {"wall_us", trace_clock_us() - start}});
    }
    if (record) record_step(rs, st, *record);
    free_after(rs, st);
  }
  return collect_outputs(rs);
}

// A run under the repro hook: a runtime error is reported with the inputs as they were before the run (an
// in-place node may change them), the first good run drops the hook's pending repro, and at level 4 the
// outputs are checked against the fp64 reference.
std::vector<Tensor> CompiledGraph::Impl::run_watched(const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> before;
  {
    NoGradGuard no_grad;
    for (const Tensor& t : inputs) before.push_back(history_free_alias(clone(t)));
  }
  std::vector<Tensor> outputs;
  try {
    outputs = run(inputs);
  } catch (const Error& e) {
    watch->hook->failed(watch->source, &before, "runtime_error", e.what(), "inductor/run", watch->backend);
    throw;
  }
  if (!watch->ran_once.exchange(true)) watch->hook->first_run_succeeded(watch->source);
  if (watch->hook->wants_accuracy()) watch->hook->check_accuracy(watch->source, before, outputs, watch->backend);
  return outputs;
}

CompiledGraph::CompiledGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledGraph::~CompiledGraph() = default;
std::vector<Tensor> CompiledGraph::operator()(const std::vector<Tensor>& inputs) const {
  if (!trace_runtime_enabled()) return impl_->watch ? impl_->run_watched(inputs) : impl_->run(inputs);
  const int64_t start = trace_clock_us();  // KILN_TRACE_RUNTIME: each call, with its wall time
  std::vector<Tensor> outputs = impl_->watch ? impl_->run_watched(inputs) : impl_->run(inputs);
  trace_event_for(impl_->compile_id, "call", {{"graph", impl_->graph.name}, {"start_us", start},
                                              {"wall_ms", double(trace_clock_us() - start) / 1000.0}});
  return outputs;
}
std::vector<CompiledGraph::Materialised> CompiledGraph::run_recording(const std::vector<Tensor>& inputs) const {
  std::vector<Materialised> record;
  impl_->run(inputs, &record);
  return record;
}
const CompileStats& CompiledGraph::stats() const { return impl_->stats; }
const std::string& CompiledGraph::loop_ir() const { return impl_->loop_ir; }
const std::vector<std::string>& CompiledGraph::kernel_llvm_ir() const { return impl_->kernels->code(); }
const std::vector<std::string>& CompiledGraph::decisions() const { return impl_->decisions; }

}  // namespace kiln
