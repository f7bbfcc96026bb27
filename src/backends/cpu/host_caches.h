// What the host's data caches can hold for this process: the figure behind decisions that depend on whether
// a buffer stays in cache for its next reader (the scheduler's streaming stores).
#pragma once
#include <cstdint>
#include <string>

namespace kiln::runtime {

struct HostCaches {
  int64_t private_bytes = 0;     // the largest cache of one CPU alone (L2), from sysfs
  int64_t llc_bytes = 0;         // the last-level cache, from sysfs (32 MB when sysfs says nothing)
  int llc_cpus = 1;              // CPUs sysfs lists as sharing the last-level cache
  bool virtual_machine = false;  // cpuid's hypervisor bit
  int cpus = 1;                  // CPUs kernels run on (OpenMP's thread count)

  // Bytes of cache this process can count on: its CPUs' private caches plus their share of the last-level cache.
  // In a virtual machine the last-level cache sysfs reports is the host socket's, shared with cores the guest
  // cannot see (the 2-vCPU development VM reports 260 MB), so the share counts at most
  // kGuestLlcBytesPerCpu a CPU.
  int64_t usable_bytes() const;
  std::string str() const;
};

// The LLC slice per core of current x86 server parts is 1.5-5 MB (Ice Lake-SP 1.5, Sapphire Rapids 1.9, Zen 4
// 4, Emerald Rapids 5): a guest counts the low end.
inline constexpr int64_t kGuestLlcBytesPerCpu = int64_t(2) << 20;

// Read once (sysfs, cpuid, OpenMP).
const HostCaches& host_caches();

// Pointwise outputs at least this large are written with streaming stores: KILN_STREAM_MIN_BYTES, or when that is
// 0 (the default) half of host_caches().usable_bytes().
int64_t streaming_threshold_bytes();

}  // namespace kiln::runtime
