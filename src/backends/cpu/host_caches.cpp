// Reads the host's cache sizes (sysfs), whether it is a virtual machine (cpuid) and how many CPUs kernels use
// (OpenMP), and turns them into the cache this process can count on (see host_caches.h).
#include "backends/cpu/host_caches.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "core/options.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kiln::runtime {
namespace {

std::string read_word(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  in >> word;
  return word;
}

// "0-1", "0,2,4-7" -> the number of CPUs listed (at least 1).
int count_cpus(const std::string& list) {
  int count = 0;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    std::string range = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = range.find('-');
    count += dash == std::string::npos ? 1 : std::atoi(range.c_str() + dash + 1) - std::atoi(range.c_str()) + 1;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::max(count, 1);
}

bool running_under_hypervisor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) return (c >> 31) & 1;
#endif
  return false;
}

HostCaches read_host_caches() {
  struct Level {
    int level;
    int64_t bytes;
    int sharing;
  };
  std::vector<Level> levels;  // data and unified caches of cpu0
  for (int i = 0; i < 8; ++i) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
    const std::string type = read_word(dir + "type");
    if (type.empty() || type == "Instruction") continue;
    levels.push_back({std::atoi(read_word(dir + "level").c_str()), parse_byte_count(read_word(dir + "size")).value_or(0),
                      count_cpus(read_word(dir + "shared_cpu_list"))});
  }
  HostCaches h;
  int llc_level = 0;
  for (const Level& l : levels)
    if (l.level > llc_level) llc_level = l.level, h.llc_bytes = l.bytes, h.llc_cpus = l.sharing;
  for (const Level& l : levels)
    if (l.level < llc_level && l.sharing == 1) h.private_bytes = std::max(h.private_bytes, l.bytes);
  if (h.llc_bytes <= 0) h.llc_bytes = int64_t(32) << 20;
  h.virtual_machine = running_under_hypervisor();
  h.cpus = std::max(1, omp_get_max_threads());
  return h;
}

}  // namespace

int64_t HostCaches::usable_bytes() const {
  int64_t share = llc_bytes / llc_cpus * std::min(cpus, llc_cpus);
  if (virtual_machine) share = std::min(share, kGuestLlcBytesPerCpu * cpus);
  return private_bytes * cpus + share;
}

std::string HostCaches::str() const {
  const std::string guest =
      virtual_machine ? fmt::format(" (virtual machine: at most {} KB a CPU)", kGuestLlcBytesPerCpu >> 10) : "";
  return fmt::format("{} CPUs, {} KB private each, last-level {} KB shared by {} CPUs{}: {} KB usable", cpus,
                     private_bytes >> 10, llc_bytes >> 10, llc_cpus, guest, usable_bytes() >> 10);
}

const HostCaches& host_caches() {
  static const HostCaches caches = read_host_caches();
  return caches;
}

int64_t streaming_threshold_bytes() {
  const int64_t forced = opt_int(Opt::StreamMinBytes);
  return forced > 0 ? forced : host_caches().usable_bytes() / 2;
}

}  // namespace kiln::runtime
