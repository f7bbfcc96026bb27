// Neural-network ops: softmax and log_softmax (fused row kernels with their own VJPs, and decompositions),
// nll_loss (kernel + VJP), and the decompositions of layer_norm, rms_norm, dropout, mse_loss, cross_entropy
// and batch_norm, following PyTorch's ATen implementations (dtypes, reductions, edge cases, errors).
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>

#include "eager/loops.h"
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------- shared helpers

// "[*, 2, 3]": the input shape layer_norm-like ops expect for a normalized_shape.
std::string star_shape(const IntList& shape) {
  std::string s = shape_str(shape);
  return "[*" + (shape.empty() ? std::string("]") : ", " + s.substr(1));
}

// Upcast of a floating tensor to the dtype its math runs in (f16/bf16 -> f32).
Tensor upcast(const Tensor& x) { return is_low_precision(x.dtype()) ? to(x, DType::F32) : x; }
Tensor cast_back(const Tensor& r, DType dt) { return r.dtype() == dt ? r : to(r, dt); }

void check_reduction(int64_t reduction, std::string_view op) {
  KILN_CHECK(reduction >= 0 && reduction <= 2, "{}: invalid reduction {} (valid: 0 = none, 1 = mean, 2 = sum)", op,
             reduction);
}

Tensor apply_reduction(const Tensor& loss, int64_t reduction) {
  if (reduction == 1) return mean(loss);
  if (reduction == 2) return sum(loss);
  return loss;
}

// Shape with `size` at `dim` and 1 elsewhere (a per-class or per-channel vector viewed for broadcasting).
Shape axis_shape(int64_t ndim, int64_t dim, int64_t size) {
  Shape s(size_t(std::max<int64_t>(ndim, 1)), 1);
  s[size_t(dim)] = size;
  return s;
}

// ---------------------------------------------------------------- softmax / log_softmax

// exp(x) for x <= 0 or NaN (the shifted values of a softmax row): Cephes' range reduction and degree-6
// polynomial (within 2 ulp of std::exp), with results down to the smallest subnormal (2^k is applied as two
// factors) and 0 below -104. The special cases are selected with integer masks, not branches, so `omp simd`
// loops vectorise it.
inline float exp_nonpositive(float x) {
  constexpr uint32_t kMinus104 = 0xc2d00000u;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t nan_mask = -uint32_t((bits & 0x7fffffffu) > 0x7f800000u);
  const uint32_t low_mask = -uint32_t(bits > kMinus104);  // x < -104 (or a NaN with the sign bit set)
  const uint32_t clamp_mask = nan_mask | low_mask;
  const float c = std::bit_cast<float>((bits & ~clamp_mask) | (kMinus104 & clamp_mask));
  const float k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(c / ln 2)
  const float r = (c - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t ki = int32_t(k);
  const int32_t k1 = ki >> 1, k2 = ki - k1;
  const float result = y * std::bit_cast<float>((k1 + 127) << 23) * std::bit_cast<float>((k2 + 127) << 23);
  const uint32_t result_bits = std::bit_cast<uint32_t>(result) & ~low_mask;
  return std::bit_cast<float>((result_bits & ~nan_mask) | (bits & nan_mask));
}

template <class T>
inline T exp_shifted(T v) {
  if constexpr (std::is_same_v<T, float>) return exp_nonpositive(v);
  else return std::exp(v);
}

// One contiguous row of length n: y = softmax(x) or log_softmax(x).
template <class T, bool Log>
void softmax_row(const T* x, T* y, int64_t n) {
  T mx = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  T total = 0;
  if constexpr (Log) {
#pragma omp simd reduction(+ : total)
    for (int64_t i = 0; i < n; ++i) total += exp_shifted<T>(x[i] - mx);
    const T log_total = std::log(total);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] - mx - log_total;
  } else {
#pragma omp simd reduction(+ : total)
    for (int64_t i = 0; i < n; ++i) {
      const T e = exp_shifted<T>(x[i] - mx);
      y[i] = e;
      total += e;
    }
    const T scale = T(1) / total;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] *= scale;
  }
}

// A [n, inner] slab (softmax over n, stride `inner`), `len` columns starting at the slab's column 0.
template <class T, bool Log>
void softmax_columns(const T* x, T* y, int64_t n, int64_t inner, int64_t len) {
  constexpr int64_t kBlock = 256;
  T mx[kBlock], total[kBlock];
  for (int64_t j = 0; j < len; ++j) {
    mx[j] = -std::numeric_limits<T>::infinity();
    total[j] = 0;
  }
  for (int64_t k = 0; k < n; ++k) {
    const T* p = x + k * inner;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) mx[j] = p[j] > mx[j] ? p[j] : mx[j];
  }
  for (int64_t k = 0; k < n; ++k) {
    const T* p = x + k * inner;
    T* q = y + k * inner;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      const T e = exp_shifted<T>(p[j] - mx[j]);
      if constexpr (!Log) q[j] = e;
      total[j] += e;
    }
  }
  for (int64_t j = 0; j < len; ++j) total[j] = Log ? std::log(total[j]) : T(1) / total[j];
  for (int64_t k = 0; k < n; ++k) {
    const T* p = x + k * inner;
    T* q = y + k * inner;
    if constexpr (Log) {
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) q[j] = p[j] - mx[j] - total[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) q[j] *= total[j];
    }
  }
}

// softmax over the middle dim of a contiguous [outer, n, inner] tensor.
template <class T, bool Log>
void softmax_contiguous(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) softmax_row<T, Log>(x + r * n, y + r * n, n);
    });
    return;
  }
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n * std::min(inner, kBlock), 1));
  parallel_for(outer * blocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / blocks, col = (t % blocks) * kBlock;
      const int64_t off = o * n * inner + col;
      softmax_columns<T, Log>(x + off, y + off, n, inner, std::min(kBlock, inner - col));
    }
  });
}

// The dtype softmax returns: the dtype argument (the input is cast to it first), else the input's.
DType softmax_dtype(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  DType dt = c.opt_dtype(2).value_or(x.dtype());
  KILN_CHECK(is_floating(dt), "{}: expected a floating-point input or dtype, got {} (pass dtype=f32 to apply it to "
             "an integer tensor)", c.name(), x.str());
  wrap_dim(c.int_(1), x.dim(), c.name());
  return dt;
}

std::vector<TensorMeta> softmax_infer(const OpCall& c) {
  return {contiguous_meta(c.tensor(0).sizes(), softmax_dtype(c))};
}

template <bool Log>
std::vector<Tensor> softmax_kernel(const OpCall& c) {
  const DType out_dt = softmax_dtype(c);
  Tensor x = c.tensor(0);
  if (x.dtype() != out_dt) x = to(x, out_dt);
  const int64_t dim = wrap_dim(c.int_(1), x.dim(), c.name());
  const DType cdt = compute_dtype(out_dt);
  Tensor xc = as_contiguous_dtype(x, cdt);
  Tensor out = Tensor::empty(x.sizes(), cdt);
  if (x.numel() > 0) {
    const int64_t n = x.dim() == 0 ? 1 : x.sizes()[size_t(dim)];
    int64_t inner = 1;
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.sizes()[size_t(d)];
    const int64_t outer = x.numel() / (n * inner);
    KILN_DISPATCH_FLOAT(cdt, [&](auto z) {
      using T = decltype(z);
      softmax_contiguous<T, Log>(xc.data<T>(), out.data<T>(), outer, n, inner);
    });
  }
  return {cast_back(out, out_dt)};
}

// softmax: dx = y * (g - sum(g * y)); log_softmax: dx = g - exp(y) * sum(g). f16/bf16 compute in f32.
template <bool Log>
std::vector<Tensor> softmax_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  const IntList dim{v.call.int_(1)};
  Tensor y = upcast(v.outputs[0]), g = upcast(v.grads[0]);
  Tensor dx = Log ? sub(g, mul(exp(y), sum(g, dim, true))) : mul(y, sub(g, sum(mul(g, y), dim, true)));
  return {cast_back(dx, x.dtype())};
}

template <bool Log>
std::vector<Tensor> softmax_decomp(const OpCall& c) {
  const DType out_dt = softmax_dtype(c);
  const Tensor& x0 = c.tensor(0);
  Tensor x = upcast(x0.dtype() == out_dt ? x0 : to(x0, out_dt));
  const IntList dim{c.int_(1)};
  // amax over an empty dim is an error; there is nothing to stabilise then (torch._decomp does the same).
  Tensor shifted = x.numel() == 0 ? x : sub(x, amax(x, dim, true));
  Tensor r = Log ? sub(shifted, log(sum(exp(shifted), dim, true))) : [&] {
    Tensor e = exp(shifted);
    return div(e, sum(e, dim, true));
  }();
  return {cast_back(r, out_dt)};
}

// ---------------------------------------------------------------- layer_norm / rms_norm

// PyTorch's _check_layer_norm_inputs; returns the trailing dims that are normalised.
IntList normalized_dims(std::string_view op, const Tensor& x, const IntList& shape, const Tensor& weight,
                        const Tensor& bias) {
  KILN_CHECK(!shape.empty(), "{}: expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
             "one element, but got normalized_shape = []", op);
  KILN_CHECK(!weight.defined() || weight.sizes() == shape, "{}: expected weight to be of same shape as "
             "normalized_shape, but got weight of shape {} and normalized_shape = {}", op, shape_str(weight.sizes()),
             shape_str(shape));
  KILN_CHECK(!bias.defined() || bias.sizes() == shape, "{}: expected bias to be of same shape as normalized_shape, "
             "but got bias of shape {} and normalized_shape = {}", op, shape_str(bias.sizes()), shape_str(shape));
  const int64_t k = int64_t(shape.size());
  bool trailing_match = x.dim() >= k && std::equal(shape.begin(), shape.end(), x.sizes().end() - k);
  KILN_CHECK(trailing_match, "{}: given normalized_shape={}, expected input with shape {}, but got input of size {}",
             op, shape_str(shape), star_shape(shape), shape_str(x.sizes()));
  KILN_CHECK(is_floating(x.dtype()), "{}: expected a floating-point input, got {}", op, x.str());
  IntList dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

std::vector<Tensor> layer_norm_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const Tensor weight = c.opt_tensor(2), bias = c.opt_tensor(3);
  IntList dims = normalized_dims("layer_norm", x, c.ints(1), weight, bias);
  Tensor xf = upcast(x);
  Tensor centered = centre_over(xf, dims).centred;
  Tensor biased_var = mean(mul(centered, centered), dims, true);
  Tensor out = mul(centered, rsqrt(add(biased_var, c.float_(4))));
  if (weight.defined()) out = mul(out, weight);
  if (bias.defined()) out = add(out, bias);
  return {cast_back(out, x.dtype())};
}

// eps None is the machine epsilon of the dtype the op computes in (f32 for f16/bf16/f32, f64 for f64), as
// ATen's rms_norm does.
std::vector<Tensor> rms_norm_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const Tensor weight = c.opt_tensor(2);
  IntList dims = normalized_dims("rms_norm", x, c.ints(1), weight, Tensor());
  Tensor xf = upcast(x);
  const bool f64 = xf.dtype() == DType::F64;
  double eps = c.opt_float(3).value_or(f64 ? DBL_EPSILON : double(FLT_EPSILON));
  if (!f64) eps = double(float(eps));
  Tensor out = mul(xf, rsqrt(add(mean(mul(xf, xf), dims, true), eps)));
  if (weight.defined()) out = mul(out, weight);
  return {cast_back(out, x.dtype())};
}

// ---------------------------------------------------------------- dropout / mse_loss

std::vector<Tensor> dropout_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const double p = c.float_(1);
  KILN_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got {}", p);
  if (!c.bool_(2) || p == 0 || x.numel() == 0) return {view(x, x.sizes())};  // an alias of the input, as PyTorch
  if (p == 1) return {mul(x, zeros({}, x.dtype()))};  // x * 0 as PyTorch: NaN and inf give NaN
  return {mul(x, div(bernoulli(x, 1 - p), 1 - p))};
}

std::vector<Tensor> mse_loss_decomp(const OpCall& c) {
  const Tensor &x = c.tensor(0), &target = c.tensor(1);
  const int64_t reduction = c.int_(2);
  check_reduction(reduction, "mse_loss");
  KILN_CHECK(is_floating(result_type({x, target})), "mse_loss: expected floating-point inputs, got {} and {}",
             x.str(), target.str());
  Tensor diff = sub(x, target);
  return {apply_reduction(mul(diff, diff), reduction)};
}

// ---------------------------------------------------------------- nll_loss

// Geometry of nll_loss: input [N, C, d1...] (or [C] unbatched), target [N, d1...] (or []).
struct NllGeometry {
  int64_t batch = 1, classes = 0, spatial = 1;
  int64_t class_dim = 0;
  Shape unreduced;  // the output shape of reduction=none
};

NllGeometry nll_geometry(const OpCall& c) {
  const Tensor &x = c.tensor(0), &target = c.tensor(1);
  const Tensor weight = c.opt_tensor(2);
  check_reduction(c.int_(3), "nll_loss");
  KILN_CHECK(x.dim() >= 1, "nll_loss: expected an input with 1 or more dimensions ([C], [N, C] or [N, C, d1, ...]), "
             "got {}", x.str());
  KILN_CHECK(is_floating(x.dtype()), "nll_loss: expected a floating-point input (log-probabilities), got {}", x.str());
  KILN_CHECK(target.dtype() == DType::I64 || target.dtype() == DType::U8, "nll_loss: expected target of class "
             "indices with dtype i64 (or u8), got {}", target.str());
  NllGeometry g;
  if (x.dim() == 1) {
    KILN_CHECK(target.dim() == 0, "nll_loss: an unbatched input {} expects a 0-dim target (one class index), got {}",
               x.str(), target.str());
    g.classes = x.size(0);
  } else {
    KILN_CHECK(target.dim() == x.dim() - 1, "nll_loss: expected a target of {} dims (class indices) for input {}, got "
               "{}", x.dim() - 1, x.str(), target.str());
    KILN_CHECK(x.size(0) == target.size(0), "nll_loss: expected input batch_size ({}) to match target batch_size "
               "({})", x.size(0), target.size(0));
    Shape expected{x.size(0)};
    expected.insert(expected.end(), x.sizes().begin() + 2, x.sizes().end());
    KILN_CHECK(target.sizes() == expected, "nll_loss: expected target size {} for input {}, got {}",
               shape_str(expected), x.str(), target.str());
    g.batch = x.size(0);
    g.classes = x.size(1);
    g.class_dim = 1;
    g.spatial = shape_numel(Shape(x.sizes().begin() + 2, x.sizes().end()));
    g.unreduced = target.sizes();
  }
  KILN_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == g.classes), "nll_loss: weight tensor "
             "should be defined either for all {} classes or no classes but got weight tensor of shape: {}",
             g.classes, shape_str(weight.sizes()));
  KILN_CHECK(!weight.defined() || weight.dtype() == x.dtype(), "nll_loss: weight dtype {} must match the input's {}",
             dtype_name(weight.dtype()), dtype_name(x.dtype()));
  return g;
}

std::vector<TensorMeta> nll_loss_infer(const OpCall& c) {
  NllGeometry g = nll_geometry(c);
  return {contiguous_meta(c.int_(3) == 0 ? g.unreduced : Shape{}, c.tensor(0).dtype())};
}

std::vector<Tensor> nll_loss_kernel(const OpCall& c) {
  const NllGeometry g = nll_geometry(c);
  const Tensor& x = c.tensor(0);
  const Tensor weight = c.opt_tensor(2);
  const int64_t reduction = c.int_(3), ignore_index = c.int_(4);
  Tensor target = as_contiguous_dtype(c.tensor(1), DType::I64);
  const int64_t* t = target.data<int64_t>();
  const int64_t count = g.batch * g.spatial;
  for (int64_t i = 0; i < count; ++i) {
    KILN_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < g.classes), "nll_loss: target {} is out of bounds (valid "
               "class indices are 0 to {}, or ignore_index {})", t[i], g.classes - 1, ignore_index);
  }
  const DType cdt = compute_dtype(x.dtype());
  Tensor xc = as_contiguous_dtype(x, cdt);
  Tensor out = Tensor::empty(reduction == 0 ? g.unreduced : Shape{}, cdt);
  KILN_DISPATCH_FLOAT(cdt, [&](auto z) {
    using T = decltype(z);
    const T* px = xc.data<T>();
    Tensor wc = weight.defined() ? as_contiguous_dtype(weight, cdt) : Tensor();
    const T* pw = weight.defined() ? wc.data<T>() : nullptr;
    T* po = out.data<T>();
    double total = 0, total_weight = 0;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t b = i / g.spatial, s = i % g.spatial;
      T loss = 0;
      if (t[i] != ignore_index) {
        const T w = pw ? pw[t[i]] : T(1);
        loss = -w * px[(b * g.classes + t[i]) * g.spatial + s];
        total_weight += double(w);
      }
      if (reduction == 0) po[i] = loss;
      total += double(loss);
    }
    if (reduction == 1) po[0] = T(total / total_weight);  // no non-ignored targets: 0/0 = nan, as PyTorch
    if (reduction == 2) po[0] = T(total);
  });
  return {cast_back(out, x.dtype())};
}

// The per-element weight of each input position: w[target] at the target's class, 0 elsewhere and for ignored
// targets. Shape of the input.
Tensor target_weights(const Tensor& x, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                      int64_t class_dim) {
  const int64_t classes = x.size(class_dim);
  const Shape class_shape = axis_shape(x.dim(), class_dim, classes);
  Tensor t = unsqueeze(target.dtype() == DType::I64 ? target : to(target, DType::I64), class_dim);
  Tensor hit = logical_and(eq(t, view(arange(0, classes, 1, DType::I64), class_shape)), ne(t, ignore_index));
  return weight.defined() ? where(hit, view(weight, class_shape), 0.0) : to(hit, x.dtype());
}

// d loss / d input = -w[target] * g at the target's class (divided by the total weight for mean).
std::vector<Tensor> nll_loss_vjp(const VjpCall& v) {
  if (!v.needs(0)) return {Tensor(), Tensor(), Tensor()};
  const OpCall& c = v.call;
  const Tensor &x = c.tensor(0), &target = c.tensor(1);
  const int64_t reduction = c.int_(3), class_dim = x.dim() == 1 ? 0 : 1;
  Tensor coef = target_weights(x, target, c.opt_tensor(2), c.int_(4), class_dim);
  Tensor g = v.grads[0];
  if (reduction == 0) g = unsqueeze(g, class_dim);
  if (reduction == 1) g = div(g, sum(coef));
  return {neg(mul(coef, g)), Tensor(), Tensor()};
}

// ---------------------------------------------------------------- cross_entropy

std::vector<Tensor> cross_entropy_decomp(const OpCall& c) {
  const Tensor &x = c.tensor(0), &target = c.tensor(1);
  const Tensor weight = c.opt_tensor(2);
  const int64_t reduction = c.int_(3), ignore_index = c.int_(4);
  const double smoothing = c.float_(5);
  check_reduction(reduction, "cross_entropy");
  KILN_CHECK(x.dim() >= 1, "cross_entropy: expected an input with 1 or more dimensions ([C], [N, C] or "
             "[N, C, d1, ...]), got {}", x.str());
  const int64_t class_dim = x.dim() == 1 ? 0 : 1;
  const int64_t classes = x.size(class_dim);
  const Shape class_shape = axis_shape(x.dim(), class_dim, classes);
  KILN_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == classes), "cross_entropy: weight tensor "
             "should be defined either for all {} classes or no classes but got weight tensor of shape: {}", classes,
             shape_str(weight.sizes()));
  KILN_CHECK(smoothing <= 1.0, "cross_entropy: label_smoothing must be between 0.0 and 1.0. Got: {}", smoothing);
  Tensor logp = log_softmax(x, class_dim, x.dtype());

  if (x.sizes() == target.sizes()) {  // class probabilities
    KILN_CHECK(is_floating(target.dtype()), "cross_entropy: expected floating point type for target with class "
               "probabilities, got {}", target.str());
    KILN_CHECK(ignore_index < 0, "cross_entropy: ignore_index is not supported for floating point target (got {})",
               ignore_index);
    Tensor probs = smoothing > 0 ? add(mul(target, 1 - smoothing), smoothing / double(classes)) : target;
    Tensor terms = mul(logp, probs);
    if (weight.defined()) terms = mul(terms, view(weight, class_shape));
    if (reduction == 0) return {neg(sum(terms, IntList{class_dim}))};
    if (reduction == 2) return {neg(sum(terms))};
    return {div(neg(sum(terms)), double(x.numel() / std::max<int64_t>(classes, 1)))};  // 0 rows: 0/0 = nan
  }

  Tensor nll = nll_loss(logp, target, weight, reduction, ignore_index);
  if (smoothing <= 0) return {nll};
  Tensor smooth = weight.defined() ? neg(sum(mul(logp, view(weight, class_shape)), IntList{class_dim}))
                                   : neg(sum(logp, IntList{class_dim}));
  Tensor ignored = eq(target.dtype() == DType::I64 ? target : to(target, DType::I64), ignore_index);
  smooth = where(ignored, 0.0, smooth);
  Tensor reduced = smooth;
  if (reduction == 2) reduced = sum(smooth);
  if (reduction == 1) {
    Tensor denominator = weight.defined() ? sum(target_weights(x, target, weight, ignore_index, class_dim))
                                          : sum(logical_not(ignored));
    reduced = div(sum(smooth), denominator);
  }
  return {add(mul(nll, 1 - smoothing), mul(reduced, smoothing / double(classes)))};
}

// ---------------------------------------------------------------- batch_norm

std::vector<Tensor> batch_norm_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const Tensor weight = c.opt_tensor(1), bias = c.opt_tensor(2);
  const Tensor running_mean = c.opt_tensor(3), running_var = c.opt_tensor(4);
  const bool training = c.bool_(5);
  const double momentum = c.float_(6), eps = c.float_(7);
  KILN_CHECK(x.dim() >= 2, "batch_norm: expected an input of at least 2 dimensions [N, C, ...], got {}", x.str());
  KILN_CHECK(is_floating(x.dtype()), "batch_norm: expected a floating-point input, got {}", x.str());
  const int64_t channels = x.size(1);
  for (auto [name, t] : {std::pair{"weight", weight}, {"bias", bias}, {"running_mean", running_mean},
                         {"running_var", running_var}}) {
    KILN_CHECK(!t.defined() || t.numel() == channels, "batch_norm: {} should contain {} elements (one per channel of "
               "input {}) not {}", name, channels, x.str(), t.numel());
  }
  KILN_CHECK(training || (running_mean.defined() && running_var.defined()), "batch_norm: running_mean and "
             "running_var must be defined in evaluation mode (training=false)");
  if (x.numel() == 0) return {clone(x)};
  const Shape channel_shape = axis_shape(x.dim(), 1, channels);
  IntList dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor xf = upcast(x);
  Tensor out;
  if (training) {
    const int64_t n = x.numel() / channels;
    KILN_CHECK(n > 1, "batch_norm: expected more than 1 value per channel when training, got input size {}",
               shape_str(x.sizes()));
    auto [centered, batch_mean] = centre_over(xf, dims);
    Tensor squares = sum(mul(centered, centered), dims, true);
    out = mul(centered, rsqrt(add(div(squares, double(n)), eps)));
    NoGradGuard no_grad;
    if (running_mean.defined()) {
      copy_(running_mean, add(mul(view(batch_mean, {channels}), momentum), mul(running_mean, 1 - momentum)));
    }
    if (running_var.defined()) {
      Tensor unbiased = div(view(squares, {channels}), double(n - 1));
      copy_(running_var, add(mul(unbiased, momentum), mul(running_var, 1 - momentum)));
    }
  } else {
    out = mul(sub(xf, view(running_mean, channel_shape)), view(rsqrt(add(running_var, eps)), channel_shape));
  }
  if (weight.defined()) out = mul(out, view(weight, channel_shape));
  if (bias.defined()) out = add(out, view(bias, channel_shape));
  return {cast_back(out, x.dtype())};
}

}  // namespace

void register_nn_ops() {
  def(OpId::softmax).infer(softmax_infer).kernel(softmax_kernel<false>).vjp(softmax_vjp<false>).decomp(softmax_decomp<false>);
  def(OpId::log_softmax).infer(softmax_infer).kernel(softmax_kernel<true>).vjp(softmax_vjp<true>).decomp(softmax_decomp<true>);
  def(OpId::layer_norm).decomp(layer_norm_decomp);
  def(OpId::rms_norm).decomp(rms_norm_decomp);
  def(OpId::dropout).decomp(dropout_decomp);
  def(OpId::mse_loss).decomp(mse_loss_decomp);
  def(OpId::nll_loss).infer(nll_loss_infer).kernel(nll_loss_kernel).vjp(nll_loss_vjp);
  def(OpId::cross_entropy).decomp(cross_entropy_decomp);
  def(OpId::batch_norm).decomp(batch_norm_decomp);
}

}  // namespace kiln
