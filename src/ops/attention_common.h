// Argument checks and mask arithmetic shared by the attention ops (the
// materialized reference in attention.cpp and the tiled twin of the kernel in
// flash_attention.cpp), so that both read masks the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "core/alibi.h"
#include "ops/attention.h"

namespace rotor::ops::detail {

struct AttentionDims {
  int64_t B, H, Tq, Tk, D;
};

// q [B, H, Tq, D], k and v [B, H, Tk, D], one dtype and device; key_lengths
// i32 [B]; dropout in [0, 1). A rotor::Error naming
// `op` otherwise.
AttentionDims check_attention_args(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const AttentionOptions& o, const char* op);
// t has `shape`, q's dtype and q's device.
void check_like(const Tensor& t, const Shape& shape, const Tensor& q, const char* what);
// The key lengths on the host (Tk for every row when there are none), each
// checked to lie in [0, Tk].
std::vector<int64_t> key_lengths_host(const AttentionDims& d, const AttentionOptions& o,
                                      const char* op);
// How many keys query i sees (keys 0..n-1): j < key_len, and with a causal
// mask j <= i + (Tk - Tq).
inline int64_t visible_keys(const AttentionDims& d, bool causal, int64_t key_len, int64_t i) {
  int64_t n = key_len;
  if (causal) n = std::min(n, std::max<int64_t>(0, i + (d.Tk - d.Tq) + 1));
  return n;
}

// ALiBi of one (head, query row) as the cores apply it (AttentionOptions::
// alibi): bias(j) = -slope * |q_pos - (k_offset + j)|, 0 when alibi is off.
struct AlibiRow {
  float slope = 0.0f;
  int64_t q_pos = 0, k_offset = 0;
  bool on = false;
  AlibiRow(const AttentionDims& d, const AttentionOptions& o, int64_t h, int64_t i)
      : slope(static_cast<float>(alibi::slope(h, d.H))),
        q_pos(o.alibi_q_offset + i + (d.Tk - d.Tq)),
        k_offset(o.alibi_k_offset),
        on(o.alibi) {}
  float operator()(int64_t j) const { return on ? alibi::bias(slope, q_pos, k_offset + j) : 0.0f; }
};

}  // namespace rotor::ops::detail
