// Causal linear attention with the chunks in parallel (see the header): the
// algorithm over a Backend, and the CPU backend.
#include "ops/linear_attention_chunked.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/cpu_gemm.h"

namespace rotor::ops::linear_chunked {
namespace {

// The padded rows of a call: C chunks of L rows, and the inputs laid out
// [BH, C L, X] (the inputs themselves when T is a whole number of chunks).
struct Layout {
  int64_t BH, T, M, Dv, L, C, Tp, N;
  bool after;
  float *s, *f, *g, *decay, *ones;
  const float *A, *Pq, *Bk, *Pk, *V;  // plain, padded
  const float *As, *Pqs, *Bs, *Pks;   // a, phi(q) times g; b, phi(k) times f
};

const float* padded(Backend& be, const Layout& l, const float* x, int64_t X) {
  if (l.T == l.Tp) return x;
  float* p = be.take(l.BH * l.Tp * X);
  be.rows(x, l.T, p, l.Tp, X, l.BH, nullptr);
  return p;
}

const float* scaled(Backend& be, const Layout& l, const float* x, int64_t X, const float* by) {
  float* p = be.take(l.BH * l.Tp * X);
  be.rows(x, l.T, p, l.Tp, X, l.BH, by);
  return p;
}

Layout layout(Backend& be, const Inputs& in) {
  ROTOR_CHECK(in.L >= 1 && in.M >= 1 && in.Dv >= 1, "linear attention (chunked): L {} M {} Dv {}",
              in.L, in.M, in.Dv);
  Layout l{};
  l.BH = in.BH;
  l.T = in.T;
  l.M = in.M;
  l.Dv = in.Dv;
  l.L = in.L;
  l.C = (in.T + in.L - 1) / in.L;
  l.Tp = l.C * l.L;
  l.N = l.BH * l.C;
  l.after = in.aq != in.phq;
  l.s = be.take(l.BH * l.Tp);
  l.f = be.take(l.BH * l.Tp);
  l.g = be.take(l.BH * l.Tp);
  l.decay = be.take(l.N);
  be.factors(in.ck, in.key_len, in.H, l.BH, l.T, l.Tp, l.L, l.s, l.f, l.g, l.decay);
  l.ones = be.take(l.L);
  be.fill(l.ones, l.L, 1.0f);
  l.A = padded(be, l, in.aq, l.M);
  l.Pq = l.after ? padded(be, l, in.phq, l.M) : l.A;
  l.Bk = padded(be, l, in.bk, l.M);
  l.Pk = l.after ? padded(be, l, in.phk, l.M) : l.Bk;
  l.V = padded(be, l, in.v, l.Dv);
  l.As = scaled(be, l, in.aq, l.M, l.g);
  l.Pqs = l.after ? scaled(be, l, in.phq, l.M, l.g) : l.As;
  l.Bs = scaled(be, l, in.bk, l.M, l.f);
  l.Pks = l.after ? scaled(be, l, in.phk, l.M, l.f) : l.Bs;
  return l;
}

// The states S_c [N, M, Dv] and z_c [N, M] of the keys before chunk c.
void states(Backend& be, const Layout& l, float*& S, float*& z) {
  const int64_t L = l.L, M = l.M, Dv = l.Dv;
  S = be.take(l.N * M * Dv);
  z = be.take(l.N * M);
  be.gemm(true, false, M, Dv, L, l.Bs, L * M, l.V, L * Dv, S, M * Dv, l.N, 0.0f);  // f b^T v
  be.gemm(true, false, M, 1, L, l.Pks, L * M, l.ones, 0, z, M, l.N, 0.0f);         // f phi^T 1
  be.scan(S, l.BH, l.C, M * Dv, l.decay, false);
  be.scan(z, l.BH, l.C, M, l.decay, false);
}

// The masked, weighted product x y^T of each chunk [N, L, L] (x, y [.., X]).
float* masked(Backend& be, const Layout& l, const Inputs& in, const float* x, const float* y,
              int64_t X) {
  float* p = be.take(l.N * l.L * l.L);
  be.gemm(false, true, l.L, l.L, X, x, l.L * X, y, l.L * X, p, l.L * l.L, l.N, 0.0f);
  be.weights(p, l.s, nullptr, in.key_len, in.H, l.T, l.BH, l.C, l.L, true);
  return p;
}

// An output [BH, T, X]: itself when T is whole chunks, else padded scratch
// (one buffer for two outputs that are one).
float* out_rows(Backend& be, const Layout& l, float* out, int64_t X) {
  return l.T == l.Tp ? out : be.take(l.BH * l.Tp * X);
}
void unpad(Backend& be, const Layout& l, const float* p, float* out, int64_t X) {
  if (p != out) be.rows(p, l.Tp, out, l.T, X, l.BH, nullptr);
}

}  // namespace

void forward(Backend& be, const Inputs& in, float* num, float* den) {
  if (in.BH == 0 || in.T == 0) return;
  const Layout l = layout(be, in);
  const int64_t L = l.L, M = l.M, Dv = l.Dv, N = l.N;
  float *S = nullptr, *z = nullptr;
  states(be, l, S, z);
  float* nump = out_rows(be, l, num, Dv);
  float* denp = out_rows(be, l, den, 1);
  be.gemm(false, false, L, Dv, M, l.As, L * M, S, M * Dv, nump, L * Dv, N, 0.0f);  // g a S
  be.gemm(false, false, L, 1, M, l.Pqs, L * M, z, M, denp, L, N, 0.0f);            // g phi z
  const float* P = masked(be, l, in, l.A, l.Bk, M);
  be.gemm(false, false, L, Dv, L, P, L * L, l.V, L * Dv, nump, L * Dv, N, 1.0f);  // + P v
  const float* Pd = l.after ? masked(be, l, in, l.Pq, l.Pk, M) : P;
  be.gemm(false, false, L, 1, L, Pd, L * L, l.ones, 0, denp, L, N, 1.0f);  // + rowsum(Pd)
  unpad(be, l, nump, num, Dv);
  unpad(be, l, denp, den, 1);
}

void backward(Backend& be, const Inputs& in, const float* G, const float* dden, float* da,
              float* dphq, float* db, float* dphk, float* dv) {
  if (in.BH == 0 || in.T == 0) return;
  const Layout l = layout(be, in);
  const int64_t L = l.L, M = l.M, Dv = l.Dv, N = l.N, BH = l.BH, Tp = l.Tp;
  float *S = nullptr, *z = nullptr;
  states(be, l, S, z);
  const float* Gp = padded(be, l, G, Dv);
  const float* Gs = scaled(be, l, G, Dv, l.g);
  const float* ddp = padded(be, l, dden, 1);
  const float* dds = scaled(be, l, dden, 1, l.g);
  const float* Vs = scaled(be, l, in.v, Dv, l.f);
  float* dap = out_rows(be, l, da, M);
  float* dphqp = dphq == da ? dap : out_rows(be, l, dphq, M);
  float* dbp = out_rows(be, l, db, M);
  float* dphkp = dphk == db ? dbp : out_rows(be, l, dphk, M);
  float* dvp = out_rows(be, l, dv, Dv);
  be.fill(dap, BH * Tp * M, 0.0f);
  if (dphqp != dap) be.fill(dphqp, BH * Tp * M, 0.0f);
  be.fill(dbp, BH * Tp * M, 0.0f);
  if (dphkp != dbp) be.fill(dphkp, BH * Tp * M, 0.0f);
  be.fill(dvp, BH * Tp * Dv, 0.0f);
  const float* P = masked(be, l, in, l.A, l.Bk, M);  // w a.b
  const float* Q = masked(be, l, in, Gp, l.V, Dv);   // w G.v
  float* W = be.take(N * L * L);                     // w dden
  be.weights(W, l.s, ddp, in.key_len, in.H, l.T, BH, l.C, L, false);
  // The queries: the keys before their chunk (the state), then their own.
  be.gemm(false, true, L, M, Dv, Gs, L * Dv, S, M * Dv, dap, L * M, N, 1.0f);    // g G S^T
  be.gemm(false, false, L, M, L, Q, L * L, l.Bk, L * M, dap, L * M, N, 1.0f);    // Q b
  be.gemm(false, false, L, M, 1, dds, L, z, M, dphqp, L * M, N, 1.0f);           // g dden z^T
  be.gemm(false, false, L, M, L, W, L * L, l.Pk, L * M, dphqp, L * M, N, 1.0f);  // W phi(k)
  // The keys: the queries after their chunk (suffix states), then their own.
  float* R = be.take(N * M * Dv);
  float* r = be.take(N * M);
  be.gemm(true, false, M, Dv, L, l.As, L * M, Gp, L * Dv, R, M * Dv, N, 0.0f);  // (g a)^T G
  be.gemm(true, false, M, 1, L, l.Pqs, L * M, ddp, L, r, M, N, 0.0f);           // (g phi)^T dden
  be.scan(R, BH, l.C, M * Dv, l.decay, true);
  be.scan(r, BH, l.C, M, l.decay, true);
  be.gemm(false, true, L, M, Dv, Vs, L * Dv, R, M * Dv, dbp, L * M, N, 1.0f);     // f v R^T
  be.gemm(true, false, L, M, L, Q, L * L, l.A, L * M, dbp, L * M, N, 1.0f);       // Q^T a
  be.gemm(false, false, L, Dv, M, l.Bs, L * M, R, M * Dv, dvp, L * Dv, N, 1.0f);  // f b R
  be.gemm(true, false, L, Dv, L, P, L * L, Gp, L * Dv, dvp, L * Dv, N, 1.0f);     // P^T G
  be.gemm(false, false, L, M, 1, l.f, L, r, M, dphkp, L * M, N, 1.0f);            // f r^T
  be.gemm(true, false, L, M, L, W, L * L, l.Pq, L * M, dphkp, L * M, N, 1.0f);    // W^T phi(q)
  unpad(be, l, dap, da, M);
  if (dphq != da) unpad(be, l, dphqp, dphq, M);
  unpad(be, l, dbp, db, M);
  if (dphk != db) unpad(be, l, dphkp, dphk, M);
  unpad(be, l, dvp, dv, Dv);
}

// ---- the CPU backend ----------------------------------------------------------

void CpuBackend::gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t sa,
                      const float* b, int64_t sb, float* d, int64_t sd, int64_t batch, float beta) {
  const int lda = static_cast<int>(ta ? m : k), ldb = static_cast<int>(tb ? k : n);
  for (int64_t i = 0; i < batch; ++i)
    cpu_sgemm(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a + i * sa, lda, b + i * sb, ldb,
              beta, d + i * sd, static_cast<int>(n));
}

void CpuBackend::rows(const float* src, int64_t src_rows, float* dst, int64_t dst_rows, int64_t X,
                      int64_t BH, const float* scale) {
  const int64_t rows = std::min(src_rows, dst_rows);
  for (int64_t bh = 0; bh < BH; ++bh) {
    for (int64_t t = 0; t < dst_rows; ++t) {
      float* o = dst + (bh * dst_rows + t) * X;
      if (t >= rows) {
        std::fill(o, o + X, 0.0f);
        continue;
      }
      const float* x = src + (bh * src_rows + t) * X;
      if (scale) {
        const float sc = scale[bh * dst_rows + t];
        for (int64_t i = 0; i < X; ++i) o[i] = x[i] * sc;
      } else {
        std::memcpy(o, x, sizeof(float) * static_cast<size_t>(X));
      }
    }
  }
}

namespace {
int64_t key_count(const int32_t* key_len, int64_t H, int64_t bh, int64_t T) {
  if (!key_len) return T;
  return std::clamp<int64_t>(key_len[bh / H], 0, T);
}
}  // namespace

void CpuBackend::factors(const float* ck, const int32_t* key_len, int64_t H, int64_t BH, int64_t T,
                         int64_t Tpad, int64_t L, float* s, float* f, float* g, float* decay) {
  const int64_t C = Tpad / L;
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t len = key_count(key_len, H, bh, T);
    float* sr = s + bh * Tpad;
    for (int64_t t = 0; t < Tpad; ++t)
      sr[t] = ck && len > 0 ? ck[bh * T + std::min(t, len - 1)] : 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      const float e = sr[c * L + L - 1], e_prev = c > 0 ? sr[c * L - 1] : sr[0];
      decay[bh * C + c] = std::exp(e_prev - e);
      for (int64_t t = c * L; t < c * L + L; ++t) {
        f[bh * Tpad + t] = t < len ? std::exp(sr[t] - e) : 0.0f;
        g[bh * Tpad + t] = std::exp(e_prev - sr[t]);
      }
    }
  }
}

void CpuBackend::scan(float* x, int64_t BH, int64_t C, int64_t E, const float* decay,
                      bool reverse) {
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t e = 0; e < E; ++e) {
      float acc = 0.0f;
      for (int64_t i = 0; i < C; ++i) {
        const int64_t c = reverse ? C - 1 - i : i;
        float& v = x[(bh * C + c) * E + e];
        const float u = v;
        v = acc;
        acc = decay[bh * C + c] * acc + u;
      }
    }
}

void CpuBackend::weights(float* p, const float* s, const float* coef, const int32_t* key_len,
                         int64_t H, int64_t T, int64_t BH, int64_t C, int64_t L, bool multiply) {
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t len = key_count(key_len, H, bh, T);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t m = 0; m < L; ++m) {
        const int64_t tm = c * L + m;
        const float sm = s[bh * C * L + tm];
        float* row = p + ((bh * C + c) * L + m) * L;
        for (int64_t n = 0; n < L; ++n) {
          const int64_t tn = c * L + n;
          const float w = n <= m && tn < len ? std::exp(s[bh * C * L + tn] - sm) : 0.0f;
          row[n] = multiply ? row[n] * w : w * coef[bh * C * L + tm];
        }
      }
  }
}

void CpuBackend::fill(float* p, int64_t n, float value) {
  std::fill(p, p + n, value);
}

float* CpuBackend::take(int64_t n) {
  scratch_.push_back(std::make_unique<float[]>(static_cast<size_t>(std::max<int64_t>(n, 1))));
  return scratch_.back().get();
}

}  // namespace rotor::ops::linear_chunked
