// Shared by the benchmarks: a wall-clock timer and the same-run memory-bandwidth baseline every
// memory-bound benchmark reports its ratio against (`vs_copy`).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "eager/loops.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

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

// The memory-bandwidth baseline: multi-threaded code that reads `read_bytes` and writes `write_bytes` and does
// nothing else, the same footprint as the kernel it is compared with, done two ways:
// - streaming: one pass over the input lines, each thread writing its share of the output with non-temporal
//   stores interleaved in proportion (equal sizes: a copy; no output: a read);
// - memcpy (equal sizes only): glibc's, which switches to non-temporal stores only above a threshold derived from
//   the last-level cache it reads from cpuid, and a virtual machine reports its host socket's whole cache (the
//   2-core development VM: 260 MB, so its 64 MB copies use ordinary stores and run at 0.5-0.65 of the streaming
//   pass).
// A roofline is the best the machine does, so the baseline is the faster of the two, measured in the same run.
class CopyBaseline {
 public:
  CopyBaseline(int64_t read_bytes, int64_t write_bytes)
      : read_(lines(read_bytes)), write_(lines(write_bytes)), src_(size_t(read_) * 64 + 64, 1),
        dst_(size_t(write_) * 64 + 64) {}
  bool has_memcpy() const { return read_ == write_; }
  void run_memcpy() {
    parallel_for(read_ * 64, 1 << 20,
                 [&](int64_t b, int64_t e) { std::memcpy(dst_.data() + b, src_.data() + b, size_t(e - b)); });
  }
  // 16-byte vectors (SSE2, every x86-64 CPU) from 64-byte aligned lines; write-combining makes 16-byte streaming
  // stores as effective as wider ones. Input lines are prefetched 8 KB ahead, as compiled kernels do (the
  // hardware prefetcher alone leaves bandwidth unused beside streaming stores). Elsewhere: memcpy of the shared
  // part, then a read or a fill of the rest.
  void run_streaming() {
    const int64_t read = read_, write = write_, steps = std::max(read, write);
    const char* src = aligned(src_.data());
    char* dst = aligned(dst_.data());
    parallel_for(steps, 1 << 12, [=, this](int64_t b, int64_t e) {
#if defined(__SSE2__)
      // Step i reads line floor(i * read / steps) when that floor moves on (error terms: no division a step); the
      // same for writes. The loaded lines are xor-ed into what is written, so no load can be dropped.
      __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
      const __m128i* in = reinterpret_cast<const __m128i*>(src) + 4 * (b * read / steps);
      __m128i* out = reinterpret_cast<__m128i*>(dst) + 4 * (b * write / steps);
      int64_t r_err = b * read % steps, w_err = b * write % steps;
      for (int64_t i = b; i < e; ++i) {
        if ((r_err += read) >= steps) {
          r_err -= steps;
          _mm_prefetch(reinterpret_cast<const char*>(in) + kPrefetchAhead, _MM_HINT_T0);
          a0 = _mm_xor_si128(a0, _mm_load_si128(in)), a1 = _mm_xor_si128(a1, _mm_load_si128(in + 1));
          a2 = _mm_xor_si128(a2, _mm_load_si128(in + 2)), a3 = _mm_xor_si128(a3, _mm_load_si128(in + 3));
          in += 4;
        }
        if ((w_err += write) >= steps) {
          w_err -= steps;
          _mm_stream_si128(out, a0), _mm_stream_si128(out + 1, a1), _mm_stream_si128(out + 2, a2),
              _mm_stream_si128(out + 3, a3);
          out += 4;
        }
      }
      _mm_sfence();
      sink_ ^= _mm_cvtsi128_si64(_mm_xor_si128(_mm_xor_si128(a0, a1), _mm_xor_si128(a2, a3)));
#else
      const int64_t rb = b * read / steps, re = e * read / steps, wb = b * write / steps, we = e * write / steps;
      const int64_t shared = std::min(re - rb, we - wb);
      std::memcpy(dst + 64 * wb, src + 64 * rb, size_t(64 * shared));
      int64_t x = 0;
      for (int64_t l = rb + shared; l < re; ++l) x ^= src[64 * l];
      std::memset(dst + 64 * (wb + shared), int(x), size_t(64 * (we - wb - shared)));
      sink_ ^= x;
#endif
    });
  }

 private:
  static constexpr int64_t kPrefetchAhead = 8192;
  static int64_t lines(int64_t bytes) { return (bytes + 63) / 64; }
  static char* aligned(char* p) { return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64; }
  int64_t read_, write_;
  std::vector<char> src_, dst_;
  std::atomic<int64_t> sink_{0};  // keeps the loads
};

// The fastest runs of the baseline, each way (memcpy only when it applies), in seconds.
struct CopyTimes {
  double memcpy_s = 1e30, streaming_s = 1e30;
  double best() const { return std::min(memcpy_s, streaming_s); }
  void time_once(CopyBaseline& copy) {
    if (copy.has_memcpy()) memcpy_s = std::min(memcpy_s, min_seconds_of([&] { copy.run_memcpy(); }, 1));
    streaming_s = std::min(streaming_s, min_seconds_of([&] { copy.run_streaming(); }, 1));
  }
};

// Bandwidth (bytes read + written per second) of the copy baseline: the faster way, fastest of 10 runs each.
inline double copy_bandwidth(int64_t bytes) {
  CopyBaseline copy(bytes / 2, bytes / 2);
  CopyTimes t;
  for (int r = 0; r < 10; ++r) t.time_once(copy);
  return double(bytes) / t.best();
}

// Times `f` and the baseline reading `read_bytes` and writing `write_bytes` alternately, `rounds` times each, and
// returns the fastest run of `f` and of the baseline: both see the same machine state, so their ratio is stable
// where either alone is not.
inline std::pair<double, CopyTimes> min_seconds_beside_copy(const std::function<void()>& f, int64_t read_bytes,
                                                            int64_t write_bytes, int rounds) {
  CopyBaseline copy(read_bytes, write_bytes);
  double best_f = 1e30;
  CopyTimes copy_times;
  for (int r = 0; r < rounds; ++r) {
    best_f = std::min(best_f, min_seconds_of(f, 1));
    copy_times.time_once(copy);
  }
  return {best_f, copy_times};
}

}  // namespace kiln
