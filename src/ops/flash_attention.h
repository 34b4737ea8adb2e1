// Flash-style attention core (docs/design.md, The attention block): online softmax over key
// tiles, no [Tq, Tk] matrix in memory. The forward saves the log-sum-exp of
// each query row; the backward recomputes the probabilities tile by tile from
// it and regenerates the Philox dropout mask from the same flat
// [B, H, Tq, Tk] element index as the reference attention (ops/attention.h),
// so both cores draw identical masks and agree within fp32 rounding.
//
// The CPU implementation is the twin of kernels/flash_attention.cu: the same
// decomposition into tiles of kFlashTile queries x kFlashTile keys, fp32 with
// fp32 running max and sum.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/attention.h"

namespace rotor::ops {

constexpr int64_t kFlashTile = 64;

// Whether the flash core runs for queries like q: always on the CPU; on CUDA
// for head dims 32, 64, 128 (the instantiated kernels) and B*H <= 65535.
bool flash_attention_supported(const Tensor& q);

// Whether rotor's tensor-core kernel (kernels/flash_attention_tc.cu) runs the
// flash core for q on CUDA: a device of compute capability 8.0 or newer, f16
// or bf16, head dim 32, 64 or 128, B*H <= 65535, non-negative rope offsets.
// It is the only CUDA kernel that honors options.rope. The portable kernel
// runs the other cases. The environment variable ROTOR_FLASH_KERNEL=portable
// or =tc forces one of the two (benchmarks, tests): under "portable" this
// returns false; under "tc" a case it cannot run is an error. False on the CPU
// (where the flash core honors rope anyway).
bool flash_attention_tc_supported(const Tensor& q, const AttentionOptions& options);

namespace detail {
enum class FlashKernel { Auto, Portable, TensorCore };
// ROTOR_FLASH_KERNEL: unset or empty = Auto; "portable"; "tc". Anything else is an error.
FlashKernel flash_kernel_override();
}  // namespace detail

// q [B, H, Tq, D], k and v [B, H, Tk, D] -> out [B, H, Tq, D] (dtype of q) and
// lse f32 [B, H, Tq] = log sum_j exp(scale q_i.k_j) over the visible keys j
// (before dropout). A query with no visible key gets a zero output and
// lse = -inf. Same AttentionOptions semantics as attention_forward.
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse);

// Recomputes P = exp(scale q.k - lse) per tile; with D_i = rowsum(dout o out):
//   dV = (P o M)^T dout,  dS = P o ((dout V^T) o M - D),  dQ = scale dS K,
//   dK = scale dS^T Q.  Writes dq, dk, dv (shapes of q, k, v).
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout,
                              const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace rotor::ops
