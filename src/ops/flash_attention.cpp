// CPU twin of the flash attention kernels (kernels/flash_attention.cu): per
// (batch, head) the queries are cut into tiles of kFlashTile rows and the
// visible keys into tiles of kFlashTile columns. The forward keeps a running
// max m and sum l per query (fp32) and rescales its accumulator by
// exp(m_old - m_new) when a tile raises the max (the online softmax of
// Milakov & Gimelshein 2018). The backward loops key tiles outside and query
// tiles inside, recomputing P from the saved log-sum-exp.
#include "ops/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/philox.h"
#include "core/rope.h"
#include "ops/attention_common.h"
#include "ops/attention_device.h"
#include "ops/cpu_f32.h"
#include "ops/dispatch.h"
#include "ops/rope_rows.h"

namespace rotor::ops {

namespace {

using detail::check_like;
using detail::key_lengths_host;
using detail::visible_keys;
using Dims = detail::AttentionDims;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// lse f32 [B, H, Tq] (variable-length: [1, H, total_q]) on q's device.
void check_lse(const Tensor& lse, const Tensor& q, const char* what) {
  check_shape(lse, {q.size(0), q.size(1), q.size(2)}, what);
  if (lse.dtype() != DType::F32) ROTOR_FAIL("{}: lse must be f32, got {}", what, lse.str());
  check_same_device(lse, q, what);
}

// The limits of the kernel asked for (options.flash_kernel on CUDA), checked
// here so that the message names the op.
void check_supported(const Tensor& q, const Tensor& k, const AttentionOptions& o, const char* op) {
  if (o.rope && (q.size(3) % 2 != 0 || o.rope_q_offset < 0 || o.rope_k_offset < 0))
    ROTOR_FAIL("{}: rope needs an even head dim and offsets >= 0 (D {}, offsets {}, {})", op,
               q.size(3), o.rope_q_offset, o.rope_k_offset);
  if (o.rope) check_rope_params(o.rope_params, q.size(3), op);
  if (o.score_bias.defined())
    ROTOR_FAIL(
        "{}: a dense score bias (options.score_bias) is added by the materialized core "
        "alone (ops::attention_forward)",
        op);
  if (!q.is_cuda()) return;
  const bool varlen = o.cu_seqlens_q.defined();  // the regrouped layout's shape
  const FlashCase c{q.dtype(),
                    varlen ? o.cu_seqlens_q.numel() - 1 : q.size(0),
                    q.size(1),
                    varlen ? o.max_seqlen_q : q.size(2),
                    varlen ? o.max_seqlen_k : k.size(2),
                    q.size(3),
                    o.rope,
                    !o.rope || rope::interleaved_full(o.rope_params, q.size(3)),
                    o.alibi,
                    o.rel_bias.defined(),
                    o.rel_max};
  const std::string why = flash_kernel_unsupported(o.flash_kernel, c, attention_device(q.device()));
  if (!why.empty()) ROTOR_FAIL("{}: {}", op, why);
}

// The settings of a call's rotation: dynamic_ntk resolved at its length,
// one for q and k (rope::at_length).
// (the variable-length layout's: its longest documents' lengths).
rope::Params call_rope(const AttentionOptions& o, const Tensor& q, const Tensor& k) {
  const bool varlen = o.cu_seqlens_q.defined();
  const int64_t length = std::max(o.rope_q_offset + (varlen ? o.max_seqlen_q : q.size(2)),
                                  o.rope_k_offset + (varlen ? o.max_seqlen_k : k.size(2)));
  return rope::at_length(o.rope_params, q.size(3), length);
}

// Where token t of a [.., T, D] tensor sits in its sequence: t, or with
// cu_seqlens (the variable-length layout's offsets, host i32 [N + 1] ending
// at T) t less the start of its document.
std::vector<int64_t> token_positions(const Tensor& cu_seqlens, int64_t T) {
  std::vector<int64_t> pos(static_cast<size_t>(T));
  if (!cu_seqlens.defined()) {
    for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = t;
    return pos;
  }
  const int32_t* cu = cu_seqlens.data<int32_t>();
  for (int64_t n = 0; n + 1 < cu_seqlens.numel(); ++n)
    for (int64_t t = cu[n]; t < cu[n + 1]; ++t) pos[static_cast<size_t>(t)] = t - cu[n];
  return pos;
}

// x f32 [B, H, T, D] on the CPU rotated by RoPE (back: by the transpose), row
// t at position offset + pos[t] (token_positions), with the factors of
// core/rope.h.
void rope_rows(const float* x, float* y, const Shape& shape, int64_t offset,
               const std::vector<int64_t>& pos, const rope::Params& p, bool back) {
  const int64_t T = shape[2], D = shape[3], half = rope::rotated_dims(p, D) / 2;
  const int64_t span = T == 0 ? 0 : *std::max_element(pos.begin(), pos.end()) + 1;
  const std::vector<rope::Rotation> table = rope_table(p, D, offset, span);
  const int64_t rows = shape[0] * shape[1] * T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    rope_row(p, D, table.data() + pos[static_cast<size_t>(r % T)] * half, x + r * D, y + r * D,
             back);
}

// A rotated copy of x (f32, CPU).
Tensor rope_copy(const Tensor& x, int64_t offset, const std::vector<int64_t>& pos,
                 const rope::Params& p) {
  Tensor y = Tensor::zeros(x.shape(), DType::F32, x.device());
  rope_rows(x.data<float>(), y.data<float>(), x.shape(), offset, pos, p, false);
  return y;
}

// One (b, h) of a call, as the kernels see it (kernels/flash_common.cuh,
// FlashSeq): where its query and key rows start, how many there are, and the
// keys padding leaves visible. Dense: rows bh Tq and bh Tk of [B, H, T, D];
// variable-length: document b's tokens in head h's [total, D].
struct Seq {
  int64_t q0, k0, tq, tk, key_len;
};
class Seqs {
 public:
  Seqs(const Dims& d, const AttentionOptions& o, const Tensor& q, const Tensor& k, const char* op)
      : d_(d), total_q_(q.size(2)), total_k_(k.size(2)) {
    if (o.cu_seqlens_q.defined()) {
      cu_q_ = o.cu_seqlens_q.data<int32_t>();
      cu_k_ = o.cu_seqlens_k.data<int32_t>();
    } else {
      key_len_ = key_lengths_host(d, o, op);
    }
  }
  Seq operator()(int64_t bh) const {
    const int64_t b = bh / d_.H, h = bh % d_.H;
    if (!cu_q_) return {bh * d_.Tq, bh * d_.Tk, d_.Tq, d_.Tk, key_len_[static_cast<size_t>(b)]};
    const int64_t tk = cu_k_[b + 1] - cu_k_[b];
    return {h * total_q_ + cu_q_[b], h * total_k_ + cu_k_[b], cu_q_[b + 1] - cu_q_[b], tk, tk};
  }

 private:
  Dims d_;
  int64_t total_q_, total_k_;
  const int32_t* cu_q_ = nullptr;
  const int32_t* cu_k_ = nullptr;
  std::vector<int64_t> key_len_;
};

inline float keep_factor(const AttentionOptions& o, float keep_scale, uint64_t flat) {
  if (o.dropout == 0.0f) return 1.0f;
  return philox_uniform(o.seed, o.stream, flat) >= o.dropout ? keep_scale : 0.0f;
}

inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t c = 0; c < n; ++c) s += a[c] * b[c];
  return s;
}

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse) {
  const Dims d = detail::check_attention_args(q, k, v, options, "flash_attention_forward", true);
  check_like(out, q.shape(), q, "flash_attention_forward out");
  check_lse(lse, q, "flash_attention_forward lse");
  check_supported(q, k, options, "flash_attention_forward");
  ROTOR_DISPATCH_CUDA(q, flash_attention_forward(q, k, v, options, out, lse));
  if (detail::F32Compute::needed({&q})) {
    detail::F32Compute f;
    Tensor out32 = f.output(out);
    flash_attention_forward(f.input(q), f.input(k), f.input(v), options, out32, lse);
    f.commit();
    return;
  }
  if (options.rope) {  // rotate copies of q and k, then the plain flash core
    AttentionOptions o = options;
    o.rope = false;
    const rope::Params p = call_rope(options, q, k);
    flash_attention_forward(
        rope_copy(q, options.rope_q_offset, token_positions(options.cu_seqlens_q, q.size(2)), p),
        rope_copy(k, options.rope_k_offset, token_positions(options.cu_seqlens_k, k.size(2)), p), v,
        o, out, lse);
    return;
  }
  const Seqs seqs(d, options, q, k, "flash_attention_forward");
  const float keep_scale = options.dropout > 0.0f ? 1.0f / (1.0f - options.dropout) : 1.0f;
  // Dense [B, H, T, D] (lse [B, H, Tq]) or variable-length [1, H, total, D].
  const float* pq = q.data<float>();  // [B, H, Tq, D]
  const float* pk = k.data<float>();  // [B, H, Tk, D]
  const float* pv = v.data<float>();  // [B, H, Tk, D]
  float* po = out.data<float>();      // [B, H, Tq, D]
  float* pl = lse.data<float>();      // [B, H, Tq]
  const int64_t q_tiles = (d.Tq + kFlashTile - 1) / kFlashTile;

#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
    for (int64_t qt = 0; qt < q_tiles; ++qt) {
      const Seq sq = seqs(bh);
      const int64_t i0 = qt * kFlashTile, i1 = std::min(sq.tq, i0 + kFlashTile);
      if (i0 >= sq.tq) continue;  // past this document's queries
      const float* kb = pk + sq.k0 * d.D;
      const float* vb = pv + sq.k0 * d.D;
      // Per query row of the tile: running max, running sum, unnormalized output.
      std::vector<float> m(static_cast<size_t>(kFlashTile), kNegInf);
      std::vector<float> l(static_cast<size_t>(kFlashTile), 0.0f);
      std::vector<float> acc(static_cast<size_t>(kFlashTile * d.D), 0.0f);         // [tile, D]
      std::vector<float> s(static_cast<size_t>(kFlashTile));                       // one score row
      const int64_t n_tile = visible_keys(d, options.causal, sq.key_len, i1 - 1);  // the most
      for (int64_t j0 = 0; j0 < n_tile; j0 += kFlashTile) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = i - i0;
          const int64_t n = visible_keys(d, options.causal, sq.key_len, i);
          const int64_t j1 = std::min(n, j0 + kFlashTile);
          if (j1 <= j0) continue;  // this tile is fully masked for query i
          const float* qrow = pq + (sq.q0 + i) * d.D;
          const detail::BiasRow bias(d, options, bh % d.H, i);
          float tile_max = kNegInf;
          for (int64_t j = j0; j < j1; ++j) {
            s[j - j0] = dot(qrow, kb + j * d.D, d.D) * options.scale + bias(j);
            tile_max = std::max(tile_max, s[j - j0]);
          }
          const float m_new = std::max(m[r], tile_max);
          const float alpha = std::exp(m[r] - m_new);  // 0 on the first visible tile
          float* a = acc.data() + r * d.D;
          for (int64_t c = 0; c < d.D; ++c) a[c] *= alpha;
          float sum = 0.0f;
          const uint64_t row_flat = static_cast<uint64_t>((bh * d.Tq + i) * d.Tk);
          for (int64_t j = j0; j < j1; ++j) {
            const float p = std::exp(s[j - j0] - m_new);
            sum += p;
            const float w = p * keep_factor(options, keep_scale, row_flat + j);
            if (w == 0.0f) continue;
            const float* vrow = vb + j * d.D;
            for (int64_t c = 0; c < d.D; ++c) a[c] += w * vrow[c];
          }
          l[r] = l[r] * alpha + sum;
          m[r] = m_new;
        }
      }
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t r = i - i0;
        float* orow = po + (sq.q0 + i) * d.D;
        const float* a = acc.data() + r * d.D;
        const bool empty = l[r] == 0.0f;  // no visible key
        const float inv = empty ? 0.0f : 1.0f / l[r];
        for (int64_t c = 0; c < d.D; ++c) orow[c] = a[c] * inv;
        pl[sq.q0 + i] = empty ? kNegInf : m[r] + std::log(l[r]);
      }
    }
  }
}

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout,
                              const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  const Dims d = detail::check_attention_args(q, k, v, options, "flash_attention_backward", true);
  check_like(out, q.shape(), q, "flash_attention_backward out");
  check_lse(lse, q, "flash_attention_backward lse");
  check_like(dout, q.shape(), q, "flash_attention_backward dout");
  check_like(dq, q.shape(), q, "flash_attention_backward dq");
  check_like(dk, k.shape(), q, "flash_attention_backward dk");
  check_like(dv, v.shape(), q, "flash_attention_backward dv");
  check_supported(q, k, options, "flash_attention_backward");
  ROTOR_DISPATCH_CUDA(q, flash_attention_backward(q, k, v, out, lse, dout, options, dq, dk, dv));
  if (detail::F32Compute::needed({&q})) {
    detail::F32Compute f;
    Tensor dq32 = f.output(dq), dk32 = f.output(dk), dv32 = f.output(dv);
    flash_attention_backward(f.input(q), f.input(k), f.input(v), f.input(out), lse, f.input(dout),
                             options, dq32, dk32, dv32);
    f.commit();
    return;
  }
  if (options.rope) {  // the gradients of the rotated q and k, rotated back
    AttentionOptions o = options;
    o.rope = false;
    const rope::Params p = call_rope(options, q, k);
    const std::vector<int64_t> pq = token_positions(options.cu_seqlens_q, q.size(2));
    const std::vector<int64_t> pk = token_positions(options.cu_seqlens_k, k.size(2));
    flash_attention_backward(rope_copy(q, options.rope_q_offset, pq, p),
                             rope_copy(k, options.rope_k_offset, pk, p), v, out, lse, dout, o, dq,
                             dk, dv);
    rope_rows(dq.data<float>(), dq.data<float>(), dq.shape(), options.rope_q_offset, pq, p, true);
    rope_rows(dk.data<float>(), dk.data<float>(), dk.shape(), options.rope_k_offset, pk, p, true);
    return;
  }
  const Seqs seqs(d, options, q, k, "flash_attention_backward");
  const float keep_scale = options.dropout > 0.0f ? 1.0f / (1.0f - options.dropout) : 1.0f;
  const float* pq = q.data<float>();      // [B, H, Tq, D]
  const float* pk = k.data<float>();      // [B, H, Tk, D]
  const float* pv = v.data<float>();      // [B, H, Tk, D]
  const float* po = out.data<float>();    // [B, H, Tq, D]
  const float* pl = lse.data<float>();    // [B, H, Tq]
  const float* pdo = dout.data<float>();  // [B, H, Tq, D]
  float* pdq = dq.data<float>();          // [B, H, Tq, D]
  float* pdk = dk.data<float>();          // [B, H, Tk, D]
  float* pdv = dv.data<float>();          // [B, H, Tk, D]

  detail::RelBiasGrad rel_grad(d, options);  // T5's table (AttentionOptions::rel_bias_grad)
#pragma omp parallel for schedule(dynamic)
  for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
    const Seq sq = seqs(bh);
    double* rel_sums = rel_grad.on() ? rel_grad.of(bh) : nullptr;
    const float* qb = pq + sq.q0 * d.D;
    const float* kb = pk + sq.k0 * d.D;
    const float* vb = pv + sq.k0 * d.D;
    const float* dob = pdo + sq.q0 * d.D;
    float* dqb = pdq + sq.q0 * d.D;
    float* dkb = pdk + sq.k0 * d.D;
    float* dvb = pdv + sq.k0 * d.D;
    std::fill(dqb, dqb + sq.tq * d.D, 0.0f);
    std::fill(dkb, dkb + sq.tk * d.D, 0.0f);
    std::fill(dvb, dvb + sq.tk * d.D, 0.0f);
    // D_i = rowsum(dout o out) = sum_j P_ij dP_ij (the kernel's preprocessing pass).
    std::vector<float> delta(static_cast<size_t>(sq.tq));
    for (int64_t i = 0; i < sq.tq; ++i) delta[i] = dot(dob + i * d.D, po + (sq.q0 + i) * d.D, d.D);
    for (int64_t j0 = 0; j0 < sq.key_len; j0 += kFlashTile) {
      const int64_t j1 = std::min(sq.key_len, j0 + kFlashTile);
      // First query that sees key j0 under the causal mask: i + Tk - Tq >= j0.
      const int64_t i_first = options.causal ? std::max<int64_t>(0, j0 - (d.Tk - d.Tq)) : 0;
      for (int64_t i0 = (i_first / kFlashTile) * kFlashTile; i0 < sq.tq; i0 += kFlashTile) {
        const int64_t i1 = std::min(sq.tq, i0 + kFlashTile);
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t n = std::min(j1, visible_keys(d, options.causal, sq.key_len, i));
          if (n <= j0) continue;
          const float lse_i = pl[sq.q0 + i];
          const float* qrow = qb + i * d.D;
          const float* dorow = dob + i * d.D;
          float* dqrow = dqb + i * d.D;
          const uint64_t row_flat = static_cast<uint64_t>((bh * d.Tq + i) * d.Tk);
          const detail::BiasRow bias(d, options, bh % d.H, i);
          for (int64_t j = j0; j < n; ++j) {
            const float p =
                std::exp(dot(qrow, kb + j * d.D, d.D) * options.scale + bias(j) - lse_i);
            const float mk = keep_factor(options, keep_scale, row_flat + j);
            const float dp = dot(dorow, vb + j * d.D, d.D) * mk;
            const float g = p * (dp - delta[i]);  // dL/d(score + bias)
            if (rel_sums) rel_sums[bias.rel_row(j)] += g;
            const float ds = g * options.scale;
            const float pm = p * mk;
            float* dkrow = dkb + j * d.D;
            float* dvrow = dvb + j * d.D;
            const float* krow = kb + j * d.D;
            for (int64_t c = 0; c < d.D; ++c) {
              dvrow[c] += pm * dorow[c];
              dkrow[c] += ds * qrow[c];
              dqrow[c] += ds * krow[c];
            }
          }
        }
      }
    }
  }
  if (rel_grad.on()) {
    Tensor g = options.rel_bias_grad;
    rel_grad.add_into(g);
  }
}

}  // namespace rotor::ops
