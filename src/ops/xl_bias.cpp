#include "ops/xl_bias.h"

#include <cmath>
#include <initializer_list>
#include <vector>

#include "core/error.h"
#include "ops/cpu_gemm.h"

namespace rotor::ops {

namespace {

struct XlDims {
  int64_t B, H, Tq, Tk, D, L;
};

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
    ROTOR_CHECK(t->dtype() == DType::F32 && t->is_cpu(), "{}: f32 CPU tensors only, got {}", op,
                t->str());
  return d;
}

// q + scale v of one (batch, head): q's Tq rows [Tq, D] plus the head's v.
std::vector<float> query_plus_v(const float* q, const float* v, float scale, const XlDims& d) {
  std::vector<float> qv(static_cast<size_t>(d.Tq * d.D));
  for (int64_t i = 0; i < d.Tq; ++i)
    for (int64_t c = 0; c < d.D; ++c) qv[i * d.D + c] = q[i * d.D + c] + scale * v[c];
  return qv;
}

}  // namespace

void xl_bias_forward(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u,
                     const Tensor& v, float scale, int64_t q_offset, Tensor& bias) {
  const XlDims d = check_xl(q, k, r, u, v, q_offset, "xl_bias_forward");
  check_shape(bias, {d.B, d.H, d.Tq, d.Tk}, "xl_bias_forward bias");
  ROTOR_CHECK(bias.dtype() == DType::F32 && bias.is_cpu(), "xl_bias_forward: bias {}", bias.str());
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
  const XlDims d = check_xl(q, k, r, u, v, q_offset, "xl_bias_backward");
  check_shape(dbias, {d.B, d.H, d.Tq, d.Tk}, "xl_bias_backward dbias");
  check_shape(dq, q.shape(), "xl_bias_backward dq");
  check_shape(dk, k.shape(), "xl_bias_backward dk");
  check_shape(dr, r.shape(), "xl_bias_backward dr");
  check_shape(du, u.shape(), "xl_bias_backward du");
  check_shape(dv, v.shape(), "xl_bias_backward dv");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dbias, &dq, &dk, &dr, &du, &dv})
    ROTOR_CHECK(t->dtype() == DType::F32 && t->is_cpu(), "xl_bias_backward: {}", t->str());
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
