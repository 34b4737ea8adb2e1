// Token embedding lookup with a scale (sqrt(d_model) in the Transformer).
#pragma once

#include "core/tensor.h"

namespace rotor::ops {

// out[i, :] = table[ids[i], :] * scale. ids: i32 [n]; table [V, d]; out [n, d].
// An id outside [0, V) is a rotor::Error.
void embedding_forward(const Tensor& ids, const Tensor& table, float scale, Tensor& out);
// out has table's dtype.
// dtable[ids[i], :] += dout[i, :] * scale, skipping ids equal to pad_id (>= 0).
// dout has dtable's dtype, or is 16-bit with an f32 dtable (mixed precision).
void embedding_backward(const Tensor& ids, const Tensor& dout, float scale, Tensor& dtable,
                        int pad_id = -1);

}  // namespace rotor::ops
