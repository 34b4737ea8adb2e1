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

// q [B, H, Tq, D], k and v [B, H, Tk, D] -> out [B, H, Tq, D] (dtype of q) and
// lse f32 [B, H, Tq] = log sum_j exp(scale q_i.k_j + alibi_ij) over the visible keys j
// (before dropout). A query with no visible key gets a zero output and
// lse = -inf. Same AttentionOptions semantics as attention_forward. On CUDA
// options.flash_kernel is the kernel that runs; one that cannot run the case
// (ops/attention_device.h, flash_kernel_unsupported) is an error, never a
// fallback to another.
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse);

// Recomputes P = exp(scale q.k + alibi - lse) per tile (the ALiBi bias is
// recomputed in the core too); with D_i = rowsum(dout o out):
//   dV = (P o M)^T dout,  dS = P o ((dout V^T) o M - D),  dQ = scale dS K,
//   dK = scale dS^T Q.  Writes dq, dk, dv (shapes of q, k, v).
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout,
                              const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace rotor::ops
