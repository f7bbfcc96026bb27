// Scans and sorts along one dim: cumsum (kernel + VJP) and argsort (kernel; the indices of a stable sort, which
// kiln import turns into ATen's sort and topk with gather). Both run over contiguous [outer, n, inner] copies in
// a wide type (f64 for floating inputs, i64 for integers and bool), as ATen's CPU kernels accumulate cumsum in
// a wider type; NaN sorts above every number, as in ATen.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "eager/loops.h"
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

// A tensor seen as [outer, n, inner] around `dim` (a 0-dim tensor is one element).
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
};
Lines lines_around(const Tensor& x, int64_t dim) {
  Lines l;
  if (x.dim() == 0) return l;
  for (int64_t d = 0; d < x.dim(); ++d) {
    int64_t s = x.sizes()[size_t(d)];
    if (d < dim) l.outer *= s;
    else if (d == dim) l.n = s;
    else l.inner *= s;
  }
  return l;
}

// The wide type a scan or a sort runs in.
DType wide_dtype(DType dt) { return is_floating(dt) ? DType::F64 : DType::I64; }

// A fresh contiguous copy of x in `dtype` (never x's own storage: the scan writes into it).
Tensor wide_copy(const Tensor& x, DType dtype) {
  Tensor out = Tensor::empty(x.sizes(), dtype);
  copy_into(out, x);
  return out;
}

// ---------------------------------------------------------------- cumsum

// ATen: integer and bool inputs sum to i64 unless a dtype is given; the input is cast to the dtype first.
DType cumsum_dtype(const Tensor& x, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  return is_floating(x.dtype()) ? x.dtype() : DType::I64;
}
std::vector<TensorMeta> cumsum_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  wrap_dim(c.int_(1), x.dim(), "cumsum");
  return {contiguous_meta(x.sizes(), cumsum_dtype(x, c.opt_dtype(2)))};
}

template <class T>
void cumulative_sum(T* p, const Lines& l) {
  if (l.outer * l.n * l.inner == 0) return;  // an empty tensor may have no memory (no offsets from null)
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      T acc = 0;
      T* line = p + o * l.n * l.inner + i;
      for (int64_t k = 0; k < l.n; ++k) {
        acc += line[k * l.inner];
        line[k * l.inner] = acc;
      }
    }
}

std::vector<Tensor> cumsum_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const DType out = cumsum_dtype(x, c.opt_dtype(2));
  const int64_t dim = wrap_dim(c.int_(1), x.dim(), "cumsum");
  const Lines l = lines_around(x, dim);
  Tensor work = wide_copy(to(x, out), wide_dtype(out));  // cast first (ATen), then sum in the wide type
  if (work.dtype() == DType::F64) cumulative_sum(work.data<double>(), l);
  else cumulative_sum(work.data<int64_t>(), l);
  return {to(work, out)};
}

// The gradient of a prefix sum is the suffix sum of the gradient: flip, cumsum, flip.
std::vector<Tensor> cumsum_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  if (!v.needs(0)) return {Tensor()};
  const Tensor& g = v.grads[0];
  if (x.dim() == 0) return {to(g, x.dtype())};
  const int64_t dim = wrap_dim(v.call.int_(1), x.dim(), "cumsum");
  Tensor suffix = flip(cumsum(flip(g, {dim}), dim), {dim});
  return {suffix.dtype() == x.dtype() ? suffix : to(suffix, x.dtype())};
}

// ---------------------------------------------------------------- argsort

std::vector<TensorMeta> argsort_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  wrap_dim(c.int_(1), x.dim(), "argsort");
  return {contiguous_meta(x.sizes(), DType::I64)};
}

// Stable order of one line of `n` values `stride` apart; NaN above every number (first when descending).
template <class T>
void sort_line(const T* line, int64_t n, int64_t stride, bool descending, int64_t* order) {
  std::iota(order, order + n, int64_t(0));
  auto above = [](T a, T b) {  // a sorts after b in ascending order
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return !std::isnan(b);
      if (std::isnan(b)) return false;
    }
    return a > b;
  };
  std::stable_sort(order, order + n, [&](int64_t i, int64_t j) {
    T a = line[i * stride], b = line[j * stride];
    return descending ? above(a, b) : above(b, a);
  });
}

template <class T>
void argsort_lines(const T* x, int64_t* out, const Lines& l, bool descending) {
  if (l.outer * l.n * l.inner == 0) return;  // an empty tensor may have no memory (no offsets from null)
  std::vector<int64_t> order(static_cast<size_t>(l.n));
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      const int64_t base = o * l.n * l.inner + i;
      sort_line(x + base, l.n, l.inner, descending, order.data());
      for (int64_t k = 0; k < l.n; ++k) out[base + k * l.inner] = order[size_t(k)];
    }
}

std::vector<Tensor> argsort_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const int64_t dim = wrap_dim(c.int_(1), x.dim(), "argsort");
  const Lines l = lines_around(x, dim);
  Tensor work = wide_copy(x, wide_dtype(x.dtype()));
  Tensor out = Tensor::empty(x.sizes(), DType::I64);
  if (work.dtype() == DType::F64) argsort_lines(work.data<double>(), out.data<int64_t>(), l, c.bool_(2));
  else argsort_lines(work.data<int64_t>(), out.data<int64_t>(), l, c.bool_(2));
  return {out};
}

}  // namespace

void register_scan_ops() {
  def(OpId::cumsum).infer(cumsum_infer).kernel(cumsum_kernel).vjp(cumsum_vjp);
  def(OpId::argsort).infer(argsort_infer).kernel(argsort_kernel);
}

}  // namespace kiln
