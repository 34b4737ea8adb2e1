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

namespace detail {
// factor[i] = philox_uniform(seed, stream, first + i) >= p ? 1/(1-p) : 0 for
// i < n: the keep-and-scale factors of n consecutive elements of a stream
// (the attention cores' dropout of probabilities), drawn 64 at a time by
// the vector Philox of dropout_forward. Bit for bit philox_uniform's.
void dropout_factors(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float p,
                     float* factor);
// One of the Philox kernels the draws pick from by the CPU ("avx512",
// "avx2" or "portable"), for the tests: r[4 * b + w] = word w of counter
// block first + b for b < 16. False (r untouched) where this build or CPU
// lacks that kernel.
bool philox_kernel_blocks(const char* kernel, uint64_t first, uint64_t stream, uint64_t seed,
                          uint32_t* r);
}  // namespace detail

}  // namespace rotor::ops
