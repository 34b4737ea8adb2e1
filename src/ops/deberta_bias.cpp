#include "ops/deberta_bias.h"

#include <initializer_list>

#include "core/error.h"
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

// x [S, H D] -> its heads [1, H, S, D].
Tensor heads_of(const Tensor& x, const Dims& d) {
  Tensor xh = Tensor::empty({1, d.H, d.S, d.D}, DType::F32, x.device());  // [1, H, S, D]
  merge_heads_backward(x.view({1, d.S, d.H * d.D}), xh);
  return xh;
}

}  // namespace

void deberta_bias_forward(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                          const Tensor& rows, float scale, Tensor& bias) {
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

void deberta_bias_backward(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                           const Tensor& rows, float scale, const Tensor& dbias, Tensor& dq,
                           Tensor& dk, Tensor& dkr, Tensor& dqr) {
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
  const int32_t* pr = rows.data<int32_t>();
  for (int64_t e = 0; e < Tq * Tk; ++e)
    ROTOR_CHECK(pr[e] >= 0 && pr[e] < S, "deberta_gather: row {} outside [0, {})", pr[e], S);
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
  const int32_t* pr = rows.data<int32_t>();
  for (int64_t e = 0; e < Tq * Tk; ++e)
    ROTOR_CHECK(pr[e] >= 0 && pr[e] < S, "deberta_scatter: row {} outside [0, {})", pr[e], S);
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
