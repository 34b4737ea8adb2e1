// Flash attention on tensor cores (sm_80 and newer: Ampere, Ada, Hopper):
// the same contract as the portable kernels of kernels/flash_attention.cuh --
// key-padding lengths, the causal mask with Tq != Tk (query i sees keys
// j <= i + (Tk - Tq)), Philox attention dropout on the flat [B, H, Tq, Tk]
// element index, lse per query, zero output and lse = -inf for a query with no
// visible key -- for f16 and bf16 storage, head dims 32, 64 and 128, with fp32
// accumulation (mma.sync m16n8k16). Optionally rotates q and k by RoPE inside
// the kernel (src/core/rope.h: interleaved pairs over the whole head, any
// scaling) and rotates dq and dk back.
// CPU twin: src/ops/flash_attention.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/rope.h"
#include "kernels/flash_attention.cuh"  // FlashParams

namespace rotor::kernels {

// Rotary position embedding applied by the kernel: q row i at position
// q_offset + i, k row j at k_offset + j, with the settings `params`
// (interleaved pairs over the whole head, rope::interleaved_full; dynamic_ntk
// is resolved at length max(q_offset + Tq, k_offset + Tk)).
struct FlashRope {
  bool enabled = false;
  rope::Params params{};
  int64_t q_offset = 0, k_offset = 0;
};

// Head dims and storage types the tensor-core kernels are instantiated for
// (whatever the GPU).
bool flash_tc_supports(int head_dim, DType dt);

// Whether CUDA device `device` can run them (compute capability 8.0 or newer
// and the build carries code for it). Cached per device.
bool flash_tc_device_ok(int device);

// Bytes of the RoPE table scratch (float2 [positions, D/2]); 0 without rope.
size_t flash_tc_rope_table_bytes(const FlashParams& p, const FlashRope& rope);

// out [B, H, Tq, D], lse f32 [B, H, Tq] (with cu_seqlens, FlashCore's
// variable-length layout: [H, total_q, D] and [H, total_q]). rope_table: scratch of
// flash_tc_rope_table_bytes (may be null without rope). Every pointer 16-byte
// aligned (q, k, v, out).
cudaError_t flash_tc_forward(const FlashParams& p, const FlashRope& rope, void* rope_table,
                             void* out, float* lse, DType dt, cudaStream_t stream);

// dq, dk, dv. Scratch: dq_accum f32 [B, H, Tq, D], delta f32 [B, H, Tq] and
// rope_table as above (all overwritten); with cu_seqlens one row per q row
// (flash_q_rows). dq is accumulated with fp32 atomics
// across key blocks: not bitwise deterministic from run to run.
cudaError_t flash_tc_backward(const FlashParams& p, const FlashRope& rope, void* rope_table,
                              const void* out, const float* lse, const void* dout, void* dq,
                              void* dk, void* dv, float* dq_accum, float* delta, DType dt,
                              cudaStream_t stream);

}  // namespace rotor::kernels
