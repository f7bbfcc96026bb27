// The process-wide default generator.
#include "eager/philox.h"

namespace kiln {

GeneratorState& default_generator() {
  static GeneratorState g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator() = GeneratorState{seed, 0}; }

}  // namespace kiln
