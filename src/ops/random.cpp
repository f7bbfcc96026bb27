// Random ops drawing from the Philox4x32-10 generator keyed by (seed, offset).
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {

void register_random_ops() {}

}  // namespace kiln
