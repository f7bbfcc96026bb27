// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
// A draw is a pure function of (seed, counter), so eager kernels, compiled CPU code and GPU code produce the
// same numbers for the same (seed, offset), whatever the thread or launch layout.
#pragma once
#include <array>
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

// The global generator state: each random op consumes a range of counters starting at `offset` and then
// advances it, so a program's draws depend only on the seed and the order of random ops.
struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};
GeneratorState& default_generator();
void manual_seed(uint64_t seed);  // also resets the offset to 0

}  // namespace kiln
