// Causal linear attention with the chunks in parallel (ops/linear_attention_
// chunked.h, the algorithm CUDA runs for Tq == Tk) on its CPU backend,
// against a brute-force O(T^2) evaluation in double written here from the
// contract of the sequential sweeps (kernels/linear_attention_device.cuh,
// ChunkArgs): query m sees keys n <= m with n < key_len, weight w_mn =
// exp(s_n - s_m) with s_t the prefix stabilizer of key min(t, key_len - 1);
// num_m = sum_n w_mn (a_m.b_n) v_n, den_m = sum_n w_mn phi(q_m).phi(k_n);
// and the backward's d a, d phi(q), d b, d phi(k), dv for given G and dden.
// Keys past key_len have zero features (as the feature kernels write them)
// and must get zero gradients. Cases: T a whole number of chunks and not,
// one chunk, one row, rotated features (a != phi) and not (one buffer for
// d a and d phi(q)), stabilizers that grow by tens (the factors stay <= 1),
// key lengths 0, short and full. Errors relative to the largest reference
// entry, within 2e-5 (f32 sums in another order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/linear_attention_chunked.h"
#include "support/test_util.h"

namespace rotor {
namespace {

namespace lc = ops::linear_chunked;

struct Case {
  int64_t B = 1, H = 2, T = 10, M = 4, Dv = 3, L = 4;
  bool rotated = false, stabilizers = false;
  std::vector<int32_t> key_len = {};  // empty: none
};

struct Data {
  std::vector<float> phq, aq, phk, bk, v, ck, G, dden;
};

double max_abs(const std::vector<double>& r) {
  double m = 0;
  for (double x : r) m = std::max(m, std::abs(x));
  return m;
}

double rel(const std::vector<float>& got, const std::vector<double>& ref) {
  double d = 0;
  for (size_t i = 0; i < ref.size(); ++i) d = std::max(d, std::abs(got[i] - ref[i]));
  return d / std::max(1e-30, max_abs(ref));
}

int64_t len_of(const Case& c, int64_t bh) {
  return c.key_len.empty() ? c.T : std::clamp<int64_t>(c.key_len[bh / c.H], 0, c.T);
}

Data make(const Case& c) {
  const int64_t BH = c.B * c.H, T = c.T, M = c.M;
  Data d;
  d.phq = test::random_floats(BH * T * M, 1, 0.0f, 1.0f);
  d.phk = test::random_floats(BH * T * M, 2, 0.0f, 1.0f);
  d.aq = c.rotated ? test::random_floats(BH * T * M, 3) : d.phq;
  d.bk = c.rotated ? test::random_floats(BH * T * M, 4) : d.phk;
  d.v = test::random_floats(BH * T * c.Dv, 5);
  d.G = test::random_floats(BH * T * c.Dv, 6);
  d.dden = test::random_floats(BH * T, 7);
  if (c.stabilizers) {  // a prefix max that jumps by tens now and then
    const auto steps = test::random_floats(BH * T, 8, 0.0f, 1.0f);
    d.ck.resize(static_cast<size_t>(BH * T));
    for (int64_t bh = 0; bh < BH; ++bh) {
      float run = -3.0f;
      for (int64_t t = 0; t < T; ++t) {
        const float u = steps[bh * T + t];
        run += u > 0.8f ? 30.0f * u : u < 0.5f ? 0.0f : u;
        d.ck[bh * T + t] = run;
      }
    }
  }
  for (int64_t bh = 0; bh < BH; ++bh)  // keys past the length: zero features
    for (int64_t t = len_of(c, bh); t < T; ++t)
      for (int64_t i = 0; i < M; ++i) {
        d.phk[(bh * T + t) * M + i] = 0.0f;
        d.bk[(bh * T + t) * M + i] = 0.0f;
      }
  return d;
}

struct Ref {
  std::vector<double> num, den, da, dphq, db, dphk, dv;
};

Ref brute(const Case& c, const Data& d) {
  const int64_t BH = c.B * c.H, T = c.T, M = c.M, Dv = c.Dv;
  Ref r;
  r.num.assign(BH * T * Dv, 0);
  r.den.assign(BH * T, 0);
  r.da.assign(BH * T * M, 0);
  r.dphq.assign(BH * T * M, 0);
  r.db.assign(BH * T * M, 0);
  r.dphk.assign(BH * T * M, 0);
  r.dv.assign(BH * T * Dv, 0);
  auto dot = [](const float* x, const float* y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * y[i];
    return s;
  };
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t len = len_of(c, bh);
    auto s = [&](int64_t t) {
      return d.ck.empty() || len == 0 ? 0.0 : d.ck[bh * T + std::min(t, len - 1)];
    };
    for (int64_t m = 0; m < T; ++m)
      for (int64_t n = 0; n <= m && n < len; ++n) {
        const double w = std::exp(s(n) - s(m));
        const float* am = &d.aq[(bh * T + m) * M];
        const float* bn = &d.bk[(bh * T + n) * M];
        const float* pqm = &d.phq[(bh * T + m) * M];
        const float* pkn = &d.phk[(bh * T + n) * M];
        const float* vn = &d.v[(bh * T + n) * Dv];
        const float* Gm = &d.G[(bh * T + m) * Dv];
        const double ab = w * dot(am, bn, M), gv = w * dot(Gm, vn, Dv);
        const double wd = w * d.dden[bh * T + m];
        r.den[bh * T + m] += w * dot(pqm, pkn, M);
        for (int64_t j = 0; j < Dv; ++j) {
          r.num[(bh * T + m) * Dv + j] += ab * vn[j];
          r.dv[(bh * T + n) * Dv + j] += ab * Gm[j];
        }
        for (int64_t i = 0; i < M; ++i) {
          r.da[(bh * T + m) * M + i] += gv * bn[i];
          r.db[(bh * T + n) * M + i] += gv * am[i];
          r.dphq[(bh * T + m) * M + i] += wd * pkn[i];
          r.dphk[(bh * T + n) * M + i] += wd * pqm[i];
        }
      }
  }
  if (!c.rotated)  // one buffer each: d a + d phi(q), d b + d phi(k)
    for (size_t i = 0; i < r.da.size(); ++i) {
      r.da[i] += r.dphq[i];
      r.dphq[i] = r.da[i];
      r.db[i] += r.dphk[i];
      r.dphk[i] = r.db[i];
    }
  return r;
}

void run(const Case& c) {
  SCOPED_TRACE(::testing::Message()
               << "T " << c.T << " L " << c.L << " H " << c.H << (c.rotated ? " rotated" : "")
               << (c.stabilizers ? " stabilizers" : "") << " key_len " << c.key_len.size());
  const int64_t BH = c.B * c.H, T = c.T, M = c.M, Dv = c.Dv;
  const Data d = make(c);
  lc::Inputs in;
  in.H = c.H;
  in.BH = BH;
  in.T = T;
  in.M = M;
  in.Dv = Dv;
  in.L = c.L;
  in.key_len = c.key_len.empty() ? nullptr : c.key_len.data();
  in.phq = d.phq.data();
  in.aq = c.rotated ? d.aq.data() : in.phq;
  in.phk = d.phk.data();
  in.bk = c.rotated ? d.bk.data() : in.phk;
  in.v = d.v.data();
  in.ck = d.ck.empty() ? nullptr : d.ck.data();
  std::vector<float> num(BH * T * Dv, NAN), den(BH * T, NAN);
  {
    lc::CpuBackend be;
    lc::forward(be, in, num.data(), den.data());
  }
  std::vector<float> da(BH * T * M, NAN), dphq(da), db(da), dphk(da), dv(BH * T * Dv, NAN);
  {
    lc::CpuBackend be;
    float* pdphq = c.rotated ? dphq.data() : da.data();
    float* pdphk = c.rotated ? dphk.data() : db.data();
    lc::backward(be, in, d.G.data(), d.dden.data(), da.data(), pdphq, db.data(), pdphk, dv.data());
    if (!c.rotated) {
      dphq = da;
      dphk = db;
    }
  }
  const Ref r = brute(c, d);
  EXPECT_LT(rel(num, r.num), 2e-5);
  EXPECT_LT(rel(den, r.den), 2e-5);
  EXPECT_LT(rel(da, r.da), 2e-5);
  EXPECT_LT(rel(dphq, r.dphq), 2e-5);
  EXPECT_LT(rel(db, r.db), 2e-5);
  EXPECT_LT(rel(dphk, r.dphk), 2e-5);
  EXPECT_LT(rel(dv, r.dv), 2e-5);
  // Keys past their length: nothing flows back to them.
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t t = len_of(c, bh); t < T; ++t) {
      for (int64_t i = 0; i < M; ++i) {
        ASSERT_EQ(db[(bh * T + t) * M + i], 0.0f) << "bh " << bh << " t " << t;
        ASSERT_EQ(dphk[(bh * T + t) * M + i], 0.0f) << "bh " << bh << " t " << t;
      }
      for (int64_t j = 0; j < Dv; ++j) ASSERT_EQ(dv[(bh * T + t) * Dv + j], 0.0f);
    }
}

TEST(LinearAttentionChunked, WholeChunksAndAPartialOne) {
  run({.T = 12, .L = 4});
  run({.T = 10, .L = 4});
  run({.T = 10, .L = 4, .rotated = true});
  run({.B = 2, .H = 3, .T = 37, .M = 5, .Dv = 6, .L = 8, .rotated = true});
}

TEST(LinearAttentionChunked, OneChunkAndOneRow) {
  run({.T = 5, .L = 8});
  run({.T = 1, .L = 4, .rotated = true});
  run({.T = 7, .L = 1});  // a chunk a row: everything through the states
}

TEST(LinearAttentionChunked, PrefixStabilizers) {
  run({.T = 23, .L = 4, .stabilizers = true});
  run({.B = 2, .H = 2, .T = 30, .M = 6, .Dv = 4, .L = 8, .rotated = true, .stabilizers = true});
}

TEST(LinearAttentionChunked, KeyLengths) {
  run({.B = 3, .H = 2, .T = 13, .L = 4, .key_len = {0, 5, 13}});
  run({.B = 2, .H = 1, .T = 17, .L = 8, .rotated = true, .stabilizers = true, .key_len = {9, 3}});
}

}  // namespace
}  // namespace rotor
