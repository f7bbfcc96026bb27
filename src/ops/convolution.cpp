// ATen's general `convolution` (1-D, 2-D and 3-D, grouped, transposed) as a decomposition into conv2d, so
// eager, gradients and the inductor come from conv2d's kernel and VJP: 1-D runs as 2-D over [N, C, 1, L];
// 3-D sums one 2-D convolution per kernel depth over the depth slices it reads; a transposed 2-D or 3-D
// convolution is the direct convolution of the input spread by the stride (zeros between neighbours), padded by
// dilation * (k - 1) - padding (plus output_padding after), with the weight's in/out channels swapped per group
// and its kernel flipped.
#include <vector>

#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

struct ConvArgs {
  Tensor bias;
  IntList stride, padding, dilation, output_padding;
  int64_t groups = 1;
};

// ATen's expand_param_if_needed: one value for every spatial dim, or one per dim.
IntList expand_param(const IntList& v, int64_t dims, std::string_view name) {
  KILN_CHECK(v.size() == 1 || int64_t(v.size()) == dims, "convolution: expected {} to be a single integer value or a "
             "list of {} values to match the convolution dimensions, but got {}={}", name, dims, name, shape_str(v));
  return v.size() == 1 ? IntList(size_t(dims), v[0]) : v;
}

// The 2-D arguments of a 1-D convolution run over [N, C, 1, L].
ConvArgs lifted_to_2d(const ConvArgs& a) {
  return {a.bias, {1, a.stride[0]}, {0, a.padding[0]}, {1, a.dilation[0]}, {0, a.output_padding[0]}, a.groups};
}

// `stride - 1` zeros between neighbours along `dim` (length (n - 1) * stride + 1).
Tensor spread(const Tensor& x, int64_t dim, int64_t stride) {
  const int64_t n = x.sizes()[size_t(dim)];
  if (stride == 1 || n == 0) return x;
  Tensor u = unsqueeze(x, dim + 1);  // [..., n, 1, ...]
  const int64_t from_last = u.dim() - 2 - dim;  // the new dim counted from the last (pad's order)
  IntList pads(size_t(2 * (from_last + 1)), 0);
  pads[size_t(2 * from_last + 1)] = stride - 1;
  Shape widened = x.sizes();
  widened[size_t(dim)] = n * stride;
  return narrow(reshape(pad(u, pads), widened), dim, 0, (n - 1) * stride + 1);
}

// A 3-D convolution: for each kernel depth kd, the depth slices it reads ([N, C, OD, H, W], as OD images per
// sample) through a 2-D convolution with the weight's slice kd; the sum, back to [N, O, OD, OH, OW].
Tensor conv3d_by_depth(const Tensor& x, const Tensor& w, const ConvArgs& a) {
  const int64_t N = x.sizes()[0], C = x.sizes()[1], D = x.sizes()[2], H = x.sizes()[3], W = x.sizes()[4];
  const int64_t KD = w.sizes()[2], s = a.stride[0], p = a.padding[0], dil = a.dilation[0];
  KILN_CHECK(s > 0 && dil > 0 && p >= 0, "convolution: stride and dilation must be positive and padding "
             "non-negative, got stride={} padding={} dilation={}", shape_str(a.stride), shape_str(a.padding),
             shape_str(a.dilation));
  KILN_CHECK(a.groups > 0 && C == w.sizes()[1] * a.groups, "convolution: given groups={}, weight of size {}, expected "
             "input{} to have {} channels, but got {} channels instead", a.groups, shape_str(w.sizes()),
             shape_str(x.sizes()), w.sizes()[1] * a.groups, C);
  const int64_t extent = dil * (KD - 1) + 1, padded = D + 2 * p;
  KILN_CHECK(padded >= extent, "convolution: calculated padded input depth {}, kernel depth {}: kernel size can't be "
             "greater than actual input size", padded, extent);
  const int64_t OD = (padded - extent) / s + 1;
  Tensor xp = p > 0 ? pad(x, {0, 0, 0, 0, p, p}) : x;
  Tensor total;
  const IntList stride2{a.stride[1], a.stride[2]}, padding2{a.padding[1], a.padding[2]},
      dilation2{a.dilation[1], a.dilation[2]};
  for (int64_t kd = 0; kd < KD; ++kd) {
    Tensor slices = slice(xp, 2, kd * dil, kd * dil + (OD - 1) * s + 1, s);
    Tensor images = reshape(permute(slices, {0, 2, 1, 3, 4}), {N * OD, C, H, W});
    Tensor y = conv2d(images, select(w, 2, kd), kd == 0 ? a.bias : Tensor(), stride2, padding2, dilation2, a.groups);
    total = total.defined() ? total + y : y;
  }
  const Shape& y = total.sizes();
  return contiguous(permute(reshape(total, {N, OD, y[1], y[2], y[3]}), {0, 2, 1, 3, 4}));
}

// A transposed 2-D or 3-D convolution: the direct convolution (stride 1, no padding) of the input spread by
// the stride and padded by dilation * (k - 1) - padding (plus output_padding after), with the weight's in/out
// channels swapped per group and its kernel flipped.
Tensor transposed_conv(const Tensor& x, const Tensor& w, const ConvArgs& a) {
  const int64_t in_channels = w.sizes()[0], g = a.groups, dims = w.dim() - 2;
  KILN_CHECK(g > 0, "convolution: non-positive groups is not supported, got groups={}", g);
  KILN_CHECK(in_channels % g == 0, "convolution: given groups={}, expected weight to be divisible by {} at dimension "
             "0, but got weight of size {} instead", g, g, shape_str(w.sizes()));
  KILN_CHECK(x.sizes()[1] == in_channels, "convolution: given transposed=1, weight of size {}, expected input{} to "
             "have {} channels, but got {} channels instead", shape_str(w.sizes()), shape_str(x.sizes()), in_channels,
             x.sizes()[1]);
  IntList pads(size_t(2 * dims));
  Shape out_sizes(static_cast<size_t>(dims));
  Tensor spread_x = x;
  for (int64_t d = 0; d < dims; ++d) {
    const int64_t s = a.stride[size_t(d)], p = a.padding[size_t(d)], dil = a.dilation[size_t(d)];
    const int64_t op = a.output_padding[size_t(d)];
    KILN_CHECK(s > 0 && dil > 0 && p >= 0 && op >= 0, "convolution: stride and dilation must be positive and padding "
               "and output_padding non-negative, got stride={} padding={} dilation={} output_padding={}",
               shape_str(a.stride), shape_str(a.padding), shape_str(a.dilation), shape_str(a.output_padding));
    KILN_CHECK(op < s || op < dil, "convolution: output padding must be smaller than either stride or dilation, but "
               "got output_padding={} stride={} dilation={}", shape_str(a.output_padding), shape_str(a.stride),
               shape_str(a.dilation));
    const int64_t k = w.sizes()[size_t(2 + d)], before = dil * (k - 1) - p;
    out_sizes[size_t(d)] = (x.sizes()[size_t(2 + d)] - 1) * s - 2 * p + dil * (k - 1) + op + 1;
    pads[size_t(2 * (dims - 1 - d))] = before;  // pad lists (before, after) from the last dim back
    pads[size_t(2 * (dims - 1 - d) + 1)] = before + op;
    spread_x = spread(spread_x, 2 + d, s);
  }
  for (int64_t size : out_sizes)
    KILN_CHECK(size > 0, "convolution: given input size per channel: {}, calculated output size per channel: {}; "
               "output size is too small", shape_str(Shape(x.sizes().begin() + 2, x.sizes().end())), shape_str(out_sizes));
  const int64_t out_per_group = w.sizes()[1];
  Shape grouped = {g, in_channels / g, out_per_group}, direct = {g * out_per_group, in_channels / g};
  IntList kernel_dims;
  for (int64_t d = 0; d < dims; ++d) {
    grouped.push_back(w.sizes()[size_t(2 + d)]);
    direct.push_back(w.sizes()[size_t(2 + d)]);
    kernel_dims.push_back(2 + d);
  }
  Tensor direct_w = flip(reshape(transpose(reshape(w, grouped), 1, 2), direct), kernel_dims);
  const Tensor padded = pad(spread_x, pads);
  if (dims == 2) return conv2d(padded, direct_w, a.bias, {1, 1}, {0, 0}, a.dilation, g);
  return conv3d_by_depth(padded, direct_w, {a.bias, IntList(3, 1), IntList(3, 0), a.dilation, IntList(3, 0), g});
}

std::vector<Tensor> convolution_decomp(const OpCall& c) {
  const Tensor &x = c.tensor(0), &w = c.tensor(1);
  const int64_t dims = w.dim() - 2;
  KILN_CHECK(dims >= 1 && dims <= 3, "convolution: expected a weight of 3, 4 or 5 dimensions ([out_channels, "
             "in_channels / groups, *kernel]), got {}", w.str());
  KILN_CHECK(x.dim() == w.dim(), "convolution: expected {}-dimensional input for {}-dimensional weight {}, but got "
             "{}-dimensional input of size {} instead", w.dim(), w.dim(), shape_str(w.sizes()), x.dim(),
             shape_str(x.sizes()));
  const ConvArgs a{c.opt_tensor(2), expand_param(c.ints(3), dims, "stride"), expand_param(c.ints(4), dims, "padding"),
                   expand_param(c.ints(5), dims, "dilation"), expand_param(c.ints(7), dims, "output_padding"),
                   c.int_(8)};
  const bool transposed = c.bool_(6);
  if (dims == 1) {
    const ConvArgs a2 = lifted_to_2d(a);
    const Tensor x2 = unsqueeze(x, 2), w2 = unsqueeze(w, 2);
    return {squeeze(transposed ? transposed_conv(x2, w2, a2)
                               : conv2d(x2, w2, a2.bias, a2.stride, a2.padding, a2.dilation, a2.groups), IntList{2})};
  }
  if (transposed) return {transposed_conv(x, w, a)};
  if (dims == 2) return {conv2d(x, w, a.bias, a.stride, a.padding, a.dilation, a.groups)};
  return {conv3d_by_depth(x, w, a)};
}

}  // namespace

void register_convolution_ops() { def(OpId::convolution).decomp(convolution_decomp); }

}  // namespace kiln
