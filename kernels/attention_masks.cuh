// The masks, the dropout draw and ALiBi's bias of every attention kernel (the
// reference row kernels, kernels/attention_reference.cu, and the three flash
// kernels, kernels/flash_common.cuh): one definition, so that all of them --
// and the CPU implementations they are tested against (src/ops/attention.cpp,
// src/ops/flash_attention.cpp) -- see the same keys, draw the same mask and
// add the same bias. M is a parameter struct with B-indexed key_lengths, H,
// Tq, Tk, causal, dropout, seed, stream_id, alibi, bias_q_offset and
// bias_k_offset (AttentionMask, FlashParams).
//
// Only device code that plain C++ can also compile: the CPU emulation of the
// Volta kernels (tests/emulation/flash_sm70_emulate.cpp) includes it with
// __device__ defined away.
#pragma once

#include <cstdint>

#include "core/alibi.h"
#include "core/philox.h"
#include "core/t5_bias.h"

namespace rotor::kernels {

// The number of keys of batch row b (key_lengths clamped to [0, Tk]).
template <class M>
__device__ __forceinline__ int64_t key_length_of(const M& m, int64_t b) {
  if (!m.key_lengths) return m.Tk;
  const int64_t len = m.key_lengths[b];
  return len < 0 ? 0 : (len > m.Tk ? m.Tk : len);
}

// Keys 0..n-1 are visible to query i of a row with key_len keys (padding and
// the causal mask both cut a prefix; nondecreasing in i).
template <class M>
__device__ __forceinline__ int64_t visible_keys(const M& m, int64_t key_len, int64_t i) {
  int64_t n = key_len;
  if (m.causal) {
    int64_t c = i + (m.Tk - m.Tq) + 1;
    if (c < 0) c = 0;
    if (c < n) n = c;
  }
  return n;
}

// The first query that sees key j under the causal mask (i + Tk - Tq >= j); 0
// without it.
template <class M>
__device__ __forceinline__ int64_t first_query_seeing(const M& m, int64_t j) {
  if (!m.causal) return 0;
  const int64_t i = j - (m.Tk - m.Tq);
  return i > 0 ? i : 0;
}

// The dropout factor of the probability at flat index (bh * Tq + i) * Tk + j
// of [B, H, Tq, Tk]: rotor's Philox, 0 or 1 / (1 - p) (keep_scale). The draw
// alone (dropout > 0 known to the caller) keeps a register-bound kernel free
// of the extra test.
template <class M>
__device__ __forceinline__ float dropout_draw(const M& m, float keep_scale, uint64_t flat) {
  return philox_uniform(m.seed, m.stream_id, flat) >= m.dropout ? keep_scale : 0.0f;
}
template <class M>
__device__ __forceinline__ float keep_factor(const M& m, float keep_scale, uint64_t flat) {
  return m.dropout == 0.0f ? 1.0f : dropout_draw(m, keep_scale, flat);
}

// ALiBi (core/alibi.h), computed in the kernel, never materialized: head h
// adds -slope_h * |p_i - p_j| to the scaled score of query i and key j, with
// p_i = bias_q_offset + i + (Tk - Tq) and p_j = bias_k_offset + j (the
// contract of ops::AttentionOptions::alibi). A kernel takes the negated slope
// once (alibi_neg_slope, times log2(e) where it works in the log2 domain) and
// the query's distance origin once per row or tile (alibi_origin: p_i minus
// bias_k_offset, i.e. the key index at distance 0), and then adds the bias
// with one FMA per score (alibi_add). Positions are exact in fp32 below 2^24.
template <class M>
__device__ __forceinline__ float alibi_neg_slope(const M& m, int64_t h) {
  return m.alibi ? -static_cast<float>(alibi::slope(h, m.H)) : 0.0f;
}
template <class M>
__device__ __forceinline__ float alibi_origin(const M& m, int64_t i) {
  return static_cast<float>(m.bias_q_offset + i + (m.Tk - m.Tq) - m.bias_k_offset);
}
// s + neg_slope * |origin - j| (j: the key index, or origin and j both
// shifted by the same tile offset).
__device__ __forceinline__ float alibi_add(float s, float neg_slope, float origin, float j) {
  return fmaf(neg_slope, fabsf(origin - j), s);
}

// T5's relative bias (core/t5_bias.h) in the flash kernels (M: FlashCore or
// FlashParams; R: FlashT5 or FlashParams, with rel, rel_max and rel_grad):
// the score of query i and key j adds row t5::relative_row(j - t5_origin(i),
// rel_max) of head h's column of the [2 rel_max + 1, H] table, t5_origin(i)
// = p_i - bias_k_offset being, as alibi_origin, the key index at distance 0.
// A block stages its head's column in shared memory once (t5_stage) and
// reads it per score. Its backward sums each visible score's unscaled dS by
// row into the same shared rows (row r's bias at col[2 r], its sum at
// col[2 r + 1]: one base address, a constant offset from the block's shared
// memory, which keeps the tc kernel's backward within its registers) with
// shared atomics (a diagonal of the tile and, past rel_max, whole bands
// share a row) and, after a barrier, adds the sums into rel_grad (t5_flush,
// one global atomic per row that received anything).
template <class M>
__device__ __forceinline__ int64_t t5_origin(const M& m, int64_t i) {
  return m.bias_q_offset + i + (m.Tk - m.Tq) - m.bias_k_offset;
}
template <class R>
__device__ __forceinline__ int t5_row(const R& t, int64_t r) {
  return static_cast<int>(t5::relative_row(r, t.rel_max));
}
// col[stride row] = row `row` of the table's column h (of H); with stride 2
// (a backward) col[2 row + 1] = 0, the row's sum. Needs a barrier before
// the first read.
template <class R>
__device__ __forceinline__ void t5_stage(const R& t, int64_t H, int64_t h, float* col, int stride) {
  const int rows = static_cast<int>(2 * t.rel_max + 1);
  for (int e = threadIdx.x; e < rows; e += blockDim.x) {
    col[e * stride] = t.rel[e * H + h];
    if (stride == 2) col[2 * e + 1] = 0.0f;
  }
}
// rel_grad[row, h] += col[2 row + 1]; after a barrier that orders every sum.
template <class R>
__device__ __forceinline__ void t5_flush(const R& t, int64_t H, int64_t h, const float* col) {
  const int rows = static_cast<int>(2 * t.rel_max + 1);
  for (int e = threadIdx.x; e < rows; e += blockDim.x)
    if (col[2 * e + 1] != 0.0f) atomicAdd(t.rel_grad + e * H + h, col[2 * e + 1]);
}

}  // namespace rotor::kernels
