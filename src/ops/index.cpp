// Data movement: cat, stack, repeat, flip, roll, tril, triu, pad, index_select, gather, scatter(_add), index, index_put, embedding.
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {

void register_index_ops() {}

}  // namespace kiln
