// Attention in double, the yardstick of the emulated attention kernels
// (flash_tc_emulate.cpp, flash_sm70_emulate.cpp): forward out and lse, and the
// gradients dq, dk, dv of a given dout, with key lengths, the causal mask
// aligned to the last key (query i sees keys j <= i + Tk - Tq), attention
// dropout drawn by philox_uniform on the flat [B, H, Tq, Tk] index,
// optionally RoPE on q and k (the fp32 cos/sin of src/core/rope.h; the
// gradients rotated back) and optionally ALiBi: a materialized bias
// [H, Tq, Tk] in double, -alibi::slope(h, H) * |p_i - p_j| with the paper's
// slopes in double, p_i = bias_q_offset + i + (Tk - Tq), p_j =
// bias_k_offset + j (ops::AttentionOptions::alibi), added to the scaled
// scores, or T5's: row t5::relative_row(p_j - p_i, rel_max) of head h's
// column of a given [2 rel_max + 1, H] table, with the table's gradient (the
// unscaled dS summed per row). Inputs are the kernels' 16-bit inputs as
// doubles.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/alibi.h"
#include "core/philox.h"
#include "core/rope.h"
#include "core/t5_bias.h"

namespace emu {

struct AttentionShape {
  int64_t B, H, Tq, Tk;
  int D;
  bool causal;
  std::vector<int32_t> lengths;  // [B] visible keys, empty: all
  float dropout;
  double scale;
  uint64_t seed, stream;  // of the dropout draw
  bool rope = false;
  int64_t q_offset = 0, k_offset = 0;  // RoPE positions of the first query / key
  rotor::rope::Params rope_params{};   // interleaved pairs over the whole head
  bool alibi = false;
  int64_t bias_q_offset = 0,
          bias_k_offset = 0;     // ALiBi's and T5's positions of query 0 (less Tk - Tq), key 0
  std::vector<double> rel = {};  // T5's table [2 rel_max + 1, H]; empty: none
  int64_t rel_max = 0;
};

// ALiBi's bias materialized in double: [H, Tq, Tk] (empty without alibi).
inline std::vector<double> alibi_bias(const AttentionShape& c) {
  std::vector<double> bias;
  if (!c.alibi) return bias;
  bias.resize(static_cast<size_t>(c.H * c.Tq * c.Tk));
  for (int64_t h = 0; h < c.H; ++h) {
    const double slope = rotor::alibi::slope(h, c.H);
    for (int64_t i = 0; i < c.Tq; ++i)
      for (int64_t j = 0; j < c.Tk; ++j) {
        const int64_t pi = c.bias_q_offset + i + (c.Tk - c.Tq), pj = c.bias_k_offset + j;
        bias[static_cast<size_t>((h * c.Tq + i) * c.Tk + j)] =
            -slope * static_cast<double>(pi > pj ? pi - pj : pj - pi);
      }
  }
  return bias;
}

struct AttentionResult {
  std::vector<double> out, lse, dq, dk, dv;  // [B, H, Tq, D], [B, H, Tq], [B, H, Tq|Tk, D]
  std::vector<double> drel = {};             // T5's table gradient [2 rel_max + 1, H]
  // The sum of |term| of each entry of drel: the scale of the rounding a
  // kernel's sum of the same terms carries (rel_err below).
  std::vector<double> drel_mass = {};
};

// max |got - want| / max(1, mass) over a table's entries: a sum's error
// measured against the mass of its terms. T5's table gradient sums dS over
// whole diagonals, where the terms cancel (past max_distance, a row's dS sums
// to about 0) while each carries the rounding of the kernel's 16-bit out in
// delta = rowsum(dO o out).
inline double rel_err(const std::vector<double>& want, const std::vector<double>& mass,
                      const std::vector<float>& got) {
  double e = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    e = std::max(e, std::abs(want[i] - got[i]) / std::max(1.0, mass[i]));
  }
  return e;
}

// Rotates the [rows, D] head vectors of x (row r at position pos0 + r % T)
// by RoPE (back: by the transpose), in double with rope::rotation's factors
// (`p` resolved at the call's length).
inline void rotate_rows(std::vector<double>& x, int64_t T, int D, int64_t pos0,
                        const rotor::rope::Params& p, bool back) {
  for (size_t r = 0; r < x.size() / D; ++r)
    for (int i = 0; i < D / 2; ++i) {
      const rotor::rope::Rotation c =
          rotor::rope::rotation(p, pos0 + static_cast<int64_t>(r) % T, i, D);
      const double s = back ? -c.sin : c.sin, x0 = x[r * D + 2 * i], x1 = x[r * D + 2 * i + 1];
      x[r * D + 2 * i] = x0 * c.cos - x1 * s;
      x[r * D + 2 * i + 1] = x1 * c.cos + x0 * s;
    }
}

// q, dout: [B, H, Tq, D]; k, v: [B, H, Tk, D].
inline AttentionResult reference_attention(const AttentionShape& c, std::vector<double> q,
                                           std::vector<double> k, const std::vector<double>& v,
                                           const std::vector<double>& dout) {
  const int D = c.D;
  const rotor::rope::Params rp =
      rotor::rope::at_length(c.rope_params, D, std::max(c.q_offset + c.Tq, c.k_offset + c.Tk));
  if (c.rope) {
    rotate_rows(q, c.Tq, D, c.q_offset, rp, false);
    rotate_rows(k, c.Tk, D, c.k_offset, rp, false);
  }
  const double keep = c.dropout > 0 ? 1.0 / (1.0 - static_cast<double>(c.dropout)) : 1.0;
  const std::vector<double> bias = alibi_bias(c);
  const size_t nq = q.size(), nk = k.size();
  AttentionResult r{std::vector<double>(nq, 0), std::vector<double>(c.B * c.H * c.Tq),
                    std::vector<double>(nq, 0), std::vector<double>(nk, 0),
                    std::vector<double>(nk, 0)};
  if (!c.rel.empty()) r.drel.assign(c.rel.size(), 0.0);
  if (!c.rel.empty()) r.drel_mass.assign(c.rel.size(), 0.0);
  // T5's table row of query i and key j.
  auto rel_row = [&](int64_t i, int64_t j) {
    const int64_t pi = c.bias_q_offset + i + (c.Tk - c.Tq), pj = c.bias_k_offset + j;
    return static_cast<size_t>(rotor::t5::relative_row(pj - pi, c.rel_max));
  };
  for (int64_t bh = 0; bh < c.B * c.H; ++bh) {
    const int64_t b = bh / c.H;
    const int64_t len = c.lengths.empty() ? c.Tk : std::clamp<int64_t>(c.lengths[b], 0, c.Tk);
    for (int64_t i = 0; i < c.Tq; ++i) {
      int64_t n = len;
      if (c.causal) n = std::min(n, std::max<int64_t>(0, i + (c.Tk - c.Tq) + 1));
      const size_t qi = static_cast<size_t>((bh * c.Tq + i) * D);
      if (n == 0) {
        r.lse[bh * c.Tq + i] = -INFINITY;
        continue;
      }
      std::vector<double> s(n), pm(n), mk(n);
      double m = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += q[qi + d] * k[(bh * c.Tk + j) * D + d];
        s[j] = dot * c.scale;
        if (c.alibi) s[j] += bias[static_cast<size_t>(((bh % c.H) * c.Tq + i) * c.Tk + j)];
        if (!c.rel.empty()) s[j] += c.rel[rel_row(i, j) * c.H + (bh % c.H)];
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(s[j] - m);
      r.lse[bh * c.Tq + i] = m + std::log(sum);
      for (int64_t j = 0; j < n; ++j) {
        const uint64_t flat = static_cast<uint64_t>((bh * c.Tq + i) * c.Tk + j);
        mk[j] = c.dropout == 0
                    ? 1.0
                    : (rotor::philox_uniform(c.seed, c.stream, flat) >= c.dropout ? keep : 0.0);
        pm[j] = std::exp(s[j] - m) / sum;
        for (int d = 0; d < D; ++d) r.out[qi + d] += pm[j] * mk[j] * v[(bh * c.Tk + j) * D + d];
      }
      double del = 0;
      for (int d = 0; d < D; ++d) del += dout[qi + d] * r.out[qi + d];
      for (int64_t j = 0; j < n; ++j) {
        const size_t kj = static_cast<size_t>((bh * c.Tk + j) * D);
        double dp = 0;
        for (int d = 0; d < D; ++d) dp += dout[qi + d] * v[kj + d];
        const double g = pm[j] * (dp * mk[j] - del);  // the bias's gradient
        if (!c.rel.empty()) {
          r.drel[rel_row(i, j) * c.H + (bh % c.H)] += g;
          r.drel_mass[rel_row(i, j) * c.H + (bh % c.H)] += std::abs(g);
        }
        const double ds = g * c.scale;
        for (int d = 0; d < D; ++d) {
          r.dv[kj + d] += pm[j] * mk[j] * dout[qi + d];
          r.dk[kj + d] += ds * q[qi + d];
          r.dq[qi + d] += ds * k[kj + d];
        }
      }
    }
  }
  if (c.rope) {
    rotate_rows(r.dq, c.Tq, D, c.q_offset, rp, true);
    rotate_rows(r.dk, c.Tk, D, c.k_offset, rp, true);
  }
  return r;
}

// max |got - ref| / max(1, |ref|); infinities must agree exactly, NaN fails.
inline double max_err(const std::vector<double>& ref, const std::vector<float>& got) {
  double e = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    if (std::isinf(ref[i]) || std::isinf(got[i])) {
      if (ref[i] != static_cast<double>(got[i])) return INFINITY;
      continue;
    }
    e = std::max(e, std::abs(ref[i] - got[i]) / std::max(1.0, std::abs(ref[i])));
  }
  return e;
}

}  // namespace emu
