// Resampling of NCHW images: upsample_nearest2d and upsample_bilinear2d, each a decomposition (index_select
// along H and W, and for bilinear the two neighbours' weighted sum), so gradients and the inductor come from
// the ops they use. The source indices and weights are computed here, on the host, with ATen's CPU formulas
// (UpSample.h: compute_scales_value, nearest_idx, area_pixel_compute_source_index, guard_index_and_lambda) in
// ATen's types (f32, f64 for f64 inputs), so the sampled positions are PyTorch's exactly.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

struct Resample {
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
};

// ATen's upsample_2d_common_check: a 4-D input with non-empty planes, a 2-element positive output size.
Resample check_resample(const Tensor& x, const IntList& output_size, std::string_view op) {
  KILN_CHECK(output_size.size() == 2, "{}: it is expected output_size equals to 2, but got size {}", op,
             output_size.size());
  KILN_CHECK(x.dim() == 4, "{}: expected a 4-D input [N, C, H, W], got {}", op, x.str());
  KILN_CHECK(x.numel() != 0 || (x.sizes()[1] > 0 && x.sizes()[2] > 0 && x.sizes()[3] > 0),
             "{}: non-empty 4D data tensor expected but got a tensor with sizes {}", op, shape_str(x.sizes()));
  Resample r{x.sizes()[2], x.sizes()[3], output_size[0], output_size[1]};
  KILN_CHECK(r.in_h > 0 && r.in_w > 0 && r.out_h > 0 && r.out_w > 0, "{}: input and output sizes should be greater "
             "than 0, but got input (H: {}, W: {}) output (H: {}, W: {})", op, r.in_h, r.in_w, r.out_h, r.out_w);
  return r;
}

// compute_scales_value: 1 / scale where a positive scale is given, else in / out.
template <class M>
M scales_value(std::optional<double> scale, int64_t in, int64_t out) {
  return scale && *scale > 0 ? M(1.0 / *scale) : M(in) / M(out);
}

// ---------------------------------------------------------------- nearest

// nearest_idx: the input row each output row reads.
Tensor nearest_indices(int64_t in, int64_t out, std::optional<double> scale) {
  std::vector<int64_t> idx(static_cast<size_t>(out));
  const float s = scales_value<float>(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    if (out == in) idx[size_t(o)] = o;
    else if (out == 2 * in) idx[size_t(o)] = o >> 1;
    else idx[size_t(o)] = std::min(int64_t(std::floor(float(o) * s)), in - 1);
  }
  return Tensor::from_vector(idx, {out});
}

void check_nearest_dtype(const Tensor& x) {
  KILN_CHECK(is_floating(x.dtype()) || x.dtype() == DType::U8, "upsample_nearest2d: expected a floating or u8 input "
             "(as ATen's CPU kernel), got {}", dtype_name(x.dtype()));
}

std::vector<Tensor> upsample_nearest2d_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const Resample r = check_resample(x, c.ints(1), "upsample_nearest2d");
  check_nearest_dtype(x);
  Tensor rows = index_select(x, 2, nearest_indices(r.in_h, r.out_h, c.opt_float(2)));
  return {index_select(rows, 3, nearest_indices(r.in_w, r.out_w, c.opt_float(3)))};
}

// ---------------------------------------------------------------- bilinear

// One dim of a linear interpolation: the two neighbours each output position reads and their weights.
struct LinearTaps {
  Tensor lo, hi;          // i64 [out]
  Tensor w_lo, w_hi;      // [out] in the math dtype
};

template <class M>
LinearTaps linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale, DType math) {
  const M s = align_corners ? (out > 1 ? M(in - 1) / M(out - 1) : M(0)) : scales_value<M>(scale, in, out);
  std::vector<int64_t> lo(static_cast<size_t>(out)), hi(static_cast<size_t>(out));
  std::vector<M> w_lo(static_cast<size_t>(out)), w_hi(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    M src = align_corners ? s * M(o) : s * (M(o) + M(0.5)) - M(0.5);
    if (!align_corners && src < 0) src = 0;
    const int64_t i0 = std::min(int64_t(std::floor(src)), in - 1);
    const M lambda = std::clamp(src - M(i0), M(0), M(1));
    lo[size_t(o)] = i0;
    hi[size_t(o)] = i0 + (i0 < in - 1 ? 1 : 0);
    w_lo[size_t(o)] = M(1) - lambda;
    w_hi[size_t(o)] = lambda;
  }
  LinearTaps t{Tensor::from_vector(lo, {out}), Tensor::from_vector(hi, {out}), Tensor::from_vector(w_lo, {out}),
               Tensor::from_vector(w_hi, {out})};
  if (t.w_lo.dtype() != math) t = {t.lo, t.hi, to(t.w_lo, math), to(t.w_hi, math)};
  return t;
}

// x's two neighbours along `dim` weighted (the weights viewed to broadcast along that dim of a 4-D tensor).
Tensor interpolate_along(const Tensor& x, int64_t dim, const LinearTaps& t) {
  Shape wshape(4, 1);
  wshape[size_t(dim)] = t.w_lo.numel();
  return index_select(x, dim, t.lo) * reshape(t.w_lo, wshape) + index_select(x, dim, t.hi) * reshape(t.w_hi, wshape);
}

std::vector<Tensor> upsample_bilinear2d_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const Resample r = check_resample(x, c.ints(1), "upsample_bilinear2d");
  KILN_CHECK(is_floating(x.dtype()), "upsample_bilinear2d: expected a floating input, got {} (ATen's u8 path rounds "
             "in fixed point, which kiln does not reproduce)", dtype_name(x.dtype()));
  const bool align = c.bool_(2);
  const DType math = x.dtype() == DType::F64 ? DType::F64 : DType::F32;  // ATen's opmath type
  auto taps = [&](int64_t in, int64_t out, std::optional<double> scale) {
    return math == DType::F64 ? linear_taps<double>(in, out, align, scale, math)
                              : linear_taps<float>(in, out, align, scale, math);
  };
  Tensor xm = x.dtype() == math ? x : to(x, math);
  Tensor rows = interpolate_along(xm, 2, taps(r.in_h, r.out_h, c.opt_float(3)));
  Tensor out = interpolate_along(rows, 3, taps(r.in_w, r.out_w, c.opt_float(4)));
  return {out.dtype() == x.dtype() ? out : to(out, x.dtype())};
}

}  // namespace

void register_resample_ops() {
  def(OpId::upsample_nearest2d).decomp(upsample_nearest2d_decomp);
  def(OpId::upsample_bilinear2d).decomp(upsample_bilinear2d_decomp);
}

}  // namespace kiln
