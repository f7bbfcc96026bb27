// The CUDA C every generated kernel starts with: storage conversions (f16 through PTX cvt, bf16 on the bits, as
// the CPU backend rounds), eager's scalar rules for the runtime helpers the loop IR calls (the device copies of
// core/scalar_math.h's integer division, remainder, floor division and integer power), NaN-propagating
// maximum/minimum, float-to-integer conversion as eager's float_to_int, warp shuffles and block reductions.
// Self-contained (no #include), so NVRTC needs no toolkit headers at run time.
#pragma once

namespace kiln::cuda {

inline constexpr const char* kCudaPrelude = R"CUDA(
#define KILN_FULL_MASK 0xffffffffu
typedef long long i64;
typedef unsigned long long u64;
__device__ __forceinline__ float kiln_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short kiln_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float kiln_bf2f(unsigned short b) { return __int_as_float(int((unsigned)b << 16)); }
__device__ __forceinline__ unsigned short kiln_f2bf(float f) {
  if (f != f) return 0x7fc0;
  unsigned bits = (unsigned)__float_as_int(f);
  return (unsigned short)((bits + (((bits >> 16) & 1u) + 0x7fffu)) >> 16);
}
__device__ __forceinline__ i64 kiln_wrap_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ i64 kiln_wrap_sub(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
__device__ __forceinline__ i64 kiln_wrap_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
__device__ __forceinline__ i64 kiln_f2i64(double d) { return (d >= -0x1p63 && d < 0x1p63) ? (i64)d : (i64)(-9223372036854775807LL - 1); }
__device__ __forceinline__ unsigned kiln_f2i32(double d) { return (d > -0x1p31 - 1 && d < 0x1p31) ? (unsigned)(int)d : 0x80000000u; }
template <class T> __device__ __forceinline__ T kiln_maximum(T x, T y) {
  if (x != x || y != y) return x + y;
  if (x == y) return signbit(x) ? y : x;
  return x < y ? y : x;
}
template <class T> __device__ __forceinline__ T kiln_minimum(T x, T y) {
  if (x != x || y != y) return x + y;
  if (x == y) return signbit(x) ? x : y;
  return y < x ? y : x;
}
__device__ __forceinline__ void kiln_report(int* status, int code) { atomicCAS(status, 0, code); }
// A hint that `p` will be read soon: its line is fetched into L2 (persistent rows prefetch the next row).
__device__ __forceinline__ void kiln_prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" :: "l"(p)); }
#define KILN_STATUS_ZERO_DIVISION %ZERO_DIVISION%
__device__ i64 kiln_rt_idiv_trunc(i64 x, i64 y, int* status) {
  if (y == 0) { kiln_report(status, KILN_STATUS_ZERO_DIVISION); return 0; }
  if (y == -1) return kiln_wrap_sub(0, x);
  return x / y;
}
__device__ i64 kiln_rt_idiv_floor(i64 x, i64 y, int* status) {
  if (y == 0) { kiln_report(status, KILN_STATUS_ZERO_DIVISION); return 0; }
  if (y == -1) return kiln_wrap_sub(0, x);
  i64 q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}
__device__ i64 kiln_rt_iremainder(i64 x, i64 y, int* status) {
  if (y == 0) { kiln_report(status, KILN_STATUS_ZERO_DIVISION); return 0; }
  if (y == -1) return 0;
  i64 r = x % y;
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
__device__ i64 kiln_rt_ipow(i64 base, i64 exponent, int*) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent & 1) ? -1 : 1;
    return 0;
  }
  i64 r = 1;
  while (exponent) {
    if (exponent & 1) r = kiln_wrap_mul(r, base);
    base = kiln_wrap_mul(base, base);
    exponent >>= 1;
  }
  return r;
}
template <class T> __device__ T kiln_div_floor(T a, T b) {
  if (b == T(0)) return a / b;
  T mod = fmod(a, b);
  T quot = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) quot -= T(1);
  if (quot == T(0)) return copysign(T(0), a / b);
  T floored = floor(quot);
  if (quot - floored > T(0.5)) floored += T(1);
  return floored;
}
template <class T> __device__ T kiln_remainder(T x, T y) {
  T mod = fmod(x, y);
  if (mod != T(0) && ((y < T(0)) != (mod < T(0)))) mod += y;
  return mod;
}
__device__ float kiln_rt_div_floor_f32(float x, float y, int*) { return kiln_div_floor(x, y); }
__device__ double kiln_rt_div_floor_f64(double x, double y, int*) { return kiln_div_floor(x, y); }
__device__ float kiln_rt_remainder_f32(float x, float y, int*) { return kiln_remainder(x, y); }
__device__ double kiln_rt_remainder_f64(double x, double y, int*) { return kiln_remainder(x, y); }

__device__ __forceinline__ float kiln_shfl(float v, int o) { return __shfl_xor_sync(KILN_FULL_MASK, v, o); }
__device__ __forceinline__ double kiln_shfl(double v, int o) { return __shfl_xor_sync(KILN_FULL_MASK, v, o); }
__device__ __forceinline__ i64 kiln_shfl(i64 v, int o) { return __shfl_xor_sync(KILN_FULL_MASK, v, o); }
__device__ __forceinline__ u64 kiln_shfl(u64 v, int o) { return __shfl_xor_sync(KILN_FULL_MASK, v, o); }
template <class T> __device__ __forceinline__ T kiln_shfl(T v, int o) { return (T)__shfl_xor_sync(KILN_FULL_MASK, (int)v, o); }

// The block's reduction of every thread's `v` under `f` (associative and commutative), returned to every thread:
// butterfly shuffles in each warp, then warp 0 over the warps' partials. Every thread of the block must call it.
template <class T, class F> __device__ __forceinline__ T kiln_block_reduce(T v, T identity, F f) {
  __shared__ T partial[32];
  __shared__ T result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) v = f(v, kiln_shfl(v, o));
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? partial[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) v = f(v, kiln_shfl(v, o));
    if (lane == 0) result = v;
  }
  __syncthreads();
  return result;
}
// Whether (v, i) beats (w, j) for argmax (is_max) or argmin: index -1 is empty; NaN beats any number; ties and
// two NaNs keep the first index (as eager).
template <class T> __device__ __forceinline__ bool kiln_arg_better(T v, i64 i, T w, i64 j, bool is_max) {
  if (j < 0) return i >= 0;
  if (i < 0) return false;
  const bool vn = v != v, wn = w != w;
  if (vn || wn) return vn && wn ? i < j : vn;
  if (v == w) return i < j;
  return is_max ? v > w : v < w;
}
template <class T> __device__ __forceinline__ i64 kiln_block_argreduce(T v, i64 i, bool is_max) {
  __shared__ T pv[32];
  __shared__ i64 pi[32];
  __shared__ i64 result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    T w = kiln_shfl(v, o);
    i64 j = kiln_shfl(i, o);
    if (kiln_arg_better(w, j, v, i, is_max)) { v = w; i = j; }
  }
  __syncthreads();
  if (lane == 0) { pv[warp] = v; pi[warp] = i; }
  __syncthreads();
  if (warp == 0) {
    v = pv[lane < warps ? lane : 0];
    i = lane < warps ? pi[lane] : -1;
    for (int o = 16; o > 0; o >>= 1) {
      T w = kiln_shfl(v, o);
      i64 j = kiln_shfl(i, o);
      if (kiln_arg_better(w, j, v, i, is_max)) { v = w; i = j; }
    }
    if (lane == 0) result = i;
  }
  __syncthreads();
  return result;
}
)CUDA";

}  // namespace kiln::cuda
