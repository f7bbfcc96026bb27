// The iteration engine every eager kernel uses: broadcasting, per-operand element strides, dimension
// coalescing, and a parallel strided loop that hands contiguous inner rows to a tight (vectorisable) body.
// Typed helpers on top: unary/binary/ternary maps with f16/bf16 computed in f32, and dtype conversion.
#pragma once
#include <omp.h>

#include <array>
#include <cmath>
#include <type_traits>

#include "eager/tensor.h"
#include "core/scalar_math.h"

namespace kiln {

// Broadcast result of shapes (PyTorch rules); throws naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);
// `t`'s strides seen through a broadcast to `shape` (0 on broadcast dims).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

// Runs f(begin, end) over [0, n) split across threads when n >= grain (OpenMP; serial otherwise).
template <class F>
void parallel_for(int64_t n, int64_t grain, F f) {
  if (n <= 0) return;
  int threads = omp_get_max_threads();
  if (n < grain || threads <= 1 || omp_in_parallel()) {
    f(int64_t(0), n);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
#pragma omp parallel for num_threads(int(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    if (b < e) f(b, e);
  }
}

inline constexpr int64_t kParallelGrain = 32768;  // elements: below this one thread is faster

// N operands (output first) iterated together over `shape`. Size-1 dims are dropped and adjacent dims merged
// where every operand allows it, so contiguous tensors become one flat row.
template <int N>
struct StridedIter {
  Shape shape;                    // innermost last
  std::array<Shape, N> strides;   // in elements

  StridedIter(const Shape& full_shape, const std::array<Shape, N>& full_strides) {
    for (size_t d = 0; d < full_shape.size(); ++d) {
      if (full_shape[d] == 1) continue;
      bool merge = !shape.empty();
      for (int k = 0; k < N && merge; ++k) merge = strides[k].back() == full_strides[k][d] * full_shape[d];
      if (merge) {
        shape.back() *= full_shape[d];
        for (int k = 0; k < N; ++k) strides[k].back() = full_strides[k][d];
      } else {
        shape.push_back(full_shape[d]);
        for (int k = 0; k < N; ++k) strides[k].push_back(full_strides[k][d]);
      }
    }
    if (shape.empty()) {  // a single element
      shape.push_back(1);
      for (int k = 0; k < N; ++k) strides[k].push_back(0);
    }
  }
  int64_t numel() const { return shape_numel(shape); }

  // Calls row(offsets, n, inner_strides) for every inner row intersecting linear range [begin, end).
  template <class Row>
  void for_range(int64_t begin, int64_t end, Row row) const {
    const int64_t nd = int64_t(shape.size());
    const int64_t inner = shape.back();
    std::array<int64_t, N> inner_st;
    for (int k = 0; k < N; ++k) inner_st[k] = strides[k].back();
    // multi-index of `begin`
    Shape idx(size_t(nd), 0);
    int64_t rem = begin;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[size_t(d)] = rem % shape[size_t(d)];
      rem /= shape[size_t(d)];
    }
    int64_t pos = begin;
    while (pos < end) {
      std::array<int64_t, N> off{};
      for (int k = 0; k < N; ++k)
        for (int64_t d = 0; d < nd; ++d) off[k] += idx[size_t(d)] * strides[k][size_t(d)];
      int64_t n = std::min(inner - idx[size_t(nd - 1)], end - pos);
      row(off, n, inner_st);
      pos += n;
      idx[size_t(nd - 1)] += n;
      for (int64_t d = nd - 1; d > 0 && idx[size_t(d)] >= shape[size_t(d)]; --d) {
        idx[size_t(d)] = 0;
        ++idx[size_t(d - 1)];
      }
    }
  }

  template <class Row>
  void run(Row row) const {
    parallel_for(numel(), kParallelGrain, [&](int64_t b, int64_t e) { for_range(b, e, row); });
  }
};

// out[i] = f(a[i]) with `a` broadcast to out's shape. Out and A are C++ element types.
template <class Out, class A, class F>
void map1(const Tensor& out, const Tensor& a, F f) {
  StridedIter<2> it(out.sizes(), {out.strides(), broadcast_strides(a, out.sizes())});
  Out* po = static_cast<Out*>(out.data_ptr());
  const A* pa = static_cast<const A*>(a.data_ptr());
  it.run([&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
    Out* o = po + off[0];
    const A* x = pa + off[1];
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(x[i * st[1]]);
    }
  });
}

template <class Out, class A, class B, class F>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  StridedIter<3> it(out.sizes(), {out.strides(), broadcast_strides(a, out.sizes()), broadcast_strides(b, out.sizes())});
  Out* po = static_cast<Out*>(out.data_ptr());
  const A* pa = static_cast<const A*>(a.data_ptr());
  const B* pb = static_cast<const B*>(b.data_ptr());
  it.run([&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
    Out* o = po + off[0];
    const A* x = pa + off[1];
    const B* y = pb + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
      const B yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
      const A xv = *x;
      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(x[i * st[1]], y[i * st[2]]);
    }
  });
}

template <class Out, class A, class B, class C, class F>
void map3(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  StridedIter<4> it(out.sizes(), {out.strides(), broadcast_strides(a, out.sizes()), broadcast_strides(b, out.sizes()),
                                  broadcast_strides(c, out.sizes())});
  Out* po = static_cast<Out*>(out.data_ptr());
  const A* pa = static_cast<const A*>(a.data_ptr());
  const B* pb = static_cast<const B*>(b.data_ptr());
  const C* pc = static_cast<const C*>(c.data_ptr());
  it.run([&](const std::array<int64_t, 4>& off, int64_t n, const std::array<int64_t, 4>& st) {
    for (int64_t i = 0; i < n; ++i)
      po[off[0] + i * st[0]] = f(pa[off[1] + i * st[1]], pb[off[2] + i * st[2]], pc[off[3] + i * st[3]]);
  });
}

// Element conversion with PyTorch's semantics (float->int truncates; anything->bool is `!= 0`).
template <class To, class From>
inline To convert_element(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) return float(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(float(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return convert_element<To>(float(v));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return float_to_int<To>(v);  // defined for NaN, inf and out-of-range values, as PyTorch on x86
  } else {
    return static_cast<To>(v);
  }
}

// dst[...] = src[...] converted to dst's dtype, src broadcast to dst's shape (any dtypes, any strides).
void copy_into(const Tensor& dst, const Tensor& src);
// `t` as a contiguous tensor of dtype `dt` (returns `t` itself when it already is one).
Tensor as_contiguous_dtype(const Tensor& t, DType dt);

}  // namespace kiln
