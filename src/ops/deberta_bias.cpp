#include "ops/deberta_bias.h"

#include <initializer_list>

#include "core/error.h"
#include "ops/cpu_gemm.h"

namespace rotor::ops {

namespace {

struct Dims {
  int64_t B, H, Tq, Tk, D, S;
};

Dims check_deberta(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                   const std::vector<int32_t>& rows, const char* op) {
  ROTOR_CHECK(q.dim() == 4 && k.dim() == 4 && kr.dim() == 2,
              "{}: q, k must be [B, H, T, D] and kr [S, H D], got {}, {}, {}", op, q.str(), k.str(),
              kr.str());
  const Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), kr.size(0)};
  check_shape(k, {d.B, d.H, d.Tk, d.D}, op);
  check_shape(kr, {d.S, d.H * d.D}, op);
  check_shape(qr, {d.S, d.H * d.D}, op);
  ROTOR_CHECK(static_cast<int64_t>(rows.size()) == d.Tq * d.Tk, "{}: {} rows for [{}, {}]", op,
              rows.size(), d.Tq, d.Tk);
  for (int32_t r : rows) ROTOR_CHECK(r >= 0 && r < d.S, "{}: row {} outside [0, {})", op, r, d.S);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &kr, &qr})
    ROTOR_CHECK(t->dtype() == DType::F32 && t->is_cpu(), "{}: f32 CPU tensors only, got {}", op,
                t->str());
  return d;
}

// out [rows_a, S] = a [rows_a, D] x_h^T, x_h the head's D columns of x [S, H D].
void products(const float* a, int64_t rows_a, const float* x, int64_t h, const Dims& d,
              float* out) {
  cpu_sgemm(CblasNoTrans, CblasTrans, static_cast<int>(rows_a), static_cast<int>(d.S),
            static_cast<int>(d.D), 1.0f, a, static_cast<int>(d.D), x + h * d.D,
            static_cast<int>(d.H * d.D), 0.0f, out, static_cast<int>(d.S));
}

}  // namespace

void deberta_bias_forward(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                          const std::vector<int32_t>& rows, float scale, Tensor& bias) {
  const Dims d = check_deberta(q, k, kr, qr, rows, "deberta_bias_forward");
  check_shape(bias, {d.B, d.H, d.Tq, d.Tk}, "deberta_bias_forward bias");
  const float* pq = q.data<float>();
  const float* pk = k.data<float>();
  float* pb = bias.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t bh = b * d.H + h;
      std::vector<float> c2p(static_cast<size_t>(d.Tq * d.S)), p2c(static_cast<size_t>(d.Tk * d.S));
      products(pq + bh * d.Tq * d.D, d.Tq, kr.data<float>(), h, d, c2p.data());  // [Tq, S]
      products(pk + bh * d.Tk * d.D, d.Tk, qr.data<float>(), h, d, p2c.data());  // [Tk, S]
      for (int64_t i = 0; i < d.Tq; ++i) {
        float* out = pb + (bh * d.Tq + i) * d.Tk;
        const int32_t* ri = rows.data() + i * d.Tk;
        for (int64_t j = 0; j < d.Tk; ++j)
          out[j] = c2p[i * d.S + ri[j]] + scale * p2c[j * d.S + ri[j]];
      }
    }
}

void deberta_bias_backward(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                           const std::vector<int32_t>& rows, float scale, const Tensor& dbias,
                           Tensor& dq, Tensor& dk, Tensor& dkr, Tensor& dqr) {
  const Dims d = check_deberta(q, k, kr, qr, rows, "deberta_bias_backward");
  check_shape(dbias, {d.B, d.H, d.Tq, d.Tk}, "deberta_bias_backward dbias");
  check_shape(dq, q.shape(), "deberta_bias_backward dq");
  check_shape(dk, k.shape(), "deberta_bias_backward dk");
  check_shape(dkr, kr.shape(), "deberta_bias_backward dkr");
  check_shape(dqr, qr.shape(), "deberta_bias_backward dqr");
  const float* pq = q.data<float>();
  const float* pk = k.data<float>();
  const float* pg = dbias.data<float>();
  float* pdq = dq.data<float>();
  float* pdk = dk.data<float>();
  const int64_t HD = d.H * d.D;
  // Per batch row partial sums of dkr and dqr, added in a fixed order below.
  std::vector<float> dkr_part(static_cast<size_t>(d.B * d.S * HD), 0.0f),
      dqr_part(static_cast<size_t>(d.B * d.S * HD), 0.0f);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t bh = b * d.H + h;
      // dC2P[i, row] += g[i, j]; dP2C[j, row] += scale g[i, j] (rows repeat
      // where distances share a bucket or are clamped: sums, in j then i order).
      std::vector<float> dc2p(static_cast<size_t>(d.Tq * d.S), 0.0f),
          dp2c(static_cast<size_t>(d.Tk * d.S), 0.0f);
      for (int64_t i = 0; i < d.Tq; ++i) {
        const float* g = pg + (bh * d.Tq + i) * d.Tk;
        const int32_t* ri = rows.data() + i * d.Tk;
        for (int64_t j = 0; j < d.Tk; ++j) {
          dc2p[i * d.S + ri[j]] += g[j];
          dp2c[j * d.S + ri[j]] += scale * g[j];
        }
      }
      const int S = static_cast<int>(d.S), D = static_cast<int>(d.D), ld = static_cast<int>(HD);
      // dq += dC2P kr_h; dk += dP2C qr_h.
      cpu_sgemm(CblasNoTrans, CblasNoTrans, static_cast<int>(d.Tq), D, S, 1.0f, dc2p.data(), S,
                kr.data<float>() + h * d.D, ld, 1.0f, pdq + bh * d.Tq * d.D, D);
      cpu_sgemm(CblasNoTrans, CblasNoTrans, static_cast<int>(d.Tk), D, S, 1.0f, dp2c.data(), S,
                qr.data<float>() + h * d.D, ld, 1.0f, pdk + bh * d.Tk * d.D, D);
      // dkr_h = dC2P^T q; dqr_h = dP2C^T k, into this batch row's parts.
      cpu_sgemm(CblasTrans, CblasNoTrans, S, D, static_cast<int>(d.Tq), 1.0f, dc2p.data(), S,
                pq + bh * d.Tq * d.D, D, 0.0f, dkr_part.data() + b * d.S * HD + h * d.D, ld);
      cpu_sgemm(CblasTrans, CblasNoTrans, S, D, static_cast<int>(d.Tk), 1.0f, dp2c.data(), S,
                pk + bh * d.Tk * d.D, D, 0.0f, dqr_part.data() + b * d.S * HD + h * d.D, ld);
    }
  float* pdkr = dkr.data<float>();
  float* pdqr = dqr.data<float>();
  for (int64_t x = 0; x < d.S * HD; ++x) {
    double sk = 0.0, sq = 0.0;
    for (int64_t b = 0; b < d.B; ++b) {
      sk += dkr_part[static_cast<size_t>(b * d.S * HD + x)];
      sq += dqr_part[static_cast<size_t>(b * d.S * HD + x)];
    }
    pdkr[x] = static_cast<float>(sk);
    pdqr[x] = static_cast<float>(sq);
  }
}

}  // namespace rotor::ops
