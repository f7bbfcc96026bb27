// Shared by the benchmarks: a wall-clock timer and the same-run memory-bandwidth baseline every
// memory-bound benchmark reports its ratio against (`vs_copy`).
#pragma once
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "eager/loops.h"

namespace kiln {

inline double seconds_of(const std::function<void()>& f, int reps) {
  f();  // warm up (page faults, caches)
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

// Bandwidth (bytes read + written per second) of a multi-threaded memcpy moving `bytes` in total.
inline double copy_bandwidth(int64_t bytes) {
  int64_t n = bytes / 2;  // half read, half written
  std::vector<char> src(static_cast<size_t>(n), 1), dst(static_cast<size_t>(n));
  double t = seconds_of([&] {
    parallel_for(n, 1 << 20, [&](int64_t b, int64_t e) { std::memcpy(dst.data() + b, src.data() + b, size_t(e - b)); });
  }, 10);
  return double(bytes) / t;
}

}  // namespace kiln
