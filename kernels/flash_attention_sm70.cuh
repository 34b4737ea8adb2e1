// Tensor-core flash attention for Volta (sm_70, V100): WMMA m16n16k16 on
// fp16 fragments with fp32 accumulation. Same parameters, masks, dropout
// stream and contracts as the portable kernels (kernels/flash_attention.cuh);
// CPU twin: src/ops/flash_attention.cpp.
//
// fp16 storage only (Volta has no bf16 tensor cores), head dims 64 and 128.
// The device code is compiled for __CUDA_ARCH__ 700..799 only: in the usual
// sm_80/sm_90 build the kernels are empty and the entry points answer
// cudaErrorNotSupported on such devices. CUDA 13 cannot target sm_70; a
// binary for V100 needs CUDA 12 (scripts/build_sm70.sh compiles and checks
// these kernels for sm_70 with CUDA 12's headers and ptxas).
//
// Dispatch: src/ops/flash_attention_cuda.cpp runs these after the sm_80+
// tensor-core check and before the portable kernels, for f16 at head dim 64
// or 128 without RoPE in the kernel, 16-byte aligned buffers, on a device
// where flash_attention_sm70_available() (compute capability 7.x and sm_70
// code in this binary); everything else (bf16, f32, head dim 32, Turing,
// sm_80+) keeps its path. The entry points themselves answer
// cudaErrorNotSupported, before launching anything, when unavailable or when
// q, k, v or dout are not 16-byte aligned.
#pragma once

#include <cuda_runtime.h>

#include "kernels/flash_attention.cuh"

namespace rotor::kernels {

// Head dims with a WMMA kernel (64, 128).
bool flash_attention_sm70_supports(int head_dim);

// True when the current device is compute capability 7.x and the kernels were
// compiled for it (the build lists sm_70 or sm_75).
bool flash_attention_sm70_available();

// fp16 q, k, v -> out [B, H, Tq, D] fp16, lse f32 [B, H, Tq] (-inf and a zero
// output row for a query with no visible key); with cu_seqlens (FlashCore's
// variable-length layout) out [H, total_q, D] and lse [H, total_q]. cudaErrorNotSupported when
// flash_attention_sm70_available() is false, cudaErrorInvalidValue for an
// unsupported head dim or grid.
cudaError_t flash_attention_sm70_forward(const FlashParams& p, void* out, float* lse,
                                         cudaStream_t stream);

// dq, dk, dv fp16. Scratch: dq_accum f32 [B, H, Tq, D] and delta f32
// [B, H, Tq] (both overwritten; delta = rowsum(dout o out)); with cu_seqlens
// one row per q row (flash_q_rows).
cudaError_t flash_attention_sm70_backward(const FlashParams& p, const void* out, const float* lse,
                                          const void* dout, void* dq, void* dk, void* dv,
                                          float* dq_accum, float* delta, cudaStream_t stream);

}  // namespace rotor::kernels
