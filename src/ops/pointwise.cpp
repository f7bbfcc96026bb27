// Pointwise ops: unary math, binary arithmetic and comparisons, logical and bitwise ops, where/clamp/lerp/
// addcmul. Floating math computes in f32 (f16/bf16/f32 inputs) or f64, and rounds once to the result dtype.
#include <cmath>

#include "eager/loops.h"
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------- kernel drivers

// out = f(x) for float-valued unary ops. `f` is a generic lambda over the compute type (float or double).
template <class F>
Tensor unary_float(const Tensor& x, F f) {
  DType out_dt = float_result(x.dtype());
  DType cdt = compute_dtype(out_dt);
  Tensor xc = as_contiguous_dtype(x, cdt);
  Tensor out = Tensor::empty(x.sizes(), cdt);
  KILN_DISPATCH_FLOAT(cdt, [&](auto z) {
    using T = decltype(z);
    map1<T, T>(out, xc, [&](T v) { return f(v); });
  });
  return out_dt == cdt ? out : as_contiguous_dtype(out, out_dt);
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
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      fail("{}: internal error: no compute type for {}", op, dtype_name(cdt));
    } else if (store_dt == DType::Bool) {
      map2<bool, T, T>(out, ac, bc, [&](T x, T y) { return bool(f(x, y)); });
    } else {
      map2<T, T, T>(out, ac, bc, [&](T x, T y) { return static_cast<T>(f(x, y)); });
    }
  });
  return out.dtype() == out_dt ? out : as_contiguous_dtype(out, out_dt);
}

std::vector<TensorMeta> infer_unary_float(const OpCall& c) {
  return {contiguous_meta(c.tensor(0).sizes(), float_result(c.tensor(0).dtype()))};
}
std::vector<TensorMeta> infer_binary_promote(const OpCall& c) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  return {contiguous_meta(broadcast_shapes(a.sizes(), b.sizes(), c.name()), result_type({a, b}))};
}

// ---------------------------------------------------------------- exp (the unary pattern)
std::vector<Tensor> exp_kernel(const OpCall& c) {
  return {unary_float(c.tensor(0), [](auto v) { return std::exp(v); })};
}
std::vector<Tensor> exp_vjp(const VjpCall& v) { return {mul(v.grads[0], v.outputs[0])}; }

// ---------------------------------------------------------------- neg
std::vector<Tensor> neg_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(x.dtype() != DType::Bool, "neg: negation of a bool tensor is not supported; use logical_not");
  Tensor out = Tensor::empty(x.sizes(), x.dtype());
  if (is_low_precision(x.dtype())) return {as_contiguous_dtype(neg(to(x, DType::F32)), x.dtype())};
  KILN_DISPATCH_ALL(x.dtype(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) map1<T, T>(out, x, [](T a) { return T(-a); });
  });
  return {out};
}
std::vector<TensorMeta> infer_same(const OpCall& c) { return {contiguous_meta(c.tensor(0).sizes(), c.tensor(0).dtype())}; }
std::vector<Tensor> neg_vjp(const VjpCall& v) { return {neg(v.grads[0])}; }

// ---------------------------------------------------------------- add / sub / mul (the binary pattern)
// Generic lambdas receive the compute type (bool, an integer type, float or double).
template <class T>
T scalar_as(const Scalar& s) {
  if constexpr (std::is_floating_point_v<T>) return T(s.to_double());
  else if constexpr (std::is_same_v<T, bool>) return s.to_bool();
  else return T(s.to_int());
}

std::vector<Tensor> add_sub(const OpCall& c, bool subtract) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  DType dt = result_type({a, b});
  Scalar alpha = c.scalar(2);
  KILN_CHECK(is_floating(dt) || !alpha.is_float(), "{}: alpha {} must be an integer for {} inputs", c.name(),
             alpha.str(), dtype_name(dt));
  KILN_CHECK(!(subtract && dt == DType::Bool), "sub: subtraction of bool tensors is not supported; use logical_xor");
  const double ad = subtract ? -alpha.to_double() : alpha.to_double();
  const int64_t ai = subtract ? -alpha.to_int() : alpha.to_int();
  if (ad == 1.0) return {binary_op(a, b, dt, dt, c.name(), [](auto x, auto y) { return x + y; })};
  if (ad == -1.0 && dt != DType::Bool) return {binary_op(a, b, dt, dt, c.name(), [](auto x, auto y) { return x - y; })};
  return {binary_op(a, b, dt, dt, c.name(), [ad, ai](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) return x + T(ad) * y;
    else return T(x + T(ai) * y);
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
    else return T(x * y);
  })};
}
std::vector<Tensor> mul_vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &a = v.call.tensor(0), &b = v.call.tensor(1);
  return {if_needed(v.needs(0), [&] { return sum_to(mul(g, b), a.sizes()); }),
          if_needed(v.needs(1), [&] { return sum_to(mul(g, a), b.sizes()); })};
}

}  // namespace

void register_pointwise_ops() {
  def(OpId::exp).infer(infer_unary_float).kernel(exp_kernel).vjp(exp_vjp);
  def(OpId::neg).infer(infer_same).kernel(neg_kernel).vjp(neg_vjp);
  def(OpId::add).infer(infer_binary_promote).kernel(add_kernel).vjp(add_vjp);
  def(OpId::sub).infer(infer_binary_promote).kernel(sub_kernel).vjp(sub_vjp);
  def(OpId::mul).infer(infer_binary_promote).kernel(mul_kernel).vjp(mul_vjp);
}

}  // namespace kiln
