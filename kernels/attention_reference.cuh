// The row kernels of the reference attention (the GEMMs run on cuBLASLt):
// masked softmax with Philox attention dropout, and its backward.
// Shapes: scores/probs/dp are [B, H, Tq, Tk]; the dropout element index is
// the flat [B, H, Tq, Tk] index, as on the CPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

struct AttentionMask {
  int64_t B = 0, H = 0, Tq = 0, Tk = 0;
  bool causal = false;                   // query i sees keys j <= i + (Tk - Tq)
  const int32_t* key_lengths = nullptr;  // optional [B] on the device (clamped to [0, Tk])
  float dropout = 0.0f;
  uint64_t seed = 0, stream_id = 0;
  // ALiBi added to the scores by the forward row kernel (attention_masks.cuh:
  // head h's -slope * |p_i - p_j|); the backward needs no change (the bias is
  // constant in q and k, and the probabilities are saved).
  bool alibi = false;
  int64_t alibi_q_offset = 0, alibi_k_offset = 0;
};

// probs = masked softmax of the (already scaled) f32 scores plus ALiBi's bias
// when mask.alibi; dropped =
// probs * keep / (1 - p) (may be null when dropout == 0). A row with no
// visible key gets zeros. probs and dropped have dtype dt.
cudaError_t attention_softmax_forward(const float* scores, void* probs, void* dropped, DType dt,
                                      const AttentionMask& mask, cudaStream_t stream);
// dropped = probs * keep / (1 - p) over all elements.
cudaError_t attention_dropout_probs(const void* probs, void* dropped, DType dt,
                                    const AttentionMask& mask, cudaStream_t stream);
// dP = dP_dropped * keep / (1 - p); dS = scale * P o (dP - rowsum(P o dP)).
// dp_dropped is f32 (dout V^T); ds has dtype dt.
cudaError_t attention_softmax_backward(const void* probs, const float* dp_dropped, void* ds,
                                       DType dt, float scale, const AttentionMask& mask,
                                       cudaStream_t stream);

}  // namespace rotor::kernels
