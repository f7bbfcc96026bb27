// Running a compiled CUDA program on device buffers (device_program.h).
#include "backends/cuda/device_program.h"

#include "backends/cuda/backend.h"
#include "backends/cuda/driver.h"
#include "core/error.h"
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
    KILN_CHECK(st.kind == Step::Kind::Kernel, "graph {}: {} runs as an extern call, which device programs do not run yet",
               impl.graph.name, impl.lowered.nodes[size_t(st.index)].origin);
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

void DeviceProgram::launch_kernels() const {
  const CompiledGraph::Impl& impl = *program_->impl();
  const CudaKernels& kernels = cuda_kernels(impl);
  for (const Step& st : impl.schedule.steps) {
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
    launch_kernels();
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
  if (launches_ == Launches::Direct) return launch_kernels();
  if (!graph_exec_) capture();
  check(driver()->graph_launch(graph_exec_, stream_), "cuGraphLaunch");
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
