// Device tensors' memory and copies (core/device.h's DeviceHooks) for CUDA: storages come from the caching
// allocator (device_memory.h) on the legacy null stream, copies are synchronous cuMemcpy calls (ordered after every
// kernel already enqueued on that stream). backend.cpp installs them at static initialisation.
#include <cuda.h>

#include "backends/cuda/backend.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/driver.h"
#include "core/device_hooks.h"
#include "core/error.h"

namespace kiln::cuda {

namespace {

CUdeviceptr device_ptr(const void* p) { return CUdeviceptr(reinterpret_cast<uintptr_t>(p)); }

class CudaDeviceHooks final : public DeviceHooks {
 public:
  void* allocate(int64_t nbytes, Device device) override {
    check_device(device);
    return reinterpret_cast<void*>(uintptr_t(device_alloc(size_t(nbytes))));
  }
  void free(void* data, int64_t nbytes, Device) override { device_free(device_ptr(data), size_t(nbytes)); }
  void copy(void* dst, Device to, const void* src, Device from, int64_t nbytes) override {
    const Driver& d = checked_driver();
    const bool dst_host = to.type == DeviceType::CPU, src_host = from.type == DeviceType::CPU;
    if (dst_host) check(d.memcpy_dtoh(dst, device_ptr(src), size_t(nbytes)), "cuMemcpyDtoH");
    else if (src_host) check(d.memcpy_htod(device_ptr(dst), src, size_t(nbytes)), "cuMemcpyHtoD");
    else check(d.memcpy_dtod(device_ptr(dst), device_ptr(src), size_t(nbytes)), "cuMemcpyDtoD");
  }
  // "NVIDIA H200 (sm_90)": the driver's name of device 0 and its architecture (kiln runs only cuda:0).
  std::string describe(Device device) override {
    std::string why;
    const Driver* d = driver(&why);
    if (!d) return fmt::format("none ({})", why);
    if (device.index != 0) return fmt::format("none ({}: kiln runs CUDA programs on cuda:0 only)", device.str());
    return fmt::format("{} (sm_{})", d->name, d->arch);
  }

 private:
  static const Driver& checked_driver() {
    std::string why;
    const Driver* d = driver(&why);
    KILN_CHECK(d, "CUDA tensors: {}", why);
    return *d;
  }
  static void check_device(Device device) {
    checked_driver();
    KILN_CHECK(device.index == 0, "{}: kiln runs CUDA tensors on cuda:0 only (the primary context of device 0)",
               device.str());
  }
};

}  // namespace

void install_device_hooks() {
  static CudaDeviceHooks hooks;
  set_device_hooks(DeviceType::CUDA, &hooks);
}

}  // namespace kiln::cuda
