// Reference attention: per (batch, head) the [Tq, Tk] scores are
// materialized (GEMMs on the CPU), masked (key padding, causal), softmaxed
// with sums in double and dropped out with the Philox mask the fused GPU core
// draws. On the CPU this is also the fastest path.
#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/attention_common.h"
#include "ops/cpu_f32.h"
#include "ops/cpu_gemm.h"
#include "ops/cpu_rows.h"
#include "ops/dispatch.h"
#include "ops/dropout.h"

namespace rotor::ops {

namespace {

using detail::check_like;
using detail::key_lengths_host;
using detail::visible_keys;
using Dims = detail::AttentionDims;

// Dropout keep-and-scale factors (0 or 1/(1-p)) of the [Tq, Tk] probs of
// one (batch, head), whose element (i, j) is stream element base + i Tk + j.
void head_dropout_factors(const AttentionOptions& o, uint64_t base, int64_t n,
                          std::vector<float>& factor) {
  factor.resize(static_cast<size_t>(n));
  detail::dropout_factors(o.seed, o.stream, base, n, o.dropout, factor.data());
}

// The live query rows of each batch row under packed rows
// (AttentionOptions::packed_rows; empty: not packed), checked: key lengths,
// and query lengths where Tq != Tk (else the key lengths serve both).
std::vector<int64_t> packed_rows(const Dims& d, const AttentionOptions& o,
                                 const std::vector<int64_t>& key_len, const char* what) {
  if (!o.packed_rows) return {};
  ROTOR_CHECK(o.key_lengths.defined() && (d.Tq == d.Tk || o.query_lengths.defined()),
              "{}: packed rows need key lengths, and query lengths where Tq {} != Tk {}", what,
              d.Tq, d.Tk);
  if (!o.query_lengths.defined()) return key_len;
  ROTOR_CHECK(o.query_lengths.dtype() == DType::I32 && o.query_lengths.numel() == d.B,
              "{}: query_lengths must be i32 [{}], got {}", what, d.B, o.query_lengths.str());
  std::vector<int64_t> rows;
  for (int32_t n : o.query_lengths.to(Device::cpu()).to_ints()) {
    ROTOR_CHECK(n >= 0 && n <= d.Tq, "{}: a query length {} outside 0..{}", what, n, d.Tq);
    rows.push_back(n);
  }
  return rows;
}

// One of the core's per-(batch, head) products, beta 0: cpu_sgemm, or the
// row loops of ops/cpu_rows.h where every row is short (`small`, fixed per
// call by Tq and Tk, so a call's heads and its backward agree). The core's
// products are A B^T, A B and A^T B: the three the row loops have.
void head_gemm(bool small, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
               const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
  if (!small) return cpu_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, 0.0f, C, ldc);
  if (tb == CblasTrans) return detail::small_gemm_nt(M, N, K, alpha, A, lda, B, ldb, C, ldc);
  detail::small_gemm_xn(ta == CblasTrans, M, N, K, alpha, A, lda, B, ldb, C, ldc);
}

bool small_rows(const Dims& d) {
  return d.Tq <= detail::kSmallRows && d.Tk <= detail::kSmallRows;
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& options, Tensor& out, Tensor& probs) {
  const Dims d = detail::check_attention_args(q, k, v, options, "attention_forward");
  if (options.rope)
    ROTOR_FAIL(
        "attention_forward: options.rope (RoPE inside the kernel) is honored only by the flash "
        "core (ops::flash_attention_*); rotate q and k before the reference attention");
  check_like(out, q.shape(), q, "attention_forward out");
  check_like(probs, {d.B, d.H, d.Tq, d.Tk}, q, "attention_forward probs");
  ROTOR_DISPATCH_CUDA(q, attention_forward(q, k, v, options, out, probs));
  if (detail::F32Compute::needed({&q})) {
    detail::F32Compute f;
    Tensor out32 = f.output(out), probs32 = f.output(probs);
    attention_forward(f.input(q), f.input(k), f.input(v), options, out32, probs32);
    f.commit();
    return;
  }
  const auto key_len = key_lengths_host(d, options, "attention_forward");
  const std::vector<int64_t> live_rows = packed_rows(d, options, key_len, "attention_forward");
  const bool packed = !live_rows.empty();
  const float* pq = q.data<float>();  // [B, H, Tq, D]
  const float* pk = k.data<float>();  // [B, H, Tk, D]
  const float* pv = v.data<float>();  // [B, H, Tk, D]
  float* po = out.data<float>();      // [B, H, Tq, D]
  float* pp = probs.data<float>();    // [B, H, Tq, Tk]
  const float* pbias = options.score_bias.defined() ? options.score_bias.data<float>() : nullptr;
  const bool small = small_rows(d);

  // Per (batch, head): S = scale Q K^T and O = (P o M) V are GEMMs (cpu_sgemm
  // runs them single-threaded inside this parallel loop; short rows take
  // head_gemm's row loops); the masked softmax
  // in between is per row (detail::softmax_row: vector exp, sums in double).
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t bh = b * d.H + h;
      const float* qb = pq + bh * d.Tq * d.D;
      const float* kb = pk + bh * d.Tk * d.D;
      const float* vb = pv + bh * d.Tk * d.D;
      float* pb = pp + bh * d.Tq * d.Tk;  // [Tq, Tk]
      float* ob = po + bh * d.Tq * d.D;   // [Tq, D]
      // Packed rows: only the live [rows, keys] block (the rest is zero).
      const int64_t live = packed ? live_rows[b] : d.Tq, cols = packed ? key_len[b] : d.Tk;
      if (live < d.Tq) std::fill(pb + live * d.Tk, pb + d.Tq * d.Tk, 0.0f);
      if (live > 0 && cols > 0)
        head_gemm(small, CblasNoTrans, CblasTrans, static_cast<int>(live), static_cast<int>(cols),
                  static_cast<int>(d.D), options.scale, qb, static_cast<int>(d.D), kb,
                  static_cast<int>(d.D), pb, static_cast<int>(d.Tk));
      for (int64_t i = 0; i < live; ++i) {
        float* prow = pb + i * d.Tk;
        const int64_t n = visible_keys(d, options.causal, key_len[b], i);
        const detail::BiasRow bias(d, options, h, i);
        if (bias.on())  // ALiBi's or T5's bias of this row, added to the visible scores
          for (int64_t j = 0; j < n; ++j) prow[j] += bias(j);
        if (pbias) {  // the caller's dense bias
          const float* brow = pbias + (bh * d.Tq + i) * d.Tk;
          for (int64_t j = 0; j < n; ++j) prow[j] += brow[j];
        }
        detail::softmax_row(prow, n);
        for (int64_t j = n; j < d.Tk; ++j) prow[j] = 0.0f;  // masked, or no visible key at all
      }
      const float* weights = pb;
      std::vector<float> dropped;
      if (options.dropout > 0.0f) {
        // P o M: masked entries stay 0 (0 times a factor).
        head_dropout_factors(options, static_cast<uint64_t>(bh * d.Tq * d.Tk), d.Tq * d.Tk,
                             dropped);
        for (int64_t x = 0; x < d.Tq * d.Tk; ++x) dropped[x] *= pb[x];
        weights = dropped.data();
      }
      if (live < d.Tq) std::fill(ob + live * d.D, ob + d.Tq * d.D, 0.0f);
      if (live > 0)
        head_gemm(small, CblasNoTrans, CblasNoTrans, static_cast<int>(live), static_cast<int>(d.D),
                  static_cast<int>(cols), 1.0f, weights, static_cast<int>(d.Tk), vb,
                  static_cast<int>(d.D), ob, static_cast<int>(d.D));
    }
  }
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const Tensor& dout, const AttentionOptions& options, Tensor& dq, Tensor& dk,
                        Tensor& dv) {
  const Dims d = detail::check_attention_args(q, k, v, options, "attention_backward");
  if (options.rope)
    ROTOR_FAIL(
        "attention_backward: options.rope (RoPE inside the kernel) is honored only by the flash "
        "core (ops::flash_attention_*); rotate q and k before the reference attention");
  check_like(probs, {d.B, d.H, d.Tq, d.Tk}, q, "attention_backward probs");
  check_like(dout, q.shape(), q, "attention_backward dout");
  check_like(dq, q.shape(), q, "attention_backward dq");
  check_like(dk, k.shape(), q, "attention_backward dk");
  check_like(dv, v.shape(), q, "attention_backward dv");
  ROTOR_DISPATCH_CUDA(q, attention_backward(q, k, v, probs, dout, options, dq, dk, dv));
  if (detail::F32Compute::needed({&q})) {
    detail::F32Compute f;
    Tensor dq32 = f.output(dq), dk32 = f.output(dk), dv32 = f.output(dv);
    attention_backward(f.input(q), f.input(k), f.input(v), f.input(probs), f.input(dout), options,
                       dq32, dk32, dv32);
    f.commit();
    return;
  }
  const auto key_len = key_lengths_host(d, options, "attention_backward");
  const std::vector<int64_t> live_rows = packed_rows(d, options, key_len, "attention_backward");
  const bool packed = !live_rows.empty();
  const float* pq = q.data<float>();      // [B, H, Tq, D]
  const float* pk = k.data<float>();      // [B, H, Tk, D]
  const float* pv = v.data<float>();      // [B, H, Tk, D]
  const float* pp = probs.data<float>();  // [B, H, Tq, Tk]
  const float* pdo = dout.data<float>();  // [B, H, Tq, D]
  float* pdq = dq.data<float>();          // [B, H, Tq, D]
  float* pdk = dk.data<float>();          // [B, H, Tk, D]
  float* pdv = dv.data<float>();          // [B, H, Tk, D]

  // out = (P o M) V with M the dropout factors, so
  //   dV = (P o M)^T dout,  dP = (dout V^T) o M,  dS = P o (dP - rowsum(dP o P)),
  //   dQ = scale dS K,  dK = scale dS^T Q.  Masked entries have P = 0, hence dS = 0.
  // ALiBi's bias has no parameter and is constant in q and k: it enters only
  // through P, which the forward saved. T5's bias is a parameter: its
  // gradient is dS / scale summed over the scores that read each row.
  // The four products are GEMMs per (batch, head).
  detail::RelBiasGrad rel_grad(d, options);
  float* pbias_grad =
      options.score_bias_grad.defined() ? options.score_bias_grad.data<float>() : nullptr;
  const bool small = small_rows(d);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t bh = b * d.H + h;
      const int Tk = static_cast<int>(d.Tk), D = static_cast<int>(d.D);
      const float* qb = pq + bh * d.Tq * d.D;
      const float* kb = pk + bh * d.Tk * d.D;
      const float* vb = pv + bh * d.Tk * d.D;
      const float* pb = pp + bh * d.Tq * d.Tk;
      const float* dob = pdo + bh * d.Tq * d.D;
      const uint64_t base = static_cast<uint64_t>(bh * d.Tq * d.Tk);
      std::vector<float> ds(static_cast<size_t>(d.Tq * d.Tk)), w, m;
      const float* weights = pb;  // P o M: P itself without dropout
      if (options.dropout > 0.0f) {
        head_dropout_factors(options, base, d.Tq * d.Tk, m);
        w.resize(static_cast<size_t>(d.Tq * d.Tk));
        for (int64_t x = 0; x < d.Tq * d.Tk; ++x) w[x] = pb[x] * m[x];
        weights = w.data();
      }
      // Packed rows: only the live [rows, keys] block (the rest is zero).
      const int live = static_cast<int>(packed ? live_rows[b] : d.Tq),
                cols = static_cast<int>(packed ? key_len[b] : d.Tk);
      float* dvb = pdv + bh * d.Tk * d.D;
      float* dqb = pdq + bh * d.Tq * d.D;
      float* dkb = pdk + bh * d.Tk * d.D;
      std::fill(dvb + static_cast<int64_t>(cols) * D, dvb + d.Tk * d.D, 0.0f);
      std::fill(dqb + static_cast<int64_t>(live) * D, dqb + d.Tq * d.D, 0.0f);
      std::fill(dkb + static_cast<int64_t>(cols) * D, dkb + d.Tk * d.D, 0.0f);
      if (pbias_grad)
        std::fill(pbias_grad + (bh * d.Tq + live) * d.Tk, pbias_grad + (bh + 1) * d.Tq * d.Tk,
                  0.0f);
      if (live == 0 || cols == 0) continue;
      // dV = W^T dout: [Tk, D]
      head_gemm(small, CblasTrans, CblasNoTrans, cols, D, live, 1.0f, weights, Tk, dob, D, dvb, D);
      // dP = dout V^T: [Tq, Tk] (into ds)
      head_gemm(small, CblasNoTrans, CblasTrans, live, cols, D, 1.0f, dob, D, vb, D, ds.data(), Tk);
      for (int64_t i = 0; i < live; ++i) {
        const float* prow = pb + i * d.Tk;
        float* row = ds.data() + i * d.Tk;
        if (options.dropout > 0.0f) {  // dP o M (masked entries: masked_dot_row zeroes them)
          const float* mrow = m.data() + i * d.Tk;
          for (int64_t j = 0; j < d.Tk; ++j) row[j] *= mrow[j];
        }
        const double dot = detail::masked_dot_row(prow, row, d.Tk);
        const float rowsum = static_cast<float>(dot);
        if (pbias_grad) {  // the dense bias's gradient: dS / scale, 0 where masked
          float* grow = pbias_grad + (bh * d.Tq + i) * d.Tk;
          for (int64_t j = 0; j < d.Tk; ++j) grow[j] = prow[j] * (row[j] - rowsum);
        }
        if (rel_grad.on()) {
          const detail::BiasRow bias(d, options, h, i);
          double* sums = rel_grad.of(bh);
          for (int64_t j = 0; j < d.Tk; ++j) {
            const float g = prow[j] * (row[j] - rowsum);
            sums[bias.rel_row(j)] += g;
            row[j] = g * options.scale;
          }
          continue;
        }
        for (int64_t j = 0; j < d.Tk; ++j) row[j] = prow[j] * (row[j] - rowsum) * options.scale;
      }
      // dQ = dS K: [Tq, D];  dK = dS^T Q: [Tk, D]
      head_gemm(small, CblasNoTrans, CblasNoTrans, live, D, cols, 1.0f, ds.data(), Tk, kb, D, dqb,
                D);
      head_gemm(small, CblasTrans, CblasNoTrans, cols, D, live, 1.0f, ds.data(), Tk, qb, D, dkb, D);
    }
  }
  if (rel_grad.on()) {
    Tensor g = options.rel_bias_grad;
    rel_grad.add_into(g);
  }
}

}  // namespace rotor::ops
