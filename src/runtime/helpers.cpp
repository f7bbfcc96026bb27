// Runtime helpers called from generated kernels (see helpers.h). They mirror the eager kernels in
// src/ops/pointwise.cpp exactly; a zero integer divisor sets the status word instead of trapping.
#include "runtime/helpers.h"

#include <atomic>
#include <cmath>
#include <limits>

#include "runtime/jit.h"

namespace {

void report(int32_t* status, int32_t code) {
  std::atomic_ref<int32_t>(*status).store(code, std::memory_order_relaxed);
}

template <class T>
T fmod_like_eager(T a, T b) {
  if (std::isfinite(a) && b != T(0) && std::isinf(a / b)) return std::numeric_limits<T>::quiet_NaN();
  return std::fmod(a, b);
}

template <class T>
T div_floor(T a, T b) {
  if (b == T(0)) return a / b;
  T mod = fmod_like_eager(a, b);
  T quot = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) quot -= T(1);
  if (quot == T(0)) return std::copysign(T(0), a / b);
  T floored = std::floor(quot);
  if (quot - floored > T(0.5)) floored += T(1);
  return floored;
}

template <class T>
T python_remainder(T x, T y) {  // not std::remainder (IEEE, round to nearest)
  T mod = fmod_like_eager(x, y);
  if (mod != T(0) && ((y < T(0)) != (mod < T(0)))) mod += y;
  return mod;
}

}  // namespace

extern "C" {

int64_t kiln_rt_idiv_trunc(int64_t x, int64_t y, int32_t* status) {
  if (y == 0) return report(status, kiln::runtime::kStatusZeroDivision), 0;
  if (y == -1) return int64_t(uint64_t(0) - uint64_t(x));
  return x / y;
}

int64_t kiln_rt_idiv_floor(int64_t x, int64_t y, int32_t* status) {
  if (y == 0) return report(status, kiln::runtime::kStatusZeroDivision), 0;
  if (y == -1) return int64_t(uint64_t(0) - uint64_t(x));
  int64_t q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}

int64_t kiln_rt_iremainder(int64_t x, int64_t y, int32_t* status) {
  if (y == 0) return report(status, kiln::runtime::kStatusZeroDivision), 0;
  if (y == -1) return 0;
  int64_t r = x % y;
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}

int64_t kiln_rt_ipow(int64_t base, int64_t exponent, int32_t*) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return exponent % 2 != 0 ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, b = uint64_t(base);
  for (uint64_t e = uint64_t(exponent); e != 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return int64_t(result);
}

float kiln_rt_div_floor_f32(float x, float y, int32_t*) { return div_floor(x, y); }
double kiln_rt_div_floor_f64(double x, double y, int32_t*) { return div_floor(x, y); }
float kiln_rt_remainder_f32(float x, float y, int32_t*) { return python_remainder(x, y); }
double kiln_rt_remainder_f64(double x, double y, int32_t*) { return python_remainder(x, y); }

}  // extern "C"

namespace kiln::runtime {

std::vector<std::pair<std::string, void*>> runtime_helpers() {
  return {
      {"kiln_rt_idiv_trunc", reinterpret_cast<void*>(&kiln_rt_idiv_trunc)},
      {"kiln_rt_idiv_floor", reinterpret_cast<void*>(&kiln_rt_idiv_floor)},
      {"kiln_rt_iremainder", reinterpret_cast<void*>(&kiln_rt_iremainder)},
      {"kiln_rt_ipow", reinterpret_cast<void*>(&kiln_rt_ipow)},
      {"kiln_rt_div_floor_f32", reinterpret_cast<void*>(&kiln_rt_div_floor_f32)},
      {"kiln_rt_div_floor_f64", reinterpret_cast<void*>(&kiln_rt_div_floor_f64)},
      {"kiln_rt_remainder_f32", reinterpret_cast<void*>(&kiln_rt_remainder_f32)},
      {"kiln_rt_remainder_f64", reinterpret_cast<void*>(&kiln_rt_remainder_f64)},
  };
}

}  // namespace kiln::runtime
