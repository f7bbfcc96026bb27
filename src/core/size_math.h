// Overflow-checked int64 arithmetic for sizes, strides, offsets and lengths. Shapes and op arguments come from
// user input (.kir files, API calls) and may hold any int64, so shape inference computes every size that
// multiplies or adds such numbers through these helpers: an overflow throws kiln::Error naming the op and what
// would not fit, instead of being undefined behaviour.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/error.h"

namespace kiln {

// Thrown by size computations that do not know which op they serve (contiguous strides, element counts); the
// dispatcher adds the op's name. A kiln::Error like any other.
class SizeOverflowError : public Error {
 public:
  using Error::Error;
};

// "<op>: <what> (<a> <sym> <b> overflows a 64-bit integer); check the arguments"; without an op, a
// SizeOverflowError for the dispatcher to name.
[[noreturn]] inline void size_overflow(std::string_view op, std::string_view what, int64_t a, char sym, int64_t b) {
  std::string msg = fmt::format("{} ({} {} {} overflows a 64-bit integer); check the arguments", what, a, sym, b);
  if (op.empty()) throw SizeOverflowError(msg);
  throw Error(fmt::format("{}: {}", op, msg));
}

// a * b, a + b and a - b, or size_overflow(op, what, ...). `what` says what was being computed, e.g. "the result
// would have more than 2^63 elements" or "the dilated kernel size".
inline int64_t checked_mul(int64_t a, int64_t b, std::string_view op, std::string_view what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) size_overflow(op, what, a, '*', b);
  return r;
}
inline int64_t checked_add(int64_t a, int64_t b, std::string_view op, std::string_view what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) size_overflow(op, what, a, '+', b);
  return r;
}
inline int64_t checked_sub(int64_t a, int64_t b, std::string_view op, std::string_view what) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) size_overflow(op, what, a, '-', b);
  return r;
}

// ceil(a / b) for a >= 0 and b > 0, without the overflow of (a + b - 1) / b.
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// The phrase for results too large to count: checked_mul(n, size, op, kTooManyElements).
inline constexpr std::string_view kTooManyElements = "the result would have more than 2^63 elements";

}  // namespace kiln
