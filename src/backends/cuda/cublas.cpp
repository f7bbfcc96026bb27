// cuBLAS through dlopen (cublas.h): one handle, the stream set per call, row-major products as cuBLAS's
// column-major ones (c^T = b^T a^T).
#include "backends/cuda/cublas.h"

#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>
#include <vector>

#include "backends/cuda/device_memory.h"
#include "backends/cuda/driver.h"
#include "core/error.h"
#include "ops/api.h"
#include "ops/api.h"
#include "ops/blas.h"

namespace kiln::cuda {

namespace {

using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, long long, const void*,
                                                cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                long long, int, cublasComputeType_t, cublasGemmAlgo_t);

struct Cublas {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  decltype(&::cublasSetMathMode) set_math_mode = nullptr;
  GemmStridedBatchedEx gemm = nullptr;
  cublasHandle_t handle = nullptr;
  std::mutex mutex;  // the handle's stream is set per call
  std::string why_not;
};

template <class F>
bool resolve(void* lib, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
  return out != nullptr;
}

Cublas& cublas() {
  static Cublas* c = [] {
    auto* c = new Cublas;
    std::string why;
    if (!driver(&why)) {
      c->why_not = why;
      return c;
    }
    void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("/usr/local/cuda/lib64/libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      c->why_not = "cuBLAS (libcublas.so.13) cannot be loaded";
      return c;
    }
    if (!resolve(lib, "cublasCreate_v2", c->create) || !resolve(lib, "cublasSetStream_v2", c->set_stream) ||
        !resolve(lib, "cublasSetMathMode", c->set_math_mode) || !resolve(lib, "cublasGemmStridedBatchedEx", c->gemm)) {
      c->why_not = "libcublas.so.13 lacks an entry point kiln calls";
      return c;
    }
    if (c->create(&c->handle) != CUBLAS_STATUS_SUCCESS) {
      c->why_not = "cublasCreate failed";
      c->handle = nullptr;
      return c;
    }
    c->set_math_mode(c->handle, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    return c;
  }();
  return *c;
}

struct GemmTypes {
  cudaDataType data;
  cublasComputeType_t compute;
};
std::optional<GemmTypes> gemm_types(DType dt) {
  switch (dt) {
    case DType::F32: return GemmTypes{CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case DType::F64: return GemmTypes{CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case DType::F16: return GemmTypes{CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case DType::BF16: return GemmTypes{CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    default: return std::nullopt;
  }
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT32_MAX; }

// A column of `m` ones of `dtype` on the device (grown as needed, kept for the process).
CUdeviceptr ones(DType dtype, int64_t m) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<DeviceBlock>> columns = std::vector<std::unique_ptr<DeviceBlock>>(kNumDTypes);
  std::lock_guard lock(mutex);
  auto& col = columns[size_t(dtype)];
  const size_t bytes = size_t(m) * size_t(dtype_size(dtype));
  if (!col || col->bytes < bytes) {
    Tensor host = full({m}, Scalar(1.0), dtype);
    col = std::make_unique<DeviceBlock>(std::max<size_t>(bytes, 1));
    check(driver()->memcpy_htod(col->ptr, host.data_ptr(), bytes), "cuMemcpyHtoD");
  }
  return col->ptr;
}

}  // namespace

bool device_gemm(CUstream stream, DType dtype, int64_t batch, const DeviceMatrix& a, const DeviceMatrix& b, CUdeviceptr c,
                 double alpha, double beta, std::string* why_not) {
  Cublas& cb = cublas();
  if (!cb.handle) return *why_not = cb.why_not, false;
  const std::optional<GemmTypes> types = gemm_types(dtype);
  if (!types) return *why_not = fmt::format("cuBLAS products here are f32, f64, f16 and bf16, not {}", dtype_name(dtype)), false;
  const int64_t m = a.rows, k = a.cols, n = b.cols;
  const std::optional<BlasLayout> la = blas_layout(a.rows, a.cols, a.row_stride, a.col_stride);
  const std::optional<BlasLayout> lb = blas_layout(b.rows, b.cols, b.row_stride, b.col_stride);
  if (!la || !lb) return *why_not = "an operand is neither row- nor column-major in memory", false;
  if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(batch) || !fits_int(la->ld) || !fits_int(lb->ld))
    return *why_not = "a dimension exceeds cuBLAS's 32-bit sizes", false;
  const float alpha32 = float(alpha), beta32 = float(beta);
  const void* alpha_p = dtype == DType::F64 ? static_cast<const void*>(&alpha) : &alpha32;
  const void* beta_p = dtype == DType::F64 ? static_cast<const void*>(&beta) : &beta32;
  // Row-major c = a @ b is column-major c^T = b^T a^T: b first. A row-major operand read as column-major is
  // its transpose already (no op); a column-major one (BlasLayout::transposed) needs op T.
  std::lock_guard lock(cb.mutex);
  cb.set_stream(cb.handle, stream);
  const cublasStatus_t r =
      cb.gemm(cb.handle, lb->transposed ? CUBLAS_OP_T : CUBLAS_OP_N, la->transposed ? CUBLAS_OP_T : CUBLAS_OP_N, int(n),
              int(m), int(k), alpha_p, reinterpret_cast<const void*>(b.data), types->data, int(lb->ld), b.batch_stride,
              reinterpret_cast<const void*>(a.data), types->data, int(la->ld), a.batch_stride, beta_p,
              reinterpret_cast<void*>(c), types->data, int(std::max<int64_t>(n, 1)), m * n, int(batch), types->compute,
              CUBLAS_GEMM_DEFAULT);
  if (r != CUBLAS_STATUS_SUCCESS) fail("cublasGemmStridedBatchedEx failed with status {}", int(r));
  return true;
}

bool device_broadcast_rows(CUstream stream, DType dtype, int64_t m, int64_t n, CUdeviceptr row, int64_t stride,
                           double scale, CUdeviceptr c, std::string* why_not) {
  if (!gemm_types(dtype)) return *why_not = fmt::format("cuBLAS products here are f32, f64, f16 and bf16, not {}", dtype_name(dtype)), false;
  if (!cublas().handle) return *why_not = cublas().why_not, false;
  const DeviceMatrix column{ones(dtype, m), 0, m, 1, 1, 1}, vector{row, 0, 1, n, n * std::max<int64_t>(stride, 1), stride};
  return device_gemm(stream, dtype, 1, column, vector, c, scale, 0.0, why_not);
}

}  // namespace kiln::cuda
