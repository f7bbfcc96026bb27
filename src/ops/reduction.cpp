// Reductions: sum, mean, prod, amax, amin, argmax, argmin, any, all (kernels), var, std, logsumexp
// (decompositions). Accumulation is wider than the input where PyTorch's is.
#include <cmath>

#include "eager/reduce.h"
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

// Accumulator type of a sum over T: f64 for floats (more accurate than PyTorch's f32 cascade, and within
// its tolerances), i64 for integers and bool.
template <class T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>,
                                  double, int64_t>;

template <class T>
struct SumOps {
  using Acc = SumAcc<T>;
  Acc init() const { return Acc(0); }
  Acc row(Acc acc, const T* p, int64_t n, int64_t stride, int64_t) const {
    if (stride == 1) {
      // Eight independent lanes so the loop vectorises (and rounding error grows more slowly).
      Acc lanes[8] = {};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) lanes[j] += Acc(p[i + j]);
      for (; i < n; ++i) lanes[0] += Acc(p[i]);
      for (int j = 0; j < 8; ++j) acc += lanes[j];
      return acc;
    }
    for (int64_t i = 0; i < n; ++i) acc += Acc(p[i * stride]);
    return acc;
  }
  Acc combine(Acc a, Acc b) const { return a + b; }
};

// sum's result dtype: the requested dtype, else integers and bool promote to i64.
DType sum_dtype(const Tensor& x, std::optional<DType> requested) {
  if (requested) return *requested;
  return is_integral(x.dtype(), true) ? DType::I64 : x.dtype();
}

// Sums `x` over `dims` into a new tensor of dtype `out_dt` and reduced shape; `scale` multiplies the result.
Tensor sum_impl(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim, DType out_dt, double scale) {
  Tensor x = x_in;
  if (x.dtype() != out_dt && is_floating(out_dt)) x = as_contiguous_dtype(x, out_dt);
  Tensor out = Tensor::empty(reduced_shape(x.sizes(), dims, keepdim), out_dt);
  KILN_DISPATCH_ALL(x.dtype(), [&](auto z) {
    using T = decltype(z);
    using Acc = SumAcc<T>;
    KILN_DISPATCH_ALL(out_dt, [&](auto w) {
      using O = decltype(w);
      struct Ops : SumOps<T> {
        double s;
        O finish(Acc a) const {
          if constexpr (std::is_same_v<Acc, double>) return convert_element<O>(a * s);
          else return convert_element<O>(a);
        }
      } ops;
      ops.s = scale;
      reduce_kernel<T, O, Acc>(out, x, dims, ops);
    });
  });
  return out;
}

std::vector<TensorMeta> sum_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  auto dims = reduction_dims(c.opt_ints(1), x.dim(), "sum");
  return {contiguous_meta(reduced_shape(x.sizes(), dims, c.bool_(2)), sum_dtype(x, c.opt_dtype(3)))};
}
std::vector<Tensor> sum_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  auto dims = reduction_dims(c.opt_ints(1), x.dim(), "sum");
  return {sum_impl(x, dims, c.bool_(2), sum_dtype(x, c.opt_dtype(3)), 1.0)};
}
// Gradient of a reduction over `dims`: broadcast the (keepdim-shaped) gradient back to the input's shape.
Tensor expand_reduced_grad(const Tensor& g, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor r = g;
  if (!keepdim)
    for (int64_t d : dims) r = unsqueeze(r, d);
  return expand(r, x.sizes());
}
std::vector<Tensor> sum_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  auto dims = reduction_dims(v.call.opt_ints(1), x.dim(), "sum");
  return {expand_reduced_grad(v.grads[0], x, dims, v.call.bool_(2))};
}

}  // namespace

void register_reduction_ops() {
  def(OpId::sum).infer(sum_infer).kernel(sum_kernel).vjp(sum_vjp);
}

}  // namespace kiln
