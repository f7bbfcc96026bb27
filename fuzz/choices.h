// Where the graph generator's decisions come from. The generator asks a Choices for every decision (an
// integer below n); choice 0 is always the simplest answer (fewer nodes, smaller shapes, f32, the schema's
// default), so a source that shrinks towards 0 shrinks graphs. Three sources: a seeded PRNG (`kiln fuzz`:
// graph i of seed s is a pure function of (s, i)), the bytes of a libFuzzer input (structure-aware fuzzing),
// and RapidCheck draws (fuzz/rapidcheck_gen.h: shrinking regenerates every later choice).
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln::fuzz {

class Choices {
 public:
  virtual ~Choices() = default;
  // An integer in [0, n); 0 when n <= 1.
  virtual uint64_t below(uint64_t n) = 0;
  int64_t in_range(int64_t lo, int64_t hi) {  // inclusive
    return hi <= lo ? lo : lo + int64_t(below(uint64_t(hi - lo) + 1));
  }
  bool chance(int percent) { return below(100) >= uint64_t(100 - percent); }  // 0 = no
};

// splitmix64 over (seed, index): graph `index` of run `seed` never depends on other graphs.
class SeededChoices : public Choices {
 public:
  SeededChoices(uint64_t seed, uint64_t index) : state_(seed * 0x9E3779B97F4A7C15ull ^ (index + 1) * 0xD1B54A32D192ED03ull) {}
  uint64_t below(uint64_t n) override {
    if (n <= 1) return 0;
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z % n;
  }

 private:
  uint64_t state_;
};

// Reads choices from a byte string (libFuzzer's input): 0 once the bytes run out, so a short input is a small
// graph and libFuzzer's mutations of a byte change one decision.
class ByteChoices : public Choices {
 public:
  ByteChoices(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t below(uint64_t n) override {
    if (n <= 1) return 0;
    uint64_t v = 0;
    for (uint64_t range = 1; range < n && pos_ < size_; range <<= 8) v = (v << 8) | data_[pos_++];
    return v % n;
  }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

}  // namespace kiln::fuzz
