// The process-wide random generator: a Philox4x32-10 state (core/philox.h holds the formula) that eager random
// ops consume. Each random op draws its elements at counters offset, offset + 1, ... and then advances the
// offset by its element count, so a program's draws depend only on the seed and the order of random ops.
#pragma once
#include <cstdint>

#include "core/philox.h"

namespace kiln {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};
GeneratorState& default_generator();
void manual_seed(uint64_t seed);  // also resets the offset to 0

}  // namespace kiln
