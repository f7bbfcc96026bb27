// Running a compiled CUDA program on device buffers (device_program.h).
#include "backends/cuda/device_program.h"
#include "eager/device_copy.h"

#include "backends/cuda/backend.h"
#include "backends/cuda/cublas.h"
#include "backends/cuda/driver.h"
#include "core/error.h"
#include "core/log.h"
#include "eager/loops.h"
#include "inductor/program.h"
#include "ops/api.h"

namespace kiln::cuda {

using namespace inductor;

namespace {

const CudaKernels& cuda_kernels(const CompiledGraph::Impl& impl) {
  const auto* k = dynamic_cast<const CudaKernels*>(impl.kernels.get());
  KILN_CHECK(k, "graph {} was not compiled for the CUDA backend (CompileOptions::device = \"cuda\")", impl.graph.name);
  return *k;
}

// One run of a program's steps on device memory: a device address per buffer of the lowered graph.
struct DeviceSteps {
  const CompiledGraph::Impl& impl;
  std::vector<CUdeviceptr> ptrs;
  CUdeviceptr status = 0;
  CUstream stream = nullptr;
  std::vector<bool>* fallback_logged;  // per lowered node
};

double scalar_arg_or(const graph::Node& gn, size_t i, double otherwise) {
  if (i >= gn.args.size()) return otherwise;
  const auto* s = std::get_if<Scalar>(&gn.args[i]);
  return s ? s->to_double() : otherwise;
}

// An extern matrix product (mm, bmm, addmm) through cuBLAS on the device buffers; false with why not otherwise.
bool run_extern_on_device(const DeviceSteps& run, int node, std::string* why_not) {
  const CompiledGraph::Impl& impl = run.impl;
  const LoopNode& n = impl.lowered.nodes[size_t(node)];
  const graph::Node& gn = impl.graph.nodes()[size_t(n.graph_node)];
  const std::string op(gn.info().name);
  if (op != "mm" && op != "bmm" && op != "addmm") return *why_not = "not a matrix product cuBLAS runs", false;
  for (size_t i = 0; i < n.extern_inputs.size(); ++i)
    if (impl.extern_constants[size_t(node)][i].defined() || n.extern_inputs[i].buffer < 0)
      return *why_not = "an operand is a constant held on the host", false;
  const int out = n.extern_outputs.at(0);
  const Buffer& c = impl.lowered.buffers[size_t(out)];
  auto matrix = [&](const BufferView& v) {
    const Buffer& b = impl.lowered.buffers[size_t(v.buffer)];
    const size_t d = v.sizes.size();
    DeviceMatrix m{run.ptrs[size_t(v.buffer)] + CUdeviceptr(v.offset * dtype_size(b.dtype)), d == 3 ? v.strides[0] : 0,
                   v.sizes[d - 2], v.sizes[d - 1], v.strides[d - 2], v.strides[d - 1]};
    return m;
  };
  const size_t first = op == "addmm" ? 1 : 0;
  const DeviceMatrix a = matrix(n.extern_inputs[first]), b = matrix(n.extern_inputs[first + 1]);
  const int64_t batch = op == "bmm" ? c.sizes[0] : 1;
  if (c.nbytes() == 0) return true;
  double beta = 0;
  if (op == "addmm" && (beta = scalar_arg_or(gn, 3, 1.0)) != 0) {  // the addend into c first, then c += a @ b
    const BufferView& self = n.extern_inputs[0];
    const CUdeviceptr data = run.ptrs[size_t(self.buffer)] + CUdeviceptr(self.offset * dtype_size(c.dtype));
    const bool row = self.sizes.size() == 1 || (self.sizes.size() == 2 && (self.sizes[0] == 1 || self.strides[0] == 0));
    if (row) {
      if (!device_broadcast_rows(run.stream, c.dtype, a.rows, b.cols, data, self.strides.back(), beta, run.ptrs[size_t(out)], why_not))
        return false;
      beta = 1;
    } else if (self.sizes == c.sizes && self.strides == c.strides) {
      check(driver()->memcpy_dtod(run.ptrs[size_t(out)], data, size_t(c.nbytes())), "cuMemcpyDtoD");
    } else {
      return *why_not = "addmm's addend is neither a row vector nor a contiguous matrix", false;
    }
  }
  return device_gemm(run.stream, c.dtype, batch, a, b, run.ptrs[size_t(out)], scalar_arg_or(gn, 4, 1.0), beta, why_not);
}

// The host fallback of an extern node: its input buffers to the host, its eager kernel, its results back.
void run_extern_on_host(const DeviceSteps& run, int node, const std::string& why_not_on_device) {
  const CompiledGraph::Impl& impl = run.impl;
  const LoopNode& n = impl.lowered.nodes[size_t(node)];
  if (!(*run.fallback_logged)[size_t(node)]) {
    (*run.fallback_logged)[size_t(node)] = true;
    KILN_LOG(LogChannel::Lowering, "graph {}: %{} runs on the host (copied there and back): {}; {}", impl.graph.name,
             n.origin, n.reason, why_not_on_device);
  }
  const Driver& d = *driver();
  check(d.stream_synchronize(run.stream), "cuStreamSynchronize");
  std::vector<Tensor> host(impl.lowered.buffers.size());
  for (const BufferView& v : n.extern_inputs) {
    if (v.buffer < 0 || host[size_t(v.buffer)].defined()) continue;
    const Buffer& b = impl.lowered.buffers[size_t(v.buffer)];
    host[size_t(v.buffer)] = Tensor::empty_strided(b.sizes, b.strides, b.dtype);
    if (b.nbytes() > 0)
      check(d.memcpy_dtoh(host[size_t(v.buffer)].data_ptr(), run.ptrs[size_t(v.buffer)], size_t(b.nbytes())), "cuMemcpyDtoH");
  }
  NoGradGuard no_grad;
  std::vector<Tensor> results = impl.call_extern(host, node);
  for (size_t i = 0; i < n.extern_outputs.size(); ++i) {
    const int b = n.extern_outputs[i];
    if (b < 0) continue;
    const Buffer& buf = impl.lowered.buffers[size_t(b)];
    KILN_ASSERT(results[i].numel() * dtype_size(buf.dtype) == buf.nbytes(), "graph {}: extern %{} returned {} for buffer {}{}",
                impl.graph.name, n.origin, results[i].str(), dtype_name(buf.dtype), shape_str(buf.sizes));
    if (buf.nbytes() > 0) check(d.memcpy_htod(run.ptrs[size_t(b)], results[i].data_ptr(), size_t(buf.nbytes())), "cuMemcpyHtoD");
  }
}

void launch_steps(const DeviceSteps& run) {
  const CudaKernels& kernels = cuda_kernels(run.impl);
  for (const Step& st : run.impl.schedule.steps) {
    if (st.kind == Step::Kind::Extern) {
      std::string why_not;
      if (!run_extern_on_device(run, st.index, &why_not)) run_extern_on_host(run, st.index, why_not);
      continue;
    }
    std::vector<CUdeviceptr> ptrs;
    for (int b : kernels.args(st.index)) ptrs.push_back(run.ptrs[size_t(b)]);
    kernels.launch_on_device(st.index, ptrs, run.status, run.stream);
  }
}

}  // namespace

DeviceProgram::DeviceProgram(std::shared_ptr<CompiledGraph> program, Launches launches)
    : DeviceProgram(*program->impl(), launches) {
  owner_ = std::move(program);
}

DeviceProgram::DeviceProgram(const CompiledGraph::Impl& program, Launches launches)
    : program_(&program), launches_(launches) {
  const CompiledGraph::Impl& impl = *program_;
  cuda_kernels(impl);
  for (const Step& st : impl.schedule.steps)
    KILN_CHECK(st.kind == Step::Kind::Kernel || launches == Launches::Direct,
               "graph {}: reduce-overhead (a CUDA graph) needs every step on the GPU, but %{} runs on the host ({})",
               impl.graph.name, impl.lowered.nodes[size_t(st.index)].origin, impl.lowered.nodes[size_t(st.index)].reason);
  fallback_logged_.assign(impl.lowered.nodes.size(), false);
  std::string why;
  KILN_CHECK(driver(&why), "CUDA: {}", why);
  for (const Buffer& b : impl.lowered.buffers) buffers_.push_back(std::make_unique<DeviceBlock>(size_t(std::max<int64_t>(b.nbytes(), 1))));
  status_ = std::make_unique<DeviceBlock>(sizeof(int32_t));
  check(driver()->stream_create(&stream_, CU_STREAM_DEFAULT), "cuStreamCreate");
  check(driver()->memset_d8(status_->ptr, 0, sizeof(int32_t)), "cuMemsetD8");
  for (size_t i = 0; i < impl.lowered.buffers.size(); ++i) {
    const Buffer& b = impl.lowered.buffers[i];
    if (b.kind == Buffer::Kind::Constant && b.nbytes() > 0) {
      Tensor c = contiguous(b.constant);
      check(driver()->memcpy_htod(buffers_[i]->ptr, c.data_ptr(), size_t(b.nbytes())), "cuMemcpyHtoD");
    }
  }
}

void DeviceProgram::upload(const std::vector<Tensor>& inputs) {
  const CompiledGraph::Impl& impl = *program_;
  for (size_t i = 0; i < impl.lowered.buffers.size(); ++i) {
    const Buffer& b = impl.lowered.buffers[i];
    if (b.kind != Buffer::Kind::Input) continue;
    const Tensor& t = inputs.at(size_t(b.input_index));
    KILN_CHECK(t.dtype() == b.dtype && t.sizes() == b.sizes && t.is_contiguous() && t.strides() == b.strides,
               "graph {}: input %{} must be a contiguous {}{}", impl.graph.name, b.name, dtype_name(b.dtype), shape_str(b.sizes));
    if (b.nbytes() > 0) check(driver()->memcpy_htod(buffers_[i]->ptr, t.data_ptr(), size_t(b.nbytes())), "cuMemcpyHtoD");
  }
}

DeviceProgram::~DeviceProgram() {
  const Driver* d = driver();
  if (!d) return;
  if (stream_) d->stream_synchronize(stream_);
  if (graph_exec_) d->graph_exec_destroy(graph_exec_);
  if (graph_) d->graph_destroy(graph_);
  if (stream_) d->stream_destroy(stream_);
}

void DeviceProgram::launch_steps() {
  DeviceSteps run{*program_, {}, status_->ptr, stream_, &fallback_logged_};
  for (const auto& b : buffers_) run.ptrs.push_back(b->ptr);
  kiln::cuda::launch_steps(run);
}

// The kernels' modules are loaded first (a capture may not load them), then their launches are recorded into a
// graph and instantiated.
void DeviceProgram::capture() {
  const Driver& d = *driver();
  cuda_kernels(*program_).load_on_device();
  check(d.stream_begin_capture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  try {
    launch_steps();
  } catch (...) {
    CUgraph abandoned = nullptr;
    d.stream_end_capture(stream_, &abandoned);
    if (abandoned) d.graph_destroy(abandoned);
    throw;
  }
  check(d.stream_end_capture(stream_, &graph_), "cuStreamEndCapture");
  check(d.graph_instantiate(&graph_exec_, graph_, 0), "cuGraphInstantiate");
}

void DeviceProgram::launch() {
  if (launches_ == Launches::Direct) return launch_steps();
  if (!graph_exec_) capture();
  check(driver()->graph_launch(graph_exec_, stream_), "cuGraphLaunch");
}

DeviceProgram::DeviceView DeviceProgram::input(int i) const {
  const CompiledGraph::Impl& impl = *program_;
  for (size_t b = 0; b < impl.lowered.buffers.size(); ++b) {
    const Buffer& buf = impl.lowered.buffers[b];
    if (buf.kind == Buffer::Kind::Input && buf.input_index == i) return {buffers_[b]->ptr, buf.dtype, buf.sizes, buf.strides};
  }
  fail("graph {}: no input {} (it has {})", impl.graph.name, i, impl.lowered.num_inputs);
}

DeviceProgram::DeviceView DeviceProgram::output(int i) const {
  const CompiledGraph::Impl& impl = *program_;
  KILN_CHECK(i >= 0 && size_t(i) < impl.lowered.outputs.size(), "graph {}: no output {} (it has {})", impl.graph.name, i,
             impl.lowered.outputs.size());
  const BufferView& v = impl.lowered.outputs[size_t(i)];
  KILN_CHECK(v.buffer >= 0, "graph {}: output {} is None", impl.graph.name, i);
  const Buffer& b = impl.lowered.buffers[size_t(v.buffer)];
  return {buffers_[size_t(v.buffer)]->ptr + CUdeviceptr(v.offset * dtype_size(b.dtype)), b.dtype, v.sizes, v.strides};
}

void DeviceProgram::synchronize() const {
  check(driver()->stream_synchronize(stream_), "cuStreamSynchronize");
  int32_t code = 0;
  check(driver()->memcpy_dtoh(&code, status_->ptr, sizeof code), "cuMemcpyDtoH");
  KILN_CHECK(code == 0, "graph {}: a kernel reported runtime error code {}", program_->graph.name, code);
}

std::vector<Tensor> DeviceProgram::download() const {
  const CompiledGraph::Impl& impl = *program_;
  std::vector<Tensor> out;
  for (const BufferView& v : impl.lowered.outputs) {
    KILN_CHECK(v.buffer >= 0, "graph {}: an output is None", impl.graph.name);
    const Buffer& b = impl.lowered.buffers[size_t(v.buffer)];
    Tensor whole = Tensor::empty_strided(b.sizes, b.strides, b.dtype);
    if (b.nbytes() > 0) check(driver()->memcpy_dtoh(whole.data_ptr(), buffers_[size_t(v.buffer)]->ptr, size_t(b.nbytes())), "cuMemcpyDtoH");
    out.push_back(contiguous(as_strided(whole, v.sizes, v.strides, v.offset)));
  }
  return out;
}

int64_t DeviceProgram::io_bytes() const {
  const CompiledGraph::Impl& impl = *program_;
  int64_t bytes = 0;
  for (const Buffer& b : impl.lowered.buffers)
    if (b.kind == Buffer::Kind::Input || b.is_output) bytes += b.nbytes();
  return bytes;
}

}  // namespace kiln::cuda

namespace kiln::cuda {

namespace {

constexpr Device kCuda{DeviceType::CUDA, 0};

CUdeviceptr device_address(const Tensor& t) { return CUdeviceptr(reinterpret_cast<uintptr_t>(t.data_ptr())); }

// `t` as buffer `b` of the program reads it: on the GPU, in the compiled layout (a strided copy through the host
// where the layouts differ, as the host program copies such inputs).
Tensor as_input_buffer(const CompiledGraph::Impl& impl, const Buffer& b, const Tensor& t) {
  KILN_CHECK(t.defined() && t.dtype() == b.dtype && t.sizes() == b.sizes, "compiled graph {}: input %{} must be {}{}, got {}",
             impl.graph.name, b.name, dtype_name(b.dtype), shape_str(b.sizes), t.defined() ? t.str() : "undefined");
  if (t.strides() == b.strides || t.numel() <= 1) return to_device(t, kCuda);
  Tensor host = Tensor::empty_strided(b.sizes, b.strides, b.dtype);
  copy_into(host, to_device(t, Device{}));
  return to_device(host, kCuda);
}

// The status word's meaning (inductor/kernel_status.h), as the host program reports it.
void check_status(const CompiledGraph::Impl& impl, int32_t code) {
  if (code == kStatusZeroDivision)
    fail("compiled graph {}: ZeroDivisionError: integer division by zero in a kernel", impl.graph.name);
  if (code >= kStatusInjectedBase && size_t(code - kStatusInjectedBase) < impl.inject.entries.size())
    fail("compiled graph {}: a kernel reported an injected runtime error (KILN_INJECT={}:runtime_error)", impl.graph.name,
         impl.inject.entries[size_t(code - kStatusInjectedBase)].target);
  KILN_CHECK(code == 0, "compiled graph {}: a kernel reported runtime error code {}", impl.graph.name, code);
}

// Output `v` of buffer tensor `base`: a view into its storage.
Tensor output_view(const Tensor& base, const BufferView& v) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->offset = base.offset() + v.offset;
  impl->sizes = v.sizes;
  impl->strides = v.strides;
  impl->dtype = base.dtype();
  impl->device = base.device();
  return Tensor(std::move(impl));
}

}  // namespace

std::vector<Tensor> run_on_device_tensors(const CompiledGraph::Impl& impl, const std::vector<Tensor>& inputs) {
  const LoweredGraph& lg = impl.lowered;
  KILN_CHECK(int(inputs.size()) == lg.num_inputs, "compiled graph {}: expected {} inputs, got {}", impl.graph.name,
             lg.num_inputs, inputs.size());
  NoGradGuard no_grad;
  std::vector<Tensor> bufs(lg.buffers.size());
  DeviceSteps run{impl, {}, 0, nullptr, nullptr};
  std::vector<bool> logged(lg.nodes.size(), false);
  run.fallback_logged = &logged;
  for (size_t b = 0; b < lg.buffers.size(); ++b) {
    const Buffer& buf = lg.buffers[b];
    if (buf.kind == Buffer::Kind::Input) bufs[b] = as_input_buffer(impl, buf, inputs[size_t(buf.input_index)]);
    else if (buf.kind == Buffer::Kind::Constant) bufs[b] = to_device(buf.constant, kCuda);
    else bufs[b] = Tensor::empty_strided(buf.sizes, buf.strides, buf.dtype, kCuda);
    run.ptrs.push_back(buf.nbytes() > 0 ? device_address(bufs[b]) : 0);
  }
  Tensor status = to_device(Tensor::scalar(0, DType::I32), kCuda);
  run.status = device_address(status);
  launch_steps(run);
  check_status(impl, status.item<int32_t>());  // a synchronous copy: waits for the kernels
  std::vector<Tensor> outs;
  for (const BufferView& v : lg.outputs) {
    KILN_CHECK(v.buffer >= 0, "compiled graph {}: an output is None", impl.graph.name);
    outs.push_back(output_view(bufs[size_t(v.buffer)], v));
  }
  return outs;
}

std::vector<Tensor> run_recorded(DeviceProgram& program, const std::vector<Tensor>& inputs) {
  const CompiledGraph::Impl& impl = *program.program_;
  const LoweredGraph& lg = impl.lowered;
  KILN_CHECK(int(inputs.size()) == lg.num_inputs, "compiled graph {}: expected {} inputs, got {}", impl.graph.name,
             lg.num_inputs, inputs.size());
  bool on_device = false;
  for (const Buffer& b : lg.buffers) {
    if (b.kind != Buffer::Kind::Input) continue;
    const Tensor& t = inputs[size_t(b.input_index)];
    on_device = on_device || (t.defined() && is_cuda(t));
    const Tensor in = as_input_buffer(impl, b, t);
    if (b.nbytes() > 0)
      check(driver()->memcpy_dtod(program.input(b.input_index).data, device_address(in), size_t(b.nbytes())), "cuMemcpyDtoD");
  }
  program.launch();
  program.synchronize();
  if (!on_device) return program.download();
  std::vector<Tensor> outs;
  for (const BufferView& v : lg.outputs) {
    KILN_CHECK(v.buffer >= 0, "compiled graph {}: an output is None", impl.graph.name);
    const Buffer& b = lg.buffers[size_t(v.buffer)];
    Tensor whole = Tensor::empty_strided(b.sizes, b.strides, b.dtype, kCuda);
    if (b.nbytes() > 0)
      check(driver()->memcpy_dtod(device_address(whole), program.buffers_[size_t(v.buffer)]->ptr, size_t(b.nbytes())),
            "cuMemcpyDtoD");
    outs.push_back(output_view(whole, v));
  }
  return outs;
}

}  // namespace kiln::cuda
