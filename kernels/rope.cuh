// Rotary position embedding, RoFormer eq. 34, interleaved pairs (2i, 2i+1).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

// x, y: [B, T, H, D] (y may alias x). Rotates pair i of position t by
// sign * (t + offset) * base^(-2i/D); sign = -1 is the backward (transpose).
cudaError_t rope_apply(const void* x, void* y, DType dt, int64_t B, int64_t T, int64_t H, int64_t D,
                       float base, int64_t position_offset, double sign, cudaStream_t stream);

}  // namespace rotor::kernels
