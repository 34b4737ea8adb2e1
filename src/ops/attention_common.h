// Argument checks and mask arithmetic shared by the attention ops (the
// materialized reference in attention.cpp and the tiled twin of the kernel in
// flash_attention.cpp), so that both read masks the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "core/alibi.h"
#include "core/t5_bias.h"
#include "ops/attention.h"

namespace rotor::ops::detail {

struct AttentionDims {
  int64_t B, H, Tq, Tk, D;
};

// q [B, H, Tq, D], k and v [B, H, Tk, D], one dtype and device; key_lengths
// i32 [B]; dropout in [0, 1). A rotor::Error naming
// `op` otherwise. The variable-length layout (o.cu_seqlens_q) only where
// varlen_ok (the flash core): q [1, H, total_q, D], k and v [1, H, total_k,
// D], cu_seqlens_q and cu_seqlens_k i32 [N + 1] on q's device, no key
// lengths, no dense score bias, max_seqlen_q and max_seqlen_k >= 0; on the
// CPU also the offsets themselves (from 0, nondecreasing, ending at total_q
// and total_k, no document longer than its max). The dims returned are then
// those of the regrouped layout, {N, H, max_seqlen_q, max_seqlen_k, D}.
AttentionDims check_attention_args(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const AttentionOptions& o, const char* op,
                                   bool varlen_ok = false);
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

// The bias of one (head, query row) as the cores add it to the scaled
// scores: ALiBi's (AttentionOptions::alibi), bias(j) = -slope * |q_pos -
// (k_offset + j)|, or T5's (AttentionOptions::rel_bias), bias(j) = the row of
// k_offset + j - q_pos, head h; 0 when neither is on.
struct BiasRow {
  float slope = 0.0f;
  int64_t q_pos = 0, k_offset = 0;
  bool alibi = false;
  const float* rel = nullptr;  // rel_bias + h: column h of [2 rel_max + 1, H]
  int64_t rel_max = 0, H = 1;
  BiasRow(const AttentionDims& d, const AttentionOptions& o, int64_t h, int64_t i)
      : slope(o.alibi ? static_cast<float>(alibi::slope(h, d.H)) : 0.0f),
        q_pos(o.bias_q_offset + i + (d.Tk - d.Tq)),
        k_offset(o.bias_k_offset),
        alibi(o.alibi),
        rel(o.rel_bias.defined() ? o.rel_bias.data<float>() + h : nullptr),
        rel_max(o.rel_max),
        H(d.H) {}
  bool on() const { return alibi || rel; }
  // The row of T5's table that key j reads.
  int64_t rel_row(int64_t j) const { return t5::relative_row(k_offset + j - q_pos, rel_max); }
  float operator()(int64_t j) const {
    if (alibi) return alibi::bias(slope, q_pos, k_offset + j);
    if (rel) return rel[rel_row(j) * H];
    return 0.0f;
  }
};

// The gradient of T5's gathered table, summed per (batch, head) by the
// backward's parallel loop in double, then over the batch in a fixed order
// and added into rel_bias_grad: the same bits for any thread count.
class RelBiasGrad {
 public:
  RelBiasGrad(const AttentionDims& d, const AttentionOptions& o)
      : H_(d.H),
        rows_(2 * o.rel_max + 1),
        on_(o.rel_bias_grad.defined()),
        sums_(on_ ? static_cast<size_t>(d.B * d.H * rows_) : 0, 0.0) {}
  bool on() const { return on_; }
  // The sums of (batch, head) bh, one per row of the table.
  double* of(int64_t bh) { return sums_.data() + bh * rows_; }
  // rel_bias_grad[row, h] += sum over b of of(b H + h)[row].
  void add_into(Tensor& grad) const {
    if (!on_) return;
    float* g = grad.data<float>();
    const int64_t B = static_cast<int64_t>(sums_.size()) / (H_ * rows_);
    for (int64_t h = 0; h < H_; ++h)
      for (int64_t r = 0; r < rows_; ++r) {
        double t = 0.0;
        for (int64_t b = 0; b < B; ++b) t += sums_[static_cast<size_t>((b * H_ + h) * rows_ + r)];
        g[r * H_ + h] += static_cast<float>(t);
      }
  }

 private:
  int64_t H_, rows_;
  bool on_;
  std::vector<double> sums_;
};

// rel_bias and rel_bias_grad of `o`, where set: f32 [2 rel_max + 1, H] on q's
// device, and not together with ALiBi. A rotor::Error naming `op` otherwise.
void check_rel_bias(const AttentionOptions& o, const AttentionDims& d, const Tensor& q,
                    const char* op);

}  // namespace rotor::ops::detail
