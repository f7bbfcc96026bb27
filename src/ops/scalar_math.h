// Scalar arithmetic with PyTorch's exact semantics where C++ differs or traps: wrapping negation, integer
// division rounded toward zero or -inf, Python's remainder, floor division of floats, fmod as PyTorch's
// vectorised kernels compute it, integer powers. One place for these rules: the eager kernels
// (src/ops/pointwise.cpp) and the compiled kernels' runtime helpers (src/runtime/helpers.cpp) both use them.
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
// fmod as PyTorch's vectorised CPU kernels compute it (Sleef): exact, except NaN where |a / b| overflows T.
template <class T>
T kernel_fmod(T a, T b) {
  if (std::isfinite(a) && b != T(0) && std::isinf(a / b)) return std::numeric_limits<T>::quiet_NaN();
  return std::fmod(a, b);
}
// Python's floor division for floats (c10::div_floor_floating).
template <class T>
T float_div_floor(T a, T b) {
  if (b == T(0)) return a / b;
  T mod = kernel_fmod(a, b);
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
    T mod = kernel_fmod(x, y);
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
