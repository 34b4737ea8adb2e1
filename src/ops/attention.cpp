// CPU reference attention: per (batch, head) the [Tq, Tk] scores are
// materialized, masked (key padding, causal), softmaxed in double sums and
// dropped out with the Philox mask the fused GPU core draws.
#include "ops/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/philox.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {

struct Dims {
  int64_t B, H, Tq, Tk, D;
};

Dims check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                     const char* op) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    ROTOR_FAIL("{}: q, k, v must be [B, H, T, D], got {}, {}, {}", op, shape_str(q.shape()),
               shape_str(k.shape()), shape_str(v.shape()));
  const Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  if (k.shape() != Shape{d.B, d.H, d.Tk, d.D} || v.shape() != k.shape())
    ROTOR_FAIL("{}: with q {} expected k and v [{}, {}, Tk, {}], got {} and {}", op,
               shape_str(q.shape()), d.B, d.H, d.D, shape_str(k.shape()), shape_str(v.shape()));
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) ROTOR_FAIL("{}: q, k, v dtypes differ", op);
  check_same_device(q, k, op);
  check_same_device(q, v, op);
  if (o.key_lengths.defined()) {
    if (o.key_lengths.dtype() != DType::I32 || o.key_lengths.numel() != d.B)
      ROTOR_FAIL("{}: key_lengths must be i32 [{}], got {}", op, d.B, o.key_lengths.str());
    check_same_device(q, o.key_lengths, op);
  }
  if (!(o.dropout >= 0.0f && o.dropout < 1.0f))
    ROTOR_FAIL("{}: dropout must be in [0, 1), got {}", op, o.dropout);
  return d;
}

void check_like(const Tensor& t, const Shape& shape, const Tensor& q, const char* what) {
  check_shape(t, shape, what);
  if (t.dtype() != q.dtype()) ROTOR_FAIL("{}: dtype {} differs from q's", what, t.str());
  check_same_device(t, q, what);
}

// Visible keys of batch row b: j < key_length, and j <= i + (Tk - Tq) when causal.
std::vector<int64_t> key_lengths_host(const Dims& d, const AttentionOptions& o, const char* op) {
  std::vector<int64_t> len(static_cast<size_t>(d.B), d.Tk);
  if (!o.key_lengths.defined()) return len;
  const int32_t* p = o.key_lengths.data<int32_t>();
  for (int64_t b = 0; b < d.B; ++b) {
    if (p[b] < 0 || p[b] > d.Tk)
      ROTOR_FAIL("{}: key_lengths[{}] = {} outside [0, {}]", op, b, p[b], d.Tk);
    len[static_cast<size_t>(b)] = p[b];
  }
  return len;
}

// Number of visible keys for query i (the visible ones are 0..n-1).
inline int64_t visible_keys(const Dims& d, bool causal, int64_t key_len, int64_t i) {
  int64_t n = key_len;
  if (causal) n = std::min(n, std::max<int64_t>(0, i + (d.Tk - d.Tq) + 1));
  return n;
}

// Dropout keep-and-scale factor of probs element (b, h, i, j): 0 or 1/(1-p).
inline float dropout_factor(const AttentionOptions& o, uint64_t flat_index) {
  if (o.dropout == 0.0f) return 1.0f;
  return philox_uniform(o.seed, o.stream, flat_index) >= o.dropout ? 1.0f / (1.0f - o.dropout)
                                                                   : 0.0f;
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& options, Tensor& out, Tensor& probs) {
  const Dims d = check_attention(q, k, v, options, "attention_forward");
  check_like(out, q.shape(), q, "attention_forward out");
  check_like(probs, {d.B, d.H, d.Tq, d.Tk}, q, "attention_forward probs");
  ROTOR_DISPATCH_CUDA(q, attention_forward(q, k, v, options, out, probs));
  require_f32(q, "attention_forward");
  const auto key_len = key_lengths_host(d, options, "attention_forward");
  const float* pq = q.data<float>();  // [B, H, Tq, D]
  const float* pk = k.data<float>();  // [B, H, Tk, D]
  const float* pv = v.data<float>();  // [B, H, Tk, D]
  float* po = out.data<float>();      // [B, H, Tq, D]
  float* pp = probs.data<float>();    // [B, H, Tq, Tk]

#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t bh = b * d.H + h;
      const float* qb = pq + bh * d.Tq * d.D;
      const float* kb = pk + bh * d.Tk * d.D;
      const float* vb = pv + bh * d.Tk * d.D;
      for (int64_t i = 0; i < d.Tq; ++i) {
        float* prow = pp + (bh * d.Tq + i) * d.Tk;
        float* orow = po + (bh * d.Tq + i) * d.D;
        const int64_t n = visible_keys(d, options.causal, key_len[b], i);
        for (int64_t j = 0; j < d.Tk; ++j) prow[j] = 0.0f;
        for (int64_t c = 0; c < d.D; ++c) orow[c] = 0.0f;
        if (n == 0) continue;  // no visible key: zero probabilities, zero output
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          float s = 0.0f;
          for (int64_t c = 0; c < d.D; ++c) s += qb[i * d.D + c] * kb[j * d.D + c];
          prow[j] = s * options.scale;
          mx = std::max(mx, prow[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          prow[j] = std::exp(prow[j] - mx);
          sum += prow[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        const uint64_t row_index = static_cast<uint64_t>((bh * d.Tq + i) * d.Tk);
        for (int64_t j = 0; j < n; ++j) {
          prow[j] *= inv;
          const float w = prow[j] * dropout_factor(options, row_index + j);
          if (w == 0.0f) continue;
          for (int64_t c = 0; c < d.D; ++c) orow[c] += w * vb[j * d.D + c];
        }
      }
    }
  }
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const Tensor& dout, const AttentionOptions& options, Tensor& dq, Tensor& dk,
                        Tensor& dv) {
  const Dims d = check_attention(q, k, v, options, "attention_backward");
  check_like(probs, {d.B, d.H, d.Tq, d.Tk}, q, "attention_backward probs");
  check_like(dout, q.shape(), q, "attention_backward dout");
  check_like(dq, q.shape(), q, "attention_backward dq");
  check_like(dk, k.shape(), q, "attention_backward dk");
  check_like(dv, v.shape(), q, "attention_backward dv");
  ROTOR_DISPATCH_CUDA(q, attention_backward(q, k, v, probs, dout, options, dq, dk, dv));
  require_f32(q, "attention_backward");
  const auto key_len = key_lengths_host(d, options, "attention_backward");
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
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t bh = b * d.H + h;
      const float* qb = pq + bh * d.Tq * d.D;
      const float* kb = pk + bh * d.Tk * d.D;
      const float* vb = pv + bh * d.Tk * d.D;
      float* dqb = pdq + bh * d.Tq * d.D;
      float* dkb = pdk + bh * d.Tk * d.D;
      float* dvb = pdv + bh * d.Tk * d.D;
      for (int64_t x = 0; x < d.Tq * d.D; ++x) dqb[x] = 0.0f;
      for (int64_t x = 0; x < d.Tk * d.D; ++x) dkb[x] = dvb[x] = 0.0f;
      std::vector<float> dp(static_cast<size_t>(d.Tk));  // [Tk]
      for (int64_t i = 0; i < d.Tq; ++i) {
        const float* prow = pp + (bh * d.Tq + i) * d.Tk;
        const float* dorow = pdo + (bh * d.Tq + i) * d.D;
        const int64_t n = visible_keys(d, options.causal, key_len[b], i);
        const uint64_t row_index = static_cast<uint64_t>((bh * d.Tq + i) * d.Tk);
        double dot = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          const float m = dropout_factor(options, row_index + j);
          const float w = prow[j] * m;
          float g = 0.0f;
          for (int64_t c = 0; c < d.D; ++c) {
            dvb[j * d.D + c] += w * dorow[c];
            g += dorow[c] * vb[j * d.D + c];
          }
          dp[j] = g * m;
          dot += static_cast<double>(dp[j]) * prow[j];
        }
        const float rowsum = static_cast<float>(dot);
        for (int64_t j = 0; j < n; ++j) {
          const float ds = prow[j] * (dp[j] - rowsum) * options.scale;
          if (ds == 0.0f) continue;
          for (int64_t c = 0; c < d.D; ++c) {
            dqb[i * d.D + c] += ds * kb[j * d.D + c];
            dkb[j * d.D + c] += ds * qb[i * d.D + c];
          }
        }
      }
    }
  }
}

}  // namespace rotor::ops
