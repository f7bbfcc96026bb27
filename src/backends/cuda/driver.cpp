// Loading the CUDA driver with dlopen and making device 0's primary context current (driver.h).
#include "backends/cuda/driver.h"

#include <dlfcn.h>

#include <mutex>

#include "core/error.h"

namespace kiln::cuda {

namespace {

struct Loaded {
  Driver d;
  bool ok = false;
  std::string why_not;
};

template <class F>
bool resolve(void* lib, const char* symbol, F& out, std::string& why_not) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!out) why_not = std::string("libcuda.so.1 lacks ") + symbol;
  return out != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    l.why_not = "no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded)";
    return l;
  }
  Driver& d = l.d;
  std::string& w = l.why_not;
  const bool all = resolve(lib, "cuInit", d.init, w) && resolve(lib, "cuDeviceGetCount", d.device_get_count, w) &&
                   resolve(lib, "cuDeviceGet", d.device_get, w) && resolve(lib, "cuDeviceGetName", d.device_get_name, w) &&
                   resolve(lib, "cuDeviceGetAttribute", d.device_get_attribute, w) &&
                   resolve(lib, "cuDevicePrimaryCtxRetain", d.primary_ctx_retain, w) &&
                   resolve(lib, "cuCtxSetCurrent", d.ctx_set_current, w) &&
                   resolve(lib, "cuCtxSynchronize", d.ctx_synchronize, w) &&
                   resolve(lib, "cuModuleLoadData", d.module_load_data, w) &&
                   resolve(lib, "cuModuleGetFunction", d.module_get_function, w) &&
                   resolve(lib, "cuLaunchKernel", d.launch_kernel, w) && resolve(lib, "cuMemAlloc_v2", d.mem_alloc, w) &&
                   resolve(lib, "cuMemFree_v2", d.mem_free, w) && resolve(lib, "cuMemcpyHtoD_v2", d.memcpy_htod, w) &&
                   resolve(lib, "cuMemcpyDtoH_v2", d.memcpy_dtoh, w) && resolve(lib, "cuMemcpyDtoD_v2", d.memcpy_dtod, w) &&
                   resolve(lib, "cuMemsetD8_v2", d.memset_d8, w) && resolve(lib, "cuEventCreate", d.event_create, w) &&
                   resolve(lib, "cuEventRecord", d.event_record, w) &&
                   resolve(lib, "cuEventSynchronize", d.event_synchronize, w) &&
                   resolve(lib, "cuEventElapsedTime", d.event_elapsed_time, w) &&
                   resolve(lib, "cuEventDestroy_v2", d.event_destroy, w) &&
                   resolve(lib, "cuGetErrorString", d.get_error_string, w) &&
                   resolve(lib, "cuFuncSetAttribute", d.func_set_attribute, w) &&
                   resolve(lib, "cuStreamCreate", d.stream_create, w) &&
                   resolve(lib, "cuStreamDestroy_v2", d.stream_destroy, w) &&
                   resolve(lib, "cuStreamSynchronize", d.stream_synchronize, w) &&
                   resolve(lib, "cuStreamBeginCapture_v2", d.stream_begin_capture, w) &&
                   resolve(lib, "cuStreamEndCapture", d.stream_end_capture, w) &&
                   resolve(lib, "cuGraphInstantiateWithFlags", d.graph_instantiate, w) &&
                   resolve(lib, "cuGraphLaunch", d.graph_launch, w) &&
                   resolve(lib, "cuGraphExecDestroy", d.graph_exec_destroy, w) &&
                   resolve(lib, "cuGraphDestroy", d.graph_destroy, w) &&
                   resolve(lib, "cuMemcpyHtoDAsync_v2", d.memcpy_htod_async, w);
  if (!all) return l;
  auto failed = [&](CUresult r, const char* what) {
    const char* msg = nullptr;
    d.get_error_string(r, &msg);
    l.why_not = std::string(what) + ": " + (msg ? msg : "unknown error");
    return l;
  };
  if (CUresult r = d.init(0); r != CUDA_SUCCESS) return failed(r, "cuInit");
  int count = 0;
  if (CUresult r = d.device_get_count(&count); r != CUDA_SUCCESS) return failed(r, "cuDeviceGetCount");
  if (count == 0) {
    l.why_not = "the NVIDIA driver sees no CUDA device";
    return l;
  }
  if (CUresult r = d.device_get(&d.device, 0); r != CUDA_SUCCESS) return failed(r, "cuDeviceGet");
  if (CUresult r = d.primary_ctx_retain(&d.context, d.device); r != CUDA_SUCCESS) return failed(r, "cuDevicePrimaryCtxRetain");
  char name[256] = {};
  d.device_get_name(name, sizeof name, d.device);
  d.name = name;
  int major = 0, minor = 0;
  d.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d.device);
  d.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d.device);
  d.device_get_attribute(&d.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d.device);
  d.arch = major * 10 + minor;
  l.ok = true;
  return l;
}

}  // namespace

const Driver* driver(std::string* why_not) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    if (why_not) *why_not = loaded.why_not;
    return nullptr;
  }
  thread_local bool current = false;
  if (!current) {
    check(loaded.d.ctx_set_current(loaded.d.context), "cuCtxSetCurrent");
    current = true;
  }
  return &loaded.d;
}

bool device_available(std::string* why_not) { return driver(why_not) != nullptr; }

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* msg = nullptr;
  if (const Driver* d = driver()) d->get_error_string(r, &msg);
  fail("CUDA: {}: {} (error {})", what, msg ? msg : "unknown error", int(r));
}

std::string target_arch() {
  const Driver* d = driver();
  return "sm_" + std::to_string(d ? d->arch : 90);
}

}  // namespace kiln::cuda
