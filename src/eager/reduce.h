// The reduction engine: reduces a tensor over a set of dims into a contiguous output. Two loop shapes:
//  - inner: the reduced elements of one output lie along the input's smallest stride; each output is
//    reduced on its own (a contiguous run goes to the ops' vectorised `row`),
//  - vertical: a kept dim has the smallest stride (e.g. sum over dim 0 of a row-major matrix); a block of
//    neighbouring outputs is accumulated together, adding one contiguous input row per reduced position.
// Work is split across threads over outputs, or over the reduced range (with per-chunk partial results
// combined in order) when there are too few outputs to share out.
#pragma once
#include <algorithm>
#include <concepts>
#include <memory>
#include <vector>

#include "eager/loops.h"

namespace kiln {

// Geometry of a reduction, with size-1 dims dropped and mergeable neighbours merged within each group.
struct ReduceGeometry {
  Shape kept_sizes, kept_strides;        // the outputs, row-major (matches a contiguous output)
  Shape reduced_sizes, reduced_strides;  // the reduced elements of one output, row-major
  int64_t num_outputs() const { return shape_numel(kept_sizes); }
  int64_t num_reduced() const { return shape_numel(reduced_sizes); }
  // A kept dim is innermost in memory: accumulate rows of outputs at once.
  bool vertical() const;
};
// `any_order`: the reduced dims may be visited in any order (sorted by stride for locality); false keeps
// the row-major order that the `index` passed to `step` (argmax/argmin) relies on.
ReduceGeometry reduce_geometry(const Tensor& x, const std::vector<int64_t>& dims, bool any_order);

// The ops a reduction provides (all const):
//   Acc init();                                   identity (the result of an empty reduction before finish)
//   Acc step(Acc acc, In value, int64_t index);   fold in one element; `index` is its row-major position
//                                                 within the reduced dims (argmax/argmin use it)
//   Acc combine(Acc earlier, Acc later);          merge partial results of consecutive reduced ranges
//   Out finish(Acc acc);
//   static constexpr bool kAnyOrder;              whether elements may be visited in any order
// and optionally, for speed,
//   Acc row(Acc acc, const In* p, int64_t n, int64_t stride, int64_t first_index);  fold p[0..n) (strided)
template <class Ops, class In, class Acc>
concept HasReduceRow = requires(const Ops& ops, Acc acc, const In* p) {
  { ops.row(acc, p, int64_t(0), int64_t(0), int64_t(0)) } -> std::convertible_to<Acc>;
};

namespace reduce_detail {

inline constexpr int64_t kVerticalBlock = 1024;  // outputs accumulated together (fits L1 as doubles)

// Calls f(offset, n, stride, first_index) for the runs of reduced positions [rb, re).
template <class F>
void for_reduced(const ReduceGeometry& g, int64_t rb, int64_t re, F f) {
  if (re <= rb) return;
  if (g.reduced_sizes.empty()) {  // nothing reduced: one element per output
    f(0, re - rb, 0, rb);
    return;
  }
  if (g.reduced_sizes.size() == 1) {
    f(rb * g.reduced_strides[0], re - rb, g.reduced_strides[0], rb);
    return;
  }
  StridedIter<1> it(g.reduced_sizes, {g.reduced_strides});
  int64_t pos = rb;
  it.for_range(rb, re, [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
    f(off[0], n, st[0], pos);
    pos += n;
  });
}

// Offset into the input of kept position `o` (row-major over kept dims [0, ndims)).
inline int64_t kept_offset(const ReduceGeometry& g, int64_t o, size_t ndims) {
  int64_t off = 0;
  for (size_t d = ndims; d-- > 0;) {
    off += (o % g.kept_sizes[d]) * g.kept_strides[d];
    o /= g.kept_sizes[d];
  }
  return off;
}

}  // namespace reduce_detail

// Reduces `x` (element type In) over `dims` into `out` (contiguous, element type Out, num_outputs elements).
template <class In, class Out, class Acc, class Ops>
void reduce_kernel(const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims, const Ops& ops) {
  using namespace reduce_detail;
  const ReduceGeometry g = reduce_geometry(x, dims, Ops::kAnyOrder);
  const In* px = static_cast<const In*>(x.data_ptr());
  Out* po = static_cast<Out*>(out.data_ptr());
  const int64_t n_out = g.num_outputs(), n_red = g.num_reduced();
  if (n_out == 0) return;
  if (n_red == 0) {
    const Out empty = ops.finish(ops.init());
    std::fill(po, po + n_out, empty);
    return;
  }
  const bool vertical = g.vertical();
  // Vertical: a unit is one block of up to kVerticalBlock outputs along the innermost kept dim (length K).
  const int64_t K = vertical ? g.kept_sizes.back() : 1, ks = vertical ? g.kept_strides.back() : 0;
  const int64_t blocks_per_row = vertical ? (K + kVerticalBlock - 1) / kVerticalBlock : 1;
  const int64_t units = vertical ? (n_out / K) * blocks_per_row : n_out;
  const size_t outer_dims = vertical ? g.kept_sizes.size() - 1 : g.kept_sizes.size();

  // The outputs of unit `u`: [first, first + len).
  auto unit_first = [&](int64_t u) {
    return vertical ? (u / blocks_per_row) * K + (u % blocks_per_row) * kVerticalBlock : u;
  };
  auto unit_len = [&](int64_t u) { return vertical ? std::min(kVerticalBlock, K - (u % blocks_per_row) * kVerticalBlock) : 1; };
  // Folds reduced positions [rb, re) of unit `u` into acc[0..unit_len(u)).
  auto accumulate = [&](int64_t u, int64_t rb, int64_t re, Acc* acc) {
    if (!vertical) {
      const int64_t base = kept_offset(g, u, outer_dims);
      for_reduced(g, rb, re, [&](int64_t off, int64_t n, int64_t st, int64_t first) {
        const In* p = px + base + off;
        if constexpr (HasReduceRow<Ops, In, Acc>) {
          acc[0] = ops.row(acc[0], p, n, st, first);
        } else {
          for (int64_t i = 0; i < n; ++i) acc[0] = ops.step(acc[0], p[i * st], first + i);
        }
      });
      return;
    }
    const int64_t nk = unit_len(u);
    const int64_t base = kept_offset(g, u / blocks_per_row, outer_dims) + (u % blocks_per_row) * kVerticalBlock * ks;
    for_reduced(g, rb, re, [&](int64_t off, int64_t n, int64_t st, int64_t first) {
      for (int64_t i = 0; i < n; ++i) {
        const In* p = px + base + off + i * st;
        const int64_t index = first + i;
        if (ks == 1) {
#pragma omp simd
          for (int64_t k = 0; k < nk; ++k) acc[k] = ops.step(acc[k], p[k], index);
        } else {
          for (int64_t k = 0; k < nk; ++k) acc[k] = ops.step(acc[k], p[k * ks], index);
        }
      }
    });
  };
  const int64_t max_unit_len = vertical ? std::min(kVerticalBlock, K) : 1;
  const int threads = omp_get_max_threads();

  if (units >= threads || n_out * n_red < kParallelGrain) {
    // Enough independent units: share them out, each reducing its whole range.
    const int64_t per_unit = max_unit_len * n_red;
    parallel_for(units, std::max<int64_t>(1, kParallelGrain / per_unit), [&](int64_t b, int64_t e) {
      auto acc = std::make_unique<Acc[]>(size_t(max_unit_len));  // not std::vector: Acc may be bool
      for (int64_t u = b; u < e; ++u) {
        const int64_t first = unit_first(u), len = unit_len(u);
        std::fill(acc.get(), acc.get() + len, ops.init());
        accumulate(u, 0, n_red, acc.get());
        for (int64_t k = 0; k < len; ++k) po[first + k] = ops.finish(acc[size_t(k)]);
      }
    });
    return;
  }
  // Few units, long reductions: split the reduced range into one chunk per thread, each folding into its
  // own partial results, then combine the chunks in order (earlier first, as argmax's ties need).
  const int64_t chunks = std::min<int64_t>(threads, n_red * n_out / kParallelGrain);
  auto partial = std::make_unique<Acc[]>(size_t(chunks * n_out));  // chunk-major
  std::fill(partial.get(), partial.get() + chunks * n_out, ops.init());
  parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c)
      for (int64_t u = 0; u < units; ++u)
        accumulate(u, n_red * c / chunks, n_red * (c + 1) / chunks, partial.get() + c * n_out + unit_first(u));
  });
  for (int64_t o = 0; o < n_out; ++o) {
    Acc acc = partial[size_t(o)];
    for (int64_t c = 1; c < chunks; ++c) acc = ops.combine(acc, partial[size_t(c * n_out + o)]);
    po[o] = ops.finish(acc);
  }
}

}  // namespace kiln
