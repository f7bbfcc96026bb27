// The stream-ordered caching device allocator (device_memory.h): blocks rounded up to 512 bytes (or to 2 MB
// above 1 MB), kept on free by (stream, rounded size), up to kCacheLimit bytes.
#include "backends/cuda/device_memory.h"

#include <mutex>
#include <unordered_map>

#include "backends/cuda/driver.h"
#include "core/error.h"

namespace kiln::cuda {

namespace {

constexpr size_t kCacheLimit = size_t(8) << 30;

struct Cache {
  std::mutex mutex;
  struct Block {
    CUdeviceptr ptr;
    CUstream stream;  // freed on it
  };
  std::unordered_multimap<size_t, Block> free_blocks;
  size_t cached = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: the driver may be gone at static destruction
  return *c;
}

size_t rounded(size_t bytes) {
  const size_t unit = bytes >= (size_t(1) << 20) ? size_t(2) << 20 : 512;
  return std::max<size_t>(unit, (bytes + unit - 1) / unit * unit);
}

}  // namespace

CUdeviceptr device_alloc(size_t bytes, CUstream stream) {
  const size_t r = rounded(bytes);
  {
    Cache& c = cache();
    std::lock_guard lock(c.mutex);
    auto [first, last] = c.free_blocks.equal_range(r);
    for (auto it = first; it != last; ++it) {
      if (it->second.stream != stream && it->second.stream != nullptr) continue;  // still in another stream's order
      const CUdeviceptr p = it->second.ptr;
      c.free_blocks.erase(it);
      c.cached -= r;
      return p;
    }
  }
  std::string why;
  const Driver* d = driver(&why);
  if (!d) fail("CUDA: cannot allocate device memory: {}", why);
  CUdeviceptr p = 0;
  check(d->mem_alloc(&p, r), "cuMemAlloc");
  return p;
}

size_t device_cached_bytes() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return c.cached;
}

void device_free(CUdeviceptr p, size_t bytes, CUstream stream) {
  const size_t r = rounded(bytes);
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  if (c.cached + r <= kCacheLimit) {
    c.free_blocks.emplace(r, Cache::Block{p, stream});
    c.cached += r;
    return;
  }
  if (const Driver* d = driver()) {
    if (stream) d->stream_synchronize(stream);  // its work may still use the block
    d->mem_free(p);
  }
}

}  // namespace kiln::cuda
