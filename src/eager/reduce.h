// The reduction engine: reduces a tensor over a set of dims into a contiguous output, with an accumulator
// type wider than the input where PyTorch's is (f16/bf16 -> f32, integers -> i64, f32 sums -> f64 lanes).
// Work is split across threads over output elements, or over the reduced range when there are few outputs.
#pragma once
#include <vector>

#include "eager/loops.h"

namespace kiln {

// Geometry of a reduction: kept dims (outer) and reduced dims (inner), as strides into the input.
struct ReduceGeometry {
  Shape kept_sizes, kept_strides;        // iterate outputs (row-major, matches a contiguous output)
  Shape reduced_sizes, reduced_strides;  // iterate the reduced elements of one output
  int64_t num_outputs() const { return shape_numel(kept_sizes); }
  int64_t num_reduced() const { return shape_numel(reduced_sizes); }
};
ReduceGeometry reduce_geometry(const Tensor& x, const std::vector<int64_t>& dims);

// Reduces `x` (element type In) into `out` (contiguous, element type Out, num_outputs elements).
//   Acc init();  Acc step(Acc, In value, int64_t reduced_index);  Acc combine(Acc, Acc);  Out finish(Acc)
// `reduced_index` is the row-major position within the reduced dims (argmax/argmin use it).
template <class In, class Out, class Acc, class Ops>
void reduce_kernel(const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims, const Ops& ops) {
  ReduceGeometry g = reduce_geometry(x, dims);
  const In* px = static_cast<const In*>(x.data_ptr());
  Out* po = static_cast<Out*>(out.data_ptr());
  const int64_t n_out = g.num_outputs(), n_red = g.num_reduced();
  auto reduce_range = [&](int64_t kept_offset, int64_t rb, int64_t re) {
    Acc acc = ops.init();
    if (re <= rb) return acc;
    Shape rs = g.reduced_sizes.empty() ? Shape{1} : g.reduced_sizes;
    Shape rst = g.reduced_strides.empty() ? Shape{0} : g.reduced_strides;
    StridedIter<1> it(rs, {rst});
    int64_t pos = rb;
    it.for_range(rb, re, [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
      const In* p = px + kept_offset + off[0];
      acc = ops.row(acc, p, n, st[0], pos);
      pos += n;
    });
    return acc;
  };
  auto kept_offset_of = [&](int64_t o) {
    int64_t off = 0;
    for (int64_t d = int64_t(g.kept_sizes.size()) - 1; d >= 0; --d) {
      off += (o % g.kept_sizes[size_t(d)]) * g.kept_strides[size_t(d)];
      o /= g.kept_sizes[size_t(d)];
    }
    return off;
  };
  const int threads = omp_get_max_threads();
  if (n_out >= threads || n_red < kParallelGrain) {
    parallel_for(n_out, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n_red, 1)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) po[o] = ops.finish(reduce_range(kept_offset_of(o), 0, n_red));
    });
    return;
  }
  // Few outputs, long reductions: split each reduction across threads and combine the partials.
  for (int64_t o = 0; o < n_out; ++o) {
    int64_t base = kept_offset_of(o);
    std::vector<Acc> partial(size_t(threads), ops.init());
    parallel_for(n_red, kParallelGrain, [&](int64_t b, int64_t e) {
      partial[size_t(omp_get_thread_num())] = ops.combine(partial[size_t(omp_get_thread_num())], reduce_range(base, b, e));
    });
    Acc acc = ops.init();
    for (const Acc& p : partial) acc = ops.combine(acc, p);
    po[o] = ops.finish(acc);
  }
}

}  // namespace kiln
