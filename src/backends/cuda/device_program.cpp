// Running a compiled CUDA program on device buffers (device_program.h).
#include "backends/cuda/device_program.h"

#include "backends/cuda/backend.h"
#include "backends/cuda/cublas.h"
#include "backends/cuda/driver.h"
#include "core/error.h"
#include "core/log.h"
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

}  // namespace

DeviceProgram::DeviceProgram(std::shared_ptr<CompiledGraph> program, Launches launches)
    : program_(std::move(program)), launches_(launches) {
  const CompiledGraph::Impl& impl = *program_->impl();
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
  const CompiledGraph::Impl& impl = *program_->impl();
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
  const CompiledGraph::Impl& impl = *program_->impl();
  const CudaKernels& kernels = cuda_kernels(impl);
  for (const Step& st : impl.schedule.steps) {
    if (st.kind == Step::Kind::Extern) {
      std::string why_not;
      if (!run_extern_on_device(st.index, &why_not)) run_extern_on_host(st.index, why_not);
      continue;
    }
    std::vector<CUdeviceptr> ptrs;
    for (int b : kernels.args(st.index)) ptrs.push_back(buffers_[size_t(b)]->ptr);
    kernels.launch_on_device(st.index, ptrs, status_->ptr, stream_);
  }
}

// The kernels' modules are loaded first (a capture may not load them), then their launches are recorded into a
// graph and instantiated.
void DeviceProgram::capture() {
  const Driver& d = *driver();
  cuda_kernels(*program_->impl()).load_on_device();
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

namespace {

double scalar_arg_or(const graph::Node& gn, size_t i, double otherwise) {
  if (i >= gn.args.size()) return otherwise;
  const auto* s = std::get_if<Scalar>(&gn.args[i]);
  return s ? s->to_double() : otherwise;
}

}  // namespace

// An extern matrix product (mm, bmm, addmm) through cuBLAS on the device buffers; false with why not otherwise.
bool DeviceProgram::run_extern_on_device(int node, std::string* why_not) {
  const CompiledGraph::Impl& impl = *program_->impl();
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
    DeviceMatrix m{buffers_[size_t(v.buffer)]->ptr + CUdeviceptr(v.offset * dtype_size(b.dtype)), d == 3 ? v.strides[0] : 0,
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
    const CUdeviceptr data = buffers_[size_t(self.buffer)]->ptr + CUdeviceptr(self.offset * dtype_size(c.dtype));
    const bool row = self.sizes.size() == 1 || (self.sizes.size() == 2 && (self.sizes[0] == 1 || self.strides[0] == 0));
    if (row) {
      if (!device_broadcast_rows(stream_, c.dtype, a.rows, b.cols, data, self.strides.back(), beta, buffers_[size_t(out)]->ptr, why_not))
        return false;
      beta = 1;
    } else if (self.sizes == c.sizes && self.strides == c.strides) {
      check(driver()->memcpy_dtod(buffers_[size_t(out)]->ptr, data, size_t(c.nbytes())), "cuMemcpyDtoD");
    } else {
      return *why_not = "addmm's addend is neither a row vector nor a contiguous matrix", false;
    }
  }
  return device_gemm(stream_, c.dtype, batch, a, b, buffers_[size_t(out)]->ptr, scalar_arg_or(gn, 4, 1.0), beta, why_not);
}

// The host fallback of an extern node: its input buffers to the host, its eager kernel, its results back.
void DeviceProgram::run_extern_on_host(int node, const std::string& why_not_on_device) {
  const CompiledGraph::Impl& impl = *program_->impl();
  const LoopNode& n = impl.lowered.nodes[size_t(node)];
  if (!fallback_logged_[size_t(node)]) {
    fallback_logged_[size_t(node)] = true;
    KILN_LOG(LogChannel::Lowering, "graph {}: %{} runs on the host (copied there and back): {}; {}", impl.graph.name,
             n.origin, n.reason, why_not_on_device);
  }
  const Driver& d = *driver();
  check(d.stream_synchronize(stream_), "cuStreamSynchronize");
  std::vector<Tensor> host(impl.lowered.buffers.size());
  for (const BufferView& v : n.extern_inputs) {
    if (v.buffer < 0 || host[size_t(v.buffer)].defined()) continue;
    const Buffer& b = impl.lowered.buffers[size_t(v.buffer)];
    host[size_t(v.buffer)] = Tensor::empty_strided(b.sizes, b.strides, b.dtype);
    if (b.nbytes() > 0)
      check(d.memcpy_dtoh(host[size_t(v.buffer)].data_ptr(), buffers_[size_t(v.buffer)]->ptr, size_t(b.nbytes())), "cuMemcpyDtoH");
  }
  NoGradGuard no_grad;
  std::vector<Tensor> results = impl.call_extern(host, node);
  for (size_t i = 0; i < n.extern_outputs.size(); ++i) {
    const int b = n.extern_outputs[i];
    if (b < 0) continue;
    const Buffer& buf = impl.lowered.buffers[size_t(b)];
    KILN_ASSERT(results[i].numel() * dtype_size(buf.dtype) == buf.nbytes(), "graph {}: extern %{} returned {} for buffer {}{}",
                impl.graph.name, n.origin, results[i].str(), dtype_name(buf.dtype), shape_str(buf.sizes));
    if (buf.nbytes() > 0) check(d.memcpy_htod(buffers_[size_t(b)]->ptr, results[i].data_ptr(), size_t(buf.nbytes())), "cuMemcpyHtoD");
  }
}

DeviceProgram::DeviceView DeviceProgram::input(int i) const {
  const CompiledGraph::Impl& impl = *program_->impl();
  for (size_t b = 0; b < impl.lowered.buffers.size(); ++b) {
    const Buffer& buf = impl.lowered.buffers[b];
    if (buf.kind == Buffer::Kind::Input && buf.input_index == i) return {buffers_[b]->ptr, buf.dtype, buf.sizes, buf.strides};
  }
  fail("graph {}: no input {} (it has {})", impl.graph.name, i, impl.lowered.num_inputs);
}

DeviceProgram::DeviceView DeviceProgram::output(int i) const {
  const CompiledGraph::Impl& impl = *program_->impl();
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
  KILN_CHECK(code == 0, "graph {}: a kernel reported runtime error code {}", program_->impl()->graph.name, code);
}

std::vector<Tensor> DeviceProgram::download() const {
  const CompiledGraph::Impl& impl = *program_->impl();
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
  const CompiledGraph::Impl& impl = *program_->impl();
  int64_t bytes = 0;
  for (const Buffer& b : impl.lowered.buffers)
    if (b.kind == Buffer::Kind::Input || b.is_output) bytes += b.nbytes();
  return bytes;
}

}  // namespace kiln::cuda
