// Reductions: sum, mean, prod, amax, amin, argmax, argmin, any, all (kernels on the reduction engine),
// var, std, logsumexp (decompositions). Accumulation is wider than the input where PyTorch's is.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/scalar_math.h"
#include "eager/reduce.h"
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

template <class T>
inline constexpr bool is_float_type_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Folds p[0..n) (element stride `stride`) into `acc`. A contiguous run is folded into independent lanes
// (four 16-byte vectors' worth) so the loop vectorises and hides latency; `fold` must be associative and
// commutative, `load` converts an element.
template <class Acc, class T, class Fold, class Load>
Acc fold_row(Acc acc, const T* p, int64_t n, int64_t stride, Acc identity, Fold fold, Load load) {
  constexpr int kLanes = std::max<int>(8, 64 / int(sizeof(Acc)));
  if (stride == 1 && n >= 2 * kLanes) {
    Acc lanes[kLanes];
    for (Acc& l : lanes) l = identity;
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] = fold(lanes[j], load(p[i + j]));
    for (; i < n; ++i) lanes[0] = fold(lanes[0], load(p[i]));
    for (const Acc& l : lanes) acc = fold(acc, l);
    return acc;
  }
  for (int64_t i = 0; i < n; ++i) acc = fold(acc, load(p[i * stride]));
  return acc;
}

// Normalised dims of an `int? dim` argument: the one dim, or every dim when None.
std::vector<int64_t> single_or_all_dims(std::optional<int64_t> dim, int64_t ndim, std::string_view op) {
  return dim ? reduction_dims(IntList{*dim}, ndim, op) : reduction_dims(std::nullopt, ndim, op);
}

// Throws when a reduction without identity (amax, argmax, ...) would reduce over an empty dim.
void check_nonempty_dims(const Tensor& x, const std::vector<int64_t>& dims, std::string_view op) {
  for (int64_t d : dims)
    KILN_CHECK(x.sizes()[size_t(d)] != 0,
               "{}: cannot reduce over dim {} of size 0 (input shape {}): the reduction has no identity; "
               "reduce over non-empty dims only", op, d, shape_str(x.sizes()));
}

// Whether `x` must be converted to `out_dt` before summing/multiplying (PyTorch casts the input to the
// requested dtype first; integers accumulate in i64 anyway, so i64 results need no copy).
Tensor input_as(const Tensor& x, DType out_dt) {
  if (x.dtype() == out_dt || (is_integral(x.dtype(), true) && out_dt == DType::I64)) return x;
  return as_contiguous_dtype(x, out_dt);
}

// Gradient of a reduction over `dims` as the keepdim-shaped tensor (unsqueezes the reduced dims back).
Tensor keepdim_grad(const Tensor& g, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor r = g;
  if (!keepdim)
    for (int64_t d : dims) r = unsqueeze(r, d);
  return r;
}
// ... broadcast to the input's shape.
Tensor expand_reduced_grad(const Tensor& g, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return expand(keepdim_grad(g, dims, keepdim), x.sizes());
}
// `t` summed over `dims` keeping them (all dims when `dims` is empty, which is how 0-dim inputs reduce).
Tensor sum_keepdim(const Tensor& t, const std::vector<int64_t>& dims) {
  return sum(t, dims.empty() ? OptIntList() : OptIntList(IntList(dims.begin(), dims.end())), true);
}

// ---------------------------------------------------------------- sum / mean

// Accumulator of a sum over T: f64 for floats (more accurate than PyTorch's f32 cascade, and within its
// tolerances), i64 for integers and bool.
template <class T>
using SumAcc = std::conditional_t<is_float_type_v<T>, double, int64_t>;

template <class T, class O>
struct SumOps {
  using Acc = SumAcc<T>;
  static constexpr bool kAnyOrder = true;
  double divisor = 1;  // mean divides the sum by the number of reduced elements
  Acc init() const { return Acc(0); }
  Acc step(Acc acc, T v, int64_t) const { return acc + Acc(v); }
  Acc row(Acc acc, const T* p, int64_t n, int64_t stride, int64_t) const {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // Contiguous runs: blocks of kBlock elements summed in 16 lanes of T (pure adds, several times faster than
      // converting every f32 element), each block's lanes then added into an f64 total, compensated (Kahan) for
      // f64, where the total is no wider than the lanes. A lane never sums more than kBlock / 16 elements, so the
      // error does not grow with the length (the compiled kernels block the same way: docs/inductor.md).
      constexpr int64_t kBlock = 256;
      if (stride == 1) {
        double total = 0, compensation = 0;
        int64_t i = 0;
        for (; i + kBlock <= n; i += kBlock) {
          T lanes[16] = {};
          for (int64_t b = 0; b < kBlock; b += 16)
            for (int j = 0; j < 16; ++j) lanes[j] += p[i + b + j];
          double block = 0;
          for (T l : lanes) block += double(l);
          const double y = block - compensation, t = total + y;
          compensation = (t - total) - y;
          total = t;
        }
        for (; i < n; ++i) total += double(p[i]);
        return acc + total;
      }
    }
    return fold_row<Acc>(acc, p, n, stride, Acc(0), [](Acc a, Acc b) { return a + b; }, [](T v) { return Acc(v); });
  }
  Acc combine(Acc a, Acc b) const { return a + b; }
  O finish(Acc a) const {
    if constexpr (std::is_same_v<Acc, double>) return convert_element<O>(divisor == 1 ? a : a / divisor);
    else return convert_element<O>(a);
  }
};

// Sums `x` over `dims` into a new tensor of dtype `out_dt`, dividing by `divisor` (mean).
Tensor sum_impl(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim, DType out_dt, double divisor) {
  Tensor x = input_as(x_in, out_dt);
  Tensor out = Tensor::empty(reduced_shape(x.sizes(), dims, keepdim), out_dt);
  KILN_DISPATCH_ALL(x.dtype(), [&](auto z) {  // x is of out_dt, or an integer type summed into i64
    using T = decltype(z);
    if (out_dt == DType::I64) {
      reduce_kernel<T, int64_t, SumAcc<T>>(out, x, dims, SumOps<T, int64_t>{});
    } else {
      SumOps<T, T> ops;
      ops.divisor = divisor;
      reduce_kernel<T, T, SumAcc<T>>(out, x, dims, ops);
    }
  });
  return out;
}

// sum's result dtype: the requested dtype, else integers and bool promote to i64.
DType sum_dtype(const Tensor& x, std::optional<DType> requested) {
  if (requested) return *requested;
  return is_integral(x.dtype(), true) ? DType::I64 : x.dtype();
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
std::vector<Tensor> sum_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  auto dims = reduction_dims(v.call.opt_ints(1), x.dim(), "sum");
  return {expand_reduced_grad(v.grads[0], x, dims, v.call.bool_(2))};
}

// mean's result dtype: floating only (PyTorch cannot infer a dtype for integer inputs).
DType mean_dtype(const Tensor& x, std::optional<DType> requested) {
  if (requested) {
    KILN_CHECK(is_floating(*requested), "mean: the requested dtype must be floating point, got {}; pass dtype=f32 "
               "or f64", dtype_name(*requested));
    return *requested;
  }
  KILN_CHECK(is_floating(x.dtype()), "mean: input dtype must be floating point, got {} (shape {}); pass dtype=f32 "
             "(or f64) or convert the input first", dtype_name(x.dtype()), shape_str(x.sizes()));
  return x.dtype();
}
int64_t reduced_numel(const Tensor& x, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= x.sizes()[size_t(d)];
  return n;
}
std::vector<TensorMeta> mean_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  auto dims = reduction_dims(c.opt_ints(1), x.dim(), "mean");
  return {contiguous_meta(reduced_shape(x.sizes(), dims, c.bool_(2)), mean_dtype(x, c.opt_dtype(3)))};
}
std::vector<Tensor> mean_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  auto dims = reduction_dims(c.opt_ints(1), x.dim(), "mean");
  return {sum_impl(x, dims, c.bool_(2), mean_dtype(x, c.opt_dtype(3)), double(reduced_numel(x, dims)))};
}
std::vector<Tensor> mean_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  auto dims = reduction_dims(v.call.opt_ints(1), x.dim(), "mean");
  return {div(expand_reduced_grad(v.grads[0], x, dims, v.call.bool_(2)), double(reduced_numel(x, dims)))};
}

// ---------------------------------------------------------------- prod

// Accumulator of a product over T: the compute type for floats (f32, or f64 for f64 inputs: overflow then
// happens where PyTorch's does), i64 for integers and bool.
template <class T>
using ProdAcc = std::conditional_t<std::is_same_v<T, double>, double,
                                   std::conditional_t<is_float_type_v<T>, float, int64_t>>;

template <class T, class O>
struct ProdOps {
  using Acc = ProdAcc<T>;
  static constexpr bool kAnyOrder = true;
  // Integer products wrap as PyTorch's do (two's complement), never signed overflow (UBSan, kiln fuzz).
  static Acc mul(Acc a, Acc b) { return wrapping_mul(a, b); }
  Acc init() const { return Acc(1); }
  Acc step(Acc acc, T v, int64_t) const { return mul(acc, Acc(v)); }
  Acc row(Acc acc, const T* p, int64_t n, int64_t stride, int64_t) const {
    return fold_row<Acc>(acc, p, n, stride, Acc(1), [](Acc a, Acc b) { return mul(a, b); }, [](T v) { return Acc(v); });
  }
  Acc combine(Acc a, Acc b) const { return mul(a, b); }
  O finish(Acc a) const { return convert_element<O>(a); }
};

std::vector<TensorMeta> prod_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  auto dims = single_or_all_dims(c.opt_int(1), x.dim(), "prod");
  return {contiguous_meta(reduced_shape(x.sizes(), dims, c.bool_(2)), sum_dtype(x, c.opt_dtype(3)))};
}
std::vector<Tensor> prod_kernel(const OpCall& c) {
  const DType out_dt = sum_dtype(c.tensor(0), c.opt_dtype(3));
  const Tensor x = input_as(c.tensor(0), out_dt);
  auto dims = single_or_all_dims(c.opt_int(1), x.dim(), "prod");
  Tensor out = Tensor::empty(reduced_shape(x.sizes(), dims, c.bool_(2)), out_dt);
  KILN_DISPATCH_ALL(x.dtype(), [&](auto z) {  // x is of out_dt, or an integer type multiplied into i64
    using T = decltype(z);
    if (out_dt == DType::I64) reduce_kernel<T, int64_t, ProdAcc<T>>(out, x, dims, ProdOps<T, int64_t>{});
    else reduce_kernel<T, T, ProdAcc<T>>(out, x, dims, ProdOps<T, T>{});
  });
  return {out};
}
// d prod / d x_i is the product of the other elements. Without division, so zeros are handled: with no zero
// in a reduction it is prod/x_i; with exactly one zero it is the product of the non-zeros at the zero and 0
// elsewhere; with two or more zeros it is 0 everywhere.
std::vector<Tensor> prod_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  const auto dims = single_or_all_dims(v.call.opt_int(1), x.dim(), "prod");
  const Tensor g = expand_reduced_grad(v.grads[0], x, dims, v.call.bool_(2));
  const Tensor is_zero = eq(x, 0);
  const Tensor zeros_in_reduction = sum_keepdim(is_zero, dims);
  const Tensor nonzero = where(is_zero, 1, x);
  const Tensor prod_nonzero =
      dims.size() == 1 && x.dim() > 1 ? prod(nonzero, dims[0], true) : prod(nonzero);  // broadcasts against x
  const Tensor only_zero = logical_and(is_zero, eq(zeros_in_reduction, 1));
  const Tensor others = where(eq(zeros_in_reduction, 0), div(prod_nonzero, nonzero), where(only_zero, prod_nonzero, 0));
  return {mul(g, others)};
}

// ---------------------------------------------------------------- amax / amin

// The type max/min compare in: f32 for f16/bf16, the element type otherwise.
template <class T>
using CmpType = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// Whether `v` replaces `cur` as the running max (min): strictly greater (less), or NaN over a number.
template <bool IsMax, class C>
inline bool replaces(C v, C cur) {
  if constexpr (std::is_floating_point_v<C>) return (IsMax ? v > cur : v < cur) || (v != v && cur == cur);
  else return IsMax ? v > cur : v < cur;
}

template <class T, bool IsMax>
struct ExtremumOps {
  using Acc = CmpType<T>;
  static constexpr bool kAnyOrder = true;
  Acc init() const {
    if constexpr (std::is_floating_point_v<Acc>) return IsMax ? -INFINITY : INFINITY;
    else return IsMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
  }
  // The more extreme of a and b: NaN wins and -0 orders below +0 (ieee_maximum, the compiled kernels' rule), so
  // the answer does not depend on the order elements are visited in.
  static Acc pick(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<Acc>) return IsMax ? ieee_maximum(a, b) : ieee_minimum(a, b);
    else return (IsMax ? b > a : b < a) ? b : a;
  }
  Acc step(Acc acc, T v, int64_t) const { return pick(acc, Acc(v)); }
  Acc row(Acc acc, const T* p, int64_t n, int64_t stride, int64_t) const {
    return fold_row<Acc>(acc, p, n, stride, init(), [](Acc a, Acc b) { return pick(a, b); }, [](T v) { return Acc(v); });
  }
  Acc combine(Acc a, Acc b) const { return pick(a, b); }
  T finish(Acc a) const { return T(a); }
};

template <bool IsMax>
std::vector<Tensor> extremum_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  auto dims = reduction_dims(c.ints(1), x.dim(), c.name());
  check_nonempty_dims(x, dims, c.name());
  Tensor out = Tensor::empty(reduced_shape(x.sizes(), dims, c.bool_(2)), x.dtype());
  KILN_DISPATCH_ALL(x.dtype(), [&](auto z) {
    using T = decltype(z);
    reduce_kernel<T, T, CmpType<T>>(out, x, dims, ExtremumOps<T, IsMax>{});
  });
  return {out};
}
std::vector<TensorMeta> extremum_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  auto dims = reduction_dims(c.ints(1), x.dim(), c.name());
  check_nonempty_dims(x, dims, c.name());
  return {contiguous_meta(reduced_shape(x.sizes(), dims, c.bool_(2)), x.dtype())};
}
// The gradient goes to the elements equal to the result, split evenly among ties (PyTorch's
// (grad / count) * mask, so a NaN result gives NaN gradients).
std::vector<Tensor> extremum_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  auto dims = reduction_dims(v.call.ints(1), x.dim(), v.call.name());
  const bool keepdim = v.call.bool_(2);
  const Tensor is_extremum = eq(x, keepdim_grad(v.outputs[0], dims, keepdim));
  const Tensor count = sum_keepdim(is_extremum, dims);
  return {mul(div(keepdim_grad(v.grads[0], dims, keepdim), count), is_extremum)};
}

// ---------------------------------------------------------------- argmax / argmin

template <class C>
struct ArgAcc {
  C value{};
  int64_t index = -1;  // -1: no element seen yet
};

template <class T, bool IsMax>
struct ArgOps {
  using C = CmpType<T>;
  using Acc = ArgAcc<C>;
  static constexpr bool kAnyOrder = false;  // the index is the row-major position
  Acc init() const { return {}; }
  Acc step(Acc acc, T v, int64_t index) const {
    const C cv = C(v);
    if (acc.index < 0 || replaces<IsMax>(cv, acc.value)) return {cv, index};
    return acc;
  }
  // Ties (and NaN against NaN) keep the earlier range's element: the first occurrence.
  Acc combine(Acc earlier, Acc later) const {
    if (earlier.index < 0) return later;
    if (later.index < 0) return earlier;
    return replaces<IsMax>(later.value, earlier.value) ? later : earlier;
  }
  int64_t finish(Acc a) const { return a.index < 0 ? 0 : a.index; }
};

// The dims argmax/argmin reduce (one, or all flattened), after checking the input.
std::vector<int64_t> arg_dims(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(x.dtype() != DType::Bool, "{}: not implemented for bool tensors (shape {}); convert to an integer "
             "dtype first", c.name(), shape_str(x.sizes()));
  std::optional<int64_t> dim = c.opt_int(1);
  KILN_CHECK(dim || x.numel() != 0, "{}: the input has no elements (shape {}); specify a non-empty reduction dim",
             c.name(), shape_str(x.sizes()));
  auto dims = single_or_all_dims(dim, x.dim(), c.name());
  check_nonempty_dims(x, dims, c.name());
  return dims;
}
std::vector<TensorMeta> arg_infer(const OpCall& c) {
  auto dims = arg_dims(c);
  return {contiguous_meta(reduced_shape(c.tensor(0).sizes(), dims, c.bool_(2)), DType::I64)};
}
template <bool IsMax>
std::vector<Tensor> arg_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  auto dims = arg_dims(c);
  Tensor out = Tensor::empty(reduced_shape(x.sizes(), dims, c.bool_(2)), DType::I64);
  KILN_DISPATCH_ALL(x.dtype(), [&](auto z) {
    using T = decltype(z);
    if constexpr (!std::is_same_v<T, bool>)
      reduce_kernel<T, int64_t, ArgAcc<CmpType<T>>>(out, x, dims, ArgOps<T, IsMax>{});
  });
  return {out};
}

// ---------------------------------------------------------------- any / all

template <class T, class O, bool IsAny>
struct AnyAllOps {
  using Acc = bool;
  static constexpr bool kAnyOrder = true;
  Acc init() const { return !IsAny; }
  Acc step(Acc acc, T v, int64_t) const {
    const bool b = convert_element<bool>(v);
    return IsAny ? (acc || b) : (acc && b);
  }
  Acc combine(Acc a, Acc b) const { return IsAny ? (a || b) : (a && b); }
  O finish(Acc a) const { return O(a); }
};

// any/all give bool, except u8 inputs give u8 (PyTorch keeps that for compatibility). dim=[] reduces nothing.
DType any_all_dtype(const Tensor& x) { return x.dtype() == DType::U8 ? DType::U8 : DType::Bool; }
std::vector<TensorMeta> any_all_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  auto dims = reduction_dims(c.opt_ints(1), x.dim(), c.name(), false);
  return {contiguous_meta(reduced_shape(x.sizes(), dims, c.bool_(2)), any_all_dtype(x))};
}
template <bool IsAny>
std::vector<Tensor> any_all_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  auto dims = reduction_dims(c.opt_ints(1), x.dim(), c.name(), false);
  Tensor out = Tensor::empty(reduced_shape(x.sizes(), dims, c.bool_(2)), any_all_dtype(x));
  KILN_DISPATCH_ALL(x.dtype(), [&](auto z) {
    using T = decltype(z);
    if (out.dtype() == DType::U8) reduce_kernel<T, uint8_t, bool>(out, x, dims, AnyAllOps<T, uint8_t, IsAny>{});
    else reduce_kernel<T, bool, bool>(out, x, dims, AnyAllOps<T, bool, IsAny>{});
  });
  return {out};
}

// ---------------------------------------------------------------- var / std / logsumexp (decompositions)

// Variance in the compute dtype (f32 for f16/bf16): sum((x - mean)^2) / max(0, N - correction), centred by
// centre_over (two passes over shifted data: rows of equal values give exactly 0).
Tensor variance_compute(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(is_floating(x.dtype()), "{}: input must be floating point, got {} (shape {}); convert it with to() "
             "first", c.name(), dtype_name(x.dtype()), shape_str(x.sizes()));
  const auto dims = reduction_dims(c.opt_ints(1), x.dim(), c.name());
  const double correction = c.opt_scalar(2).value_or(Scalar(1)).to_double();
  const bool keepdim = c.bool_(3);
  const double n = double(reduced_numel(x, dims));
  const Tensor xc = is_low_precision(x.dtype()) ? to(x, DType::F32) : x;
  const Tensor centred = centre_over(xc, dims).centred;
  const OptIntList sum_dims = dims.empty() ? OptIntList() : OptIntList(IntList(dims.begin(), dims.end()));
  return div(sum(mul(centred, centred), sum_dims, keepdim), std::max(0.0, n - correction));
}
std::vector<Tensor> var_decomp(const OpCall& c) { return {to(variance_compute(c), c.tensor(0).dtype())}; }
std::vector<Tensor> std_decomp(const OpCall& c) { return {to(sqrt(variance_compute(c)), c.tensor(0).dtype())}; }

// log(sum(exp(x))) computed as m + log(sum(exp(x - m))) with m the max (0 where the max is infinite, so rows
// of -inf give -inf and rows holding +inf give +inf). Integer inputs compute in the default float dtype.
std::vector<Tensor> logsumexp_decomp(const OpCall& c) {
  const Tensor& x_in = c.tensor(0);
  const DType out_dt = is_floating(x_in.dtype()) ? x_in.dtype() : kDefaultFloat;
  const Tensor x = to(x_in, compute_dtype(out_dt));
  const auto dims = reduction_dims(c.ints(1), x.dim(), "logsumexp");
  const bool keepdim = c.bool_(2);
  const OptIntList sum_dims = dims.empty() ? OptIntList() : OptIntList(IntList(dims.begin(), dims.end()));
  if (x.numel() == 0) return {to(log(sum(exp(x), sum_dims, keepdim)), out_dt)};
  const Tensor m = amax(x, IntList(dims.begin(), dims.end()), true);
  const Tensor shift = where(isinf(m), 0.0, m);
  const Tensor total = log(sum(exp(sub(x, shift)), sum_dims, keepdim));
  const Tensor shift_out = keepdim ? shift : reshape(shift, reduced_shape(x.sizes(), dims, false));
  return {to(add(total, shift_out), out_dt)};
}

// PyTorch's logsumexp backward: grad * exp(x - result) (the kernel is the decomposition; this VJP keeps the
// gradients identical to PyTorch's where the rounded result differs from the exact one, e.g. for huge x).
std::vector<Tensor> logsumexp_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  const auto dims = reduction_dims(v.call.ints(1), x.dim(), "logsumexp");
  const bool keepdim = v.call.bool_(2);
  return {mul(keepdim_grad(v.grads[0], dims, keepdim), exp(sub(x, keepdim_grad(v.outputs[0], dims, keepdim))))};
}

}  // namespace

void register_reduction_ops() {
  def(OpId::sum).infer(sum_infer).kernel(sum_kernel).vjp(sum_vjp);
  def(OpId::mean).infer(mean_infer).kernel(mean_kernel).vjp(mean_vjp);
  def(OpId::prod).infer(prod_infer).kernel(prod_kernel).vjp(prod_vjp);
  def(OpId::amax).infer(extremum_infer).kernel(extremum_kernel<true>).vjp(extremum_vjp);
  def(OpId::amin).infer(extremum_infer).kernel(extremum_kernel<false>).vjp(extremum_vjp);
  def(OpId::argmax).infer(arg_infer).kernel(arg_kernel<true>);
  def(OpId::argmin).infer(arg_infer).kernel(arg_kernel<false>);
  def(OpId::any).infer(any_all_infer).kernel(any_all_kernel<true>);
  def(OpId::all).infer(any_all_infer).kernel(any_all_kernel<false>);
  def(OpId::var).decomp(var_decomp);
  def(OpId::std).decomp(std_decomp);
  def(OpId::logsumexp).kernel(logsumexp_decomp).vjp(logsumexp_vjp).decomp(logsumexp_decomp);
}

}  // namespace kiln
