// Label-smoothed cross-entropy as fairseq defines it: the target class gets
// probability 1 - eps and every other class eps / (V - 1). Rows whose target
// equals ignore_index (the pad id) contribute nothing.
#pragma once

#include "core/tensor.h"

namespace rotor::ops {

// logits [N, V] (f32, f16 or bf16; sums in f32 or better); targets i32 [N];
// outputs f32 [N]: loss (smoothed), nll
// (-log p[target]) and lse (log-sum-exp of the row, kept for the backward).
// Ignored rows get 0 loss and 0 nll.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, float smoothing,
                           int ignore_index, Tensor& loss, Tensor& nll, Tensor& lse);
// dlogits = loss_scale * (softmax(logits) - q), 0 on ignored rows; dlogits has
// logits' dtype (loss_scale: the fp16 loss scale S, else 1).
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            float smoothing, int ignore_index, float loss_scale, Tensor& dlogits);

// hits i32 [N]: 1 where the first largest logit of row i is at targets[i],
// 0 elsewhere and on rows whose target is ignore_index (a NaN logit is never
// the largest): the rows a greedy prediction gets right, on the logits'
// device.
void top1_hits(const Tensor& logits, const Tensor& targets, int ignore_index, Tensor& hits);
// The number of such rows: top1_hits, then its [N] flags read on the host
// (not the [N, V] logits).
int64_t count_top1_hits(const Tensor& logits, const Tensor& targets, int ignore_index);

}  // namespace rotor::ops
