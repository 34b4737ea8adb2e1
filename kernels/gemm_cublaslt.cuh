// Row-major (batched) GEMM on cuBLASLt with fused epilogues. Raw pointers only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

enum class GemmEpilogue : int { None = 0, ReLU = 1, GELU = 2 };

// D[b] = act(alpha * op(A[b]) @ op(B[b]) + beta * C[b] + bias), row-major,
// b in [0, batch). op(A) is [m, k], op(B) is [k, n], C and D are [m, n].
// Strides are in elements between consecutive batch matrices; 0 broadcasts
// the matrix. C may alias D. bias (optional) is [n] of the C/D type. All of
// it is computed in f32 (split-K partial sums included) and D rounded once.
struct GemmArgs {
  DType ab_type = DType::F32;  // A and B
  DType cd_type = DType::F32;  // C, D, bias and aux
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  int64_t stride_a = 0;
  const void* b = nullptr;
  int64_t stride_b = 0;
  const void* c = nullptr;  // read only when beta != 0
  void* d = nullptr;
  int64_t stride_cd = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void* bias = nullptr;
  GemmEpilogue act = GemmEpilogue::None;
  // Optional [batch, m, n] (stride stride_cd) receiving the value before the
  // activation (cuBLASLt GELU_AUX). Only with act == GELU.
  void* aux = nullptr;
};

// What went wrong: code 0 = success; `unsupported` = cuBLASLt has no algorithm
// for this epilogue/type combination (callers then fall back to a plainer one).
struct GemmStatus {
  int code = 0;
  bool unsupported = false;
  const char* what = "";
  bool ok() const { return code == 0 && !unsupported; }
};

// The cuBLASLt workspace size rotor hands to every matmul.
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

// Runs the GEMM on `stream` with the calling thread's current device (whose
// cached cuBLASLt handle is used). `workspace` holds kGemmWorkspaceBytes.
GemmStatus gemm_cublaslt(const GemmArgs& args, void* workspace, cudaStream_t stream);

}  // namespace rotor::kernels
