// Reduction geometry: splits the input's dims into kept (outputs) and reduced, drops size-1 dims and merges
// neighbours that are contiguous with each other, so most reductions become one or two flat loops.
#include "eager/reduce.h"

#include <cstdlib>

namespace kiln {

namespace {

// Appends dim (size, stride) to a group, merging it into the previous dim when the two are contiguous.
void push_dim(Shape& sizes, Shape& strides, int64_t size, int64_t stride) {
  if (size == 1) return;
  if (!sizes.empty() && strides.back() == stride * size) {
    sizes.back() *= size;
    strides.back() = stride;
    return;
  }
  sizes.push_back(size);
  strides.push_back(stride);
}

}  // namespace

bool ReduceGeometry::vertical() const {
  return !kept_sizes.empty() && !reduced_sizes.empty() &&
         std::llabs(kept_strides.back()) < std::llabs(reduced_strides.back());
}

ReduceGeometry reduce_geometry(const Tensor& x, const std::vector<int64_t>& dims, bool any_order) {
  std::vector<int64_t> reduced, kept;
  for (int64_t d = 0; d < x.dim(); ++d)
    (std::find(dims.begin(), dims.end(), d) != dims.end() ? reduced : kept).push_back(d);
  if (any_order) {  // innermost (smallest stride) last, so runs along it are contiguous
    std::stable_sort(reduced.begin(), reduced.end(), [&](int64_t a, int64_t b) {
      return std::llabs(x.strides()[size_t(a)]) > std::llabs(x.strides()[size_t(b)]);
    });
  }
  ReduceGeometry g;
  for (int64_t d : kept) push_dim(g.kept_sizes, g.kept_strides, x.sizes()[size_t(d)], x.strides()[size_t(d)]);
  for (int64_t d : reduced)
    push_dim(g.reduced_sizes, g.reduced_strides, x.sizes()[size_t(d)], x.strides()[size_t(d)]);
  return g;
}

}  // namespace kiln
