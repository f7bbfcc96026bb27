// Softmax over the rows of a 4096x4096 f32 matrix written by hand with AVX-512 intrinsics, timed beside a
// streaming copy of the same bytes: the yardstick for kiln's compiled softmax (docs/benchmarks.md). Same
// algorithm as kiln's kernel: per row a 1-op max loop, then one loop that computes e^(x - max) (kiln's
// polynomial, runtime/vector_math.cpp) into a scratch row and sums it, prefetches the next row into L2 and
// writes the previous row (its scratch times 1/sum) with non-temporal stores. Variants: the next row's max
// moved into that loop (no max loop of its own), prefetching one or two rows ahead; an eighth of the memory
// traffic (writes and prefetches) issued in the max loop instead; and e^x replaced by x, which shows what the
// rest costs. Last, the time a row takes on one thread with its input in L2: about the computation alone.
// Every timed run starts with its data flushed from the caches (clflushopt), like kiln-bench's inductor/*
// cases (docs/benchmarks.md, Cold caches).
// Build and run (OpenMP threads from OMP_NUM_THREADS):
//   gcc -O2 -march=native -fopenmp bench/softmax_by_hand.c -o softmax_by_hand -lm && ./softmax_by_hand
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kRows = 4096, kCols = 4096 };
typedef enum {
  kMaxLoop,
  kMaxInExpLoopPrefetch2Ahead,
  kMaxInExpLoopPrefetch1Ahead,
  kEighthOfTrafficInMaxLoop,
  kMaxLoopWithoutExp,
  kVariants
} Variant;
static const char* const kVariantNames[] = {"max loop", "next max in exp loop, prefetch 2 rows ahead",
                                            "next max in exp loop, prefetch 1 row ahead",
                                            "an eighth of the traffic in the max loop", "max loop, e^x replaced by x"};

static float *x_all, *y_all;
static char *copy_src, *copy_dst;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// Flushes `bytes` at p (64-byte aligned) from every cache level, on every thread.
__attribute__((target("clflushopt"))) static void flush_from_caches(void* p, size_t bytes) {
#pragma omp parallel for
  for (size_t i = 0; i < bytes; i += 64) _mm_clflushopt((char*)p + i);
  _mm_sfence();
}

// The baseline: each thread copies its share with 16-byte streaming stores, loads prefetched 8 KB ahead.
static void streaming_copy(void) {
#pragma omp parallel
  {
    const size_t share = (size_t)kRows * kCols * 4 / omp_get_num_threads();
    const __m128i* s = (const __m128i*)(copy_src + omp_get_thread_num() * share);
    __m128i* d = (__m128i*)(copy_dst + omp_get_thread_num() * share);
    for (size_t i = 0; i < share / 16; i += 4) {
      _mm_prefetch((const char*)(s + i) + 8192, _MM_HINT_T0);
      for (int k = 0; k < 4; ++k) _mm_stream_si128(d + i + k, _mm_load_si128(s + i + k));
    }
    _mm_sfence();
  }
}

// kiln's f32 e^x: clamp, n by the 1.5 * 2^23 shifter, r = x - n ln2 in two steps, degree-5 polynomial, vscalefps.
static inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.f)), _mm512_set1_ps(88.8f));
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504f), shifter), shifter);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.3981999507e-3f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, n);
}

static void prefetch_lines(const float* row, int first_line, int end_line) {
  for (int l = first_line; l < end_line; ++l) _mm_prefetch((const char*)(row + l * 16), _MM_HINT_T1);
}

// Writes elements [begin, end) of the previous row: its scratch times 1/sum, non-temporal.
static void write_previous(float* y, const float* scratch, __m512 inverse, int begin, int end) {
  for (int j = begin; j < end; j += 16) _mm512_stream_ps(y + j, _mm512_mul_ps(_mm512_load_ps(scratch + j), inverse));
}

// The max of row x; in the eighth-of-the-traffic variant the loop also writes the previous row's first eighth
// and prefetches the next row's, spread evenly over it.
static __m512 row_max(const float* x, float* previous_y, const float* previous_scratch, __m512 inverse,
                      const float* next, int split) {
  __m512 a0 = _mm512_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0;
  for (int i = 0; i < kCols; i += 64) {
    if (split && previous_y && i % 512 == 0) write_previous(previous_y, previous_scratch, inverse, i / 8, i / 8 + 64);
    if (split && next && i % 1024 == 0) prefetch_lines(next, i / 128, i / 128 + 8);
    a0 = _mm512_max_ps(a0, _mm512_loadu_ps(x + i)), a1 = _mm512_max_ps(a1, _mm512_loadu_ps(x + i + 16));
    a2 = _mm512_max_ps(a2, _mm512_loadu_ps(x + i + 32)), a3 = _mm512_max_ps(a3, _mm512_loadu_ps(x + i + 48));
  }
  return _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3))));
}

// Softmax of `rows` rows from x into y on `threads` threads, each taking a contiguous block of rows.
static void softmax(Variant variant, const float* x_rows, float* y_rows, int rows, int threads) {
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
    const int first = t * rows / team, end = (t + 1) * rows / team;
    static __thread float scratch[2][kCols] __attribute__((aligned(64)));
    float previous_inverse = 0, *previous_y = NULL;
    int parity = 0;
    const int max_in_exp_loop = variant == kMaxInExpLoopPrefetch2Ahead || variant == kMaxInExpLoopPrefetch1Ahead;
    const int split = variant == kEighthOfTrafficInMaxLoop, with_exp = variant != kMaxLoopWithoutExp;
    const __m512 zero = _mm512_setzero_ps();
    __m512 max = max_in_exp_loop ? row_max(x_rows + (size_t)first * kCols, NULL, NULL, zero, NULL, 0) : zero;
    for (int r = first; r < end; ++r) {
      const float* x = x_rows + (size_t)r * kCols;
      const float* next = x + kCols;
      const int has_next = r + 1 < end;
      float *row_scratch = scratch[parity], *previous_scratch = scratch[parity ^ 1];
      const __m512 inverse = _mm512_set1_ps(previous_inverse);
      if (!max_in_exp_loop) max = row_max(x, previous_y, previous_scratch, inverse, has_next ? next : NULL, split);
      const float* prefetched = variant == kMaxInExpLoopPrefetch2Ahead ? x + 2 * kCols : next;
      __m512 s0 = _mm512_setzero_ps(), s1 = s0, m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
      for (int i = 0; i < kCols; i += 64) {
        // Elements [lo, hi) of the traffic go with these 64; in the split variant the other seven eighths, in
        // whole lines: 3 or 4 of them where the max loop took 4 from every 32.
        const int lo = split ? 16 * (kCols / 128 + i / 16 * 7 / 8) : i;
        const int hi = split ? 16 * (kCols / 128 + (i + 64) / 16 * 7 / 8) : i + 64;
        if (r + 1 + (variant == kMaxInExpLoopPrefetch2Ahead) < end) prefetch_lines(prefetched, lo / 16, hi / 16);
        for (int j = i; j < i + 64; j += 32) {
          __m512 e0 = _mm512_sub_ps(_mm512_loadu_ps(x + j), max), e1 = _mm512_sub_ps(_mm512_loadu_ps(x + j + 16), max);
          if (with_exp) e0 = exp16(e0), e1 = exp16(e1);
          _mm512_store_ps(row_scratch + j, e0), _mm512_store_ps(row_scratch + j + 16, e1);
          s0 = _mm512_add_ps(s0, e0), s1 = _mm512_add_ps(s1, e1);
          if (max_in_exp_loop && has_next) {
            m0 = _mm512_max_ps(m0, _mm512_loadu_ps(next + j));
            m1 = _mm512_max_ps(m1, _mm512_loadu_ps(next + j + 16));
          }
        }
        if (previous_y) write_previous(previous_y, previous_scratch, inverse, lo, hi);
      }
      if (max_in_exp_loop) max = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(m0, m1)));
      previous_inverse = 1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
      previous_y = y_rows + (size_t)r * kCols;
      parity ^= 1;
    }
    if (previous_y) write_previous(previous_y, scratch[parity ^ 1], _mm512_set1_ps(previous_inverse), 0, kCols);
    _mm_sfence();
  }
}

int main(void) {
  const size_t bytes = (size_t)kRows * kCols * 4;
  x_all = aligned_alloc(64, bytes), y_all = aligned_alloc(64, bytes);
  copy_src = aligned_alloc(64, bytes), copy_dst = aligned_alloc(64, bytes);
  for (size_t i = 0; i < (size_t)kRows * kCols; ++i) x_all[i] = (float)((i * 7919) % 1000) * 0.01f - 5, y_all[i] = 0;
  memset(copy_src, 1, bytes), memset(copy_dst, 0, bytes);
  // Softmax and the copy alternately, each from cold caches, fastest of 20 each; the variants in turn, four rounds.
  const int threads = omp_get_max_threads();
  for (int round = 0; round < 4; ++round)
    for (int v = 0; v < kVariants; ++v) {
      double best_softmax = 1e9, best_copy = 1e9;
      for (int k = 0; k < 20; ++k) {
        flush_from_caches(x_all, bytes), flush_from_caches(y_all, bytes);
        const double t0 = now();
        softmax((Variant)v, x_all, y_all, kRows, threads);
        const double t1 = now();
        flush_from_caches(copy_src, bytes), flush_from_caches(copy_dst, bytes);
        const double t2 = now();
        streaming_copy();
        const double t3 = now();
        if (t1 - t0 < best_softmax) best_softmax = t1 - t0;
        if (t3 - t2 < best_copy) best_copy = t3 - t2;
      }
      printf("threads %d  %-44s softmax %.3f ms  copy %.3f ms  vs copy %.3f\n", threads, kVariantNames[v],
             best_softmax * 1e3, best_copy * 1e3, best_copy / best_softmax);
    }
  // Every variant but the one without exp must give rows that sum to 1.
  int wrong = 0;
  for (int v = 0; v < kVariants; ++v) {
    if (v == kMaxLoopWithoutExp) continue;
    memset(y_all, 0, bytes);
    softmax((Variant)v, x_all, y_all, kRows, threads);
    for (int r = 0; r < kRows; r += 97) {
      double sum = 0;
      for (int i = 0; i < kCols; ++i) sum += y_all[(size_t)r * kCols + i];
      if (fabs(sum - 1) > 1e-3) printf("%s: row %d sums to %f\n", kVariantNames[v], r, sum), wrong = 1;
    }
  }
  // About the computation alone: 32 rows (512 KB) read from L2, one thread, fastest of 200.
  double best_row = 1e9;
  for (int k = 0; k < 200; ++k) {
    const double t0 = now();
    softmax(kMaxLoop, x_all, y_all, 32, 1);
    if ((now() - t0) / 32 < best_row) best_row = (now() - t0) / 32;
  }
  printf("one thread, rows in L2: %.2f us a row; %.3f ms for all rows on %d threads if every core computed so\n",
         best_row * 1e6, best_row * kRows / threads * 1e3, threads);
  return wrong;
}
