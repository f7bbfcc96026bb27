// GEMM through OpenBLAS (see blas.h), and the correction of OpenBLAS's kernel choice on CPUs it does not know.
#include "ops/blas.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>

// OpenBLAS's own re-selection of its kernels (exported by its DYNAMIC_ARCH builds, as Debian's; weak: absent from
// a build for one CPU, which has nothing to choose).
extern "C" __attribute__((weak)) void gotoblas_dynamic_init(void);
extern "C" __attribute__((weak)) void gotoblas_dynamic_quit(void);

namespace kiln {
namespace {

// The kernel set the CPU's vector instructions run, newest first: what OpenBLAS's later versions fall back to
// for a CPU they do not know. nullptr: nothing better than SSE.
const char* core_for_cpu_features() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "Sandybridge";
  return nullptr;
}

// OpenBLAS chooses its kernels by CPU model when it loads, and a model newer than the library gets old ones:
// Debian 12's 0.3.21 takes Emerald Rapids (family 6, model 0xcf) for a Prescott and runs SSE3 kernels, several
// times slower GEMMs. When it chose a core without AVX on a CPU with AVX, and the user did not choose one with
// OPENBLAS_CORETYPE, kiln names the kernel set the CPU's features run and OpenBLAS chooses again. Done once,
// before the first GEMM. Returns the core OpenBLAS had chosen when kiln replaced it, else "".
const std::string& replaced_blas_core() {
  static const std::string replaced = []() -> std::string {
    const std::string chosen = openblas_get_corename();
    static constexpr std::string_view kWithoutAvx[] = {"Unknown", "Katmai", "Coppermine", "Northwood", "Prescott",
                                                       "Banias",  "Atom",   "Core2",      "Penryn",    "Dunnington",
                                                       "Nehalem", "Athlon", "Opteron",    "Opteron_SSE3", "Barcelona",
                                                       "Nano"};
    const char* core = core_for_cpu_features();
    if (std::getenv("OPENBLAS_CORETYPE") || !core || !gotoblas_dynamic_init || !gotoblas_dynamic_quit ||
        std::find(std::begin(kWithoutAvx), std::end(kWithoutAvx), chosen) == std::end(kWithoutAvx))
      return "";
    // gotoblas_dynamic_init reads the choice from the environment (children inherit it, and skip this).
    setenv("OPENBLAS_CORETYPE", core, 0);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    return chosen;
  }();
  return replaced;
}

template <class T>
void gemm_impl(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS would reject the leading dimensions of empty operands
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  replaced_blas_core();
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_impl(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_impl(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::string blas_description() {
  const std::string& replaced = replaced_blas_core();
  std::string s = openblas_get_config();  // names the kernels it runs ("... USE_OPENMP SkylakeX MAX_THREADS=64")
  if (!replaced.empty())
    s += fmt::format(" ({} kernels chosen by kiln: OpenBLAS took this CPU for a {})", openblas_get_corename(),
                     replaced);
  return s;
}

}  // namespace kiln
