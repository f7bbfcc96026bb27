// 16-bit floating-point storage types (IEEE binary16 and bfloat16).
// They are storage formats only: kiln computes on them in f32 and rounds once per op, as PyTorch's CPU kernels
// do. Conversions round to nearest, ties to even, and keep NaN/Inf.
#pragma once
#include <cstdint>
#include <cstring>

namespace kiln {

inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT: implicit like a numeric type
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) { bits = uint16_t((u >> 16) | 0x40); return; }  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = uint16_t(u >> 16);
  }
  operator float() const { return bits_float(uint32_t(bits) << 16); }  // NOLINT
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) {  // NOLINT
    uint32_t u = float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t au = u & 0x7fffffffu;
    if (au >= 0x7f800000u) { bits = uint16_t(sign | 0x7c00u | (au > 0x7f800000u ? 0x200u : 0u)); return; }
    if (au >= 0x477ff000u) { bits = uint16_t(sign | 0x7c00u); return; }  // rounds to >= 65520: overflow to inf
    if (au < 0x38800000u) {  // result is subnormal or zero: add 0.5 (as float) and let the FPU round
      float r = bits_float(au) + 0.5f;
      bits = uint16_t(sign | (float_bits(r) - 0x3f000000u));
      return;
    }
    uint32_t mant_odd = (au >> 13) & 1u;
    au += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    bits = uint16_t(sign | (au >> 13));
  }
  operator float() const {  // NOLINT
    uint32_t sign = uint32_t(bits & 0x8000u) << 16;
    uint32_t exp = (bits >> 10) & 0x1fu, mant = bits & 0x3ffu;
    if (exp == 0) {
      float m = float(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
      return bits_float(sign | float_bits(m));
    }
    if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

}  // namespace kiln
