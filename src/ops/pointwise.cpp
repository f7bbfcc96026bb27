// Pointwise ops: unary math, binary arithmetic and comparisons, logical and bitwise ops, where/clamp/lerp/
// addcmul. Floating math computes in f32 (f16/bf16/f32 inputs) or f64, and rounds once to the result dtype.
// Each op's result dtype (and its dtype errors) comes from one function that both infer and kernel use.
#include <cmath>
#include <limits>

#include "eager/loops.h"
#include "ops/common.h"
#include "ops/families.h"
#include "core/scalar_math.h"

namespace kiln {
namespace {

template <class T>
inline constexpr bool is_reduced_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// A Scalar attribute (clamp bound, pow exponent) as element type T, with c10's overflow check: a finite value
// outside T's range is an error rather than a silent wrap.
template <class T>
T checked_scalar(const Scalar& s, std::string_view op, std::string_view what) {
  if constexpr (std::is_same_v<T, bool>) {
    return s.to_bool();
  } else if constexpr (std::is_same_v<T, double>) {
    return s.to_double();
  } else if constexpr (std::is_integral_v<T>) {
    const int64_t i = s.to_int();
    KILN_CHECK(i >= int64_t(std::numeric_limits<T>::lowest()) && i <= int64_t(std::numeric_limits<T>::max()),
               "{}: {} {} cannot be converted to {} without overflow", op, what, s.str(), dtype_name(DTypeOf<T>::value));
    return T(i);
  } else {  // float, Half, BFloat16
    const double d = s.to_double();
    const double limit = std::is_same_v<T, Half>       ? 65504.0
                         : std::is_same_v<T, BFloat16> ? 3.3895313892515355e38
                                                       : double(std::numeric_limits<float>::max());
    KILN_CHECK(!std::isfinite(d) || std::abs(d) <= limit, "{}: {} {} cannot be converted to {} without overflow", op,
               what, s.str(), dtype_name(DTypeOf<T>::value));
    return T(float(d));
  }
}

// ---------------------------------------------------------------- kernel drivers

// Flat fast paths for the common case of contiguous operands that have the output's shape (or a single
// element): one `omp simd` loop per thread, which the compiler vectorises at -O2 (the strided rows of
// map1/map2 are left to the cost model, which keeps them scalar). False when the operands do not qualify.
template <class Out, class A, class F>
bool flat_map1(const Tensor& out, const Tensor& a, F f) {
  const int64_t n = out.numel();
  if (a.numel() != n || !a.is_contiguous()) return false;
  Out* po = static_cast<Out*>(out.data_ptr());
  const A* pa = static_cast<const A*>(a.data_ptr());
  parallel_for(n, kParallelGrain, [&](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) po[i] = f(pa[i]);
  });
  return true;
}
template <class Out, class T, class F>
bool flat_map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  const int64_t n = out.numel();
  auto full = [&](const Tensor& t) { return t.numel() == n && t.is_contiguous(); };
  Out* po = static_cast<Out*>(out.data_ptr());
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  if (full(a) && full(b)) {
    parallel_for(n, kParallelGrain, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) po[i] = f(pa[i], pb[i]);
    });
  } else if (full(a) && b.numel() == 1) {
    const T y = *pb;
    parallel_for(n, kParallelGrain, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) po[i] = f(pa[i], y);
    });
  } else if (a.numel() == 1 && full(b)) {
    const T x = *pa;
    parallel_for(n, kParallelGrain, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) po[i] = f(x, pb[i]);
    });
  } else {
    return false;
  }
  return true;
}
template <class Out, class A, class F>
void fast_map1(const Tensor& out, const Tensor& a, F f) {
  if (!flat_map1<Out, A>(out, a, f)) map1<Out, A>(out, a, f);
}
template <class Out, class T, class F>
void fast_map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  if (!flat_map2<Out, T>(out, a, b, f)) map2<Out, T, T>(out, a, b, f);
}

// out = f(x) for float-valued unary ops. `f` is a generic lambda over the compute type (float or double).
template <class F>
Tensor unary_float(const Tensor& x, F f) {
  DType out_dt = float_result(x.dtype());
  DType cdt = compute_dtype(out_dt);
  Tensor xc = x.dtype() == cdt ? x : as_contiguous_dtype(x, cdt);
  Tensor out = Tensor::empty(x.sizes(), cdt);
  KILN_DISPATCH_FLOAT(cdt, [&](auto z) {
    using T = decltype(z);
    fast_map1<T, T>(out, xc, [&](T v) { return T(f(v)); });
  });
  return out_dt == cdt ? out : as_contiguous_dtype(out, out_dt);
}

// out = f(x) keeping x's dtype. `f` is a generic lambda over bool, the integer types, float and double;
// f16/bf16 compute in f32 and round once.
template <class F>
Tensor unary_same_dtype(const Tensor& x, F f) {
  const DType dt = x.dtype();
  if (is_low_precision(dt)) return as_contiguous_dtype(unary_same_dtype(as_contiguous_dtype(x, DType::F32), f), dt);
  Tensor out = Tensor::empty(x.sizes(), dt);
  KILN_DISPATCH_ALL(dt, [&](auto z) {
    using T = decltype(z);
    if constexpr (!is_reduced_float_v<T>) fast_map1<T, T>(out, x, [&](T v) { return T(f(v)); });
  });
  return out;
}

// out = pred(x) as bool, for any input dtype (`pred` sees the stored element; f16/bf16 as float).
template <class F>
Tensor unary_predicate(const Tensor& x, F pred) {
  Tensor out = Tensor::empty(x.sizes(), DType::Bool);
  KILN_DISPATCH_ALL(x.dtype(), [&](auto z) {
    using T = decltype(z);
    if constexpr (is_reduced_float_v<T>) map1<bool, T>(out, x, [&](T v) { return bool(pred(float(v))); });
    else map1<bool, T>(out, x, [&](T v) { return bool(pred(v)); });
  });
  return out;
}

// out = f(a, b) with broadcasting, computed in the promoted dtype's compute type, result in `out_dt`
// (the promoted dtype, or bool for comparisons).
template <class F>
Tensor binary_op(const Tensor& a, const Tensor& b, DType common, DType out_dt, std::string_view op, F f) {
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), op);
  DType cdt = is_floating(common) ? compute_dtype(common) : common;
  Tensor ac = a.dtype() == cdt ? a : as_contiguous_dtype(a, cdt);
  Tensor bc = b.dtype() == cdt ? b : as_contiguous_dtype(b, cdt);
  DType store_dt = out_dt == DType::Bool ? DType::Bool : cdt;
  Tensor out = Tensor::empty(shape, store_dt);
  KILN_DISPATCH_ALL(cdt, [&](auto z) {
    using T = decltype(z);
    if constexpr (is_reduced_float_v<T>) {
      fail("{}: internal error: no compute type for {}", op, dtype_name(cdt));
    } else if (store_dt == DType::Bool) {
      fast_map2<bool, T>(out, ac, bc, [&](T x, T y) { return bool(f(x, y)); });
    } else {
      fast_map2<T, T>(out, ac, bc, [&](T x, T y) { return static_cast<T>(f(x, y)); });
    }
  });
  return out.dtype() == out_dt ? out : as_contiguous_dtype(out, out_dt);
}

// Whether any element of `t`, converted to the integer dtype `dt`, is zero (integer division checks).
bool has_zero_as(const Tensor& t, DType dt) {
  Tensor c = as_contiguous_dtype(t, dt);
  return KILN_DISPATCH_ALL(dt, [&](auto z) -> bool {
    using T = decltype(z);
    if constexpr (is_reduced_float_v<T>) {
      return false;
    } else {
      const T* p = static_cast<const T*>(c.data_ptr());
      for (int64_t i = 0, n = c.numel(); i < n; ++i)
        if (p[i] == T(0)) return true;
      return false;
    }
  });
}

// ---------------------------------------------------------------- result dtypes (shared by infer and kernel)

using DTypeRule = DType (*)(const OpCall&);

DType float_valued_dtype(const OpCall& c) { return float_result(c.tensor(0).dtype()); }
DType same_dtype(const OpCall& c) { return c.tensor(0).dtype(); }
DType bool_dtype(const OpCall&) { return DType::Bool; }

// abs, relu, floor, ceil, trunc: integer dtypes are kept, bool is not supported (as in PyTorch).
DType same_dtype_not_bool(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(x.dtype() != DType::Bool, "{}: not supported for bool tensors (got {}); convert it to an integer or "
             "floating dtype first", c.name(), x.str());
  return x.dtype();
}
DType neg_dtype(const OpCall& c) {
  KILN_CHECK(c.tensor(0).dtype() != DType::Bool, "neg: negation of a bool tensor ({}) is not supported; to invert "
             "a mask use logical_not", c.tensor(0).str());
  return c.tensor(0).dtype();
}
DType round_dtype(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  same_dtype_not_bool(c);
  KILN_CHECK(is_floating(x.dtype()) || c.int_(1) == 0, "round: decimals={} is only supported for floating-point "
             "tensors, got {} (integer tensors round to themselves with decimals=0)", c.int_(1), x.str());
  return x.dtype();
}
// gelu and silu are defined for floating-point tensors only (PyTorch has no integer kernels for them).
DType floating_only_dtype(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(is_floating(x.dtype()), "{}: expected a floating-point tensor, got {}", c.name(), x.str());
  return x.dtype();
}
DType gelu_dtype(const OpCall& c) {
  const std::string& mode = c.str(1);
  KILN_CHECK(mode == "none" || mode == "tanh", "gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", mode);
  return floating_only_dtype(c);
}

DType promoted_dtype(const OpCall& c) { return result_type({c.tensor(0), c.tensor(1)}); }
// add and sub: the promoted dtype, and what eager's kernel refuses (an alpha that is not an integer for integer
// or bool inputs, the subtraction of bools). The inference and the kernel both ask here, so `kiln verify`
// refuses every call `kiln run` would.
DType checked_add_sub_dtype(const OpCall& c, bool subtract) {
  const DType dt = promoted_dtype(c);
  const Scalar alpha = c.scalar(2);
  KILN_CHECK(is_floating(dt) || !alpha.is_float(), "{}: alpha {} must be an integer for {} inputs", c.name(),
             alpha.str(), dtype_name(dt));
  KILN_CHECK(!(subtract && dt == DType::Bool), "sub: subtraction of bool tensors is not supported; use logical_xor");
  return dt;
}
DType add_dtype(const OpCall& c) { return checked_add_sub_dtype(c, false); }
DType sub_dtype(const OpCall& c) { return checked_add_sub_dtype(c, true); }

// maximum, minimum, atan2 and the logical ops have no number overload in PyTorch: both operands must be
// tensors (a number given for one arrives as a wrapped number).
void check_tensor_operands(const OpCall& c) {
  for (int i = 0; i < 2; ++i)
    KILN_CHECK(!c.tensor(i).is_wrapped_number(), "{}(): argument '{}' must be a Tensor, not the number {} (PyTorch "
               "has no number overload of {}; wrap it in a tensor)", c.name(), i == 0 ? "self" : "other",
               c.tensor(i).item().str(), c.name());
}
DType tensors_promoted_dtype(const OpCall& c) {
  check_tensor_operands(c);
  return promoted_dtype(c);
}
DType tensors_float_promoted_dtype(const OpCall& c) { return float_result(tensors_promoted_dtype(c)); }
DType tensors_bool_dtype(const OpCall& c) {
  check_tensor_operands(c);
  return DType::Bool;
}
DType remainder_dtype(const OpCall& c) {
  DType dt = promoted_dtype(c);
  KILN_CHECK(dt != DType::Bool, "remainder: not supported for bool tensors ({} and {})", c.tensor(0).str(),
             c.tensor(1).str());
  return dt;
}
DType bitwise_dtype(const OpCall& c) {
  DType dt = promoted_dtype(c);
  KILN_CHECK(!is_floating(dt), "{}: only integer and bool tensors are supported, but the inputs ({} and {}) "
             "promote to {}", c.name(), c.tensor(0).str(), c.tensor(1).str(), dtype_name(dt));
  return dt;
}

std::optional<std::string> div_rounding_mode(const OpCall& c) {
  std::optional<std::string> mode = c.opt_str(2);
  KILN_CHECK(!mode || *mode == "trunc" || *mode == "floor",
             "div: rounding_mode must be None, \"trunc\" or \"floor\", but got \"{}\"", mode.value_or(""));
  return mode;
}
// True division gives a float; with a rounding mode the promoted dtype is kept (bool has no such division).
DType div_dtype(const OpCall& c) {
  std::optional<std::string> mode = div_rounding_mode(c);
  DType dt = promoted_dtype(c);
  if (!mode) return float_result(dt);
  KILN_CHECK(dt != DType::Bool, "div: rounding_mode=\"{}\" is not supported for bool tensors ({} and {})", *mode,
             c.tensor(0).str(), c.tensor(1).str());
  return dt;
}

// pow(Tensor, number) follows torch.pow(Tensor, Scalar): an integer tensor may not take a negative integer
// exponent. Integer exponent tensors may hold negatives (those give 0, or +-1 for bases +-1, as in PyTorch).
DType pow_dtype(const OpCall& c) {
  const Tensor &base = c.tensor(0), &exponent = c.tensor(1);
  DType dt = promoted_dtype(c);
  if (exponent.is_wrapped_number() && !exponent.is_meta()) {
    Scalar e = exponent.item();
    KILN_CHECK(!(is_integral(base.dtype(), true) && !e.is_float() && e.to_int() < 0),
               "pow: Integers to negative integer powers are not allowed (base {}, exponent {})", base.str(), e.str());
    return dt;
  }
  KILN_CHECK(dt != DType::Bool, "pow: not supported for bool tensors ({} and {})", base.str(), exponent.str());
  return dt;
}

// clamp: a floating tensor keeps its dtype; otherwise the bounds take part in type promotion as numbers.
DType clamp_dtype(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  std::optional<Scalar> lo = c.opt_scalar(1), hi = c.opt_scalar(2);
  KILN_CHECK(lo || hi, "clamp: at least one of 'min' or 'max' must not be None");
  DType dt = x.dtype();
  if (!is_floating(dt)) {
    std::vector<Tensor> operands{x};
    if (lo) operands.push_back(Tensor::wrapped_number(*lo));
    if (hi) operands.push_back(Tensor::wrapped_number(*hi));
    dt = result_type(operands);
    KILN_CHECK(dt != DType::Bool, "clamp: not supported for bool tensors ({}) with bool bounds", x.str());
  }
  KILN_DISPATCH_ALL(dt, [&](auto z) {  // each bound converts to dt, as the kernel converts it (same check)
    using S = decltype(z);
    if (lo) checked_scalar<S>(*lo, "clamp", "min");
    if (hi) checked_scalar<S>(*hi, "clamp", "max");
  });
  return dt;
}

DType where_dtype(const OpCall& c) {
  const Tensor& cond = c.tensor(0);
  KILN_CHECK(cond.dtype() == DType::Bool || cond.dtype() == DType::U8,
             "where: expected condition to be a bool tensor, but got {}", cond.str());
  return result_type({c.tensor(1), c.tensor(2)});
}

template <DTypeRule Rule>
std::vector<TensorMeta> infer_unary(const OpCall& c) {
  return one_meta(contiguous_meta(c.tensor(0).sizes(), Rule(c)));
}
template <DTypeRule Rule>
std::vector<TensorMeta> infer_binary(const OpCall& c) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  return one_meta(contiguous_meta(broadcast_shapes(a.sizes(), b.sizes(), c.name()), Rule(c)));
}
std::vector<TensorMeta> infer_where(const OpCall& c) {
  DType dt = where_dtype(c);
  Shape shape = broadcast_shapes(c.tensor(0).sizes(), broadcast_shapes(c.tensor(1).sizes(), c.tensor(2).sizes(), "where"),
                                 "where");
  return one_meta(contiguous_meta(std::move(shape), dt));
}

// ---------------------------------------------------------------- VJP helpers

// The forward output for a VJP formula: the saved (detached) output in a plain backward; recomputed from the
// inputs when the backward is itself recorded (create_graph), so higher-order gradients see its history.
template <class F>
Tensor forward_output(const VjpCall& v, F recompute) {
  return grad_mode_enabled() ? recompute() : v.outputs[0];
}
// The gradient of a unary op: g * dy/dx where `local` builds dy/dx (only when the input needs a gradient).
template <class F>
std::vector<Tensor> unary_grad(const VjpCall& v, F local) {
  return {if_needed(v.needs(0), [&] { return mul(v.grads[0], local()); })};
}
std::vector<Tensor> zero_vjp(const VjpCall& v) {
  return {if_needed(v.needs(0), [&] { return zeros_like(v.grads[0]); })};
}

constexpr double kLn2 = 0.693147180559945309417;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;   // 2 / sqrt(pi)
constexpr double kInvSqrt2Pi = 0.398942280401432677940;     // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.797884560802865355880;    // sqrt(2 / pi)
constexpr double kGeluTanhCoeff = 0.044715;

// ---------------------------------------------------------------- float-valued unary ops
#define KILN_FLOAT_UNARY_KERNEL(name, expr)                                  \
  std::vector<Tensor> name##_kernel(const OpCall& c) {                      \
    return {unary_float(c.tensor(0), [](auto v) {                           \
      using T = decltype(v);                                                 \
      return T(expr);                                                        \
    })};                                                                     \
  }
KILN_FLOAT_UNARY_KERNEL(exp, std::exp(v))
KILN_FLOAT_UNARY_KERNEL(exp2, std::exp2(v))
KILN_FLOAT_UNARY_KERNEL(log, std::log(v))
KILN_FLOAT_UNARY_KERNEL(log2, std::log2(v))
KILN_FLOAT_UNARY_KERNEL(log1p, std::log1p(v))
KILN_FLOAT_UNARY_KERNEL(expm1, std::expm1(v))
KILN_FLOAT_UNARY_KERNEL(sqrt, std::sqrt(v))
KILN_FLOAT_UNARY_KERNEL(rsqrt, T(1) / std::sqrt(v))
KILN_FLOAT_UNARY_KERNEL(sin, std::sin(v))
KILN_FLOAT_UNARY_KERNEL(cos, std::cos(v))
KILN_FLOAT_UNARY_KERNEL(tan, std::tan(v))
KILN_FLOAT_UNARY_KERNEL(tanh, std::tanh(v))
KILN_FLOAT_UNARY_KERNEL(asin, std::asin(v))
KILN_FLOAT_UNARY_KERNEL(acos, std::acos(v))
KILN_FLOAT_UNARY_KERNEL(atan, std::atan(v))
KILN_FLOAT_UNARY_KERNEL(sinh, std::sinh(v))
KILN_FLOAT_UNARY_KERNEL(cosh, std::cosh(v))
KILN_FLOAT_UNARY_KERNEL(sigmoid, T(1) / (T(1) + std::exp(-v)))
KILN_FLOAT_UNARY_KERNEL(erf, std::erf(v))
KILN_FLOAT_UNARY_KERNEL(reciprocal, T(1) / v)
#undef KILN_FLOAT_UNARY_KERNEL

std::vector<Tensor> silu_kernel(const OpCall& c) {
  floating_only_dtype(c);
  return {unary_float(c.tensor(0), [](auto v) { return v / (decltype(v)(1) + std::exp(-v)); })};
}

std::vector<Tensor> gelu_kernel(const OpCall& c) {
  gelu_dtype(c);
  if (c.str(1) == "tanh") {
    return {unary_float(c.tensor(0), [](auto x) {
      using T = decltype(x);
      const T inner = T(kSqrt2OverPi) * (x + T(kGeluTanhCoeff) * (x * x * x));
      return T(0.5) * x * (T(1) + std::tanh(inner));
    })};
  }
  // The formula for every dtype, as PyTorch's f64 kernel and its scalar path compute it: gelu(inf) = inf,
  // gelu(-inf) = -inf * 0 = NaN. (Its vectorised f32 kernel gives NaN for +inf too.)
  return {unary_float(c.tensor(0), [](auto x) {
    using T = decltype(x);
    return x * T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
  })};
}

std::vector<Tensor> exp_vjp(const VjpCall& v) {
  return unary_grad(v, [&] { return forward_output(v, [&] { return exp(v.call.tensor(0)); }); });
}
std::vector<Tensor> exp2_vjp(const VjpCall& v) {
  return unary_grad(v, [&] { return mul(forward_output(v, [&] { return exp2(v.call.tensor(0)); }), kLn2); });
}
std::vector<Tensor> log_vjp(const VjpCall& v) {
  return {if_needed(v.needs(0), [&] { return div(v.grads[0], v.call.tensor(0)); })};
}
std::vector<Tensor> log2_vjp(const VjpCall& v) {
  return {if_needed(v.needs(0), [&] { return div(v.grads[0], mul(v.call.tensor(0), kLn2)); })};
}
std::vector<Tensor> log1p_vjp(const VjpCall& v) {
  return {if_needed(v.needs(0), [&] { return div(v.grads[0], add(v.call.tensor(0), 1)); })};
}
std::vector<Tensor> expm1_vjp(const VjpCall& v) {
  return unary_grad(v, [&] { return add(forward_output(v, [&] { return expm1(v.call.tensor(0)); }), 1); });
}
std::vector<Tensor> sqrt_vjp(const VjpCall& v) {
  return {if_needed(v.needs(0), [&] {
    return div(v.grads[0], mul(forward_output(v, [&] { return sqrt(v.call.tensor(0)); }), 2));
  })};
}
std::vector<Tensor> rsqrt_vjp(const VjpCall& v) {  // d/dx x^-1/2 = -1/2 y^3
  return unary_grad(v, [&] {
    Tensor y = forward_output(v, [&] { return rsqrt(v.call.tensor(0)); });
    return mul(mul(mul(y, y), y), -0.5);
  });
}
std::vector<Tensor> sin_vjp(const VjpCall& v) {
  return unary_grad(v, [&] { return cos(v.call.tensor(0)); });
}
std::vector<Tensor> cos_vjp(const VjpCall& v) {
  return unary_grad(v, [&] { return neg(sin(v.call.tensor(0))); });
}
std::vector<Tensor> tan_vjp(const VjpCall& v) {  // 1 + tan^2
  return unary_grad(v, [&] {
    Tensor y = forward_output(v, [&] { return tan(v.call.tensor(0)); });
    return add(mul(y, y), 1);
  });
}
std::vector<Tensor> tanh_vjp(const VjpCall& v) {  // 1 - tanh^2
  return unary_grad(v, [&] {
    Tensor y = forward_output(v, [&] { return tanh(v.call.tensor(0)); });
    return sub(1, mul(y, y));
  });
}
std::vector<Tensor> asin_vjp(const VjpCall& v) {
  return {if_needed(v.needs(0), [&] {
    const Tensor& x = v.call.tensor(0);
    return div(v.grads[0], sqrt(sub(1, mul(x, x))));
  })};
}
std::vector<Tensor> acos_vjp(const VjpCall& v) {
  return {if_needed(v.needs(0), [&] {
    const Tensor& x = v.call.tensor(0);
    return neg(div(v.grads[0], sqrt(sub(1, mul(x, x)))));
  })};
}
std::vector<Tensor> atan_vjp(const VjpCall& v) {
  return {if_needed(v.needs(0), [&] {
    const Tensor& x = v.call.tensor(0);
    return div(v.grads[0], add(mul(x, x), 1));
  })};
}
std::vector<Tensor> sinh_vjp(const VjpCall& v) {
  return unary_grad(v, [&] { return cosh(v.call.tensor(0)); });
}
std::vector<Tensor> cosh_vjp(const VjpCall& v) {
  return unary_grad(v, [&] { return sinh(v.call.tensor(0)); });
}
std::vector<Tensor> sigmoid_vjp(const VjpCall& v) {  // y (1 - y)
  return unary_grad(v, [&] {
    Tensor y = forward_output(v, [&] { return sigmoid(v.call.tensor(0)); });
    return mul(y, sub(1, y));
  });
}
std::vector<Tensor> erf_vjp(const VjpCall& v) {  // 2/sqrt(pi) exp(-x^2)
  return unary_grad(v, [&] {
    const Tensor& x = v.call.tensor(0);
    return mul(exp(neg(mul(x, x))), kTwoOverSqrtPi);
  });
}
std::vector<Tensor> reciprocal_vjp(const VjpCall& v) {  // -1/x^2 = -y^2
  return unary_grad(v, [&] {
    Tensor y = forward_output(v, [&] { return reciprocal(v.call.tensor(0)); });
    return neg(mul(y, y));
  });
}
std::vector<Tensor> silu_vjp(const VjpCall& v) {  // s (1 + x (1 - s)), s = sigmoid(x)
  return unary_grad(v, [&] {
    const Tensor& x = v.call.tensor(0);
    Tensor s = sigmoid(x);
    return mul(s, add(mul(x, sub(1, s)), 1));
  });
}
std::vector<Tensor> gelu_vjp(const VjpCall& v) {
  return unary_grad(v, [&] {
    const Tensor& x = v.call.tensor(0);
    if (v.call.str(1) == "tanh") {
      // y = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + k x^3)
      Tensor x2 = mul(x, x);
      Tensor t = tanh(mul(add(x, mul(mul(x2, x), kGeluTanhCoeff)), kSqrt2OverPi));
      Tensor left = mul(add(t, 1), 0.5);
      Tensor du = mul(add(mul(x2, 3 * kGeluTanhCoeff), 1), kSqrt2OverPi);
      Tensor right = mul(mul(mul(x, 0.5), sub(1, mul(t, t))), du);
      return add(left, right);
    }
    // Phi(x) + x phi(x)
    Tensor cdf = mul(add(erf(mul(x, M_SQRT1_2)), 1), 0.5);
    Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), kInvSqrt2Pi);
    return add(cdf, mul(x, pdf));
  });
}

// ---------------------------------------------------------------- dtype-keeping unary ops
std::vector<Tensor> neg_kernel(const OpCall& c) {
  neg_dtype(c);
  return {unary_same_dtype(c.tensor(0), [](auto v) { return wrapping_neg(v); })};
}
std::vector<Tensor> neg_vjp(const VjpCall& v) {
  return {if_needed(v.needs(0), [&] { return neg(v.grads[0]); })};
}

std::vector<Tensor> abs_kernel(const OpCall& c) {
  same_dtype_not_bool(c);
  return {unary_same_dtype(c.tensor(0), [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>) return std::abs(v);
    else if constexpr (std::is_unsigned_v<T>) return v;
    else return v < 0 ? wrapping_neg(v) : v;
  })};
}
std::vector<Tensor> abs_vjp(const VjpCall& v) {  // sign(x): 0 at 0
  return unary_grad(v, [&] { return sign(v.call.tensor(0)); });
}

// sign: -1, 0 or 1 (0 for NaN, as PyTorch's (0 < x) - (x < 0)); bool stays bool.
std::vector<Tensor> sign_kernel(const OpCall& c) {
  return {unary_same_dtype(c.tensor(0), [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, bool>) return v;
    else if constexpr (std::is_unsigned_v<T>) return T(v != 0);
    else return T(int(T(0) < v) - int(v < T(0)));
  })};
}

// relu = clamp_min(x, 0): NaN stays NaN, -0.0 stays -0.0.
std::vector<Tensor> relu_kernel(const OpCall& c) {
  same_dtype_not_bool(c);
  return {unary_same_dtype(c.tensor(0), [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_unsigned_v<T>) return v;
    else return v < T(0) ? T(0) : v;
  })};
}
// Gradient 0 where x <= 0, read from the result (relu(x) <= 0 exactly where x <= 0, NaN and -0 included), as
// PyTorch's threshold_backward does: a compiled training step then keeps the activation its next layer's
// gradient needs anyway, not also the input or a mask of it (AOT's MLP saved a 256 KB mask beside it).
std::vector<Tensor> relu_vjp(const VjpCall& v) {
  return {if_needed(v.needs(0), [&] { return where(le(v.outputs[0], 0), 0, v.grads[0]); })};
}

// floor/ceil/trunc/round of an integer tensor is a copy of it.
template <class F>
Tensor rounding_op(const Tensor& x, F f) {
  return unary_same_dtype(x, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>) return T(f(v));
    else return v;
  });
}
std::vector<Tensor> floor_kernel(const OpCall& c) {
  same_dtype_not_bool(c);
  return {rounding_op(c.tensor(0), [](auto v) { return std::floor(v); })};
}
std::vector<Tensor> ceil_kernel(const OpCall& c) {
  same_dtype_not_bool(c);
  return {rounding_op(c.tensor(0), [](auto v) { return std::ceil(v); })};
}
std::vector<Tensor> trunc_kernel(const OpCall& c) {
  same_dtype_not_bool(c);
  return {rounding_op(c.tensor(0), [](auto v) { return std::trunc(v); })};
}
// Round half to even (nearbyint); with decimals, PyTorch's formula: nearbyint(x * 10^d) / 10^d (d > 0) or
// nearbyint(x / 10^-d) * 10^-d (d < 0), in the compute type.
std::vector<Tensor> round_kernel(const OpCall& c) {
  round_dtype(c);
  const int64_t decimals = c.int_(1);
  if (decimals == 0) return {rounding_op(c.tensor(0), [](auto v) { return std::nearbyint(v); })};
  const bool negative = decimals < 0;
  const double scale = std::pow(10.0, double(negative ? -decimals : decimals));
  return {rounding_op(c.tensor(0), [negative, scale](auto v) {
    using T = decltype(v);
    return negative ? std::nearbyint(v / T(scale)) * T(scale) : std::nearbyint(v * T(scale)) / T(scale);
  })};
}

// ---------------------------------------------------------------- bool-valued unary ops
std::vector<Tensor> logical_not_kernel(const OpCall& c) {
  return {unary_predicate(c.tensor(0), [](auto v) { return !(v != decltype(v)(0)); })};
}
std::vector<Tensor> isnan_kernel(const OpCall& c) {
  return {unary_predicate(c.tensor(0), [](auto v) {
    if constexpr (std::is_floating_point_v<decltype(v)>) return std::isnan(v);
    else return false;
  })};
}
std::vector<Tensor> isinf_kernel(const OpCall& c) {
  return {unary_predicate(c.tensor(0), [](auto v) {
    if constexpr (std::is_floating_point_v<decltype(v)>) return std::isinf(v);
    else return false;
  })};
}

// ---------------------------------------------------------------- add / sub / mul
// Generic lambdas receive the compute type (bool, an integer type, float or double).
std::vector<Tensor> add_sub(const OpCall& c, bool subtract) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  const DType dt = checked_add_sub_dtype(c, subtract);
  const Scalar alpha = c.scalar(2);
  const double ad = subtract ? -alpha.to_double() : alpha.to_double();
  const int64_t ai = subtract ? -alpha.to_int() : alpha.to_int();
  if (ad == 1.0) return {binary_op(a, b, dt, dt, c.name(), [](auto x, auto y) { return wrapping_add(x, y); })};
  if (ad == -1.0 && dt != DType::Bool)
    return {binary_op(a, b, dt, dt, c.name(), [](auto x, auto y) { return wrapping_sub(x, y); })};
  return {binary_op(a, b, dt, dt, c.name(), [ad, ai](auto x, auto y) {
    using T = decltype(x);
    // One rounding (an FMA), as PyTorch's kernels: add(inf, -max, alpha=2) = inf, not inf + -inf = NaN.
    if constexpr (std::is_floating_point_v<T>) return std::fma(T(ad), y, x);
    else return wrapping_add(x, wrapping_mul(T(ai), y));
  })};
}
std::vector<Tensor> add_kernel(const OpCall& c) { return add_sub(c, false); }
std::vector<Tensor> sub_kernel(const OpCall& c) { return add_sub(c, true); }
std::vector<Tensor> add_vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  double alpha = v.call.scalar(2).to_double();
  return {if_needed(v.needs(0), [&] { return sum_to(g, v.call.tensor(0).sizes()); }),
          if_needed(v.needs(1), [&] { return sum_to(alpha == 1.0 ? g : mul(g, alpha), v.call.tensor(1).sizes()); })};
}
std::vector<Tensor> sub_vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  double alpha = v.call.scalar(2).to_double();
  return {if_needed(v.needs(0), [&] { return sum_to(g, v.call.tensor(0).sizes()); }),
          if_needed(v.needs(1), [&] { return sum_to(mul(g, -alpha), v.call.tensor(1).sizes()); })};
}

std::vector<Tensor> mul_kernel(const OpCall& c) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  DType dt = result_type({a, b});
  return {binary_op(a, b, dt, dt, "mul", [](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_same_v<T, bool>) return bool(x && y);
    else return wrapping_mul(x, y);
  })};
}
std::vector<Tensor> mul_vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &a = v.call.tensor(0), &b = v.call.tensor(1);
  return {if_needed(v.needs(0), [&] { return sum_to(mul(g, b), a.sizes()); }),
          if_needed(v.needs(1), [&] { return sum_to(mul(g, a), b.sizes()); })};
}

// ---------------------------------------------------------------- div
std::vector<Tensor> div_kernel(const OpCall& c) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  const DType dt = div_dtype(c);
  const std::optional<std::string> mode = div_rounding_mode(c);
  if (!mode) return {binary_op(a, b, dt, dt, "div", [](auto x, auto y) { return x / y; })};
  if (!is_floating(dt)) {
    const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "div");
    KILN_CHECK(shape_numel(shape) == 0 || !has_zero_as(b, dt),
               "div: ZeroDivisionError: integer division by zero (rounding_mode=\"{}\", divisor {})", *mode, b.str());
  }
  if (*mode == "trunc") {
    return {binary_op(a, b, dt, dt, "div", [](auto x, auto y) {
      using T = decltype(x);
      if constexpr (std::is_floating_point_v<T>) return std::trunc(x / y);
      else if constexpr (std::is_same_v<T, bool>) return x;
      else return int_div_trunc(x, y);
    })};
  }
  return {binary_op(a, b, dt, dt, "div", [](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) return float_div_floor(x, y);
    else if constexpr (std::is_same_v<T, bool>) return x;
    else return int_div_floor(x, y);
  })};
}
std::vector<Tensor> div_vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &a = v.call.tensor(0), &b = v.call.tensor(1);
  if (v.call.opt_str(2)) {  // rounded quotients are piecewise constant
    return {if_needed(v.needs(0), [&] { return zeros(a.sizes(), g.dtype()); }),
            if_needed(v.needs(1), [&] { return zeros(b.sizes(), g.dtype()); })};
  }
  return {if_needed(v.needs(0), [&] { return sum_to(div(g, b), a.sizes()); }),
          if_needed(v.needs(1), [&] { return sum_to(neg(mul(g, div(div(a, b), b))), b.sizes()); })};
}

// ---------------------------------------------------------------- remainder (sign of the divisor)
std::vector<Tensor> remainder_kernel(const OpCall& c) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  const DType dt = remainder_dtype(c);
  if (!is_floating(dt)) {
    const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "remainder");
    KILN_CHECK(shape_numel(shape) == 0 || !has_zero_as(b, dt),
               "remainder: ZeroDivisionError: integer remainder by zero (divisor {})", b.str());
  }
  return {binary_op(a, b, dt, dt, "remainder", [](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_same_v<T, bool>) return x;
    else return python_remainder(x, y);
  })};
}
std::vector<Tensor> remainder_vjp(const VjpCall& v) {  // a - floor(a/b) b
  const Tensor& g = v.grads[0];
  const Tensor &a = v.call.tensor(0), &b = v.call.tensor(1);
  return {if_needed(v.needs(0), [&] { return sum_to(g, a.sizes()); }),
          if_needed(v.needs(1), [&] { return sum_to(neg(mul(g, div(a, b, std::string("floor")))), b.sizes()); })};
}

// ---------------------------------------------------------------- pow
// Scalar equality as c10::Scalar::equal: a bool never equals a number.
bool scalar_is(const Scalar& s, double value) { return !s.is_bool() && s.to_double() == value; }

// pow(Tensor, number): PyTorch's Tensor_Scalar special cases (0 -> ones, 1 -> copy, 1/2 -> sqrt, -1/2 -> rsqrt,
// -1 -> reciprocal, 2, 3, -2 -> products); f32 otherwise computes pow in double; f16/bf16 round the exponent to
// their own precision first.
Tensor pow_tensor_scalar(const Tensor& base, const Scalar& e, DType dt) {
  if (scalar_is(e, 0.0) || (e.is_bool() && !e.to_bool())) return ones_like(base, dt);
  if (scalar_is(e, 1.0) || (e.is_bool() && e.to_bool())) {
    Tensor copy = Tensor::empty(base.sizes(), dt);
    copy_into(copy, base);
    return copy;
  }
  if (!is_floating(dt)) {
    Tensor bc = as_contiguous_dtype(base, dt);
    Tensor out = Tensor::empty(base.sizes(), dt);
    KILN_DISPATCH_ALL(dt, [&](auto z) {
      using T = decltype(z);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const T exponent = checked_scalar<T>(e, "pow", "exponent");
        map1<T, T>(out, bc, [exponent](T v) { return int_pow(v, exponent); });
      } else {
        fail("pow: internal error: {} exponent {} for a {} result", e.str(), base.str(), dtype_name(dt));
      }
    });
    return out;
  }
  Tensor bc = to(base, dt);
  if (dt == DType::F16) {  // PyTorch's f16 path: plain pow with the exponent rounded to f16
    const double exponent = float(checked_scalar<Half>(e, "pow", "exponent"));
    return unary_float(bc, [exponent](auto x) { return decltype(x)(std::pow(double(x), exponent)); });
  }
  const double exponent = dt == DType::BF16 ? float(checked_scalar<BFloat16>(e, "pow", "exponent")) : e.to_double();
  if (exponent == 0.5) return sqrt(bc);
  if (exponent == -0.5) return rsqrt(bc);
  if (exponent == -1.0) return reciprocal(bc);
  if (exponent == 2.0) return unary_float(bc, [](auto x) { return x * x; });
  if (exponent == 3.0) return unary_float(bc, [](auto x) { return x * x * x; });
  if (exponent == -2.0) return unary_float(bc, [](auto x) { return decltype(x)(1.0 / double(x * x)); });
  return unary_float(bc, [exponent](auto x) { return decltype(x)(std::pow(double(x), exponent)); });
}

std::vector<Tensor> pow_kernel(const OpCall& c) {
  const Tensor &base = c.tensor(0), &exponent = c.tensor(1);
  const DType dt = pow_dtype(c);
  if (exponent.is_wrapped_number()) return {pow_tensor_scalar(base, exponent.item(), dt)};
  if (base.is_wrapped_number() && scalar_is(base.item(), 1.0)) return {ones_like(exponent, dt)};
  return {binary_op(base, exponent, dt, dt, "pow", [](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) return std::pow(x, y);
    else if constexpr (std::is_same_v<T, bool>) return x;
    else return int_pow(x, y);
  })};
}
// d/dbase = e base^(e-1), 0 where e == 0; d/de = out log(base), 0 where base == 0 and e >= 0.
std::vector<Tensor> pow_vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &base = v.call.tensor(0), &exponent = v.call.tensor(1);
  Tensor grad_base = if_needed(v.needs(0), [&]() -> Tensor {
    if (exponent.is_wrapped_number()) {
      const double e = exponent.item().to_double();
      if (e == 0.0) return zeros_like(base, g.dtype());
      return mul(g, mul(pow(base, e - 1.0), e));
    }
    Tensor local = mul(exponent, pow(base, sub(exponent, 1)));
    return sum_to(where(eq(exponent, 0), 0, mul(g, local)), base.sizes());
  });
  Tensor grad_exponent = if_needed(v.needs(1), [&]() -> Tensor {
    Tensor out = forward_output(v, [&] { return pow(base, exponent); });
    Tensor local;
    if (base.is_wrapped_number()) {
      const double b = base.item().to_double();
      local = mul(out, std::log(b));
      if (b == 0.0) local = where(ge(exponent, 0), 0, local);
    } else {
      Tensor promoted_base = to(base, result_type({base, exponent}));
      local = where(logical_and(eq(base, 0), ge(exponent, 0)), 0, mul(out, log(promoted_base)));
    }
    return sum_to(mul(g, local), exponent.sizes());
  });
  return {grad_base, grad_exponent};
}

// ---------------------------------------------------------------- maximum / minimum / atan2
std::vector<Tensor> maximum_kernel(const OpCall& c) {
  const DType dt = tensors_promoted_dtype(c);
  return {binary_op(c.tensor(0), c.tensor(1), dt, dt, "maximum", [](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_same_v<T, bool>) return bool(x || y);
    else if constexpr (std::is_floating_point_v<T>) return ieee_maximum(x, y);
    else return x < y ? y : x;
  })};
}
std::vector<Tensor> minimum_kernel(const OpCall& c) {
  const DType dt = tensors_promoted_dtype(c);
  return {binary_op(c.tensor(0), c.tensor(1), dt, dt, "minimum", [](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_same_v<T, bool>) return bool(x && y);
    else if constexpr (std::is_floating_point_v<T>) return ieee_minimum(x, y);
    else return y < x ? y : x;
  })};
}
// The gradient goes to the selected input; ties split it in half (PyTorch's rule).
std::vector<Tensor> extremum_vjp(const VjpCall& v, bool is_max) {
  const Tensor& g = v.grads[0];
  const Tensor &a = v.call.tensor(0), &b = v.call.tensor(1);
  auto grad_for = [&](const Tensor& mine, const Tensor& other) {
    Tensor shared = where(eq(mine, other), mul(g, 0.5), g);
    Tensor loses = is_max ? lt(mine, other) : gt(mine, other);
    return sum_to(where(loses, 0, shared), mine.sizes());
  };
  return {if_needed(v.needs(0), [&] { return grad_for(a, b); }), if_needed(v.needs(1), [&] { return grad_for(b, a); })};
}
std::vector<Tensor> maximum_vjp(const VjpCall& v) { return extremum_vjp(v, true); }
std::vector<Tensor> minimum_vjp(const VjpCall& v) { return extremum_vjp(v, false); }

std::vector<Tensor> atan2_kernel(const OpCall& c) {
  const DType dt = tensors_float_promoted_dtype(c);
  return {binary_op(c.tensor(0), c.tensor(1), dt, dt, "atan2", [](auto y, auto x) {
    using T = decltype(y);
    if constexpr (std::is_floating_point_v<T>) return std::atan2(y, x);
    else return y;
  })};
}
std::vector<Tensor> atan2_vjp(const VjpCall& v) {  // d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)
  const Tensor& g = v.grads[0];
  const Tensor &a = v.call.tensor(0), &b = v.call.tensor(1);
  Tensor scaled = div(g, add(mul(a, a), mul(b, b)));
  return {if_needed(v.needs(0), [&] { return sum_to(mul(scaled, b), a.sizes()); }),
          if_needed(v.needs(1), [&] { return sum_to(neg(mul(scaled, a)), b.sizes()); })};
}

// ---------------------------------------------------------------- comparisons, logical and bitwise ops
// Comparisons run in the promoted dtype and return bool.
template <class F>
std::vector<Tensor> compare(const OpCall& c, F f) {
  return {binary_op(c.tensor(0), c.tensor(1), promoted_dtype(c), DType::Bool, c.name(), f)};
}
std::vector<Tensor> eq_kernel(const OpCall& c) { return compare(c, [](auto x, auto y) { return x == y; }); }
std::vector<Tensor> ne_kernel(const OpCall& c) { return compare(c, [](auto x, auto y) { return x != y; }); }
std::vector<Tensor> lt_kernel(const OpCall& c) { return compare(c, [](auto x, auto y) { return x < y; }); }
std::vector<Tensor> le_kernel(const OpCall& c) { return compare(c, [](auto x, auto y) { return x <= y; }); }
std::vector<Tensor> gt_kernel(const OpCall& c) { return compare(c, [](auto x, auto y) { return x > y; }); }
std::vector<Tensor> ge_kernel(const OpCall& c) { return compare(c, [](auto x, auto y) { return x >= y; }); }
// Logical ops: nonzero (NaN included) is true.
std::vector<Tensor> logical_and_kernel(const OpCall& c) {
  check_tensor_operands(c);
  return compare(c, [](auto x, auto y) { return x != decltype(x)(0) && y != decltype(y)(0); });
}
std::vector<Tensor> logical_or_kernel(const OpCall& c) {
  check_tensor_operands(c);
  return compare(c, [](auto x, auto y) { return x != decltype(x)(0) || y != decltype(y)(0); });
}
std::vector<Tensor> logical_xor_kernel(const OpCall& c) {
  check_tensor_operands(c);
  return compare(c, [](auto x, auto y) { return (x != decltype(x)(0)) != (y != decltype(y)(0)); });
}

template <class F>
std::vector<Tensor> bitwise(const OpCall& c, F f) {
  const DType dt = bitwise_dtype(c);
  return {binary_op(c.tensor(0), c.tensor(1), dt, dt, c.name(), [&](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) return x;
    else return T(f(x, y));
  })};
}
std::vector<Tensor> bitwise_and_kernel(const OpCall& c) { return bitwise(c, [](auto x, auto y) { return x & y; }); }
std::vector<Tensor> bitwise_or_kernel(const OpCall& c) { return bitwise(c, [](auto x, auto y) { return x | y; }); }
std::vector<Tensor> bitwise_xor_kernel(const OpCall& c) { return bitwise(c, [](auto x, auto y) { return x ^ y; }); }

// ---------------------------------------------------------------- where / clamp
std::vector<Tensor> where_kernel(const OpCall& c) {
  const DType dt = where_dtype(c);
  const Tensor& cond = c.tensor(0);
  Tensor out = Tensor::empty(infer_where(c)[0].sizes, dt);
  Tensor cond_b = cond.dtype() == DType::Bool ? cond : as_contiguous_dtype(cond, DType::Bool);
  Tensor a = c.tensor(1).dtype() == dt ? c.tensor(1) : as_contiguous_dtype(c.tensor(1), dt);
  Tensor b = c.tensor(2).dtype() == dt ? c.tensor(2) : as_contiguous_dtype(c.tensor(2), dt);
  KILN_DISPATCH_ALL(dt, [&](auto z) {
    using T = decltype(z);
    map3<T, bool, T, T>(out, cond_b, a, b, [](bool k, T x, T y) { return k ? x : y; });
  });
  return {out};
}
std::vector<Tensor> where_vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor& cond = v.call.tensor(0);
  return {Tensor(), if_needed(v.needs(1), [&] { return sum_to(where(cond, g, 0), v.call.tensor(1).sizes()); }),
          if_needed(v.needs(2), [&] { return sum_to(where(cond, 0, g), v.call.tensor(2).sizes()); })};
}

// clamp: min(max(x, lo), hi) (hi wins when lo > hi); NaN input stays NaN; a NaN bound (with both given) gives
// all NaN, as in PyTorch. Bounds convert to the result dtype with an overflow check.
std::vector<Tensor> clamp_kernel(const OpCall& c) {
  const DType dt = clamp_dtype(c);
  const Tensor& x = c.tensor(0);
  std::optional<Scalar> lo = c.opt_scalar(1), hi = c.opt_scalar(2);
  if (lo && hi && (std::isnan(lo->to_double()) || std::isnan(hi->to_double())))
    return {full_like(x, std::numeric_limits<double>::quiet_NaN(), dt)};
  // f16/bf16 compare in f32 against the bounds rounded to their dtype; the selected value is then exact.
  const DType cdt = is_low_precision(dt) ? DType::F32 : dt;
  Tensor xc = x.dtype() == cdt ? x : as_contiguous_dtype(x, cdt);
  Tensor out = Tensor::empty(x.sizes(), cdt);
  KILN_DISPATCH_ALL(dt, [&](auto z) {
    using S = decltype(z);
    using C = std::conditional_t<is_reduced_float_v<S>, float, S>;
    const C lo_c = lo ? C(checked_scalar<S>(*lo, "clamp", "min")) : C();
    const C hi_c = hi ? C(checked_scalar<S>(*hi, "clamp", "max")) : C();
    if (lo && hi) map1<C, C>(out, xc, [=](C v) { return std::min(std::max(v, lo_c), hi_c); });
    else if (lo) map1<C, C>(out, xc, [=](C v) { return std::max(v, lo_c); });
    else map1<C, C>(out, xc, [=](C v) { return std::min(v, hi_c); });
  });
  return {cdt == dt ? out : as_contiguous_dtype(out, dt)};
}
std::vector<Tensor> clamp_vjp(const VjpCall& v) {  // passes where min <= x <= max
  return {if_needed(v.needs(0), [&] {
    const Tensor& x = v.call.tensor(0);
    std::optional<Scalar> lo = v.call.opt_scalar(1), hi = v.call.opt_scalar(2);
    Tensor inside;
    if (lo && hi) inside = logical_and(ge(x, *lo), le(x, *hi));
    else if (lo) inside = ge(x, *lo);
    else inside = le(x, *hi);
    return where(inside, v.grads[0], 0);
  })};
}

// ---------------------------------------------------------------- lerp (kernel and decomposition), addcmul
// self and end share a dtype; weight must too unless it is 0-dim (then it takes part in type promotion).
DType lerp_dtype(const OpCall& c) {
  const Tensor &self = c.tensor(0), &end = c.tensor(1), &weight = c.tensor(2);
  KILN_CHECK(self.dtype() == end.dtype(), "lerp: expected dtype {} for `end` but got dtype {}",
             dtype_name(self.dtype()), dtype_name(end.dtype()));
  KILN_CHECK(weight.dim() == 0 || weight.dtype() == self.dtype(), "lerp: expected dtype {} for `weight` but got "
             "dtype {} (only a 0-dim weight may differ)", dtype_name(self.dtype()), dtype_name(weight.dtype()));
  KILN_CHECK(is_floating(self.dtype()), "lerp: expected floating-point tensors, got {}", self.str());
  return result_type({self, end, weight});
}
std::vector<TensorMeta> infer_lerp(const OpCall& c) {
  const DType dt = lerp_dtype(c);
  Shape shape = broadcast_shapes(c.tensor(0).sizes(), broadcast_shapes(c.tensor(1).sizes(), c.tensor(2).sizes(), "lerp"),
                                 "lerp");
  return one_meta(contiguous_meta(std::move(shape), dt));
}
// PyTorch's kernel: fma(w, end - self, self) when |w| < 0.5, else fma(w - 1, end - self, end), in the compute
// type (f16/bf16 in f32), rounded once.
std::vector<Tensor> lerp_kernel(const OpCall& c) {
  const DType dt = lerp_dtype(c);
  const DType cdt = compute_dtype(dt);
  auto in_compute_type = [&](const Tensor& t) { return t.dtype() == cdt ? t : as_contiguous_dtype(t, cdt); };
  Tensor self = in_compute_type(c.tensor(0)), end = in_compute_type(c.tensor(1)), weight = in_compute_type(c.tensor(2));
  Tensor out = Tensor::empty(infer_lerp(c)[0].sizes, cdt);
  KILN_DISPATCH_FLOAT(cdt, [&](auto z) {
    using T = decltype(z);
    map3<T, T, T, T>(out, self, end, weight, [](T a, T b, T w) {
      const bool small = std::abs(w) < T(0.5);
      return T(std::fma(small ? w : w - T(1), b - a, small ? a : b));
    });
  });
  return {cdt == dt ? out : as_contiguous_dtype(out, dt)};
}
std::vector<Tensor> lerp_vjp(const VjpCall& v) {  // d/dself = 1 - w, d/dend = w, d/dw = end - self
  const Tensor& g = v.grads[0];
  const Tensor &self = v.call.tensor(0), &end = v.call.tensor(1), &weight = v.call.tensor(2);
  auto one_minus_weight = [&]() -> IValue {
    if (weight.is_wrapped_number()) return 1.0 - weight.item().to_double();  // keep a number's full precision
    return sub(1, weight);
  };
  return {if_needed(v.needs(0), [&] { return sum_to(mul(g, one_minus_weight()), self.sizes()); }),
          if_needed(v.needs(1), [&] { return sum_to(mul(g, weight), end.sizes()); }),
          if_needed(v.needs(2), [&] { return sum_to(mul(g, sub(end, self)), weight.sizes()); })};
}
// The same formula in tensor ops (two roundings where the kernel's fma has one).
std::vector<Tensor> lerp_decomp(const OpCall& c) {
  lerp_dtype(c);
  const Tensor &self = c.tensor(0), &end = c.tensor(1), &weight = c.tensor(2);
  Tensor diff = sub(end, self);
  if (weight.is_wrapped_number() && !weight.is_meta()) {
    const double w = weight.item().to_double();
    if (std::abs(w) < 0.5) return {add(self, mul(diff, w))};
    // 1 - w in the compute type, as PyTorch's kernel forms it (f32 for f16/bf16/f32)
    const double one_minus_w = self.dtype() == DType::F64 ? 1.0 - w : double(1.0f - float(w));
    return {sub(end, mul(diff, one_minus_w))};
  }
  // A 0-dim weight of another dtype (bool, an integer) is read as a number in self's dtype, as the kernel reads
  // it (a kiln fuzz finding: abs of a bool weight was an error; seed 12 index 2021, --max-nodes 30).
  const Tensor w = is_floating(weight.dtype()) ? weight : to(weight, self.dtype());
  Tensor upper = ge(abs(w), 0.5);
  Tensor coeff = where(upper, sub(w, 1), w);
  return {add(mul(coeff, diff), where(upper, end, self))};
}

// addcmul = self + value * t1 * t2 in the promoted dtype (an integer result truncates a float value, as PyTorch).
std::vector<Tensor> addcmul_decomp(const OpCall& c) {
  const DType dt = result_type({c.tensor(0), c.tensor(1), c.tensor(2)});
  KILN_CHECK(dt != DType::Bool, "addcmul: not implemented for bool tensors ({}, {} and {}), as in PyTorch; convert "
             "them to an integer or floating dtype first", c.tensor(0).str(), c.tensor(1).str(), c.tensor(2).str());
  auto in_dtype = [&](const Tensor& t) { return t.dtype() == dt ? t : to(t, dt); };
  Tensor self = in_dtype(c.tensor(0)), t1 = in_dtype(c.tensor(1)), t2 = in_dtype(c.tensor(2));
  Scalar value = c.scalar(3);
  if (!is_floating(dt)) value = Scalar(value.to_int());
  Tensor product = scalar_is(value, 1.0) ? mul(t1, t2) : mul(mul(t1, value), t2);
  return {add(self, product)};
}

}  // namespace

void register_pointwise_ops() {
  // float-valued unary
  def(OpId::exp).infer(infer_unary<float_valued_dtype>).kernel(exp_kernel).vjp(exp_vjp);
  def(OpId::exp2).infer(infer_unary<float_valued_dtype>).kernel(exp2_kernel).vjp(exp2_vjp);
  def(OpId::log).infer(infer_unary<float_valued_dtype>).kernel(log_kernel).vjp(log_vjp);
  def(OpId::log2).infer(infer_unary<float_valued_dtype>).kernel(log2_kernel).vjp(log2_vjp);
  def(OpId::log1p).infer(infer_unary<float_valued_dtype>).kernel(log1p_kernel).vjp(log1p_vjp);
  def(OpId::expm1).infer(infer_unary<float_valued_dtype>).kernel(expm1_kernel).vjp(expm1_vjp);
  def(OpId::sqrt).infer(infer_unary<float_valued_dtype>).kernel(sqrt_kernel).vjp(sqrt_vjp);
  def(OpId::rsqrt).infer(infer_unary<float_valued_dtype>).kernel(rsqrt_kernel).vjp(rsqrt_vjp);
  def(OpId::sin).infer(infer_unary<float_valued_dtype>).kernel(sin_kernel).vjp(sin_vjp);
  def(OpId::cos).infer(infer_unary<float_valued_dtype>).kernel(cos_kernel).vjp(cos_vjp);
  def(OpId::tan).infer(infer_unary<float_valued_dtype>).kernel(tan_kernel).vjp(tan_vjp);
  def(OpId::tanh).infer(infer_unary<float_valued_dtype>).kernel(tanh_kernel).vjp(tanh_vjp);
  def(OpId::asin).infer(infer_unary<float_valued_dtype>).kernel(asin_kernel).vjp(asin_vjp);
  def(OpId::acos).infer(infer_unary<float_valued_dtype>).kernel(acos_kernel).vjp(acos_vjp);
  def(OpId::atan).infer(infer_unary<float_valued_dtype>).kernel(atan_kernel).vjp(atan_vjp);
  def(OpId::sinh).infer(infer_unary<float_valued_dtype>).kernel(sinh_kernel).vjp(sinh_vjp);
  def(OpId::cosh).infer(infer_unary<float_valued_dtype>).kernel(cosh_kernel).vjp(cosh_vjp);
  def(OpId::sigmoid).infer(infer_unary<float_valued_dtype>).kernel(sigmoid_kernel).vjp(sigmoid_vjp);
  def(OpId::erf).infer(infer_unary<float_valued_dtype>).kernel(erf_kernel).vjp(erf_vjp);
  def(OpId::reciprocal).infer(infer_unary<float_valued_dtype>).kernel(reciprocal_kernel).vjp(reciprocal_vjp);
  def(OpId::gelu).infer(infer_unary<gelu_dtype>).kernel(gelu_kernel).vjp(gelu_vjp);
  def(OpId::silu).infer(infer_unary<floating_only_dtype>).kernel(silu_kernel).vjp(silu_vjp);
  // dtype-keeping unary
  def(OpId::neg).infer(infer_unary<neg_dtype>).kernel(neg_kernel).vjp(neg_vjp);
  def(OpId::abs).infer(infer_unary<same_dtype_not_bool>).kernel(abs_kernel).vjp(abs_vjp);
  def(OpId::sign).infer(infer_unary<same_dtype>).kernel(sign_kernel).vjp(zero_vjp);
  def(OpId::relu).infer(infer_unary<same_dtype_not_bool>).kernel(relu_kernel).vjp(relu_vjp);
  def(OpId::floor).infer(infer_unary<same_dtype_not_bool>).kernel(floor_kernel).vjp(zero_vjp);
  def(OpId::ceil).infer(infer_unary<same_dtype_not_bool>).kernel(ceil_kernel).vjp(zero_vjp);
  def(OpId::trunc).infer(infer_unary<same_dtype_not_bool>).kernel(trunc_kernel).vjp(zero_vjp);
  def(OpId::round).infer(infer_unary<round_dtype>).kernel(round_kernel).vjp(zero_vjp);
  // bool-valued unary
  def(OpId::logical_not).infer(infer_unary<bool_dtype>).kernel(logical_not_kernel);
  def(OpId::isnan).infer(infer_unary<bool_dtype>).kernel(isnan_kernel);
  def(OpId::isinf).infer(infer_unary<bool_dtype>).kernel(isinf_kernel);
  // binary arithmetic
  def(OpId::add).infer(infer_binary<add_dtype>).kernel(add_kernel).vjp(add_vjp);
  def(OpId::sub).infer(infer_binary<sub_dtype>).kernel(sub_kernel).vjp(sub_vjp);
  def(OpId::mul).infer(infer_binary<promoted_dtype>).kernel(mul_kernel).vjp(mul_vjp);
  def(OpId::div).infer(infer_binary<div_dtype>).kernel(div_kernel).vjp(div_vjp);
  def(OpId::remainder).infer(infer_binary<remainder_dtype>).kernel(remainder_kernel).vjp(remainder_vjp);
  def(OpId::pow).infer(infer_binary<pow_dtype>).kernel(pow_kernel).vjp(pow_vjp);
  def(OpId::maximum).infer(infer_binary<tensors_promoted_dtype>).kernel(maximum_kernel).vjp(maximum_vjp);
  def(OpId::minimum).infer(infer_binary<tensors_promoted_dtype>).kernel(minimum_kernel).vjp(minimum_vjp);
  def(OpId::atan2).infer(infer_binary<tensors_float_promoted_dtype>).kernel(atan2_kernel).vjp(atan2_vjp);
  // comparisons, logical, bitwise
  def(OpId::eq).infer(infer_binary<bool_dtype>).kernel(eq_kernel);
  def(OpId::ne).infer(infer_binary<bool_dtype>).kernel(ne_kernel);
  def(OpId::lt).infer(infer_binary<bool_dtype>).kernel(lt_kernel);
  def(OpId::le).infer(infer_binary<bool_dtype>).kernel(le_kernel);
  def(OpId::gt).infer(infer_binary<bool_dtype>).kernel(gt_kernel);
  def(OpId::ge).infer(infer_binary<bool_dtype>).kernel(ge_kernel);
  def(OpId::logical_and).infer(infer_binary<tensors_bool_dtype>).kernel(logical_and_kernel);
  def(OpId::logical_or).infer(infer_binary<tensors_bool_dtype>).kernel(logical_or_kernel);
  def(OpId::logical_xor).infer(infer_binary<tensors_bool_dtype>).kernel(logical_xor_kernel);
  def(OpId::bitwise_and).infer(infer_binary<bitwise_dtype>).kernel(bitwise_and_kernel);
  def(OpId::bitwise_or).infer(infer_binary<bitwise_dtype>).kernel(bitwise_or_kernel);
  def(OpId::bitwise_xor).infer(infer_binary<bitwise_dtype>).kernel(bitwise_xor_kernel);
  // ternary
  def(OpId::where).infer(infer_where).kernel(where_kernel).vjp(where_vjp);
  def(OpId::clamp).infer(infer_unary<clamp_dtype>).kernel(clamp_kernel).vjp(clamp_vjp);
  def(OpId::lerp).infer(infer_lerp).kernel(lerp_kernel).vjp(lerp_vjp).decomp(lerp_decomp);
  def(OpId::addcmul).decomp(addcmul_decomp);
}

}  // namespace kiln
