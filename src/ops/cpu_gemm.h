// The CPU's f32 GEMM, row-major: every product rotor computes on the CPU
// goes through cpu_sgemm (ops::gemm, the materialized attention core, linear
// attention's sweeps, the relative-position terms), except linear
// attention's plain products, which try cpu_small_sgemm first. It calls oneDNN's
// dnnl_sgemm when the build has it (ROTOR_CPU_GEMM=onednn, the default where
// Debian's libdnnl-dev is installed) and OpenBLAS's cblas_sgemm otherwise
// (ROTOR_CPU_GEMM=openblas; `rotor info` names the one built). Both run on the OpenMP threads of
// rotor's own loops, and inside a parallel region both run on the calling thread alone. Why oneDNN:
// docs/design.md, "The CPU GEMM" (measured on the tiny configs' shapes by
// bench/gemm/gemm_libs.cpp).
#pragma once

#include <cblas.h>

namespace rotor::ops {

// C = alpha op(A) op(B) + beta C with cblas_sgemm's arguments, row-major.
// M, N, K >= 1 and the leading dimensions valid, as BLAS requires.
void cpu_sgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N, int K, float alpha,
               const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc);

// C = A B + beta C, row-major, neither operand transposed, beta 0 (C not
// read) or 1, on the calling thread, by a small-matrix kernel: libxsmm's,
// generated once per shape, where the build has libxsmm (Debian's
// libxsmm-dev, amd64) and it has a kernel for this CPU. False (C untouched)
// otherwise, and the caller uses cpu_sgemm. For the many products of a few
// thousand multiply-adds each of linear attention's sweeps, which oneDNN
// runs with more overhead than arithmetic (docs/design.md, "The CPU GEMM").
bool cpu_small_sgemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                     float beta, float* C, int ldc);
// "libxsmm 1.17" or "none": what cpu_small_sgemm runs (`rotor info`).
const char* cpu_small_gemm_name();

}  // namespace rotor::ops
