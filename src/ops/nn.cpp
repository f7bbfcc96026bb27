// Neural-network ops: softmax, log_softmax, layer_norm, rms_norm, dropout, losses, batch_norm.
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {

void register_nn_ops() {}

}  // namespace kiln
