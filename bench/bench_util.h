// Shared by the benchmarks: a wall-clock timer and the same-run memory-bandwidth baseline every
// memory-bound benchmark reports its ratio against (`vs_copy`).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "eager/loops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
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

// What the caches hold when a timed run starts.
// - Cold: every line of the data the run reads and writes was flushed from every cache level first
//   (clflushopt), so the run reads its inputs from memory: what "the bytes that must move" and a
//   memory-bandwidth roofline mean, and what Triton's do_bench does on a GPU (it clears L2 before each run).
//   Flushing the run's own lines is the one way found that works on both measured machines: on the 16-core
//   host, a pass reading twice its 300 MB LLC left a copy's 64 MB source cached after three copies had read
//   it (the copy ran at 241-254 GB/s after the pass, 267-301 with no eviction, 146-154 after clflushopt).
// - Warm: the run follows an untimed run of itself. Where the last-level cache holds the inputs they come back
//   from it: the development VM (260 MB of host LLC) keeps a 64 MB input between runs, and a copy of it runs at
//   48-68 GB/s there against 33-38 GB/s from memory. A kernel that also computes gains less than a copy does,
//   so a warm ratio against a warm copy understates it, and moves with how much of the cache the machine's
//   other tenants leave.
enum class Caches { Warm, Cold };

// The regime of the inductor/* cases: cold, or warm with KILN_BENCH_WARM_CACHES=1 (docs/benchmarks.md).
inline Caches bench_caches() {
  const char* warm = std::getenv("KILN_BENCH_WARM_CACHES");
  return warm && std::string_view(warm) == "1" ? Caches::Warm : Caches::Cold;
}

// `flush` where runs start cold, nothing where they start warm: the last argument of min_seconds_of.
inline std::function<void()> flush_when(Caches caches, std::function<void()> flush) {
  return caches == Caches::Cold ? std::move(flush) : std::function<void()>();
}

#if defined(__x86_64__)
__attribute__((target("clflushopt"))) inline void flush_lines_opt(const char* p, int64_t lines) {
  for (int64_t l = 0; l < lines; ++l) _mm_clflushopt(const_cast<char*>(p) + 64 * l);  // takes a void*
}
#endif

// Flushes [p, p + bytes) from every cache level, dirty lines written back, on every thread (a no-op off x86-64).
inline void flush_from_caches(const void* p, int64_t bytes) {
#if defined(__x86_64__)
  static const bool has_clflushopt = __builtin_cpu_supports("clflushopt");
  const char* first = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63));
  const int64_t lines = (static_cast<const char*>(p) + bytes - first + 63) / 64;
  parallel_for(lines, 1 << 12, [&](int64_t b, int64_t e) {
    if (has_clflushopt) flush_lines_opt(first + 64 * b, e - b);
    else
      for (int64_t l = b; l < e; ++l) _mm_clflush(first + 64 * l);
  });
  _mm_sfence();
#endif
}

// CPU time of the calling thread: what a single-threaded phase (a compile) costs regardless of the machine's load,
// which inflates its wall time on the shared development machine.
inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// The fastest of `reps` timed runs after an untimed one (page faults, code, caches): on a shared, noisy machine
// the minimum is the run least disturbed by other processes, which is what a ratio between two measurements
// needs. `flush`, when given, runs before each timed run to make it start cold.
inline double min_seconds_of(const std::function<void()>& f, int reps, const std::function<void()>& flush = {}) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    if (flush) flush();
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
  void flush_from_caches() const {
    kiln::flush_from_caches(src_.data(), int64_t(src_.size()));
    kiln::flush_from_caches(dst_.data(), int64_t(dst_.size()));
  }
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
  void time_once(CopyBaseline& copy, Caches caches) {
    const std::function<void()> flush = flush_when(caches, [&] { copy.flush_from_caches(); });
    if (copy.has_memcpy()) memcpy_s = std::min(memcpy_s, min_seconds_of([&] { copy.run_memcpy(); }, 1, flush));
    streaming_s = std::min(streaming_s, min_seconds_of([&] { copy.run_streaming(); }, 1, flush));
  }
};

// Bandwidth (bytes read + written per second) of the copy baseline: the faster way, fastest of 10 runs each,
// with warm caches like the eager/* kernels it is compared with (timed back to back).
inline double copy_bandwidth(int64_t bytes) {
  CopyBaseline copy(bytes / 2, bytes / 2);
  CopyTimes t;
  for (int r = 0; r < 10; ++r) t.time_once(copy, Caches::Warm);
  return double(bytes) / t.best();
}

// Times `f` and the baseline reading `read_bytes` and writing `write_bytes` alternately, `rounds` times each, from
// the same cache state (cold: `flush_f` flushes what f touches), and returns the fastest run of `f` and of the
// baseline: both see the same machine state, so their ratio is stable where either alone is not.
inline std::pair<double, CopyTimes> min_seconds_beside_copy(const std::function<void()>& f,
                                                            const std::function<void()>& flush_f, int64_t read_bytes,
                                                            int64_t write_bytes, int rounds, Caches caches) {
  CopyBaseline copy(read_bytes, write_bytes);
  double best_f = 1e30;
  CopyTimes copy_times;
  for (int r = 0; r < rounds; ++r) {
    best_f = std::min(best_f, min_seconds_of(f, 1, flush_when(caches, flush_f)));
    copy_times.time_once(copy, caches);
  }
  return {best_f, copy_times};
}

}  // namespace kiln
