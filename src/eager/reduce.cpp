// Reduction geometry: splits the input's dims into kept (outputs) and reduced, dropping size-1 dims.
#include "eager/reduce.h"

#include <algorithm>

namespace kiln {

ReduceGeometry reduce_geometry(const Tensor& x, const std::vector<int64_t>& dims) {
  ReduceGeometry g;
  for (int64_t d = 0; d < x.dim(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    int64_t size = x.sizes()[size_t(d)], stride = x.strides()[size_t(d)];
    if (reduced) {
      g.reduced_sizes.push_back(size);
      g.reduced_strides.push_back(stride);
    } else {
      g.kept_sizes.push_back(size);
      g.kept_strides.push_back(stride);
    }
  }
  return g;
}

}  // namespace kiln
