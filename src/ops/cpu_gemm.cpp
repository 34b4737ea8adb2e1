#include "ops/cpu_gemm.h"

#include "core/error.h"

#if ROTOR_ONEDNN_GEMM
#include <oneapi/dnnl/dnnl.h>
#endif
#if ROTOR_XSMM
#include <libxsmm.h>
#endif

namespace rotor::ops {

void cpu_sgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N, int K, float alpha,
               const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
#if ROTOR_ONEDNN_GEMM
  const dnnl_status_t s =
      dnnl_sgemm(trans_a == CblasTrans ? 'T' : 'N', trans_b == CblasTrans ? 'T' : 'N', M, N, K,
                 alpha, A, lda, B, ldb, beta, C, ldc);
  ROTOR_CHECK(s == dnnl_success, "dnnl_sgemm failed (status {}) for M {} N {} K {}",
              static_cast<int>(s), M, N, K);
#else
  cblas_sgemm(CblasRowMajor, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

bool cpu_small_sgemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                     float beta, float* C, int ldc) {
#if ROTOR_XSMM
  if (beta != 0.0f && beta != 1.0f) return false;
  // Row-major C = A B is column-major C^T = B^T A^T: libxsmm's m, n are N,
  // M and its A, B are B, A (each as stored). libxsmm keeps the kernels it
  // generated, by their arguments, and finds them again in a hash table.
  const libxsmm_blasint m = N, n = M, k = K, la = ldb, lb = lda, lc = ldc;
  const float alpha = 1.0f;
  const int flags = beta == 0.0f ? LIBXSMM_GEMM_FLAG_BETA_0 : LIBXSMM_GEMM_FLAG_NONE;
  const libxsmm_smmfunction kernel =
      libxsmm_smmdispatch(m, n, k, &la, &lb, &lc, &alpha, &beta, &flags, nullptr);
  if (!kernel) return false;
  kernel(B, A, C);
  return true;
#else
  (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)beta, (void)C, (void)ldc;
  return false;
#endif
}

const char* cpu_small_gemm_name() {
#if ROTOR_XSMM
  return "libxsmm " LIBXSMM_VERSION;
#else
  return "none";
#endif
}

}  // namespace rotor::ops
