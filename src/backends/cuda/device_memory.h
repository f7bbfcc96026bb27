// GPU memory for the CUDA backend: a stream-ordered caching allocator of device blocks (freed blocks are kept by
// size and reused, as PyTorch's caching allocator does, so a staged launch, a device tensor or a benchmark loop
// does not pay cuMemAlloc each time) and an owning handle.
//
// Stream order: a block is freed on the stream whose work last used it (the caller has enqueued that work, it may
// not have run). A later allocation on the same stream runs after that work, so it may take the block at once;
// so may any allocation when the block was freed on the legacy null stream (device tensors' stream: work on
// every blocking stream waits for it). A block freed on another stream is never handed to a different stream.
#pragma once
#include <cuda.h>

#include <cstddef>

namespace kiln::cuda {

// `bytes` of device memory (at least 256-byte aligned), from the cache or cuMemAlloc. Throws kiln::Error.
// `stream`: where the memory will be used (null: the legacy null stream).
CUdeviceptr device_alloc(size_t bytes, CUstream stream = nullptr);
void device_free(CUdeviceptr p, size_t bytes, CUstream stream = nullptr);
// Bytes held by the cache (freed, not yet reused or returned to the driver).
size_t device_cached_bytes();

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
