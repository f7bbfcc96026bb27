// GPU memory for the CUDA backend: a caching allocator of device blocks (freed blocks are kept by size and
// reused, as PyTorch's caching allocator does, so a staged launch or a benchmark loop does not pay cuMemAlloc
// each time) and an owning handle.
#pragma once
#include <cuda.h>

#include <cstddef>

namespace kiln::cuda {

// `bytes` of device memory (at least 256-byte aligned), from the cache or cuMemAlloc. Throws kiln::Error.
CUdeviceptr device_alloc(size_t bytes);
void device_free(CUdeviceptr p, size_t bytes);

struct DeviceBlock {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  explicit DeviceBlock(size_t n) : ptr(device_alloc(n)), bytes(n) {}
  DeviceBlock(DeviceBlock&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = 0; }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  ~DeviceBlock() {
    if (ptr) device_free(ptr, bytes);
  }
};

}  // namespace kiln::cuda
