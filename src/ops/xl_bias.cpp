#include "ops/xl_bias.h"

#include <cmath>
#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "ops/cpu_gemm.h"
#include "ops/dispatch.h"
#include "ops/gemm.h"
#include "ops/heads.h"

namespace rotor::ops {

namespace {

struct XlDims {
  int64_t B, H, Tq, Tk, D, L;
};

void check_f32_on(const Tensor& t, const Device& dev, const char* op) {
  ROTOR_CHECK(t.dtype() == DType::F32 && t.device() == dev, "{}: f32 tensors on {} only, got {}",
              op, dev.str(), t.str());
}

XlDims check_xl(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u, const Tensor& v,
                int64_t q_offset, const char* op) {
  ROTOR_CHECK(q.dim() == 4 && k.dim() == 4, "{}: q and k must be [B, H, T, D], got {} and {}", op,
              q.str(), k.str());
  const XlDims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), r.size(0)};
  ROTOR_CHECK(q_offset >= 0, "{}: q_offset {} < 0", op, q_offset);
  check_shape(k, {d.B, d.H, d.Tk, d.D}, op);
  check_shape(r, {q_offset + d.Tq + d.Tk - 1, d.H * d.D}, op);
  check_shape(u, {d.H, d.D}, op);
  check_shape(v, {d.H, d.D}, op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &r, &u, &v})
    check_f32_on(*t, q.device(), op);
  return d;
}

// q + scale v of one (batch, head): q's Tq rows [Tq, D] plus the head's v.
std::vector<float> query_plus_v(const float* q, const float* v, float scale, const XlDims& d) {
  std::vector<float> qv(static_cast<size_t>(d.Tq * d.D));
  for (int64_t i = 0; i < d.Tq; ++i)
    for (int64_t c = 0; c < d.D; ++c) qv[i * d.D + c] = q[i * d.D + c] + scale * v[c];
  return qv;
}

// r [L, H D] -> its heads [1, H, L, D].
Tensor heads_of(const Tensor& r, const XlDims& d) {
  Tensor rh = Tensor::empty({1, d.H, d.L, d.D}, DType::F32, r.device());  // [1, H, L, D]
  merge_heads_backward(r.view({1, d.L, d.H * d.D}), rh);
  return rh;
}

// Row b of a [B, ...] tensor as [1, ...].
Tensor row(const Tensor& t, int64_t b) {
  return t.narrow(b, 1);
}

}  // namespace

void xl_bias_forward(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u,
                     const Tensor& v, float scale, int64_t q_offset, Tensor& bias) {
  if (q.is_cuda()) return detail::xl_bias_forward_composed(q, k, r, u, v, scale, q_offset, bias);
  const XlDims d = check_xl(q, k, r, u, v, q_offset, "xl_bias_forward");
  check_shape(bias, {d.B, d.H, d.Tq, d.Tk}, "xl_bias_forward bias");
  check_f32_on(bias, q.device(), "xl_bias_forward bias");
  // The CPU: per (batch, head) GEMMs and the shift in one pass (two to
  // three times faster here than the composed path's batched products and
  // separate passes).
  const float* pq = q.data<float>();
  const float* pk = k.data<float>();
  const float* pr = r.data<float>();
  const float* pu = u.data<float>();
  const float* pv = v.data<float>();
  float* pb = bias.data<float>();
  const int64_t HD = d.H * d.D;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t bh = b * d.H + h;
      const std::vector<float> qv =
          query_plus_v(pq + bh * d.Tq * d.D, pv + h * d.D, scale, d);  // [Tq, D]
      // G = qv r_h^T: [Tq, L], r_h the head's D columns of r (leading dim H D).
      std::vector<float> g(static_cast<size_t>(d.Tq * d.L));
      cpu_sgemm(CblasNoTrans, CblasTrans, static_cast<int>(d.Tq), static_cast<int>(d.L),
                static_cast<int>(d.D), 1.0f, qv.data(), static_cast<int>(d.D), pr + h * d.D,
                static_cast<int>(HD), 0.0f, g.data(), static_cast<int>(d.L));
      // c_j = scale u . k_j
      std::vector<float> cu(static_cast<size_t>(d.Tk));
      for (int64_t j = 0; j < d.Tk; ++j) {
        float s = 0.0f;
        for (int64_t c = 0; c < d.D; ++c) s += pu[h * d.D + c] * pk[(bh * d.Tk + j) * d.D + c];
        cu[j] = scale * s;
      }
      for (int64_t i = 0; i < d.Tq; ++i) {
        float* row = pb + (bh * d.Tq + i) * d.Tk;
        const float* gi = g.data() + i * d.L;
        const int64_t base = q_offset + i + d.Tk - 1;  // row(i, j) = base - j
        for (int64_t j = 0; j < d.Tk; ++j) row[j] = gi[base - j] + cu[j];
      }
    }
}

void xl_bias_backward(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u,
                      const Tensor& v, float scale, int64_t q_offset, const Tensor& dbias,
                      Tensor& dq, Tensor& dk, Tensor& dr, Tensor& du, Tensor& dv) {
  if (q.is_cuda())
    return detail::xl_bias_backward_composed(q, k, r, u, v, scale, q_offset, dbias, dq, dk, dr, du,
                                             dv);
  const XlDims d = check_xl(q, k, r, u, v, q_offset, "xl_bias_backward");
  check_shape(dbias, {d.B, d.H, d.Tq, d.Tk}, "xl_bias_backward dbias");
  check_shape(dq, q.shape(), "xl_bias_backward dq");
  check_shape(dk, k.shape(), "xl_bias_backward dk");
  check_shape(dr, r.shape(), "xl_bias_backward dr");
  check_shape(du, u.shape(), "xl_bias_backward du");
  check_shape(dv, v.shape(), "xl_bias_backward dv");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dbias, &dq, &dk, &dr, &du, &dv})
    check_f32_on(*t, q.device(), "xl_bias_backward");
  const float* pq = q.data<float>();
  const float* pk = k.data<float>();
  const float* pr = r.data<float>();
  const float* pu = u.data<float>();
  const float* pv = v.data<float>();
  const float* pdb = dbias.data<float>();
  float* pdq = dq.data<float>();
  float* pdk = dk.data<float>();
  const int64_t HD = d.H * d.D;
  // Per (batch, head) partial sums of dr, du and dv, added over the batch in
  // a fixed order below: the same bits for any thread count.
  std::vector<float> dr_part(static_cast<size_t>(d.B * d.L * HD), 0.0f);
  std::vector<double> du_part(static_cast<size_t>(d.B * HD), 0.0),
      dv_part(static_cast<size_t>(d.B * HD), 0.0);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t bh = b * d.H + h;
      const std::vector<float> qv =
          query_plus_v(pq + bh * d.Tq * d.D, pv + h * d.D, scale, d);  // [Tq, D]
      // dG[i, base_i - j] = dbias[i, j] (each (i, row) from one j at most);
      // dc_j = sum_i dbias[i, j].
      std::vector<float> dg(static_cast<size_t>(d.Tq * d.L), 0.0f);
      std::vector<double> dc(static_cast<size_t>(d.Tk), 0.0);
      for (int64_t i = 0; i < d.Tq; ++i) {
        const float* row = pdb + (bh * d.Tq + i) * d.Tk;
        const int64_t base = q_offset + i + d.Tk - 1;
        for (int64_t j = 0; j < d.Tk; ++j) {
          dg[i * d.L + base - j] = row[j];
          dc[j] += row[j];
        }
      }
      // dqv = dG r_h: [Tq, D]; dq += dqv, dv_h += scale sum_i dqv_i.
      std::vector<float> dqv(static_cast<size_t>(d.Tq * d.D));
      cpu_sgemm(CblasNoTrans, CblasNoTrans, static_cast<int>(d.Tq), static_cast<int>(d.D),
                static_cast<int>(d.L), 1.0f, dg.data(), static_cast<int>(d.L), pr + h * d.D,
                static_cast<int>(HD), 0.0f, dqv.data(), static_cast<int>(d.D));
      double* dvb = dv_part.data() + b * HD + h * d.D;
      for (int64_t i = 0; i < d.Tq; ++i)
        for (int64_t c = 0; c < d.D; ++c) {
          pdq[(bh * d.Tq + i) * d.D + c] += dqv[i * d.D + c];
          dvb[c] += static_cast<double>(scale) * dqv[i * d.D + c];
        }
      // dr_h = dG^T qv: [L, D], into this batch row's part (leading dim H D).
      cpu_sgemm(CblasTrans, CblasNoTrans, static_cast<int>(d.L), static_cast<int>(d.D),
                static_cast<int>(d.Tq), 1.0f, dg.data(), static_cast<int>(d.L), qv.data(),
                static_cast<int>(d.D), 0.0f, dr_part.data() + b * d.L * HD + h * d.D,
                static_cast<int>(HD));
      // c_j = scale u . k_j: dk_j += scale dc_j u, du += scale sum_j dc_j k_j.
      double* dub = du_part.data() + b * HD + h * d.D;
      for (int64_t j = 0; j < d.Tk; ++j) {
        const float w = scale * static_cast<float>(dc[j]);
        for (int64_t c = 0; c < d.D; ++c) {
          pdk[(bh * d.Tk + j) * d.D + c] += w * pu[h * d.D + c];
          dub[c] += static_cast<double>(scale) * dc[j] * pk[(bh * d.Tk + j) * d.D + c];
        }
      }
    }
  float* pdr = dr.data<float>();
  float* pdu = du.data<float>();
  float* pdv = dv.data<float>();
  for (int64_t x = 0; x < d.L * HD; ++x) {
    double s = 0.0;
    for (int64_t b = 0; b < d.B; ++b) s += dr_part[static_cast<size_t>(b * d.L * HD + x)];
    pdr[x] = static_cast<float>(s);
  }
  for (int64_t x = 0; x < HD; ++x) {
    double su = 0.0, sv = 0.0;
    for (int64_t b = 0; b < d.B; ++b) {
      su += du_part[static_cast<size_t>(b * HD + x)];
      sv += dv_part[static_cast<size_t>(b * HD + x)];
    }
    pdu[x] += static_cast<float>(su);
    pdv[x] += static_cast<float>(sv);
  }
}

namespace detail {

void xl_bias_forward_composed(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u,
                              const Tensor& v, float scale, int64_t q_offset, Tensor& bias) {
  const XlDims d = check_xl(q, k, r, u, v, q_offset, "xl_bias_forward");
  check_shape(bias, {d.B, d.H, d.Tq, d.Tk}, "xl_bias_forward bias");
  check_f32_on(bias, q.device(), "xl_bias_forward bias");
  const Device dev = q.device();
  const Tensor rh = heads_of(r, d);                                  // [1, H, L, D]
  Tensor g = Tensor::empty({d.B, d.H, d.Tq, d.L}, DType::F32, dev);  // [B, H, Tq, L]
  Tensor gv = Tensor::empty({d.H, d.L, 1}, DType::F32, dev);         // [H, L, 1]
  Tensor cu = Tensor::empty({d.B, d.H, d.Tk}, DType::F32, dev);      // [B, H, Tk]
  GemmOptions nt;
  nt.trans_b = true;
  GemmOptions scaled;
  scaled.alpha = scale;
  // gv_h = scale r_h v_h: the (d) term's bias v, per distance.
  gemm(rh.view({d.H, d.L, d.D}), v.view({d.H, d.D, 1}), gv, scaled);
  for (int64_t b = 0; b < d.B; ++b) {
    Tensor gb = row(g, b);  // [1, H, Tq, L]: G = q r_h^T, the (b) term
    gemm(row(q, b), rh, gb, nt);
    Tensor cb = row(cu, b).view({d.H, d.Tk, 1});  // [H, Tk, 1]: scale k u_h, the (c) term
    gemm(row(k, b).view({d.H, d.Tk, d.D}), u.view({d.H, d.D, 1}), cb, scaled);
  }
  xl_shift_forward(g, gv.view({d.H, d.L}), cu, q_offset, bias);
}

void xl_bias_backward_composed(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u,
                               const Tensor& v, float scale, int64_t q_offset, const Tensor& dbias,
                               Tensor& dq, Tensor& dk, Tensor& dr, Tensor& du, Tensor& dv) {
  const XlDims d = check_xl(q, k, r, u, v, q_offset, "xl_bias_backward");
  check_shape(dbias, {d.B, d.H, d.Tq, d.Tk}, "xl_bias_backward dbias");
  check_shape(dq, q.shape(), "xl_bias_backward dq");
  check_shape(dk, k.shape(), "xl_bias_backward dk");
  check_shape(dr, r.shape(), "xl_bias_backward dr");
  check_shape(du, u.shape(), "xl_bias_backward du");
  check_shape(dv, v.shape(), "xl_bias_backward dv");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dbias, &dq, &dk, &dr, &du, &dv})
    check_f32_on(*t, q.device(), "xl_bias_backward");
  const Device dev = q.device();
  const Tensor rh = heads_of(r, d);                                   // [1, H, L, D]
  Tensor dg = Tensor::empty({d.B, d.H, d.Tq, d.L}, DType::F32, dev);  // [B, H, Tq, L]
  Tensor dgv = Tensor::empty({d.H, d.L}, DType::F32, dev);            // [H, L]
  Tensor dcu = Tensor::empty({d.B, d.H, d.Tk}, DType::F32, dev);      // [B, H, Tk]
  xl_shift_backward(dbias, q_offset, dg, dgv, dcu);
  Tensor drh = Tensor::empty({1, d.H, d.L, d.D}, DType::F32, dev);  // [1, H, L, D]
  GemmOptions acc;                                                  // C += A B
  acc.beta = 1.0f;
  GemmOptions tn;  // C = A^T B, then C += A^T B
  tn.trans_a = true;
  GemmOptions scaled_acc;  // C += scale A B
  scaled_acc.alpha = scale;
  scaled_acc.beta = 1.0f;
  const Tensor u_row = u.view({d.H, 1, d.D});  // [H, 1, D]
  Tensor du3 = du.view({d.H, 1, d.D});         // [H, 1, D]
  for (int64_t b = 0; b < d.B; ++b) {
    const Tensor dgb = row(dg, b);  // [1, H, Tq, L]
    Tensor dqb = row(dq, b);        // [1, H, Tq, D]: dq += dG r_h
    gemm(dgb, rh, dqb, acc);
    gemm(dgb, row(q, b), drh, tn);  // dr_h += dG^T q
    tn.beta = 1.0f;
    // (c): dk_j += scale dcu_j u_h, du_h += scale sum_j dcu_j k_j.
    const Tensor dcb = row(dcu, b);  // [1, H, Tk]
    Tensor dkb = row(dk, b).view({d.H, d.Tk, d.D});
    gemm(dcb.view({d.H, d.Tk, 1}), u_row, dkb, scaled_acc);
    gemm(dcb.view({d.H, 1, d.Tk}), row(k, b).view({d.H, d.Tk, d.D}), du3, scaled_acc);
  }
  // (d)'s v: dr_h += scale dgv_h v_h^T, dv_h += scale dgv_h^T r_h.
  Tensor drh3 = drh.view({d.H, d.L, d.D});
  gemm(dgv.view({d.H, d.L, 1}), v.view({d.H, 1, d.D}), drh3, scaled_acc);
  Tensor dv3 = dv.view({d.H, 1, d.D});
  gemm(dgv.view({d.H, 1, d.L}), rh.view({d.H, d.L, d.D}), dv3, scaled_acc);
  Tensor dr3 = dr.view({1, d.L, d.H * d.D});
  merge_heads_forward(drh, dr3);
}

}  // namespace detail

void xl_shift_forward(const Tensor& g, const Tensor& gv, const Tensor& cu, int64_t q_offset,
                      Tensor& bias) {
  ROTOR_CHECK(bias.dim() == 4 && g.dim() == 4, "xl_shift_forward: bias {} and g {} must be 4-D",
              bias.str(), g.str());
  const int64_t B = bias.size(0), H = bias.size(1), Tq = bias.size(2), Tk = bias.size(3);
  const int64_t L = q_offset + Tq + Tk - 1;
  ROTOR_CHECK(q_offset >= 0, "xl_shift_forward: q_offset {} < 0", q_offset);
  check_shape(g, {B, H, Tq, L}, "xl_shift_forward g");
  check_shape(gv, {H, L}, "xl_shift_forward gv");
  check_shape(cu, {B, H, Tk}, "xl_shift_forward cu");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&g, &gv, &cu})
    check_f32_on(*t, bias.device(), "xl_shift_forward");
  check_f32_on(bias, bias.device(), "xl_shift_forward");
  ROTOR_DISPATCH_CUDA(bias, xl_shift_forward(g, gv, cu, q_offset, bias));
  const float* pg = g.data<float>();
  const float* pv = gv.data<float>();
  const float* pc = cu.data<float>();
  float* pb = bias.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = 0; i < Tq; ++i) {
      const int64_t base = q_offset + i + Tk - 1;  // g's column of key j: base - j
      const float* gi = pg + (bh * Tq + i) * L;
      const float* vh = pv + (bh % H) * L;
      const float* cb = pc + bh * Tk;
      float* out = pb + (bh * Tq + i) * Tk;
      for (int64_t j = 0; j < Tk; ++j) out[j] = gi[base - j] + vh[base - j] + cb[j];
    }
}

void xl_shift_backward(const Tensor& dbias, int64_t q_offset, Tensor& dg, Tensor& dgv,
                       Tensor& dcu) {
  ROTOR_CHECK(dbias.dim() == 4, "xl_shift_backward: dbias {} must be 4-D", dbias.str());
  const int64_t B = dbias.size(0), H = dbias.size(1), Tq = dbias.size(2), Tk = dbias.size(3);
  const int64_t L = q_offset + Tq + Tk - 1;
  ROTOR_CHECK(q_offset >= 0, "xl_shift_backward: q_offset {} < 0", q_offset);
  check_shape(dg, {B, H, Tq, L}, "xl_shift_backward dg");
  check_shape(dgv, {H, L}, "xl_shift_backward dgv");
  check_shape(dcu, {B, H, Tk}, "xl_shift_backward dcu");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dbias, &dg, &dgv, &dcu})
    check_f32_on(*t, dbias.device(), "xl_shift_backward");
  ROTOR_DISPATCH_CUDA(dbias, xl_shift_backward(dbias, q_offset, dg, dgv, dcu));
  const float* pd = dbias.data<float>();
  float* pg = dg.data<float>();
  float* pv = dgv.data<float>();
  float* pc = dcu.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    std::vector<double> col(static_cast<size_t>(Tk), 0.0);
    for (int64_t i = 0; i < Tq; ++i) {
      const int64_t base = q_offset + i + Tk - 1;  // key of g's column l: base - l
      const float* di = pd + (bh * Tq + i) * Tk;
      float* gi = pg + (bh * Tq + i) * L;
      for (int64_t l = 0; l < L; ++l) {
        const int64_t j = base - l;
        gi[l] = j >= 0 && j < Tk ? di[j] : 0.0f;
      }
      for (int64_t j = 0; j < Tk; ++j) col[static_cast<size_t>(j)] += di[j];
    }
    for (int64_t j = 0; j < Tk; ++j)
      pc[bh * Tk + j] = static_cast<float>(col[static_cast<size_t>(j)]);
  }
  // dgv[h, l]: over the batch, then the queries, in that order.
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> s(static_cast<size_t>(L), 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < Tq; ++i) {
        const float* gi = pg + ((b * H + h) * Tq + i) * L;
        for (int64_t l = 0; l < L; ++l) s[static_cast<size_t>(l)] += gi[l];
      }
    for (int64_t l = 0; l < L; ++l) pv[h * L + l] = static_cast<float>(s[static_cast<size_t>(l)]);
  }
}

Tensor xl_distance_table(int64_t rows, int64_t first_distance, int64_t d) {
  ROTOR_CHECK(d % 2 == 0 && d > 0, "xl_distance_table: d {} must be even", d);
  std::vector<float> t(static_cast<size_t>(rows * d));
  const int64_t half = d / 2;
  for (int64_t l = 0; l < rows; ++l) {
    const double x = static_cast<double>(first_distance + l);
    for (int64_t c = 0; c < half; ++c) {
      const double w = std::pow(10000.0, -2.0 * static_cast<double>(c) / static_cast<double>(d));
      t[static_cast<size_t>(l * d + c)] = static_cast<float>(std::sin(x * w));
      t[static_cast<size_t>(l * d + half + c)] = static_cast<float>(std::cos(x * w));
    }
  }
  return Tensor::from_floats(t, {rows, d});
}

}  // namespace rotor::ops
