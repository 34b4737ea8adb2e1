// kernels/linear_attention_chunks.cu (the row kernels of causal linear
// attention with the chunks in parallel) run on the CPU (emulate_cu.py,
// kernel_emulation.h) and held bitwise to their twin, the methods of
// ops::linear_chunked::CpuBackend (the same f32 operations in the same
// order, expf for std::exp): rows (padding, scaling, unpadding), factors
// (with and without stabilizers and key lengths, a partial last chunk),
// the forward and reverse scans, and both kinds of weights; then the whole
// algorithm on a CPU backend whose row steps are these kernels against the
// plain CPU backend.
#include "ops/linear_attention_chunked.h"
//
#include "emulate_common.h"
#include "emulated/linear_attention_chunks.inc"

namespace {

using namespace emu_check;
namespace ke = rotor::kernels::emulated;
namespace lc = rotor::ops::linear_chunked;

// A prefix maximum that jumps now and then, [BH, T].
std::vector<float> stabilizers(int64_t BH, int64_t T, unsigned seed) {
  const auto u = randoms(static_cast<size_t>(BH * T), seed, 0.0f, 1.0f);
  std::vector<float> ck(u.size());
  for (int64_t bh = 0; bh < BH; ++bh) {
    float run = -2.0f;
    for (int64_t t = 0; t < T; ++t) {
      const float x = u[static_cast<size_t>(bh * T + t)];
      run += x > 0.8f ? 20.0f * x : x < 0.5f ? 0.0f : x;
      ck[static_cast<size_t>(bh * T + t)] = run;
    }
  }
  return ck;
}

void rows_case(int64_t BH, int64_t src_rows, int64_t dst_rows, int64_t X, bool scaled) {
  char what[96];
  std::snprintf(what, sizeof what, "la rows BH%lld %lld->%lld X%lld%s", (long long)BH,
                (long long)src_rows, (long long)dst_rows, (long long)X, scaled ? " scaled" : "");
  const auto src = randoms(static_cast<size_t>(BH * src_rows * X), 1);
  const auto scale = randoms(static_cast<size_t>(BH * dst_rows), 2);
  std::vector<float> got(static_cast<size_t>(BH * dst_rows * X), NAN), ref(got.size(), NAN);
  lc::CpuBackend be;
  be.rows(src.data(), src_rows, ref.data(), dst_rows, X, BH, scaled ? scale.data() : nullptr);
  check_status(what, ke::la_chunk_rows_emulated(src.data(), src_rows, got.data(), dst_rows, X, BH,
                                                scaled ? scale.data() : nullptr, nullptr));
  check_bits(what, "dst", got, ref);
}

void factors_case(int64_t B, int64_t H, int64_t T, int64_t L, bool stab,
                  std::vector<int32_t> key_len) {
  char what[96];
  std::snprintf(what, sizeof what, "la factors B%lld H%lld T%lld L%lld%s%s", (long long)B,
                (long long)H, (long long)T, (long long)L, stab ? " stab" : "",
                key_len.empty() ? "" : " key_len");
  const int64_t BH = B * H, C = (T + L - 1) / L, Tp = C * L;
  const auto ck = stabilizers(BH, T, 3);
  const int32_t* kl = key_len.empty() ? nullptr : key_len.data();
  std::vector<float> s(static_cast<size_t>(BH * Tp), NAN), f(s), g(s),
      d(static_cast<size_t>(BH * C), NAN);
  std::vector<float> s2(s), f2(s), g2(s), d2(d);
  lc::CpuBackend be;
  be.factors(stab ? ck.data() : nullptr, kl, H, BH, T, Tp, L, s.data(), f.data(), g.data(),
             d.data());
  check_status(what,
               ke::la_chunk_factors_emulated(stab ? ck.data() : nullptr, kl, H, BH, T, Tp, L,
                                             s2.data(), f2.data(), g2.data(), d2.data(), nullptr));
  check_bits(what, "s", s2, s);
  check_bits(what, "f", f2, f);
  check_bits(what, "g", g2, g);
  check_bits(what, "decay", d2, d);
  bool bounded = true;  // every factor in [0, 1]: s never decreases
  for (const auto* v : {&f2, &g2, &d2})
    for (float x : *v) bounded &= x >= 0.0f && x <= 1.0f;
  check_true(what, "<= 1", bounded);
}

void scan_case(int64_t BH, int64_t C, int64_t E, bool reverse) {
  char what[96];
  std::snprintf(what, sizeof what, "la scan BH%lld C%lld E%lld%s", (long long)BH, (long long)C,
                (long long)E, reverse ? " reverse" : "");
  const auto x = randoms(static_cast<size_t>(BH * C * E), 4);
  const auto decay = randoms(static_cast<size_t>(BH * C), 5, 0.0f, 1.0f);
  std::vector<float> ref(x), got(x);
  lc::CpuBackend be;
  be.scan(ref.data(), BH, C, E, decay.data(), reverse);
  check_status(what,
               ke::la_chunk_scan_emulated(got.data(), BH, C, E, decay.data(), reverse, nullptr));
  check_bits(what, "x", got, ref);
}

void weights_case(int64_t B, int64_t H, int64_t T, int64_t L, bool multiply,
                  std::vector<int32_t> key_len) {
  char what[96];
  std::snprintf(what, sizeof what, "la weights B%lld H%lld T%lld L%lld %s%s", (long long)B,
                (long long)H, (long long)T, (long long)L, multiply ? "multiply" : "write",
                key_len.empty() ? "" : " key_len");
  const int64_t BH = B * H, C = (T + L - 1) / L, Tp = C * L;
  const int32_t* kl = key_len.empty() ? nullptr : key_len.data();
  std::vector<float> s(static_cast<size_t>(BH * Tp)), f(s), g(s), d(static_cast<size_t>(BH * C));
  const auto ck = stabilizers(BH, T, 6);
  lc::CpuBackend be;
  be.factors(ck.data(), kl, H, BH, T, Tp, L, s.data(), f.data(), g.data(), d.data());
  const auto p = randoms(static_cast<size_t>(BH * C * L * L), 7);
  const auto coef = randoms(static_cast<size_t>(BH * Tp), 8);
  std::vector<float> ref(p), got(multiply ? p : std::vector<float>(p.size(), NAN));
  be.weights(ref.data(), s.data(), coef.data(), kl, H, T, BH, C, L, multiply);
  check_status(what, ke::la_chunk_weights_emulated(got.data(), s.data(), coef.data(), kl, H, T, BH,
                                                   C, L, multiply, nullptr));
  check_bits(what, "p", got, ref);
}

// The CPU backend with its row steps done by the emulated kernels.
class EmulatedBackend : public lc::CpuBackend {
 public:
  void rows(const float* src, int64_t src_rows, float* dst, int64_t dst_rows, int64_t X, int64_t BH,
            const float* scale) override {
    ok &= ke::la_chunk_rows_emulated(src, src_rows, dst, dst_rows, X, BH, scale, nullptr) ==
          cudaSuccess;
  }
  void factors(const float* ck, const int32_t* key_len, int64_t H, int64_t BH, int64_t T,
               int64_t Tpad, int64_t L, float* s, float* f, float* g, float* decay) override {
    ok &= ke::la_chunk_factors_emulated(ck, key_len, H, BH, T, Tpad, L, s, f, g, decay, nullptr) ==
          cudaSuccess;
  }
  void scan(float* x, int64_t BH, int64_t C, int64_t E, const float* decay, bool reverse) override {
    ok &= ke::la_chunk_scan_emulated(x, BH, C, E, decay, reverse, nullptr) == cudaSuccess;
  }
  void weights(float* p, const float* s, const float* coef, const int32_t* key_len, int64_t H,
               int64_t T, int64_t BH, int64_t C, int64_t L, bool multiply) override {
    ok &= ke::la_chunk_weights_emulated(p, s, coef, key_len, H, T, BH, C, L, multiply, nullptr) ==
          cudaSuccess;
  }
  bool ok = true;
};

void algorithm_case(int64_t B, int64_t H, int64_t T, int64_t L, bool rotated,
                    std::vector<int32_t> key_len) {
  char what[96];
  std::snprintf(what, sizeof what, "la chunked B%lld H%lld T%lld L%lld%s%s", (long long)B,
                (long long)H, (long long)T, (long long)L, rotated ? " rotated" : "",
                key_len.empty() ? "" : " key_len");
  const int64_t BH = B * H, M = 6, Dv = 5;
  const size_t nm = static_cast<size_t>(BH * T * M), nv = static_cast<size_t>(BH * T * Dv);
  const auto phq = randoms(nm, 11, 0.0f, 1.0f), phk = randoms(nm, 12, 0.0f, 1.0f);
  const auto aq = randoms(nm, 13), bk = randoms(nm, 14), v = randoms(nv, 15), G = randoms(nv, 16);
  const auto dden = randoms(static_cast<size_t>(BH * T), 17);
  const auto ck = stabilizers(BH, T, 18);
  lc::Inputs in;
  in.H = H;
  in.BH = BH;
  in.T = T;
  in.M = M;
  in.Dv = Dv;
  in.L = L;
  in.key_len = key_len.empty() ? nullptr : key_len.data();
  in.phq = phq.data();
  in.aq = rotated ? aq.data() : phq.data();
  in.phk = phk.data();
  in.bk = rotated ? bk.data() : phk.data();
  in.v = v.data();
  in.ck = ck.data();
  auto run = [&](lc::Backend& be, std::vector<std::vector<float>>& o) {
    o.assign(7, {});
    o[0].assign(nv, NAN);
    o[1].assign(static_cast<size_t>(BH * T), NAN);
    for (int i = 2; i < 6; ++i) o[static_cast<size_t>(i)].assign(nm, NAN);
    o[6].assign(nv, NAN);
    lc::forward(be, in, o[0].data(), o[1].data());
    lc::backward(be, in, G.data(), dden.data(), o[2].data(), rotated ? o[3].data() : o[2].data(),
                 o[4].data(), rotated ? o[5].data() : o[4].data(), o[6].data());
  };
  std::vector<std::vector<float>> ref, got;
  lc::CpuBackend plain;
  run(plain, ref);
  EmulatedBackend emulated;
  run(emulated, got);
  check_true(what, "status", emulated.ok);
  const char* names[7] = {"num", "den", "da", "dphq", "db", "dphk", "dv"};
  for (size_t i = 0; i < 7; ++i) check_bits(what, names[i], got[i], ref[i]);
}

void run() {
  rows_case(2, 10, 12, 5, false);  // padding
  rows_case(2, 10, 12, 4, true);   // padding, scaled
  rows_case(3, 12, 10, 3, false);  // unpadding
  rows_case(1, 300, 320, 9, true);
  for (bool stab : {false, true}) {
    factors_case(1, 2, 16, 4, stab, {});
    factors_case(2, 3, 37, 8, stab, {0, 21});
    factors_case(3, 1, 5, 8, stab, {5, 2, 9});  // one partial chunk; a length past T
  }
  for (bool reverse : {false, true}) {
    scan_case(2, 7, 33, reverse);
    scan_case(3, 1, 5, reverse);
    scan_case(1, 40, 300, reverse);
  }
  for (bool multiply : {true, false}) {
    weights_case(1, 2, 16, 4, multiply, {});
    weights_case(2, 2, 29, 8, multiply, {29, 11});
  }
  algorithm_case(1, 2, 24, 8, false, {});
  algorithm_case(2, 2, 29, 8, true, {29, 11});
  algorithm_case(1, 1, 70, 16, true, {});
}

const Register reg("linear_attention_chunks", run);

}  // namespace
