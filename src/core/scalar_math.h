// Scalar arithmetic with PyTorch's exact semantics where C++ differs or traps: wrapping negation, integer
// division rounded toward zero or -inf, Python's remainder and floor division of floats (on the exact fmod),
// float-to-integer conversion, integer powers. One place for these rules: the eager kernels (src/ops/, through
// eager/loops.h) and the compiled kernels' runtime helpers (src/backends/cpu/helpers.cpp) both use them.
// Integer divisors must be non-zero (callers check).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace kiln {

// -x with two's-complement wrap-around for integers (PyTorch: -INT_MIN == INT_MIN).
template <class T>
T wrapping_neg(T v) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return T(uint64_t(0) - uint64_t(int64_t(v)));
  else return T(-v);
}

// x + y, x - y and x * y with two's-complement wrap-around for signed integers: PyTorch's integer kernels
// wrap (INT64_MAX + 1 == INT64_MIN), where C++'s signed overflow is undefined behaviour.
template <class T>
T wrapping_add(T x, T y) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return T(uint64_t(int64_t(x)) + uint64_t(int64_t(y)));
  else return T(x + y);
}
template <class T>
T wrapping_sub(T x, T y) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return T(uint64_t(int64_t(x)) - uint64_t(int64_t(y)));
  else return T(x - y);
}
template <class T>
T wrapping_mul(T x, T y) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return T(uint64_t(int64_t(x)) * uint64_t(int64_t(y)));
  else return T(x * y);
}

// Integer quotient rounded toward zero / toward -inf; x / -1 wraps like negation (no trap on INT_MIN).
template <class T>
T int_div_trunc(T x, T y) {
  if constexpr (std::is_signed_v<T>) {
    if (y == T(-1)) return wrapping_neg(x);
  }
  return T(x / y);
}
template <class T>
T int_div_floor(T x, T y) {
  if constexpr (std::is_signed_v<T>) {
    if (y == T(-1)) return wrapping_neg(x);
    const T q = T(x / y);
    return (x % y != 0 && ((x < 0) != (y < 0))) ? T(q - 1) : q;
  } else {
    return T(x / y);
  }
}
// Python's floor division for floats (c10::div_floor_floating), on the exact remainder (std::fmod, as PyTorch's
// scalar path; its vectorised Sleef fmod gives NaN where |a / b| overflows, a denormal divisor for one).
template <class T>
T float_div_floor(T a, T b) {
  if (b == T(0)) return a / b;
  T mod = std::fmod(a, b);
  T quot = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) quot -= T(1);
  if (quot == T(0)) return std::copysign(T(0), a / b);
  T floored = std::floor(quot);
  if (quot - floored > T(0.5)) floored += T(1);
  return floored;
}

// Python's remainder (the sign of the divisor). Integers: y != 0; x % -1 is 0 (no trap on INT_MIN).
template <class T>
T python_remainder(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    T mod = std::fmod(x, y);  // exact (see float_div_floor)
    if (mod != T(0) && ((y < T(0)) != (mod < T(0)))) mod += y;
    return mod;
  } else if constexpr (std::is_signed_v<T>) {
    if (y == T(-1)) return T(0);
    T r = T(x % y);
    return (r != 0 && ((r < 0) != (y < 0))) ? T(r + y) : r;
  } else {
    return T(x % y);
  }
}

// A float converted to an integer type as PyTorch's CPU kernels do on x86 (the truncating conversion
// instructions, cvttss2si/cvttsd2si): toward zero; NaN, +-inf and values outside the range of the 64-bit (for
// i64) or 32-bit (for every narrower type) conversion give that conversion's minimum, and narrower types then
// keep the low bits of the 32-bit result (300.0 -> u8 44, 70000.0 -> i16 4464, 3e9 -> i16 0). C++'s conversion
// is undefined outside the range; this one is defined everywhere. Eager (convert_element) and compiled kernels
// (codegen_scalar.cpp `cast`) follow it.
template <class To, class From>
To float_to_int(From v) {
  static_assert(std::is_integral_v<To> && !std::is_same_v<To, bool> && std::is_floating_point_v<From>);
  const double d = double(v);
  if constexpr (sizeof(To) == 8) {
    if (!(d >= -0x1p63 && d < 0x1p63)) return To(std::numeric_limits<int64_t>::min());
    return To(int64_t(d));
  } else {
    if (!(d > -0x1p31 - 1 && d < 0x1p31)) return To(uint32_t(std::numeric_limits<int32_t>::min()));
    return To(uint32_t(int32_t(d)));
  }
}

// IEEE 754-2019 maximum and minimum (llvm.maximum/minimum, what compiled kernels use): NaN wins and -0 orders
// below +0, whatever the operand order. PyTorch's own answer for a pair of zeros depends on the operand order
// and on whether the element falls in a vector; amax/amin follow the same rule (src/ops/reduction.cpp).
template <class T>
T ieee_maximum(T x, T y) {
  if (x != x || y != y) return std::numeric_limits<T>::quiet_NaN();
  if (x == y) return std::signbit(x) ? y : x;  // equal: only the zeros' signs can differ
  return x < y ? y : x;
}
template <class T>
T ieee_minimum(T x, T y) {
  if (x != x || y != y) return std::numeric_limits<T>::quiet_NaN();
  if (x == y) return std::signbit(x) ? x : y;
  return y < x ? y : x;
}

// Integer power by squaring with wrap-around; negative exponents give 0 except for bases 1 and -1.
template <class T>
T int_pow(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {
      if (base == 1) return T(1);
      if (base == -1) return T(exponent % 2 != 0 ? -1 : 1);
      return T(0);
    }
  }
  uint64_t result = 1, b = uint64_t(int64_t(base));
  for (uint64_t e = uint64_t(int64_t(exponent)); e != 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return T(result);
}

}  // namespace kiln
