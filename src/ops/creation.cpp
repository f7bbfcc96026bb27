// Creation ops: full, zeros, ones, arange, linspace, eye and the *_like variants. None is differentiable.
#include <cmath>
#include <limits>

#include "core/size_math.h"
#include "eager/loops.h"
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

// The dtype of full(size, value) without an explicit dtype: the value's category (PyTorch: bool, i64, f32).
DType default_dtype_for(const Scalar& s) {
  return s.is_float() ? kDefaultFloat : s.is_int() ? DType::I64 : DType::Bool;
}

void check_size(const IntList& size, std::string_view op) {
  for (int64_t s : size)
    KILN_CHECK(s >= 0, "{}: negative dimension {} in size {}", op, s, shape_str(size));
}

Tensor filled(const Shape& size, Scalar value, DType dt) {
  Tensor out = Tensor::empty(size, dt);
  copy_into(out, Tensor::scalar(value, dt));
  return out;
}

// full's output meta; the fill value must fit the dtype, as PyTorch's checked conversion requires.
TensorMeta full_meta(const OpCall& c) {
  check_size(c.ints(0), "full");
  DType dt = c.opt_dtype(2).value_or(default_dtype_for(c.scalar(1)));
  check_fits(c.scalar(1), dt, "full");
  return contiguous_meta(c.ints(0), dt);
}
std::vector<Tensor> full_kernel(const OpCall& c) {
  TensorMeta m = full_meta(c);
  return {filled(m.sizes, c.scalar(1), m.dtype)};
}
std::vector<TensorMeta> full_infer(const OpCall& c) { return {full_meta(c)}; }
std::vector<Tensor> zeros_kernel(const OpCall& c) { return {filled(c.ints(0), 0, c.opt_dtype(1).value_or(kDefaultFloat))}; }
std::vector<Tensor> ones_kernel(const OpCall& c) { return {filled(c.ints(0), 1, c.opt_dtype(1).value_or(kDefaultFloat))}; }
std::vector<TensorMeta> zeros_infer(const OpCall& c) {
  check_size(c.ints(0), c.name());
  return {contiguous_meta(c.ints(0), c.opt_dtype(1).value_or(kDefaultFloat))};
}

std::vector<TensorMeta> full_like_infer(const OpCall& c) {
  DType dt = c.opt_dtype(2).value_or(c.tensor(0).dtype());
  check_fits(c.scalar(1), dt, "full_like");
  return {contiguous_meta(c.tensor(0).sizes(), dt)};
}
std::vector<Tensor> full_like_kernel(const OpCall& c) {
  TensorMeta m = full_like_infer(c)[0];
  return {filled(m.sizes, c.scalar(1), m.dtype)};
}
std::vector<Tensor> zeros_like_kernel(const OpCall& c) {
  return {filled(c.tensor(0).sizes(), 0, c.opt_dtype(1).value_or(c.tensor(0).dtype()))};
}
std::vector<Tensor> ones_like_kernel(const OpCall& c) {
  return {filled(c.tensor(0).sizes(), 1, c.opt_dtype(1).value_or(c.tensor(0).dtype()))};
}
std::vector<TensorMeta> like_infer(const OpCall& c) {
  return {contiguous_meta(c.tensor(0).sizes(), c.opt_dtype(1).value_or(c.tensor(0).dtype()))};
}

// arange: length ceil((end - start) / step); integer result when all three are integers.
DType arange_dtype(const OpCall& c) {
  if (auto dt = c.opt_dtype(3)) return *dt;
  bool all_int = !c.scalar(0).is_float() && !c.scalar(1).is_float() && !c.scalar(2).is_float();
  return all_int ? DType::I64 : kDefaultFloat;
}
int64_t arange_length(const OpCall& c) {
  double start = c.scalar(0).to_double(), end = c.scalar(1).to_double(), step = c.scalar(2).to_double();
  KILN_CHECK(step != 0, "arange: step must be nonzero");
  KILN_CHECK(std::isfinite(start) && std::isfinite(end), "arange: start ({}) and end ({}) must be finite", start, end);
  KILN_CHECK((step > 0 && end >= start) || (step < 0 && end <= start),
             "arange: upper bound and larger bound inconsistent with step sign (start {}, end {}, step {})", start, end, step);
  if (!c.scalar(0).is_float() && !c.scalar(1).is_float() && !c.scalar(2).is_float()) {
    // Exact integer arithmetic, unsigned: |end - start| can reach 2^64 - 1 and |step| 2^63, which int64 cannot hold.
    int64_t s = c.scalar(0).to_int(), e = c.scalar(1).to_int(), st = c.scalar(2).to_int();
    KILN_CHECK(st > 0 ? e >= s : e <= s, "arange: upper bound and larger bound inconsistent with step sign (start {}, "
               "end {}, step {})", s, e, st);
    uint64_t span = st > 0 ? uint64_t(e) - uint64_t(s) : uint64_t(s) - uint64_t(e);
    uint64_t magnitude = st > 0 ? uint64_t(st) : uint64_t(0) - uint64_t(st);
    uint64_t length = span / magnitude + (span % magnitude != 0);
    KILN_CHECK(length <= uint64_t(std::numeric_limits<int64_t>::max()), "arange: {} (start {}, end {}, step {}); "
               "check the arguments", kTooManyElements, s, e, st);
    return int64_t(length);
  }
  double length = std::ceil((end - start) / step);  // may be inf: arange(0.0, 1e308, 1e-308)
  KILN_CHECK(length < 9223372036854775808.0, "arange: {} (start {}, end {}, step {}); check the arguments",
             kTooManyElements, start, end, step);
  return int64_t(length);
}
std::vector<TensorMeta> arange_infer(const OpCall& c) { return {contiguous_meta({arange_length(c)}, arange_dtype(c))}; }
std::vector<Tensor> arange_kernel(const OpCall& c) {
  int64_t n = arange_length(c);
  DType dt = arange_dtype(c);
  Tensor out = Tensor::empty({n}, dt);
  bool integral = is_integral(dt, true);
  KILN_DISPATCH_ALL(dt, [&](auto z) {
    using T = decltype(z);
    T* p = out.data<T>();
    if (integral) {
      int64_t s = c.scalar(0).to_int(), st = c.scalar(2).to_int();
      for (int64_t i = 0; i < n; ++i) p[i] = convert_element<T>(s + i * st);
    } else {
      double s = c.scalar(0).to_double(), st = c.scalar(2).to_double();
      for (int64_t i = 0; i < n; ++i) p[i] = convert_element<T>(s + double(i) * st);
    }
  });
  return {out};
}

// linspace: PyTorch computes the first half from start and the second half from end (symmetric rounding).
std::vector<TensorMeta> linspace_infer(const OpCall& c) {
  KILN_CHECK(c.int_(2) >= 0, "linspace: number of steps must be non-negative, got {}", c.int_(2));
  return {contiguous_meta({c.int_(2)}, c.opt_dtype(3).value_or(kDefaultFloat))};
}
std::vector<Tensor> linspace_kernel(const OpCall& c) {
  int64_t n = linspace_infer(c)[0].sizes[0];
  DType dt = c.opt_dtype(3).value_or(kDefaultFloat);
  Tensor out = Tensor::empty({n}, dt);
  double start = c.scalar(0).to_double(), end = c.scalar(1).to_double();
  double step = n > 1 ? (end - start) / double(n - 1) : 0.0;
  int64_t half = n / 2;
  KILN_DISPATCH_ALL(dt, [&](auto z) {
    using T = decltype(z);
    T* p = out.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      double v = i < half ? start + step * double(i) : end - step * double(n - 1 - i);
      if constexpr (std::is_integral_v<T>) p[i] = convert_element<T>(int64_t(v));
      else p[i] = convert_element<T>(v);
    }
  });
  return {out};
}

std::vector<TensorMeta> eye_infer(const OpCall& c) {
  int64_t n = c.int_(0), m = c.opt_int(1).value_or(n);
  KILN_CHECK(n >= 0 && m >= 0, "eye: sizes must be non-negative, got n={} m={}", n, m);
  return {contiguous_meta({n, m}, c.opt_dtype(2).value_or(kDefaultFloat))};
}
std::vector<Tensor> eye_kernel(const OpCall& c) {
  TensorMeta m = eye_infer(c)[0];
  Tensor out = filled(m.sizes, 0, m.dtype);
  Tensor one = Tensor::scalar(1, m.dtype);
  int64_t k = std::min(m.sizes[0], m.sizes[1]);
  if (k > 0) copy_into(make_view(out, {k}, {m.sizes[1] + 1}, 0), one);
  return {out};
}

}  // namespace

void register_creation_ops() {
  def(OpId::full).infer(full_infer).kernel(full_kernel);
  def(OpId::zeros).infer(zeros_infer).kernel(zeros_kernel);
  def(OpId::ones).infer(zeros_infer).kernel(ones_kernel);
  def(OpId::arange).infer(arange_infer).kernel(arange_kernel);
  def(OpId::linspace).infer(linspace_infer).kernel(linspace_kernel);
  def(OpId::eye).infer(eye_infer).kernel(eye_kernel);
  def(OpId::full_like).infer(full_like_infer).kernel(full_like_kernel);
  def(OpId::zeros_like).infer(like_infer).kernel(zeros_like_kernel);
  def(OpId::ones_like).infer(like_infer).kernel(ones_like_kernel);
}

}  // namespace kiln
