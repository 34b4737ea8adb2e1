#include "ops/deberta_bias.h"

#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "ops/cpu_gemm.h"
#include "ops/dispatch.h"
#include "ops/gemm.h"
#include "ops/heads.h"

namespace rotor::ops {

namespace {

struct Dims {
  int64_t B, H, Tq, Tk, D, S;
};

void check_on(const Tensor& t, DType dt, const Device& dev, const char* op) {
  ROTOR_CHECK(t.dtype() == dt && t.device() == dev, "{}: {} tensors on {} only, got {}", op,
              dtype_name(dt), dev.str(), t.str());
}

Dims check_deberta(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                   const Tensor& rows, const char* op) {
  ROTOR_CHECK(q.dim() == 4 && k.dim() == 4 && kr.dim() == 2,
              "{}: q, k must be [B, H, T, D] and kr [S, H D], got {}, {}, {}", op, q.str(), k.str(),
              kr.str());
  const Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), kr.size(0)};
  check_shape(k, {d.B, d.H, d.Tk, d.D}, op);
  check_shape(kr, {d.S, d.H * d.D}, op);
  check_shape(qr, {d.S, d.H * d.D}, op);
  check_shape(rows, {d.Tq, d.Tk}, op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &kr, &qr})
    check_on(*t, DType::F32, q.device(), op);
  check_on(rows, DType::I32, q.device(), op);
  return d;
}

// out [rows_a, S] = a [rows_a, D] x_h^T, x_h the head's D columns of x [S, H D].
void products(const float* a, int64_t rows_a, const float* x, int64_t h, const Dims& d,
              float* out) {
  cpu_sgemm(CblasNoTrans, CblasTrans, static_cast<int>(rows_a), static_cast<int>(d.S),
            static_cast<int>(d.D), 1.0f, a, static_cast<int>(d.D), x + h * d.D,
            static_cast<int>(d.H * d.D), 0.0f, out, static_cast<int>(d.S));
}

// rows' values on the CPU, each in [0, S).
const int32_t* check_rows(const Tensor& rows, int64_t S, const char* op) {
  const int32_t* pr = rows.data<int32_t>();
  for (int64_t e = 0; e < rows.numel(); ++e)
    ROTOR_CHECK(pr[e] >= 0 && pr[e] < S, "{}: row {} outside [0, {})", op, pr[e], S);
  return pr;
}

// x [S, H D] -> its heads [1, H, S, D].
Tensor heads_of(const Tensor& x, const Dims& d) {
  Tensor xh = Tensor::empty({1, d.H, d.S, d.D}, DType::F32, x.device());  // [1, H, S, D]
  merge_heads_backward(x.view({1, d.S, d.H * d.D}), xh);
  return xh;
}

}  // namespace

void deberta_bias_forward(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                          const Tensor& rows, float scale, Tensor& bias) {
  if (q.is_cuda()) return detail::deberta_bias_forward_composed(q, k, kr, qr, rows, scale, bias);
  const Dims d = check_deberta(q, k, kr, qr, rows, "deberta_bias_forward");
  check_shape(bias, {d.B, d.H, d.Tq, d.Tk}, "deberta_bias_forward bias");
  check_on(bias, DType::F32, q.device(), "deberta_bias_forward bias");
  const int32_t* rp = check_rows(rows, d.S, "deberta_bias_forward");
  // The CPU: per (batch, head) GEMMs and the gather in one pass (faster
  // here than the composed path's batched products and separate passes).
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
        const int32_t* ri = rp + i * d.Tk;
        for (int64_t j = 0; j < d.Tk; ++j)
          out[j] = c2p[i * d.S + ri[j]] + scale * p2c[j * d.S + ri[j]];
      }
    }
}

void deberta_bias_backward(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                           const Tensor& rows, float scale, const Tensor& dbias, Tensor& dq,
                           Tensor& dk, Tensor& dkr, Tensor& dqr) {
  if (q.is_cuda())
    return detail::deberta_bias_backward_composed(q, k, kr, qr, rows, scale, dbias, dq, dk, dkr,
                                                  dqr);
  const Dims d = check_deberta(q, k, kr, qr, rows, "deberta_bias_backward");
  check_shape(dbias, {d.B, d.H, d.Tq, d.Tk}, "deberta_bias_backward dbias");
  check_shape(dq, q.shape(), "deberta_bias_backward dq");
  check_shape(dk, k.shape(), "deberta_bias_backward dk");
  check_shape(dkr, kr.shape(), "deberta_bias_backward dkr");
  check_shape(dqr, qr.shape(), "deberta_bias_backward dqr");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dbias, &dq, &dk, &dkr, &dqr})
    check_on(*t, DType::F32, q.device(), "deberta_bias_backward");
  const int32_t* rp = check_rows(rows, d.S, "deberta_bias_backward");
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
        const int32_t* ri = rp + i * d.Tk;
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

namespace detail {

void deberta_bias_forward_composed(const Tensor& q, const Tensor& k, const Tensor& kr,
                                   const Tensor& qr, const Tensor& rows, float scale,
                                   Tensor& bias) {
  const Dims d = check_deberta(q, k, kr, qr, rows, "deberta_bias_forward");
  check_shape(bias, {d.B, d.H, d.Tq, d.Tk}, "deberta_bias_forward bias");
  check_on(bias, DType::F32, q.device(), "deberta_bias_forward bias");
  const Device dev = q.device();
  const Tensor krh = heads_of(kr, d), qrh = heads_of(qr, d);           // [1, H, S, D] each
  Tensor c2p = Tensor::empty({d.B, d.H, d.Tq, d.S}, DType::F32, dev);  // [B, H, Tq, S]
  Tensor p2c = Tensor::empty({d.B, d.H, d.Tk, d.S}, DType::F32, dev);  // [B, H, Tk, S]
  GemmOptions nt;
  nt.trans_b = true;
  for (int64_t b = 0; b < d.B; ++b) {
    Tensor cb = c2p.narrow(b, 1), pb = p2c.narrow(b, 1);  // [1, H, T, S] each
    gemm(q.narrow(b, 1), krh, cb, nt);                    // q kr_h^T
    gemm(k.narrow(b, 1), qrh, pb, nt);                    // k qr_h^T
  }
  deberta_gather(c2p, p2c, rows, scale, bias);
}

void deberta_bias_backward_composed(const Tensor& q, const Tensor& k, const Tensor& kr,
                                    const Tensor& qr, const Tensor& rows, float scale,
                                    const Tensor& dbias, Tensor& dq, Tensor& dk, Tensor& dkr,
                                    Tensor& dqr) {
  const Dims d = check_deberta(q, k, kr, qr, rows, "deberta_bias_backward");
  check_shape(dbias, {d.B, d.H, d.Tq, d.Tk}, "deberta_bias_backward dbias");
  check_shape(dq, q.shape(), "deberta_bias_backward dq");
  check_shape(dk, k.shape(), "deberta_bias_backward dk");
  check_shape(dkr, kr.shape(), "deberta_bias_backward dkr");
  check_shape(dqr, qr.shape(), "deberta_bias_backward dqr");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dbias, &dq, &dk, &dkr, &dqr})
    check_on(*t, DType::F32, q.device(), "deberta_bias_backward");
  const Device dev = q.device();
  const Tensor krh = heads_of(kr, d), qrh = heads_of(qr, d);            // [1, H, S, D] each
  Tensor dc2p = Tensor::empty({d.B, d.H, d.Tq, d.S}, DType::F32, dev);  // [B, H, Tq, S]
  Tensor dp2c = Tensor::empty({d.B, d.H, d.Tk, d.S}, DType::F32, dev);  // [B, H, Tk, S]
  deberta_scatter(dbias, rows, scale, dc2p, dp2c);
  Tensor dkrh = Tensor::empty({1, d.H, d.S, d.D}, DType::F32, dev);  // [1, H, S, D]
  Tensor dqrh = Tensor::empty({1, d.H, d.S, d.D}, DType::F32, dev);  // [1, H, S, D]
  GemmOptions acc;                                                   // C += A B
  acc.beta = 1.0f;
  GemmOptions tn;  // C = A^T B, then C += A^T B
  tn.trans_a = true;
  for (int64_t b = 0; b < d.B; ++b) {
    const Tensor cb = dc2p.narrow(b, 1), pb = dp2c.narrow(b, 1);  // [1, H, T, S] each
    Tensor dqb = dq.narrow(b, 1), dkb = dk.narrow(b, 1);          // [1, H, T, D] each
    gemm(cb, krh, dqb, acc);                                      // dq += dC2P kr_h
    gemm(pb, qrh, dkb, acc);                                      // dk += dP2C qr_h
    gemm(cb, q.narrow(b, 1), dkrh, tn);                           // dkr_h += dC2P^T q
    gemm(pb, k.narrow(b, 1), dqrh, tn);                           // dqr_h += dP2C^T k
    tn.beta = 1.0f;
  }
  Tensor dkr3 = dkr.view({1, d.S, d.H * d.D}), dqr3 = dqr.view({1, d.S, d.H * d.D});
  merge_heads_forward(dkrh, dkr3);
  merge_heads_forward(dqrh, dqr3);
}

}  // namespace detail

void deberta_gather(const Tensor& c2p, const Tensor& p2c, const Tensor& rows, float scale,
                    Tensor& bias) {
  ROTOR_CHECK(c2p.dim() == 4 && bias.dim() == 4, "deberta_gather: c2p {} and bias {} must be 4-D",
              c2p.str(), bias.str());
  const int64_t B = bias.size(0), H = bias.size(1), Tq = bias.size(2), Tk = bias.size(3),
                S = c2p.size(3);
  check_shape(c2p, {B, H, Tq, S}, "deberta_gather c2p");
  check_shape(p2c, {B, H, Tk, S}, "deberta_gather p2c");
  check_shape(rows, {Tq, Tk}, "deberta_gather rows");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&c2p, &p2c, &bias})
    check_on(*t, DType::F32, bias.device(), "deberta_gather");
  check_on(rows, DType::I32, bias.device(), "deberta_gather rows");
  ROTOR_DISPATCH_CUDA(bias, deberta_gather(c2p, p2c, rows, scale, bias));
  const int32_t* pr = check_rows(rows, S, "deberta_gather");
  const float* pc = c2p.data<float>();
  const float* pp = p2c.data<float>();
  float* pb = bias.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = 0; i < Tq; ++i) {
      const float* ci = pc + (bh * Tq + i) * S;
      const float* pbh = pp + bh * Tk * S;
      const int32_t* ri = pr + i * Tk;
      float* out = pb + (bh * Tq + i) * Tk;
      for (int64_t j = 0; j < Tk; ++j) out[j] = ci[ri[j]] + scale * pbh[j * S + ri[j]];
    }
}

void deberta_scatter(const Tensor& dbias, const Tensor& rows, float scale, Tensor& dc2p,
                     Tensor& dp2c) {
  ROTOR_CHECK(dbias.dim() == 4 && dc2p.dim() == 4,
              "deberta_scatter: dbias {} and dc2p {} must be 4-D", dbias.str(), dc2p.str());
  const int64_t B = dbias.size(0), H = dbias.size(1), Tq = dbias.size(2), Tk = dbias.size(3),
                S = dc2p.size(3);
  check_shape(dc2p, {B, H, Tq, S}, "deberta_scatter dc2p");
  check_shape(dp2c, {B, H, Tk, S}, "deberta_scatter dp2c");
  check_shape(rows, {Tq, Tk}, "deberta_scatter rows");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dbias, &dc2p, &dp2c})
    check_on(*t, DType::F32, dbias.device(), "deberta_scatter");
  check_on(rows, DType::I32, dbias.device(), "deberta_scatter rows");
  ROTOR_DISPATCH_CUDA(dbias, deberta_scatter(dbias, rows, scale, dc2p, dp2c));
  const int32_t* pr = check_rows(rows, S, "deberta_scatter");
  const float* pg = dbias.data<float>();
  float* pc = dc2p.data<float>();
  float* pp = dp2c.data<float>();
  // One (batch, head) a task: dc2p's row i over j, dp2c's row j over i, in
  // the orders the CUDA kernels use (one thread a row there).
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const float* g = pg + bh * Tq * Tk;
    for (int64_t i = 0; i < Tq; ++i) {
      float* ci = pc + (bh * Tq + i) * S;
      for (int64_t s = 0; s < S; ++s) ci[s] = 0.0f;
      for (int64_t j = 0; j < Tk; ++j) ci[pr[i * Tk + j]] += g[i * Tk + j];
    }
    for (int64_t j = 0; j < Tk; ++j) {
      float* pj = pp + (bh * Tk + j) * S;
      for (int64_t s = 0; s < S; ++s) pj[s] = 0.0f;
      for (int64_t i = 0; i < Tq; ++i) pj[pr[i * Tk + j]] += scale * g[i * Tk + j];
    }
  }
}

}  // namespace rotor::ops
