// Ops for incremental decoding: the key/value cache and attention of one new
// query per sequence against it, and row gathers for beam search.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace rotor::ops {

// cache[b, h, position, :] = src[b, h, 0, :]; src [B, H, 1, D], cache [B, H, Tmax, D].
void kv_cache_write(const Tensor& src, Tensor& cache, int64_t position);
// q [B, H, 1, D] (already rotated and scaled) against the first `length` keys
// and values of the caches [B, H, Tmax, D] -> out [B, H, 1, D]. Every cached
// key is visible (they are all at or before the query's position). alibi:
// head h of H adds -alibi::slope(h, H) * (length - 1 - j) to key j's score
// (the query sits at position length - 1, core/alibi.h), as the causal
// forward does, on the CPU and in the CUDA kernel. rel_bias (f32
// [2 rel_max + 1, H], T5's gathered table, ops::AttentionOptions::rel_bias):
// head h adds rel_bias[t5::relative_row(j - (length - 1), rel_max), h].
void decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t length,
                      Tensor& out, bool alibi = false, const Tensor& rel_bias = Tensor(),
                      int64_t rel_max = 0);
// dst[i] = src[index[i]] along the leading dimension; index i32 [M].
void index_select(const Tensor& src, const Tensor& index, Tensor& dst);

}  // namespace rotor::ops
