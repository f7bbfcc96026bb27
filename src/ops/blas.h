// The one door to BLAS (OpenBLAS's OpenMP build; CMakeLists.txt says why that build): row-major GEMM for f32 and
// f64, which makes sure on first use that OpenBLAS runs kernels for this CPU, and the line `kiln --version`
// prints about the library.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

// c = alpha * op(a) @ op(b) + beta * c, row-major; op(x) is x transposed when trans_x. op(a) is m x k, op(b)
// k x n, c m x n; lda, ldb, ldc are row strides in elements. k == 0 scales c by beta (0: fills it with zeros).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// How a matrix operand (rows x cols, element strides rs, cs) is handed to row-major BLAS without copying: as is
// (cs == 1) or transposed (rs == 1), with its leading dimension. nullopt when neither layout fits. (Also the CUDA
// backend's cuBLAS calls.)
struct BlasLayout {
  bool transposed;
  int64_t ld;
};
std::optional<BlasLayout> blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

// The BLAS kiln runs, after the check GEMM makes: "OpenBLAS 0.3.21 ... USE_OPENMP SkylakeX MAX_THREADS=64" and,
// when kiln chose the kernels, what OpenBLAS had taken the CPU for.
std::string blas_description();

}  // namespace kiln
