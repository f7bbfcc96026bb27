// The caching device allocator (device_memory.h): blocks rounded up to 512 bytes (or to 2 MB above 1 MB),
// kept on free by rounded size, up to kCacheLimit bytes.
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
  std::unordered_multimap<size_t, CUdeviceptr> free_blocks;
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

CUdeviceptr device_alloc(size_t bytes) {
  const size_t r = rounded(bytes);
  {
    Cache& c = cache();
    std::lock_guard lock(c.mutex);
    if (auto it = c.free_blocks.find(r); it != c.free_blocks.end()) {
      const CUdeviceptr p = it->second;
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

void device_free(CUdeviceptr p, size_t bytes) {
  const size_t r = rounded(bytes);
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  if (c.cached + r <= kCacheLimit) {
    c.free_blocks.emplace(r, p);
    c.cached += r;
    return;
  }
  if (const Driver* d = driver()) d->mem_free(p);
}

}  // namespace kiln::cuda
