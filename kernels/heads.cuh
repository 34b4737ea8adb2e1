// Launchers for the head split with fused RoPE and the head merge (see
// src/ops/heads.h for the semantics). Raw pointers; dtype selects f32/f16/bf16.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/rope.h"

namespace rotor::kernels {

struct HeadsShape {
  int64_t B, T, P, H, D;
};

// Device scratch for the split's table of RoPE factors ([T, R/2] cos and sin
// as float pairs, R the rotated dims of `rope`; 0 bytes without rotation).
size_t split_heads_workspace(HeadsShape s, int rope_parts, const rope::Params& rope);
// x [B, T, P, H, D] -> parts[p] [B, H, T, D]; parts is a device-visible array
// passed by value (at most 3 parts). `workspace` holds split_heads_workspace
// bytes (without it the rotation is computed per pair: slower). `rope` as
// given (dynamic_ntk is resolved here at length position_offset + T).
cudaError_t split_heads_forward(const void* x, void* const parts[3], HeadsShape s, DType dtype,
                                int rope_parts, rope::Params rope, int64_t position_offset,
                                float part0_scale, void* workspace, size_t workspace_bytes,
                                cudaStream_t stream);
cudaError_t split_heads_backward(const void* const dparts[3], void* dx, HeadsShape s, DType dtype,
                                 int rope_parts, rope::Params rope, int64_t position_offset,
                                 float part0_scale, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream);
// x [B, H, T, D] <-> y [B, T, H, D]; forward=true merges, false splits back.
cudaError_t merge_heads(const void* src, void* dst, int64_t B, int64_t H, int64_t T, int64_t D,
                        DType dtype, bool forward, cudaStream_t stream);

}  // namespace rotor::kernels
