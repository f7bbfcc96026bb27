// Shared by the benchmarks: a wall-clock timer and the same-run memory-bandwidth baseline every
// memory-bound benchmark reports its ratio against (`vs_copy`).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "eager/loops.h"

namespace kiln {

inline double seconds_of(const std::function<void()>& f, int reps) {
  f();  // warm up (page faults, caches)
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

// The fastest of `reps` timed runs (after a warm-up): on a shared, noisy machine the minimum is the run least
// disturbed by other processes, which is what a ratio between two measurements needs.
inline double min_seconds_of(const std::function<void()>& f, int reps) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// A multi-threaded memcpy moving `bytes` in total (half read, half written): the memory-bandwidth baseline.
class CopyBaseline {
 public:
  explicit CopyBaseline(int64_t bytes)
      : bytes_(bytes), src_(static_cast<size_t>(bytes / 2), 1), dst_(static_cast<size_t>(bytes / 2)) {}
  void run() {
    int64_t n = bytes_ / 2;
    parallel_for(n, 1 << 20, [&](int64_t b, int64_t e) { std::memcpy(dst_.data() + b, src_.data() + b, size_t(e - b)); });
  }
  int64_t bytes() const { return bytes_; }

 private:
  int64_t bytes_;
  std::vector<char> src_, dst_;
};

// Bandwidth (bytes read + written per second) of the copy baseline, averaged over 10 runs.
inline double copy_bandwidth(int64_t bytes) {
  CopyBaseline copy(bytes);
  return double(bytes) / seconds_of([&] { copy.run(); }, 10);
}

// Times `f` and the copy baseline of `bytes` alternately, `rounds` times each, and returns the fastest run of
// each (seconds): both see the same machine state, so their ratio is stable where either alone is not.
inline std::pair<double, double> min_seconds_beside_copy(const std::function<void()>& f, int64_t bytes, int rounds) {
  CopyBaseline copy(bytes);
  double best_f = 1e30, best_copy = 1e30;
  for (int r = 0; r < rounds; ++r) {
    best_f = std::min(best_f, min_seconds_of(f, 1));
    best_copy = std::min(best_copy, min_seconds_of([&] { copy.run(); }, 1));
  }
  return {best_f, best_copy};
}

}  // namespace kiln
