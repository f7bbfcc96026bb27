// The CUDA driver API, loaded at first use with dlopen("libcuda.so.1"): kiln links only the toolkit's NVRTC
// and cuBLAS, so every kiln program starts on machines without an NVIDIA driver, and the CUDA backend there
// compiles kernels (NVRTC needs no GPU) but says why it cannot run them. One process-wide context: the primary
// context of device 0, made current on every thread that calls into the driver through here.
#pragma once
#include <cstdint>
#include <string>

#include <cuda.h>

namespace kiln::cuda {

struct Driver {
  // The entry points kiln uses (the _v2 ABIs that cuda.h's macros name).
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemcpyHtoD) memcpy_htod = nullptr;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh = nullptr;
  decltype(&::cuMemcpyDtoD) memcpy_dtod = nullptr;
  decltype(&::cuMemsetD8) memset_d8 = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed_time = nullptr;
  decltype(&::cuEventDestroy) event_destroy = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuFuncSetAttribute) func_set_attribute = nullptr;
  // Streams and CUDA graphs (reduce-overhead: a program's launches captured once and replayed).
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamDestroy) stream_destroy = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuStreamBeginCapture) stream_begin_capture = nullptr;
  decltype(&::cuStreamEndCapture) stream_end_capture = nullptr;
  decltype(&::cuGraphInstantiate) graph_instantiate = nullptr;
  decltype(&::cuGraphLaunch) graph_launch = nullptr;
  decltype(&::cuGraphExecDestroy) graph_exec_destroy = nullptr;
  decltype(&::cuGraphDestroy) graph_destroy = nullptr;
  decltype(&::cuMemcpyHtoDAsync) memcpy_htod_async = nullptr;

  CUdevice device = 0;
  CUcontext context = nullptr;
  int sm_count = 0;
  int arch = 0;  // compute capability as major * 10 + minor (90 for an H100)
  std::string name;
};

// The driver with device 0's context current on this thread, or null when there is none; `why_not` then says
// why (no libcuda.so.1, no device, an initialisation error). Loaded once; thread-safe.
const Driver* driver(std::string* why_not = nullptr);
// Whether a CUDA device can run kernels here (for tests: GTEST_SKIP with why_not otherwise).
bool device_available(std::string* why_not = nullptr);

// Throws kiln::Error "<what>: <driver's message>" when `r` is not CUDA_SUCCESS.
void check(CUresult r, const char* what);

// The architecture kernels are compiled for: the device's ("sm_90"), or sm_90 where there is no device (for
// compile-only tests on GPU-less machines).
std::string target_arch();

}  // namespace kiln::cuda
