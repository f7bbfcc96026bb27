// Ops on device tensors without a device kernel: every eager kernel is written for host memory, so a call whose
// tensors live on a device (CUDA) runs on host mirrors of their storages and its results go back to the device
// (docs/cuda.md, "Device tensors"). The one place that decides where a call's tensors live.
#pragma once
#include "ops/op_info.h"

namespace kiln {

// The device of a call's tensors: the CPU unless one lives on a device. Tensors of two devices are a
// kiln::Error naming both, except 0-dim CPU tensors (Python numbers, scalars), which go with any device as in
// PyTorch.
Device call_device(const OpCall& call);
// Where shape inference puts a call's results: the first device among its tensors, else the CPU. Never throws:
// a decomposition traced on meta values of a device may mix them with host constants it makes.
Device results_device(const OpCall& call);

// Runs the op's eager kernel on `call` (under the caller's grad mode): directly for host tensors; for device
// tensors on host copies of their storages (tensors sharing a storage share its copy), then an in-place op's
// written storage is copied back, results that alias an input become views of the device tensor, and new
// results are copied to the device. Logged once per op on the `lowering` channel with the reason.
std::vector<Tensor> run_eager_kernel(const OpCall& call);

}  // namespace kiln
