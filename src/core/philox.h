// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"),
// and the one rule turning a draw into each distribution's element. A draw is a pure function of (seed,
// counter), so eager kernels, compiled CPU code and GPU code produce the same numbers for the same (seed,
// offset), whatever the thread or launch layout. Header-only, no dependencies, plain integer and float
// arithmetic: the CUDA prelude can carry the same formula (element i of a call draws counter (0, offset + i)).
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

namespace kiln {

struct Philox4x32 {
  static std::array<uint32_t, 4> draw(uint64_t seed, uint64_t counter_hi, uint64_t counter_lo) {
    std::array<uint32_t, 4> c = {uint32_t(counter_lo), uint32_t(counter_lo >> 32), uint32_t(counter_hi),
                                 uint32_t(counter_hi >> 32)};
    uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      uint64_t p0 = uint64_t(0xD2511F53u) * c[0];
      uint64_t p1 = uint64_t(0xCD9E8D57u) * c[2];
      c = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1, uint32_t(p0)};
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return c;
  }
};

// Uniform [0, 1) from 24 (float) or 53 (double) random bits.
inline float uint_to_unit_float(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }
inline double uints_to_unit_double(uint32_t hi, uint32_t lo) {
  return double(((uint64_t(hi) << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

// Element `i` of a random op whose call starts at `offset`: counter (0, offset + i). `wide` is true for f64
// results (53 random bits per uniform), false for every other floating dtype (24 bits, then rounded to it).
inline std::array<uint32_t, 4> philox_element(uint64_t seed, uint64_t offset, uint64_t i) {
  return Philox4x32::draw(seed, 0, offset + i);
}
inline double philox_uniform(const std::array<uint32_t, 4>& r, bool wide) {
  return wide ? uints_to_unit_double(r[0], r[1]) : double(uint_to_unit_float(r[0]));
}
// Box-Muller on two uniforms of the same draw.
inline double philox_normal(const std::array<uint32_t, 4>& r, bool wide) {
  double u1 = wide ? uints_to_unit_double(r[0], r[1]) : double(uint_to_unit_float(r[0]));
  double u2 = wide ? uints_to_unit_double(r[2], r[3]) : double(uint_to_unit_float(r[1]));
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace kiln
