// Reductions: column sums (bias gradients), whole-tensor sum / max |x| (with
// host partials), the global L2 norm and the non-finite flag (device results).
// All deterministic: fixed partitions and fixed summation orders, no atomics.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

// Column sums use `splits` row slices; partial holds [splits, n] floats.
int sum_rows_splits(int64_t rows);
// out[n] (+)= sum_r x[r, n], out f32.
cudaError_t sum_rows(const void* x, DType dt, int64_t rows, int64_t n, float* out, bool accumulate,
                     float* partial, int splits, cudaStream_t stream);

// Whole-tensor reductions write one partial per block (`blocks` of them).
int reduce_blocks(int64_t n);
cudaError_t sum_partials(const void* x, DType dt, int64_t n, double* partial, int blocks,
                         cudaStream_t stream);
// NaN-propagating max |x| per block.
cudaError_t max_abs_partials(const void* x, DType dt, int64_t n, float* partial, int blocks,
                             cudaStream_t stream);

// Global norm: every tensor writes its per-block sums of squares into its own
// slice of `slots`; the finish kernel adds all slots in order and takes sqrt.
cudaError_t sumsq_partials(const void* x, DType dt, int64_t n, double* slots, int blocks,
                           cudaStream_t stream);
cudaError_t global_norm_finish(const double* slots, int64_t nslots, float* out,
                               cudaStream_t stream);

// flag = 0, then any non-finite element of any checked tensor sets it to 1.
cudaError_t nonfinite_reset(uint8_t* flag, cudaStream_t stream);
cudaError_t nonfinite_check(const void* x, DType dt, int64_t n, uint8_t* flag, cudaStream_t stream);

}  // namespace rotor::kernels
