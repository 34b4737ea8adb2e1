// The row kernels of the reference attention (the GEMMs run on cuBLASLt):
// masked softmax with Philox attention dropout, and its backward, and the
// gradient of T5's relative bias table.
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
  int64_t bias_q_offset = 0, bias_k_offset = 0;
  // T5's relative bias (ops::AttentionOptions::rel_bias, core/t5_bias.h):
  // f32 [2 rel_max + 1, H] on the device, or null. The forward row kernel
  // adds rel[t5::relative_row(p_j - p_i, rel_max) * H + h] to each visible
  // score (p_i, p_j as for ALiBi); its gradient is attention_rel_bias_grad's.
  const float* rel = nullptr;
  int64_t rel_max = 0;
  // A dense bias of the scaled scores (ops::AttentionOptions::score_bias:
  // TUPE's correlation), f32 [B, H, Tq, Tk] on the device, or null; the
  // forward row kernel adds it, and its gradient is the unscaled dS that
  // attention_softmax_backward writes to g.
  const float* bias = nullptr;
};

// probs = masked softmax of the (already scaled) f32 scores plus ALiBi's bias
// when mask.alibi, T5's when mask.rel and the dense mask.bias; dropped = probs * keep / (1 - p)
// (may be null when dropout == 0). A row with no visible key gets zeros.
// probs and dropped have dtype dt.
cudaError_t attention_softmax_forward(const float* scores, void* probs, void* dropped, DType dt,
                                      const AttentionMask& mask, cudaStream_t stream);
// dropped = probs * keep / (1 - p) over all elements.
cudaError_t attention_dropout_probs(const void* probs, void* dropped, DType dt,
                                    const AttentionMask& mask, cudaStream_t stream);
// dP = dP_dropped * keep / (1 - p); dS = scale * P o (dP - rowsum(P o dP)).
// dp_dropped is f32 (dout V^T); ds has dtype dt. When g is not null it also
// receives the unscaled dS, g = P o (dP - rowsum(P o dP)) in f32 ([B, H, Tq,
// Tk], 0 on the masked keys), T5's bias gradient per score; g may be
// dp_dropped itself (each element is read, then written, by one thread).
cudaError_t attention_softmax_backward(const void* probs, const float* dp_dropped, void* ds,
                                       DType dt, float scale, const AttentionMask& mask, float* g,
                                       cudaStream_t stream);
// T5's table gradient: grad[row, h] += the sum of g (attention_softmax_backward's
// f32 [B, H, Tq, Tk]) over the (b, i, j) of head h whose score reads the row,
// t5::relative_row(p_j - p_i, mask.rel_max) = row. Deterministic, without
// atomics (the same bits every run): the scores of a diagonal j - i = const
// all read one row, so a first kernel sums each diagonal of each (b, h) in
// double, i increasing, into diag; a second, one warp per (row, h), sums in
// double the diagonals that read the row (b = 0, 1, ... in turn, the lanes
// taking the diagonals in turn, then a fixed butterfly) and adds the sum,
// rounded to f32, into grad (f32 [2 rel_max + 1, H]). diag is device scratch
// of attention_rel_bias_diagonals(mask) doubles ([B H, Tq + Tk - 1]).
int64_t attention_rel_bias_diagonals(const AttentionMask& mask);
// TUPE's untied [CLS] on the correlation c f32 [H, T, T] (ops/tupe_cls.h):
// row 0 of head h := theta[h], column 0 below it := theta[H + h]; and the
// backward on its gradient g: dtheta[H + h] += the sum of column 0 below row
// 0 (in double, i increasing), then row 0 and column 0 zeroed. One block per
// head.
cudaError_t tupe_untie_cls(float* c, const float* theta, int64_t H, int64_t T, cudaStream_t stream);
cudaError_t tupe_untie_cls_backward(float* g, float* dtheta, int64_t H, int64_t T,
                                    cudaStream_t stream);
cudaError_t attention_rel_bias_grad(const float* g, double* diag, float* grad,
                                    const AttentionMask& mask, cudaStream_t stream);

}  // namespace rotor::kernels
