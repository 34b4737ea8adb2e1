#include "ops/cpu_gemm.h"

#include "core/error.h"

#if ROTOR_ONEDNN_GEMM
#include <oneapi/dnnl/dnnl.h>
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

}  // namespace rotor::ops
