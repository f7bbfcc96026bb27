// Matrix products: mm, bmm, addmm (BLAS for f32/f64), matmul and linear (decompositions).
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {

void register_linalg_ops() {}

}  // namespace kiln
