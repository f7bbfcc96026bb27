// conv2d's f32 forward through oneDNN (Debian's libdnnl-dev) where kiln was built with it: the CPU extern
// kernel of conv2d, and so of every convolution the inductor runs. Without oneDNN the call declines and
// conv2d's own im2col + GEMM runs.
#pragma once
#include <cstdint>

namespace kiln {

struct DnnlConv2d {
  int64_t N, C, H, W, OC, KH, KW, OH, OW, groups;
  int64_t stride[2], padding[2], dilation[2];
};

// out [N, OC, OH, OW] = conv2d(x [N, C, H, W], w [OC, C / groups, KH, KW]) + bias (may be null); contiguous f32.
// Returns false (writing nothing) when oneDNN is absent or declines the geometry.
bool dnnl_conv2d_forward(const DnnlConv2d& g, const float* x, const float* w, const float* bias, float* out);

}  // namespace kiln
