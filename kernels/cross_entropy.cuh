// Label-smoothed cross-entropy (fairseq): target probability 1 - eps, every
// other class eps / (V - 1). Rows whose target is ignore_index contribute 0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

// logits [rows, vocab] of dt; targets i32 [rows]; loss, nll, lse f32 [rows].
// A target outside [0, vocab) (not ignore_index) cannot raise an error without
// a host synchronization: its loss and nll are NaN, which the non-finite
// checks of training catch.
cudaError_t cross_entropy_forward(const void* logits, DType dt, const int32_t* targets,
                                  int64_t rows, int64_t vocab, float smoothing, int ignore_index,
                                  float* loss, float* nll, float* lse, cudaStream_t stream);
// dlogits = loss_scale * (softmax(logits) - q), 0 on ignored rows, NaN on rows
// with an out-of-range target. dlogits may alias logits.
cudaError_t cross_entropy_backward(const void* logits, DType dt, const int32_t* targets,
                                   const float* lse, int64_t rows, int64_t vocab, float smoothing,
                                   int ignore_index, float loss_scale, void* dlogits,
                                   cudaStream_t stream);

// hits[r] = 1 where the first largest logit of row r is at targets[r] (not
// ignore_index), else 0; a NaN logit is never the largest.
cudaError_t top1_hits(const void* logits, DType dt, const int32_t* targets, int64_t rows,
                      int64_t vocab, int ignore_index, int32_t* hits, cudaStream_t stream);

}  // namespace rotor::kernels
