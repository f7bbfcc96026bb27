// CPU storage allocation with live/peak byte accounting and a bounded cache of freed large blocks; other
// devices' storage and copies through their installed DeviceHooks.
#include "core/device.h"
#include "core/device_hooks.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "core/error.h"

namespace kiln {
namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};

// Freed large blocks are kept for reuse, keyed by rounded size: glibc returns blocks above its mmap threshold
// (at most 32 MB) to the kernel, so without this every large eager op would page-fault and zero its whole
// output again. Bounded: beyond kCacheLimit bytes, blocks are really freed.
constexpr size_t kCacheMinBlock = size_t(1) << 20;
constexpr size_t kCacheLimit = size_t(1) << 30;
struct BlockCache {
  std::mutex mu;
  std::unordered_multimap<size_t, void*> free_blocks;
  size_t cached_bytes = 0;
};
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;  // never destroyed: storages may be freed during static destruction
  return *cache;
}

void* take_block(size_t rounded) {
  if (rounded < kCacheMinBlock) return std::aligned_alloc(64, rounded);
  BlockCache& c = block_cache();
  {
    std::lock_guard lock(c.mu);
    auto it = c.free_blocks.find(rounded);
    if (it != c.free_blocks.end()) {
      void* p = it->second;
      c.free_blocks.erase(it);
      c.cached_bytes -= rounded;
      return p;
    }
  }
  return std::aligned_alloc(64, rounded);
}

void give_block(void* p, size_t rounded) {
  if (rounded >= kCacheMinBlock) {
    BlockCache& c = block_cache();
    std::lock_guard lock(c.mu);
    if (c.cached_bytes + rounded <= kCacheLimit) {
      c.free_blocks.emplace(rounded, p);
      c.cached_bytes += rounded;
      return;
    }
  }
  std::free(p);
}

void account(int64_t delta) {
  int64_t now = g_live.fetch_add(delta) + delta;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {}
}

std::atomic<DeviceHooks*> g_cuda_hooks{nullptr};

std::shared_ptr<Storage> allocate_on_device(int64_t nbytes, Device device) {
  DeviceHooks* hooks = &device_hooks(device.type);
  void* p = nbytes > 0 ? hooks->allocate(nbytes, device) : nullptr;
  return std::make_shared<Storage>(p, nbytes, device, [hooks, nbytes, device](void* q) {
    if (q) hooks->free(q, nbytes, device);
  });
}
}  // namespace

DeviceHooks* set_device_hooks(DeviceType type, DeviceHooks* hooks) {
  KILN_CHECK(type == DeviceType::CUDA, "set_device_hooks: the CPU's memory is not a hook");
  return g_cuda_hooks.exchange(hooks);
}

DeviceHooks& device_hooks(DeviceType type) {
  DeviceHooks* hooks = type == DeviceType::CUDA ? g_cuda_hooks.load() : nullptr;
  KILN_CHECK(hooks, "{} tensors are not available in this build (kiln was built without its CUDA backend: "
             "configure with -DKILN_CUDA=ON where the CUDA toolkit is installed)", type == DeviceType::CUDA ? "CUDA" : "cpu");
  return *hooks;
}

void copy_bytes(void* dst, Device to, const void* src, Device from, int64_t nbytes) {
  if (nbytes <= 0) return;
  if (to.type == DeviceType::CPU && from.type == DeviceType::CPU) {
    std::memcpy(dst, src, size_t(nbytes));
    return;
  }
  device_hooks(to.type == DeviceType::CPU ? from.type : to.type).copy(dst, to, src, from, nbytes);
}

std::optional<Device> parse_device(std::string_view text) {
  if (text == "cpu") return Device{};
  if (text == "cuda") return Device{DeviceType::CUDA, 0};
  if (!text.starts_with("cuda:") || text.size() == 5 || text.size() > 8) return std::nullopt;
  int index = 0;
  for (char c : text.substr(5)) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + (c - '0');
  }
  return Device{DeviceType::CUDA, index};
}

std::shared_ptr<Storage> Storage::allocate(int64_t nbytes, Device device) {
  KILN_CHECK(nbytes >= 0, "cannot allocate a negative number of bytes ({})", nbytes);
  if (device.type != DeviceType::CPU) return allocate_on_device(nbytes, device);  // device_hooks.h
  size_t rounded = (size_t(nbytes) + 63) / 64 * 64;
  void* p = rounded ? take_block(rounded) : nullptr;
  if (rounded && !p) fail("out of memory allocating {} bytes on the CPU", nbytes);
  account(nbytes);
  return std::make_shared<Storage>(p, nbytes, device, [nbytes, rounded](void* q) {
    if (q) give_block(q, rounded);
    account(-nbytes);
  });
}

int64_t Storage::live_bytes() { return g_live.load(); }
int64_t Storage::peak_bytes() { return g_peak.load(); }
void Storage::reset_peak_bytes() { g_peak.store(g_live.load()); }

}  // namespace kiln
