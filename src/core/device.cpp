// CPU storage allocation with live/peak byte accounting.
#include "core/device.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/error.h"

namespace kiln {
namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};

void account(int64_t delta) {
  int64_t now = g_live.fetch_add(delta) + delta;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {}
}
}  // namespace

std::shared_ptr<Storage> Storage::allocate(int64_t nbytes, Device device) {
  KILN_CHECK(device.type == DeviceType::CPU, "allocation on {} is not available in this build", device.str());
  KILN_CHECK(nbytes >= 0, "cannot allocate a negative number of bytes ({})", nbytes);
  size_t rounded = (size_t(nbytes) + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !p) fail("out of memory allocating {} bytes on the CPU", nbytes);
  account(nbytes);
  return std::make_shared<Storage>(p, nbytes, device, [nbytes](void* q) {
    std::free(q);
    account(-nbytes);
  });
}

int64_t Storage::live_bytes() { return g_live.load(); }
int64_t Storage::peak_bytes() { return g_peak.load(); }
void Storage::reset_peak_bytes() { g_peak.store(g_live.load()); }

}  // namespace kiln
