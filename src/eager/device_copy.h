// Moving tensors between the host and devices (docs/cuda.md, "Device tensors").
#pragma once
#include "eager/tensor.h"

namespace kiln {

// `t`'s values on `device`, with the same sizes and strides (the span of storage `t` covers is copied; other
// views of the storage are not). `t` itself when it is already there. No autograd history: the copy is a leaf.
// Throws kiln::Error when the device is not available (no CUDA backend in the build, no driver, no GPU).
Tensor to_device(const Tensor& t, Device device);
inline bool is_cuda(const Tensor& t) { return t.device().type == DeviceType::CUDA; }

}  // namespace kiln
