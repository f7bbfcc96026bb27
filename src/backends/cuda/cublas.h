// cuBLAS for the CUDA backend's matrix products (mm, bmm, addmm on device buffers), loaded at first use with
// dlopen("libcublas.so.13") like the driver (driver.h), so kiln starts without it; where it cannot be loaded, or
// an operand does not fit (integer dtypes, a layout cuBLAS cannot read, addmm's addend not a row vector or a
// matrix), the caller runs the op on the host instead and logs `why_not`.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace kiln::cuda {

// A matrix operand on the device: data, its [batch,] rows, cols and their element strides (batch stride 0 when
// it is broadcast over the batch).
struct DeviceMatrix {
  CUdeviceptr data = 0;
  int64_t batch_stride = 0, rows = 0, cols = 0, row_stride = 0, col_stride = 0;
};

// c[b] = alpha * a[b] @ b[b] + beta * c[b] for b < batch, on `stream`, c contiguous ([batch,] m x n); dtype F32
// (no TF32), F64, F16 or BF16 (f32 accumulation, no reduced-precision reductions). Returns false with `why_not`
// when cuBLAS cannot run it (nothing was launched then).
bool device_gemm(CUstream stream, DType dtype, int64_t batch, const DeviceMatrix& a, const DeviceMatrix& b, CUdeviceptr c,
                 double alpha, double beta, std::string* why_not);

// c (m x n, contiguous) = the row vector `row` (n elements, stride `stride`) on every row, by a rank-one product
// with a column of ones: addmm's bias before its product is added with beta = 1.
bool device_broadcast_rows(CUstream stream, DType dtype, int64_t m, int64_t n, CUdeviceptr row, int64_t stride,
                           double scale, CUdeviceptr c, std::string* why_not);

}  // namespace kiln::cuda
