// Convolution and pooling: conv2d as im2col + GEMM (ops/blas.h; f32 forward through oneDNN where kiln has it,
// ops/conv_dnnl.h), max_pool2d and avg_pool2d as direct loops over
// the N*C planes, and the backward helper ops their VJPs call (kernels only, so gradients are first-order).
// f16/bf16 compute in f32 and round once; shapes, output sizes and errors follow ATen.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "core/size_math.h"
#include "eager/loops.h"
#include "ops/blas.h"
#include "ops/common.h"
#include "ops/conv_dnnl.h"
#include "ops/families.h"

namespace kiln {
namespace {

using Pair = std::array<int64_t, 2>;

// An int[] argument of a 2d op: two values, or one used for both dims (PyTorch's _pair).
Pair pair_arg(const IntList& v, std::string_view op, std::string_view name) {
  KILN_CHECK(v.size() == 1 || v.size() == 2, "{}: {} must be a single int or a list of 2 ints, got {}", op, name,
             shape_str(v));
  return {v[0], v.back()};
}
IntList as_list(const Pair& p) { return {p[0], p[1]}; }
std::string pair_str(const Pair& p) { return fmt::format("({} x {})", p[0], p[1]); }

Tensor cast_back(const Tensor& r, DType dt) { return r.dtype() == dt ? r : to(r, dt); }

// The outputs o in [0, n) whose input position o * stride + offset lies in [0, size), as [lo, hi).
std::pair<int64_t, int64_t> valid_outputs(int64_t n, int64_t stride, int64_t offset, int64_t size) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = size - offset <= 0 ? 0 : (size - offset + stride - 1) / stride;
  lo = std::min(lo, n);
  return {lo, std::clamp(hi, lo, n)};
}

// ---------------------------------------------------------------- conv2d geometry

struct ConvGeometry {
  bool batched = true;
  int64_t N = 1, C = 0, H = 0, W = 0;  // input
  int64_t OC = 0, Cg = 0, KH = 0, KW = 0, groups = 1;
  int64_t OH = 0, OW = 0;
  Pair stride{}, padding{}, dilation{};
  int64_t OCg() const { return OC / groups; }
  int64_t col_rows() const { return Cg * KH * KW; }  // rows of one group's im2col matrix
  int64_t out_plane() const { return OH * OW; }
  // 1x1 kernel, stride 1, no padding: the image itself is the im2col matrix.
  bool direct() const {
    return KH == 1 && KW == 1 && stride == Pair{1, 1} && padding == Pair{0, 0};
  }
  Shape input_shape() const { return batched ? Shape{N, C, H, W} : Shape{C, H, W}; }
  Shape output_shape() const { return batched ? Shape{N, OC, OH, OW} : Shape{OC, OH, OW}; }
};

// ATen's convolution shape checks for input size `in` and weight size `w`.
ConvGeometry conv_geometry(std::string_view op, const Shape& in, const Shape& w, const IntList& stride,
                           const IntList& padding, const IntList& dilation, int64_t groups) {
  KILN_CHECK(in.size() == 3 || in.size() == 4, "{}: expected 3D (unbatched) or 4D (batched) input, but got input of "
             "size: {}", op, shape_str(in));
  KILN_CHECK(w.size() == 4, "{}: expected 4-dimensional weight [out_channels, in_channels / groups, kH, kW] for "
             "input of size {}, but got {}-dimensional weight of size {}", op, shape_str(in), w.size(), shape_str(w));
  ConvGeometry g;
  g.stride = pair_arg(stride, op, "stride");
  g.padding = pair_arg(padding, op, "padding");
  g.dilation = pair_arg(dilation, op, "dilation");
  KILN_CHECK(g.stride[0] > 0 && g.stride[1] > 0, "{}: non-positive stride is not supported, got stride={}", op,
             shape_str(stride));
  KILN_CHECK(g.padding[0] >= 0 && g.padding[1] >= 0, "{}: negative padding is not supported, got padding={}", op,
             shape_str(padding));
  KILN_CHECK(g.dilation[0] > 0 && g.dilation[1] > 0, "{}: dilation should be greater than zero, got dilation={}", op,
             shape_str(dilation));
  KILN_CHECK(groups > 0, "{}: non-positive groups is not supported, got groups={}", op, groups);
  g.batched = in.size() == 4;
  g.N = g.batched ? in[0] : 1;
  g.C = in[in.size() - 3];
  g.H = in[in.size() - 2];
  g.W = in[in.size() - 1];
  g.OC = w[0];
  g.Cg = w[1];
  g.KH = w[2];
  g.KW = w[3];
  g.groups = groups;
  KILN_CHECK(g.OC >= groups && g.OC % groups == 0, "{}: given groups={}, expected weight to be divisible by {} at "
             "dimension 0, but got weight of size {} instead", op, groups, groups, shape_str(w));
  KILN_CHECK(g.C == g.Cg * groups, "{}: given groups={}, weight of size {}, expected input{} to have {} channels, but "
             "got {} channels instead", op, groups, shape_str(w), shape_str(in), g.Cg * groups, g.C);
  // Padded input and dilated kernel extents; arguments too large for int64 arithmetic are errors.
  auto padded_size = [&](int64_t in, int64_t pad) {
    return checked_add(in, checked_mul(2, pad, op, "the padded input size"), op, "the padded input size");
  };
  auto kernel_extent = [&](int64_t dilation, int64_t k) {
    return checked_add(checked_mul(dilation, k - 1, op, "the dilated kernel size"), 1, op, "the dilated kernel size");
  };
  const Pair padded{padded_size(g.H, g.padding[0]), padded_size(g.W, g.padding[1])};
  const Pair kernel{kernel_extent(g.dilation[0], g.KH), kernel_extent(g.dilation[1], g.KW)};
  KILN_CHECK(padded[0] >= kernel[0] && padded[1] >= kernel[1], "{}: calculated padded input size per channel: {}. "
             "Kernel size: {}. Kernel size can't be greater than actual input size (the output size would be <= 0)",
             op, pair_str(padded), pair_str(kernel));
  g.OH = (padded[0] - kernel[0]) / g.stride[0] + 1;
  g.OW = (padded[1] - kernel[1]) / g.stride[1] + 1;
  return g;
}

// conv2d's geometry plus its dtype and bias checks.
ConvGeometry conv2d_checked(const OpCall& c) {
  const Tensor &x = c.tensor(0), &w = c.tensor(1);
  const Tensor bias = c.opt_tensor(2);
  ConvGeometry g = conv_geometry("conv2d", x.sizes(), w.sizes(), c.ints(3), c.ints(4), c.ints(5), c.int_(6));
  KILN_CHECK(is_floating(x.dtype()), "conv2d: expected a floating-point input, got {}", x.str());
  KILN_CHECK(w.dtype() == x.dtype(), "conv2d: input type ({}) and weight type ({}) should be the same",
             dtype_name(x.dtype()), dtype_name(w.dtype()));
  if (bias.defined()) {
    KILN_CHECK(bias.dim() == 1 && bias.size(0) == g.OC, "conv2d: given weight of size {}, expected bias to be "
               "1-dimensional with {} elements, but got bias of size {} instead", shape_str(w.sizes()), g.OC,
               shape_str(bias.sizes()));
    KILN_CHECK(bias.dtype() == x.dtype(), "conv2d: input type ({}) and bias type ({}) should be the same",
               dtype_name(x.dtype()), dtype_name(bias.dtype()));
  }
  return g;
}

// ---------------------------------------------------------------- im2col / col2im

// The receptive fields of one group of one image, x [channels, H, W] -> col [channels*KH*KW, OH*OW], with zeros
// where a field reaches into the padding.
template <class T>
void im2col(const ConvGeometry& g, const T* x, int64_t channels, T* col) {
  const int64_t rows = channels * g.KH * g.KW, P = g.out_plane();
  parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(P, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t ch = r / (g.KH * g.KW), kh = (r / g.KW) % g.KH, kw = r % g.KW;
      const T* plane = x + ch * g.H * g.W;
      const int64_t w_off = kw * g.dilation[1] - g.padding[1];
      const auto [lo, hi] = valid_outputs(g.OW, g.stride[1], w_off, g.W);
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t ih = oh * g.stride[0] + kh * g.dilation[0] - g.padding[0];
        T* dst = col + r * P + oh * g.OW;
        if (ih < 0 || ih >= g.H) {
          std::fill(dst, dst + g.OW, T(0));
          continue;
        }
        const T* src = plane + ih * g.W;
        std::fill(dst, dst + lo, T(0));
        for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * g.stride[1] + w_off];
        std::fill(dst + hi, dst + g.OW, T(0));
      }
    }
  });
}

// The adjoint of im2col: adds each column entry back onto its input position, x [channels, H, W] += col.
template <class T>
void col2im(const ConvGeometry& g, const T* col, int64_t channels, T* x) {
  const int64_t P = g.out_plane();
  parallel_for(channels, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(P * g.KH * g.KW, 1)),
               [&](int64_t b, int64_t e) {
    for (int64_t ch = b; ch < e; ++ch) {
      T* plane = x + ch * g.H * g.W;
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const T* src_row = col + ((ch * g.KH + kh) * g.KW + kw) * P;
          const int64_t w_off = kw * g.dilation[1] - g.padding[1];
          const auto [lo, hi] = valid_outputs(g.OW, g.stride[1], w_off, g.W);
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = oh * g.stride[0] + kh * g.dilation[0] - g.padding[0];
            if (ih < 0 || ih >= g.H) continue;
            T* dst = plane + ih * g.W;
            const T* src = src_row + oh * g.OW;
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.stride[1] + w_off] += src[ow];
          }
        }
      }
    }
  });
}

// ---------------------------------------------------------------- conv2d and its backward helpers

// out[n, group] = W[group] @ im2col(x[n, group]) (+ bias), for contiguous compute-type buffers.
template <class T>
void conv2d_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* out) {
  const int64_t K = g.col_rows(), P = g.out_plane(), OCg = g.OCg();
  std::vector<T> col(g.direct() ? 0 : size_t(K * P));
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* image = x + (n * g.C + grp * g.Cg) * g.H * g.W;
      if (!g.direct()) im2col(g, image, g.Cg, col.data());
      T* o = out + (n * g.OC + grp * OCg) * P;
      gemm(false, false, OCg, P, K, T(1), w + grp * OCg * K, K, g.direct() ? image : col.data(), P, T(0), o, P);
      if (!bias) continue;
      for (int64_t oc = 0; oc < OCg; ++oc) {
        const T b = bias[grp * OCg + oc];
        T* row = o + oc * P;
        for (int64_t p = 0; p < P; ++p) row[p] += b;
      }
    }
  }
}

// dx[n, group] = col2im(W[group]^T @ dy[n, group]).
template <class T>
void conv2d_input_grad(const ConvGeometry& g, const T* dy, const T* w, T* dx) {
  const int64_t K = g.col_rows(), P = g.out_plane(), OCg = g.OCg();
  std::vector<T> col(g.direct() ? 0 : size_t(K * P));
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* go = dy + (n * g.OC + grp * OCg) * P;
      T* image = dx + (n * g.C + grp * g.Cg) * g.H * g.W;
      gemm(true, false, K, P, OCg, T(1), w + grp * OCg * K, K, go, P, T(0), g.direct() ? image : col.data(), P);
      if (!g.direct()) col2im(g, col.data(), g.Cg, image);
    }
  }
}

// dW[group] = sum over n of dy[n, group] @ im2col(x[n, group])^T.
template <class T>
void conv2d_weight_grad(const ConvGeometry& g, const T* dy, const T* x, T* dw) {
  const int64_t K = g.col_rows(), P = g.out_plane(), OCg = g.OCg();
  std::vector<T> col(g.direct() ? 0 : size_t(K * P));
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* image = x + (n * g.C + grp * g.Cg) * g.H * g.W;
      if (!g.direct()) im2col(g, image, g.Cg, col.data());
      const T* go = dy + (n * g.OC + grp * OCg) * P;
      gemm(false, true, OCg, K, P, T(1), go, P, g.direct() ? image : col.data(), P, T(1), dw + grp * OCg * K, K);
    }
  }
}

std::vector<TensorMeta> conv2d_infer(const OpCall& c) {
  return {contiguous_meta(conv2d_checked(c).output_shape(), c.tensor(0).dtype())};
}

DnnlConv2d dnnl_geometry(const ConvGeometry& g) {
  return {g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.OH, g.OW, g.groups, {g.stride[0], g.stride[1]},
          {g.padding[0], g.padding[1]}, {g.dilation[0], g.dilation[1]}};
}

std::vector<Tensor> conv2d_kernel(const OpCall& c) {
  const ConvGeometry g = conv2d_checked(c);
  const Tensor &x = c.tensor(0), &w = c.tensor(1);
  const Tensor bias = c.opt_tensor(2);
  const DType cdt = compute_dtype(x.dtype());
  Tensor xc = as_contiguous_dtype(x, cdt), wc = as_contiguous_dtype(w, cdt);
  Tensor bc = bias.defined() ? as_contiguous_dtype(bias, cdt) : Tensor();
  Tensor out = Tensor::empty(g.output_shape(), cdt);
  if (cdt == DType::F32 && dnnl_conv2d_forward(dnnl_geometry(g), xc.data<float>(), wc.data<float>(),
                                               bc.defined() ? bc.data<float>() : nullptr, out.data<float>()))
    return {cast_back(out, x.dtype())};
  KILN_DISPATCH_FLOAT(cdt, [&](auto z) {
    using T = decltype(z);
    conv2d_forward<T>(g, xc.data<T>(), wc.data<T>(), bc.defined() ? bc.data<T>() : nullptr, out.data<T>());
  });
  return {cast_back(out, x.dtype())};
}

std::vector<Tensor> conv2d_vjp(const VjpCall& v) {
  const OpCall& c = v.call;
  const Tensor &x = c.tensor(0), &w = c.tensor(1), &g = v.grads[0];
  const ConvGeometry geo = conv2d_checked(c);
  const IntList stride = as_list(geo.stride), padding = as_list(geo.padding), dilation = as_list(geo.dilation);
  return {if_needed(v.needs(0), [&] { return conv2d_backward_input(g, w, x.sizes(), stride, padding, dilation, geo.groups); }),
          if_needed(v.needs(1), [&] { return conv2d_backward_weight(g, x, w.sizes(), stride, padding, dilation, geo.groups); }),
          if_needed(v.needs(2), [&] { return sum(g, geo.batched ? IntList{0, 2, 3} : IntList{1, 2}); })};
}

void check_grad_output(std::string_view op, const Tensor& grad_output, const Shape& expected) {
  KILN_CHECK(grad_output.sizes() == expected, "{}: grad_output {} does not match the forward output shape {}", op,
             grad_output.str(), shape_str(expected));
  KILN_CHECK(is_floating(grad_output.dtype()), "{}: expected a floating-point grad_output, got {}", op,
             grad_output.str());
}

// conv2d_backward_input(grad_output, weight, input_size, stride, padding, dilation, groups)
ConvGeometry backward_input_geometry(const OpCall& c) {
  const Tensor &dy = c.tensor(0), &w = c.tensor(1);
  ConvGeometry g = conv_geometry("conv2d_backward_input", c.ints(2), w.sizes(), c.ints(3), c.ints(4), c.ints(5),
                                 c.int_(6));
  check_grad_output("conv2d_backward_input", dy, g.output_shape());
  return g;
}
std::vector<TensorMeta> conv2d_backward_input_infer(const OpCall& c) {
  return {contiguous_meta(backward_input_geometry(c).input_shape(), c.tensor(0).dtype())};
}
std::vector<Tensor> conv2d_backward_input_kernel(const OpCall& c) {
  const ConvGeometry g = backward_input_geometry(c);
  const Tensor &dy = c.tensor(0), &w = c.tensor(1);
  const DType cdt = compute_dtype(dy.dtype());
  Tensor dyc = as_contiguous_dtype(dy, cdt), wc = as_contiguous_dtype(w, cdt);
  Tensor dx = zeros(g.input_shape(), cdt);
  KILN_DISPATCH_FLOAT(cdt, [&](auto z) {
    using T = decltype(z);
    conv2d_input_grad<T>(g, dyc.data<T>(), wc.data<T>(), dx.data<T>());
  });
  return {cast_back(dx, dy.dtype())};
}

// conv2d_backward_weight(grad_output, input, weight_size, stride, padding, dilation, groups)
ConvGeometry backward_weight_geometry(const OpCall& c) {
  const Tensor &dy = c.tensor(0), &x = c.tensor(1);
  ConvGeometry g = conv_geometry("conv2d_backward_weight", x.sizes(), c.ints(2), c.ints(3), c.ints(4), c.ints(5),
                                 c.int_(6));
  check_grad_output("conv2d_backward_weight", dy, g.output_shape());
  return g;
}
std::vector<TensorMeta> conv2d_backward_weight_infer(const OpCall& c) {
  backward_weight_geometry(c);
  return {contiguous_meta(c.ints(2), c.tensor(0).dtype())};
}
std::vector<Tensor> conv2d_backward_weight_kernel(const OpCall& c) {
  const ConvGeometry g = backward_weight_geometry(c);
  const Tensor &dy = c.tensor(0), &x = c.tensor(1);
  const DType cdt = compute_dtype(dy.dtype());
  Tensor dyc = as_contiguous_dtype(dy, cdt), xc = as_contiguous_dtype(x, cdt);
  Tensor dw = zeros(c.ints(2), cdt);
  KILN_DISPATCH_FLOAT(cdt, [&](auto z) {
    using T = decltype(z);
    conv2d_weight_grad<T>(g, dyc.data<T>(), xc.data<T>(), dw.data<T>());
  });
  return {cast_back(dw, dy.dtype())};
}

// ---------------------------------------------------------------- pooling geometry

struct PoolGeometry {
  bool batched = true;
  int64_t N = 1, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  Pair kernel{}, stride{}, padding{}, dilation{1, 1};
  int64_t planes() const { return N * C; }
  Shape output_shape() const { return batched ? Shape{N, C, OH, OW} : Shape{C, OH, OW}; }
};

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// ATen's pooling_output_shape: floor (or ceil) of the window count, where in ceil mode the last window must
// start inside the input or its left padding.
// Called after pool_geometry's checks: k, stride, dilation > 0 and 0 <= pad <= the dilated kernel size / 2.
int64_t pool_output_size(std::string_view op, int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                         bool ceil_mode) {
  constexpr std::string_view what = "the output size";
  int64_t span = checked_sub(checked_add(in, checked_mul(2, pad, op, what), op, what),
                             checked_add(checked_mul(dilation, k - 1, op, what), 1, op, what), op, what);
  int64_t out = floor_div(checked_add(span, ceil_mode ? stride - 1 : 0, op, what), stride) + 1;
  if (ceil_mode && checked_mul(out - 1, stride, op, what) >= checked_add(in, pad, op, what)) --out;
  return out;
}

// ATen's max_pool2d/avg_pool2d argument and shape checks (avg_pool2d passes dilation [1]).
PoolGeometry pool_geometry(std::string_view op, const Shape& in, const IntList& kernel, const IntList& stride,
                           const IntList& padding, const IntList& dilation, bool ceil_mode) {
  KILN_CHECK(kernel.size() == 1 || kernel.size() == 2, "{}: kernel_size must either be a single int, or a tuple of "
             "two ints, got {}", op, shape_str(kernel));
  KILN_CHECK(stride.size() <= 2, "{}: stride must either be omitted, a single int, or a tuple of two ints, got {}", op,
             shape_str(stride));
  KILN_CHECK(padding.size() == 1 || padding.size() == 2, "{}: padding must either be a single int, or a tuple of two "
             "ints, got {}", op, shape_str(padding));
  KILN_CHECK(dilation.size() == 1 || dilation.size() == 2, "{}: dilation must be either a single int, or a tuple of "
             "two ints, got {}", op, shape_str(dilation));
  PoolGeometry g;
  g.kernel = pair_arg(kernel, op, "kernel_size");
  g.stride = stride.empty() ? g.kernel : pair_arg(stride, op, "stride");
  g.padding = pair_arg(padding, op, "padding");
  g.dilation = pair_arg(dilation, op, "dilation");
  KILN_CHECK(in.size() == 3 || in.size() == 4, "{}: expected a 3D [C, H, W] or 4D (batch mode) [N, C, H, W] input, "
             "but got {}", op, shape_str(in));
  KILN_CHECK(g.kernel[0] > 0 && g.kernel[1] > 0, "{}: kernel size should be greater than zero, but got kH: {} kW: {}",
             op, g.kernel[0], g.kernel[1]);
  KILN_CHECK(g.stride[0] > 0 && g.stride[1] > 0, "{}: stride should be greater than zero, but got dH: {} dW: {}", op,
             g.stride[0], g.stride[1]);
  KILN_CHECK(g.dilation[0] > 0 && g.dilation[1] > 0, "{}: dilation should be greater than zero, but got dilationH: "
             "{} dilationW: {}", op, g.dilation[0], g.dilation[1]);
  for (int i = 0; i < 2; ++i) {
    const int64_t effective = checked_add(checked_mul(g.kernel[i] - 1, g.dilation[i], op, "the dilated kernel size"),
                                          1, op, "the dilated kernel size");
    KILN_CHECK(g.padding[i] >= 0, "{}: pad must be non-negative, but got pad: {}", op, g.padding[i]);
    KILN_CHECK(g.padding[i] <= effective / 2, "{}: pad should be at most half of effective kernel size, but got "
               "pad={}, kernel_size={} and dilation={}", op, g.padding[i], g.kernel[i], g.dilation[i]);
  }
  g.batched = in.size() == 4;
  g.N = g.batched ? in[0] : 1;
  g.C = in[in.size() - 3];
  g.H = in[in.size() - 2];
  g.W = in[in.size() - 1];
  KILN_CHECK(g.C != 0 && g.H != 0 && g.W != 0, "{}: expected 3D or 4D (batch mode) tensor with optional 0 dim batch "
             "size for input, but got: {}", op, shape_str(in));
  g.OH = pool_output_size(op, g.H, g.kernel[0], g.padding[0], g.stride[0], g.dilation[0], ceil_mode);
  g.OW = pool_output_size(op, g.W, g.kernel[1], g.padding[1], g.stride[1], g.dilation[1], ceil_mode);
  KILN_CHECK(g.OH >= 1 && g.OW >= 1, "{}: given input size: ({}x{}x{}). Calculated output size: ({}x{}x{}). Output "
             "size is too small", op, g.C, g.H, g.W, g.C, g.OH, g.OW);
  return g;
}

// Runs f(plane) for every N*C plane, in parallel.
template <class F>
void for_each_plane(const PoolGeometry& g, F f) {
  parallel_for(g.planes(), std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.H * g.W, 1)),
               [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) f(p);
  });
}

// ---------------------------------------------------------------- max_pool2d

PoolGeometry max_pool_geometry(std::string_view op, const OpCall& c, int first_arg, const Tensor& x) {
  KILN_CHECK(x.dtype() != DType::Bool, "{}: bool input is not supported, got {}", op, x.str());
  return pool_geometry(op, x.sizes(), c.ints(first_arg), c.ints(first_arg + 1), c.ints(first_arg + 2),
                       c.ints(first_arg + 3), c.bool_(first_arg + 4));
}

// Index (h * W + w) of the maximum of window (oh, ow) of a plane, or -1 for an empty window. The first
// maximum wins ties; a NaN wins over numbers (the last NaN, as ATen's scan).
template <class T>
int64_t window_argmax(const PoolGeometry& g, const T* plane, int64_t oh, int64_t ow, T& best) {
  int64_t h0 = oh * g.stride[0] - g.padding[0], w0 = ow * g.stride[1] - g.padding[1];
  const int64_t h1 = std::min(h0 + (g.kernel[0] - 1) * g.dilation[0] + 1, g.H);
  const int64_t w1 = std::min(w0 + (g.kernel[1] - 1) * g.dilation[1] + 1, g.W);
  while (h0 < 0) h0 += g.dilation[0];
  while (w0 < 0) w0 += g.dilation[1];
  best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  if (h0 >= h1 || w0 >= w1) return -1;
  int64_t arg = h0 * g.W + w0;
  for (int64_t ih = h0; ih < h1; ih += g.dilation[0]) {
    for (int64_t iw = w0; iw < w1; iw += g.dilation[1]) {
      const T v = plane[ih * g.W + iw];
      bool is_nan = false;
      if constexpr (std::is_floating_point_v<T>) is_nan = std::isnan(v);
      if (v > best || is_nan) {
        best = v;
        arg = ih * g.W + iw;
      }
    }
  }
  return arg;
}

// max/min are exact, so f16/bf16 pool in f32 and convert back without loss.
DType pool_compute_dtype(DType dt) { return is_low_precision(dt) ? DType::F32 : dt; }

std::vector<TensorMeta> max_pool2d_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  return {contiguous_meta(max_pool_geometry("max_pool2d", c, 1, x).output_shape(), x.dtype())};
}

std::vector<Tensor> max_pool2d_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const PoolGeometry g = max_pool_geometry("max_pool2d", c, 1, x);
  const DType cdt = pool_compute_dtype(x.dtype());
  Tensor xc = as_contiguous_dtype(x, cdt);
  Tensor out = Tensor::empty(g.output_shape(), cdt);
  KILN_DISPATCH_ALL(cdt, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T* px = xc.data<T>();
      T* po = out.data<T>();
      for_each_plane(g, [&](int64_t p) {
        const T* plane = px + p * g.H * g.W;
        T* o = po + p * g.OH * g.OW;
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow) window_argmax(g, plane, oh, ow, o[oh * g.OW + ow]);
      });
    }
  });
  return {cast_back(out, x.dtype())};
}

std::vector<Tensor> max_pool2d_vjp(const VjpCall& v) {
  const OpCall& c = v.call;
  return {if_needed(v.needs(0), [&] {
    return max_pool2d_backward(v.grads[0], c.tensor(0), c.ints(1), c.ints(2), c.ints(3), c.ints(4), c.bool_(5));
  })};
}

// max_pool2d_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode): each output's
// gradient goes to its window's argmax (accumulating where windows overlap).
PoolGeometry max_pool_backward_geometry(const OpCall& c) {
  const PoolGeometry g = max_pool_geometry("max_pool2d_backward", c, 2, c.tensor(1));
  check_grad_output("max_pool2d_backward", c.tensor(0), g.output_shape());
  KILN_CHECK(is_floating(c.tensor(1).dtype()), "max_pool2d_backward: expected a floating-point input, got {}",
             c.tensor(1).str());
  return g;
}
std::vector<TensorMeta> max_pool2d_backward_infer(const OpCall& c) {
  max_pool_backward_geometry(c);
  return {contiguous_meta(c.tensor(1).sizes(), c.tensor(1).dtype())};
}
std::vector<Tensor> max_pool2d_backward_kernel(const OpCall& c) {
  const PoolGeometry g = max_pool_backward_geometry(c);
  const Tensor &dy = c.tensor(0), &x = c.tensor(1);
  const DType cdt = compute_dtype(x.dtype());
  Tensor xc = as_contiguous_dtype(x, cdt), dyc = as_contiguous_dtype(dy, cdt);
  Tensor dx = zeros(x.sizes(), cdt);
  KILN_DISPATCH_FLOAT(cdt, [&](auto z) {
    using T = decltype(z);
    const T *px = xc.data<T>(), *pg = dyc.data<T>();
    T* pd = dx.data<T>();
    for_each_plane(g, [&](int64_t p) {
      const T* plane = px + p * g.H * g.W;
      const T* go = pg + p * g.OH * g.OW;
      T* gi = pd + p * g.H * g.W;
      T best;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t arg = window_argmax(g, plane, oh, ow, best);
          if (arg >= 0) gi[arg] += go[oh * g.OW + ow];
        }
      }
    });
  });
  return {cast_back(dx, x.dtype())};
}

// ---------------------------------------------------------------- avg_pool2d

struct AvgOptions {
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override;
};

// avg_pool2d args from `first_arg` on: kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override (the same order in the op and its backward helper).
PoolGeometry avg_pool_geometry(std::string_view op, const OpCall& c, int first_arg, const Tensor& x, AvgOptions& opts) {
  KILN_CHECK(is_floating(x.dtype()) || x.dtype() == DType::I64, "{}: not implemented for {} (supported: floating "
             "dtypes and i64)", op, x.str());
  opts.count_include_pad = c.bool_(first_arg + 4);
  opts.divisor_override = c.opt_int(first_arg + 5);
  KILN_CHECK(!opts.divisor_override || *opts.divisor_override != 0, "{}: divisor must be not zero", op);
  return pool_geometry(op, x.sizes(), c.ints(first_arg), c.ints(first_arg + 1), c.ints(first_arg + 2), {1},
                       c.bool_(first_arg + 3));
}

// The clipped window of output (oh, ow) and the divisor ATen uses for it (0 for a window wholly in padding).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
AvgWindow avg_window(const PoolGeometry& g, const AvgOptions& opts, int64_t oh, int64_t ow) {
  AvgWindow win;
  win.h0 = oh * g.stride[0] - g.padding[0];
  win.w0 = ow * g.stride[1] - g.padding[1];
  win.h1 = std::min(win.h0 + g.kernel[0], g.H + g.padding[0]);
  win.w1 = std::min(win.w0 + g.kernel[1], g.W + g.padding[1]);
  const int64_t pool_size = (win.h1 - win.h0) * (win.w1 - win.w0);
  win.h0 = std::max<int64_t>(win.h0, 0);
  win.w0 = std::max<int64_t>(win.w0, 0);
  win.h1 = std::min(win.h1, g.H);
  win.w1 = std::min(win.w1, g.W);
  if (win.h0 >= win.h1 || win.w0 >= win.w1) win.divisor = 0;
  else if (opts.divisor_override) win.divisor = *opts.divisor_override;
  else win.divisor = opts.count_include_pad ? pool_size : (win.h1 - win.h0) * (win.w1 - win.w0);
  return win;
}

std::vector<TensorMeta> avg_pool2d_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  AvgOptions opts;
  return {contiguous_meta(avg_pool_geometry("avg_pool2d", c, 1, x, opts).output_shape(), x.dtype())};
}

std::vector<Tensor> avg_pool2d_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  AvgOptions opts;
  const PoolGeometry g = avg_pool_geometry("avg_pool2d", c, 1, x, opts);
  const DType cdt = pool_compute_dtype(x.dtype());
  Tensor xc = as_contiguous_dtype(x, cdt);
  Tensor out = Tensor::empty(g.output_shape(), cdt);
  KILN_DISPATCH_ALL(cdt, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t>) {
      const T* px = xc.data<T>();
      T* po = out.data<T>();
      for_each_plane(g, [&](int64_t p) {
        const T* plane = px + p * g.H * g.W;
        T* o = po + p * g.OH * g.OW;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            const AvgWindow win = avg_window(g, opts, oh, ow);
            T total = 0;
            if (win.divisor != 0) {
              for (int64_t ih = win.h0; ih < win.h1; ++ih)
                for (int64_t iw = win.w0; iw < win.w1; ++iw) total += plane[ih * g.W + iw];
              total = total / T(win.divisor);
            }
            o[oh * g.OW + ow] = total;
          }
        }
      });
    }
  });
  return {cast_back(out, x.dtype())};
}

std::vector<Tensor> avg_pool2d_vjp(const VjpCall& v) {
  const OpCall& c = v.call;
  return {if_needed(v.needs(0), [&] {
    return avg_pool2d_backward(v.grads[0], c.tensor(0), c.ints(1), c.ints(2), c.ints(3), c.bool_(4), c.bool_(5),
                               c.opt_int(6));
  })};
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override): each output's gradient, divided by its divisor, is added over its clipped window.
PoolGeometry avg_pool_backward_geometry(const OpCall& c, AvgOptions& opts) {
  const PoolGeometry g = avg_pool_geometry("avg_pool2d_backward", c, 2, c.tensor(1), opts);
  check_grad_output("avg_pool2d_backward", c.tensor(0), g.output_shape());
  return g;
}
std::vector<TensorMeta> avg_pool2d_backward_infer(const OpCall& c) {
  AvgOptions opts;
  avg_pool_backward_geometry(c, opts);
  return {contiguous_meta(c.tensor(1).sizes(), c.tensor(0).dtype())};
}
std::vector<Tensor> avg_pool2d_backward_kernel(const OpCall& c) {
  AvgOptions opts;
  const PoolGeometry g = avg_pool_backward_geometry(c, opts);
  const Tensor& dy = c.tensor(0);
  const DType cdt = compute_dtype(dy.dtype());
  Tensor dyc = as_contiguous_dtype(dy, cdt);
  Tensor dx = zeros(c.tensor(1).sizes(), cdt);
  KILN_DISPATCH_FLOAT(cdt, [&](auto z) {
    using T = decltype(z);
    const T* pg = dyc.data<T>();
    T* pd = dx.data<T>();
    for_each_plane(g, [&](int64_t p) {
      const T* go = pg + p * g.OH * g.OW;
      T* gi = pd + p * g.H * g.W;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const AvgWindow win = avg_window(g, opts, oh, ow);
          if (win.divisor == 0) continue;
          const T delta = go[oh * g.OW + ow] / T(win.divisor);
          for (int64_t ih = win.h0; ih < win.h1; ++ih)
            for (int64_t iw = win.w0; iw < win.w1; ++iw) gi[ih * g.W + iw] += delta;
        }
      }
    });
  });
  return {cast_back(dx, dy.dtype())};
}

}  // namespace

void register_conv_ops() {
  def(OpId::conv2d).infer(conv2d_infer).kernel(conv2d_kernel).vjp(conv2d_vjp);
  def(OpId::max_pool2d).infer(max_pool2d_infer).kernel(max_pool2d_kernel).vjp(max_pool2d_vjp);
  def(OpId::avg_pool2d).infer(avg_pool2d_infer).kernel(avg_pool2d_kernel).vjp(avg_pool2d_vjp);
  def(OpId::conv2d_backward_input).infer(conv2d_backward_input_infer).kernel(conv2d_backward_input_kernel);
  def(OpId::conv2d_backward_weight).infer(conv2d_backward_weight_infer).kernel(conv2d_backward_weight_kernel);
  def(OpId::max_pool2d_backward).infer(max_pool2d_backward_infer).kernel(max_pool2d_backward_kernel);
  def(OpId::avg_pool2d_backward).infer(avg_pool2d_backward_infer).kernel(avg_pool2d_backward_kernel);
}

}  // namespace kiln
