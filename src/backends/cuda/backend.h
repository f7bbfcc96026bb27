// The CUDA backend (inductor/code_generator.h): CUDA C per fused kernel (codegen_cuda.h), compiled by NVRTC through the
// cubin cache (nvrtc.h), launched through the driver API (driver.h). Its Target asks for kernel-local rows (registers
// or shared memory) but no streaming stores or deferred writes (the CPU's placement passes): the same scheduler, other data.
//
// Kernels run on the host program's buffers by staging (docs/cuda.md): each launch copies the spans of its
// arguments to the GPU, runs and copies the written ones back, so every tool (kiln run, the comparator, the
// minifier) works with compiled GPU kernels; inputs that are CUDA tensors skip the staging (device_program.h).
// `launch_on_device` runs a kernel on device pointers (benchmarks, and the device-tensor path). In mode
// max-autotune each kernel's first launch times its candidate launch shapes (autotune.h) and later launches use the
// one kept.
#pragma once
#include <cuda.h>

#include "backends/cuda/codegen_cuda.h"
#include "inductor/code_generator.h"

namespace kiln::cuda {

// Installs CUDA tensors' DeviceHooks (device_hooks.cpp; core/device.h). Called at static initialisation.
void install_device_hooks();

class CudaCodeGenerator final : public inductor::CodeGenerator {
 public:
  std::string name() const override { return "cuda"; }
  inductor::Target target() const override;
  std::vector<inductor::SchedulePass> placement_passes() const override { return {}; }
  std::string code_extension() const override { return ".cu"; }
  std::unique_ptr<inductor::CompiledKernels> compile(const inductor::Schedule& s, const inductor::LoweredGraph& lg,
                                                     inductor::CompileContext& ctx) const override;
};

class CudaKernels : public inductor::CompiledKernels {
 public:
  // Kernel `kernel` on device buffers (the data of args(kernel), in order) and a device status word, on `stream`
  // (null: the null stream), asynchronously. Throws kiln::Error when there is no device.
  virtual void launch_on_device(int kernel, const std::vector<CUdeviceptr>& buffers, CUdeviceptr status,
                                CUstream stream) const = 0;
  virtual const CudaKernel& kernel(int kernel) const = 0;
  // Loads every kernel's module and allocates split reductions' workspaces (launches do it at first use; a CUDA
  // graph capture needs it done).
  virtual void load_on_device() const = 0;
};

}  // namespace kiln::cuda
