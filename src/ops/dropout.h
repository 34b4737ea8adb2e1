// Dropout with masks from Philox (core/philox.h): element i is kept when
// philox_uniform(seed, stream, i) >= p, and scaled by 1/(1-p). The backward
// regenerates the same mask rather than storing it.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace rotor::ops {

void dropout_forward(const Tensor& x, Tensor& y, float p, uint64_t seed, uint64_t stream);
void dropout_backward(const Tensor& dy, Tensor& dx, float p, uint64_t seed, uint64_t stream);
// out = residual + dropout(x): the end of a residual branch in one pass, with
// the mask of dropout_forward(x, ., p, seed, stream) (so dropout_backward is
// its backward for x; residual's gradient is the incoming one). All three of
// one shape-compatible element count, dtype and device; out may alias either.
void dropout_add_forward(const Tensor& residual, const Tensor& x, float p, uint64_t seed,
                         uint64_t stream, Tensor& out);

}  // namespace rotor::ops
