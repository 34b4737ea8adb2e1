// Kernels of incremental decoding (CPU twins in src/ops/decode.cpp): writing
// one position into the key/value cache, attention of one query per (b, h)
// against the first `length` cached keys, and the row gather of beam search.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

// cache[bh, position, :] = src[bh, :]; src [BH, D], cache [BH, Tmax, D].
cudaError_t kv_cache_write(const void* src, void* cache, int64_t BH, int64_t Tmax, int64_t D,
                           int64_t position, DType dt, cudaStream_t stream);

// The bias decode_attention adds to each key's score, the query at position
// length - 1 and key j at j. alibi_heads > 0: ALiBi with that many heads per
// batch row -- head h = bh % alibi_heads adds -alibi::slope(h, alibi_heads) *
// (length - 1 - j) (kernels/attention_masks.cuh). rel (device f32
// [2 rel_max + 1, heads], T5's gathered table, ops::AttentionOptions::
// rel_bias): head h = bh % heads adds rel[t5::relative_row(j - (length - 1),
// rel_max), h]. Neither: no bias.
struct DecodeBias {
  int64_t alibi_heads = 0;
  const float* rel = nullptr;
  int64_t rel_max = 0, heads = 1;
};

// q [BH, D] (rotated and scaled) against k/v cache [BH, Tmax, D], keys
// 0..length-1 -> out [BH, D]. fp32 arithmetic; D <= 256; `bias` as above.
cudaError_t decode_attention(const void* q, const void* k_cache, const void* v_cache, void* out,
                             int64_t BH, int64_t Tmax, int64_t D, int64_t length, DType dt,
                             cudaStream_t stream, const DecodeBias& bias = {});

// dst row i = src row index[i]; rows of row_bytes bytes; index i32 [M] on the
// device, already validated against the number of source rows.
cudaError_t index_select_rows(const void* src, const int32_t* index, void* dst, int64_t M,
                              size_t row_bytes, cudaStream_t stream);

}  // namespace rotor::kernels
