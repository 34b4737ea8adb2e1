// The device code of kernels/flash_attention_sm70.cu run on the CPU, for the
// machines without a V100 (scripts/build_sm70.sh builds and runs it). The
// thread block, barriers, shuffles, atomicAdd and shared memory are
// cuda_emulation.h's (a fiber per CUDA thread). A WMMA fragment
// (wmma_emulation.h) is the whole 16 x 16 tile, held by every lane (loads
// read it whole, mma_sync computes it with fp32 sums of exact products,
// stores write it from lane 0), so the emulation checks the kernels' tiling,
// indexing, masks, dropout draws and synchronization, not the tensor cores'
// rounding. Results are compared with attention computed in double
// (attention_reference.h) on the same fp16-rounded inputs: out, lse,
// dq, dk, dv within 2e-2 of max(1, |ref|). Variable-length cases (cu_seqlens,
// run_varlen) also run the same documents regrouped dense and require every
// document's rows bit for bit as that call gives them; their packed grid
// runs document by document with the other documents' input rows NaN and
// their output rows unchanged. Under ThreadSanitizer
// (build_sm70.sh --tsan) a shared-memory access that no barrier orders is
// reported; shuffles count as warp barriers here, so a missing __syncwarp next
// to one goes unseen.
//
// Built by scripts/build_sm70.sh as
//   c++ -std=c++20 -O2 -pthread -I. -Isrc -I<CUDA include> \
//       -DROTOR_SM70_SECTION='"<generated>"' tests/emulation/flash_sm70_emulate.cpp
// where <generated> holds the kernels' device section (from `namespace {` to
// `#endif  // ROTOR_FLASH_SM70_DEVICE`, its `extern __shared__` line replaced
// by `unsigned char* smem_raw = emu::shared_memory();`), closed by `}`. Built
// with -O1 -g -fsanitize=address instead of -O2, it reports an access past
// the variable-length cases' buffers (exactly the call's rows) or a block's
// shared memory.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <type_traits>
#include <vector>

#include "attention_reference.h"
#include "core/philox.h"
#include "cuda_emulation.h"
#include "kernels/flash_attention.cuh"
#include "wmma_emulation.h"

// The masks and the dropout draw the kernels share, compiled as host code.
#include "kernels/flash_common.cuh"

namespace rotor::kernels {
#include ROTOR_SM70_SECTION

// The launchers' grids, block by block; with doc >= 0 only the blocks of
// batch row (document) doc, every head.
inline void run_grid_of(const FlashParams& p, int threads, int64_t gx, size_t smem, int64_t doc,
                        const std::function<void()>& body) {
  const auto gy = static_cast<unsigned>(p.B * p.H);
  for (unsigned by = 0; by < gy; ++by)
    if (doc < 0 || static_cast<int64_t>(by) / p.H == doc)
      for (unsigned bx = 0; bx < static_cast<unsigned>(gx); ++bx)
        emu::run_block(threads, static_cast<unsigned>(gx), gy, bx, by, smem, body);
}
template <int D>
void emulate_forward(const FlashParams& p, __half* out, float* lse, int64_t doc = -1) {
  using C = Sm70Fwd<D>;
  run_grid_of(p, C::kWarps * 32, (p.Tq + C::BQ - 1) / C::BQ, C::smem + flash_t5_smem(p, false), doc,
              [&] { fwd_block<D>(p, out, lse); });
}
template <int D>
void emulate_backward(const FlashParams& p, const float* lse, const __half* dout,
                      const float* delta, __half* dk, __half* dv, float* dq_accum,
                      int64_t doc = -1) {
  using C = Sm70Bwd<D>;
  run_grid_of(p, C::kWarps * 32, (p.Tk + C::BK - 1) / C::BK, C::smem + flash_t5_smem(p, true), doc,
              [&] { bwd_block<D>(p, lse, dout, delta, dk, dv, dq_accum); });
}
}  // namespace rotor::kernels

namespace {

using rotor::kernels::FlashParams;

struct Case {
  int64_t B, H, Tq, Tk;
  int D;
  bool causal;
  std::vector<int32_t> lengths;
  float dropout;
  bool alibi = false;  // ALiBi's bias, query 0 at alibi_q + Tk - Tq and key 0 at alibi_k
  int64_t alibi_q = 0, alibi_k = 0;  // the positions of T5's bias too
  int64_t t5 = -1;                   // T5's bias with max_distance t5 (a random table); -1: none
};

std::vector<__half> random_half(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<__half> v(n);
  for (auto& x : v) x = __float2half_rn(u(g));
  return v;
}

// The emulated kernels at p.D; doc >= 0: only document (batch row) doc's blocks.
void forward(const FlashParams& p, __half* out, float* lse, int64_t doc = -1) {
  if (p.D == 64)
    rotor::kernels::emulate_forward<64>(p, out, lse, doc);
  else
    rotor::kernels::emulate_forward<128>(p, out, lse, doc);
}
void backward(const FlashParams& p, const float* lse, const __half* dout, const float* delta,
              __half* dk, __half* dv, float* dq_accum, int64_t doc = -1) {
  if (p.D == 64)
    rotor::kernels::emulate_backward<64>(p, lse, dout, delta, dk, dv, dq_accum, doc);
  else
    rotor::kernels::emulate_backward<128>(p, lse, dout, delta, dk, dv, dq_accum, doc);
}

// delta = rowsum(dout o out) per row, as the backward's preprocessing pass computes it.
std::vector<float> row_delta(const std::vector<__half>& out, const std::vector<__half>& dout,
                             int D) {
  std::vector<float> delta(out.size() / D);
  for (size_t r = 0; r < delta.size(); ++r) {
    float s = 0;
    for (int d = 0; d < D; ++d) s += __half2float(out[r * D + d]) * __half2float(dout[r * D + d]);
    delta[r] = s;
  }
  return delta;
}

std::vector<double> doubles(const std::vector<__half>& a) {
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = __half2float(a[i]);
  return d;
}

template <class T>
std::vector<float> floats(const std::vector<T>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, __half>)
      f[i] = __half2float(v[i]);
    else
      f[i] = v[i];
  }
  return f;
}

bool run_case(const Case& c, uint32_t seed) {
  const int D = c.D;
  const size_t nq = static_cast<size_t>(c.B * c.H * c.Tq * D),
               nk = static_cast<size_t>(c.B * c.H * c.Tk * D);
  const auto q = random_half(nq, seed, -2.0f, 2.0f), k = random_half(nk, seed + 1, -1.0f, 1.0f),
             v = random_half(nk, seed + 2, -1.0f, 1.0f),
             dout = random_half(nq, seed + 3, -1.0f, 1.0f);
  FlashParams p;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.B = c.B;
  p.H = c.H;
  p.Tq = c.Tq;
  p.Tk = c.Tk;
  p.D = D;
  p.scale = 1.0f / std::sqrt(static_cast<float>(D));
  p.causal = c.causal;
  p.key_lengths = c.lengths.empty() ? nullptr : c.lengths.data();
  p.dropout = c.dropout;
  p.seed = 4321;
  p.stream_id = rotor::rng_stream(5, 3, rotor::RngPurpose::AttentionDropout, 0);
  p.alibi = c.alibi;
  p.bias_q_offset = c.alibi_q;
  p.bias_k_offset = c.alibi_k;
  // T5: a random table, and a gradient that starts nonzero (the kernel adds into it).
  const int64_t rel_rows = c.t5 >= 0 ? (2 * c.t5 + 1) * c.H : 0;
  std::vector<float> rel(static_cast<size_t>(rel_rows)), rel_grad(rel.size()), rel_grad0;
  {
    std::mt19937 g(seed + 7);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (float& x : rel) x = u(g);
    for (float& x : rel_grad) x = 0.25f * u(g);
    rel_grad0 = rel_grad;
  }
  if (c.t5 >= 0) {
    p.rel = rel.data();
    p.rel_max = c.t5;
    p.rel_grad = rel_grad.data();
  }

  // The emulated kernels.
  std::vector<__half> out(nq), dk(nk), dv(nk);
  std::vector<float> lse(static_cast<size_t>(c.B * c.H * c.Tq)), dq(nq, 0.0f);
  forward(p, out.data(), lse.data());
  const std::vector<float> delta = row_delta(out, dout, D);
  backward(p, lse.data(), dout.data(), delta.data(), dk.data(), dv.data(), dq.data());

  // The same attention in double.
  emu::AttentionShape shape{c.B,       c.H,       c.Tq,    c.Tk,   D,          c.causal,
                            c.lengths, c.dropout, p.scale, p.seed, p.stream_id};
  shape.alibi = c.alibi;
  shape.bias_q_offset = c.alibi_q;
  shape.bias_k_offset = c.alibi_k;
  shape.rel.assign(rel.begin(), rel.end());
  shape.rel_max = c.t5 >= 0 ? c.t5 : 0;
  const emu::AttentionResult ref =
      emu::reference_attention(shape, doubles(q), doubles(k), doubles(v), doubles(dout));
  // The table's gradient: what the kernel added to the starting values.
  std::vector<double> rel_want(rel_grad0.begin(), rel_grad0.end());
  for (size_t e = 0; e < ref.drel.size(); ++e) rel_want[e] += ref.drel[e];
  using emu::max_err;
  const double e_out = max_err(ref.out, floats(out)), e_lse = max_err(ref.lse, lse),
               e_dq = max_err(ref.dq, dq), e_dk = max_err(ref.dk, floats(dk)),
               e_dv = max_err(ref.dv, floats(dv)),
               e_rel = emu::rel_err(rel_want, ref.drel_mass, rel_grad);
  const double tol = 2e-2;
  const bool ok =
      e_out <= tol && e_lse <= tol && e_dq <= tol && e_dk <= tol && e_dv <= tol && e_rel <= tol;
  char t5[64] = "";
  if (c.t5 >= 0)
    std::snprintf(t5, sizeof t5, " t5 max %lld q+%lld k+%lld", static_cast<long long>(c.t5),
                  static_cast<long long>(c.alibi_q), static_cast<long long>(c.alibi_k));
  char table_err[32] = "";
  if (c.t5 >= 0) std::snprintf(table_err, sizeof table_err, " table %.1e", e_rel);
  std::printf(
      "  %-4s B%lld H%lld Tq%lld Tk%lld D%d%s%s drop%.1f%s%s: err out %.1e lse %.1e dq %.1e dk "
      "%.1e dv %.1e%s\n",
      ok ? "ok" : "FAIL", static_cast<long long>(c.B), static_cast<long long>(c.H),
      static_cast<long long>(c.Tq), static_cast<long long>(c.Tk), D, c.causal ? " causal" : "",
      c.lengths.empty() ? "" : " lengths", c.dropout,
      c.alibi
          ? (" alibi q+" + std::to_string(c.alibi_q) + " k+" + std::to_string(c.alibi_k)).c_str()
          : "",
      t5, e_out, e_lse, e_dq, e_dk, e_dv, table_err);
  return ok;
}

// A variable-length case (FlashCore's cu_seqlens): documents of q_lens
// queries and k_lens keys (empty: q_lens) end to end in each of H heads.
struct VarCase {
  int64_t H;
  int D;
  bool causal;
  std::vector<int32_t> q_lens, k_lens;
  float dropout;
  bool alibi = false;
  int64_t alibi_q = 0, alibi_k = 0;  // ALiBi's and T5's positions, as in Case
  int64_t t5 = -1;
};

// f(dense, packed) for row i < lens[b] of document b in head h: its row in
// the dense layout [B, H, T] and in the variable-length one [H, total].
template <class F>
void for_live_rows(const std::vector<int32_t>& lens, int64_t H, int64_t T, F f) {
  int64_t total = 0, start = 0;
  for (int32_t n : lens) total += n;
  for (size_t b = 0; b < lens.size(); ++b) {
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < lens[b]; ++i)
        f((static_cast<int64_t>(b) * H + h) * T + i, h * total + start + i);
    start += lens[b];
  }
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// The documents run twice: packed (cu_seqlens; buffers of exactly the
// call's rows, so that AddressSanitizer sees an overrun) and regrouped dense
// [B, H, Tq|Tk, D] with key_lengths = the documents' keys (the rows past a
// document random, its dout there zero). Every document's rows of out, lse,
// dq, dk, dv must agree bit for bit between the two (the rows the dense call
// has beyond a document only add zeros to its sums), and with attention in
// double within the dense cases' tolerance; T5's table gradient (summed by
// atomics in any order) only the latter. The packed grid runs document by
// document with the other documents' rows NaN in every input and unchanged
// in every output (below).
bool run_varlen(const VarCase& c, uint32_t seed) {
  const int D = c.D;
  const int64_t B = static_cast<int64_t>(c.q_lens.size()), H = c.H;
  const std::vector<int32_t>& ql = c.q_lens;
  const std::vector<int32_t>& kl = c.k_lens.empty() ? c.q_lens : c.k_lens;
  std::vector<int32_t> cu_q(static_cast<size_t>(B + 1), 0), cu_k(cu_q);
  for (int64_t b = 0; b < B; ++b) {
    cu_q[b + 1] = cu_q[b] + ql[b];
    cu_k[b + 1] = cu_k[b] + kl[b];
  }
  const int64_t Tq = *std::max_element(ql.begin(), ql.end()),
                Tk = *std::max_element(kl.begin(), kl.end()), total_q = cu_q[B], total_k = cu_k[B];

  // The dense layout.
  const size_t nq = static_cast<size_t>(B * H * Tq * D), nk = static_cast<size_t>(B * H * Tk * D);
  const auto q = random_half(nq, seed, -2.0f, 2.0f), k = random_half(nk, seed + 1, -1.0f, 1.0f),
             v = random_half(nk, seed + 2, -1.0f, 1.0f);
  auto dout = random_half(nq, seed + 3, -1.0f, 1.0f);
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = ql[bh / H]; i < Tq; ++i)
      std::fill_n(dout.begin() + (bh * Tq + i) * D, D, __float2half_rn(0.0f));
  // The packed layout.
  auto pack = [&](const std::vector<__half>& from, const std::vector<int32_t>& lens, int64_t T,
                  int64_t total) {
    std::vector<__half> to(static_cast<size_t>(H * total * D));
    for_live_rows(lens, H, T, [&](int64_t d, int64_t r) {
      std::copy_n(from.begin() + d * D, D, to.begin() + r * D);
    });
    return to;
  };
  const auto vq = pack(q, ql, Tq, total_q), vdout = pack(dout, ql, Tq, total_q),
             vk = pack(k, kl, Tk, total_k), vv = pack(v, kl, Tk, total_k);

  FlashParams p;
  p.B = B;
  p.H = H;
  p.Tq = Tq;
  p.Tk = Tk;
  p.D = D;
  p.scale = 1.0f / std::sqrt(static_cast<float>(D));
  p.causal = c.causal;
  p.dropout = c.dropout;
  p.seed = 987;
  p.stream_id = rotor::rng_stream(7, 1, rotor::RngPurpose::AttentionDropout, 0);
  p.alibi = c.alibi;
  p.bias_q_offset = c.alibi_q;
  p.bias_k_offset = c.alibi_k;
  // T5: a random table, and a gradient that starts nonzero (the kernel adds into it).
  std::vector<float> rel(static_cast<size_t>(c.t5 >= 0 ? (2 * c.t5 + 1) * H : 0)),
      rel_grad0(rel.size());
  {
    std::mt19937 g(seed + 7);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (float& x : rel) x = u(g);
    for (float& x : rel_grad0) x = 0.25f * u(g);
  }
  std::vector<float> rel_grad = rel_grad0, rel_grad_dense = rel_grad0;
  if (c.t5 >= 0) {
    p.rel = rel.data();
    p.rel_max = c.t5;
  }

  FlashParams pd = p;  // dense
  pd.q = q.data();
  pd.k = k.data();
  pd.v = v.data();
  pd.key_lengths = kl.data();
  if (c.t5 >= 0) pd.rel_grad = rel_grad_dense.data();
  std::vector<__half> out(nq), dk(nk), dv(nk);
  std::vector<float> lse(static_cast<size_t>(B * H * Tq)), dq(nq, 0.0f);
  forward(pd, out.data(), lse.data());
  const std::vector<float> delta = row_delta(out, dout, D);
  backward(pd, lse.data(), dout.data(), delta.data(), dk.data(), dv.data(), dq.data());

  // The packed call, its grid run document by document (in the grid's own
  // order, blockIdx.y = b H + h): while document n's blocks run, every other
  // document's input rows are NaN (a read of one reaches the results) and no
  // other document's output rows may change.
  FlashParams pv = p;
  pv.cu_seqlens_q = cu_q.data();
  pv.cu_seqlens_k = cu_k.data();
  pv.total_q = total_q;
  pv.total_k = total_k;
  if (c.t5 >= 0) pv.rel_grad = rel_grad.data();
  if (!rotor::kernels::flash_params_valid(pv)) emu::fail("variable-length parameters rejected");
  std::vector<__half> vout(vq.size()), vdk(vk.size()), vdv(vk.size());
  std::vector<float> vlse(static_cast<size_t>(H * total_q)), vdq(vq.size(), 0.0f);
  std::memset(vout.data(), 0xff, vout.size() * sizeof(__half));
  std::memset(vdk.data(), 0xff, vdk.size() * sizeof(__half));
  std::memset(vdv.data(), 0xff, vdv.size() * sizeof(__half));
  std::memset(vlse.data(), 0xff, vlse.size() * sizeof(float));
  int64_t stray = 0;
  for (int64_t n = 0; n < B; ++n) {
    // Is row t (of any head) document n's?
    auto mine = [&](const std::vector<int32_t>& cu, int64_t t) {
      return t >= cu[n] && t < cu[n + 1];
    };
    // x with its rows outside document n NaN.
    auto only = [&](auto x, const std::vector<int32_t>& cu, int64_t total, int width) {
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < total; ++t)
          if (!mine(cu, t)) std::memset(&x[(h * total + t) * width], 0xff, width * sizeof(x[0]));
      return x;
    };
    // Elements of x outside document n unlike `before`.
    auto changed = [&](const auto& x, const auto& before, const std::vector<int32_t>& cu,
                       int64_t total, int width) {
      int64_t k = 0;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < total; ++t) {
          if (mine(cu, t)) continue;
          for (int64_t e = (h * total + t) * width; e < (h * total + t + 1) * width; ++e)
            k += !same_bits(x[e], before[e]);
        }
      return k;
    };
    const auto iq = only(vq, cu_q, total_q, D), idout = only(vdout, cu_q, total_q, D),
               ik = only(vk, cu_k, total_k, D), iv = only(vv, cu_k, total_k, D);
    FlashParams pn = pv;
    pn.q = iq.data();
    pn.k = ik.data();
    pn.v = iv.data();
    const auto out0 = vout, dk0 = vdk, dv0 = vdv;
    const auto lse0 = vlse, dq0 = vdq;
    forward(pn, vout.data(), vlse.data(), n);
    const auto ilse = only(vlse, cu_q, total_q, 1),
               idelta = only(row_delta(vout, vdout, D), cu_q, total_q, 1);
    backward(pn, ilse.data(), idout.data(), idelta.data(), vdk.data(), vdv.data(), vdq.data(), n);
    stray += changed(vout, out0, cu_q, total_q, D) + changed(vlse, lse0, cu_q, total_q, 1) +
             changed(vdq, dq0, cu_q, total_q, D) + changed(vdk, dk0, cu_k, total_k, D) +
             changed(vdv, dv0, cu_k, total_k, D);
  }

  // Bit for bit the dense call's rows.
  int64_t differ = 0;
  auto compare = [&](const auto& dense, const auto& packed, const std::vector<int32_t>& lens,
                     int64_t T, int width) {
    for_live_rows(lens, H, T, [&](int64_t d, int64_t r) {
      for (int e = 0; e < width; ++e)
        differ += !same_bits(dense[d * width + e], packed[r * width + e]);
    });
  };
  compare(out, vout, ql, Tq, D);
  compare(lse, vlse, ql, Tq, 1);
  compare(dq, vdq, ql, Tq, D);
  compare(dk, vdk, kl, Tk, D);
  compare(dv, vdv, kl, Tk, D);

  // Attention in double on the dense layout, its live rows.
  emu::AttentionShape shape{B, H, Tq, Tk, D, c.causal, kl, c.dropout, p.scale, p.seed, p.stream_id};
  shape.alibi = c.alibi;
  shape.bias_q_offset = c.alibi_q;
  shape.bias_k_offset = c.alibi_k;
  shape.rel.assign(rel.begin(), rel.end());
  shape.rel_max = c.t5 >= 0 ? c.t5 : 0;
  const emu::AttentionResult ref =
      emu::reference_attention(shape, doubles(q), doubles(k), doubles(v), doubles(dout));
  auto err = [&](const std::vector<double>& want, const std::vector<float>& packed,
                 const std::vector<int32_t>& lens, int64_t T, int width) {
    std::vector<double> w;
    std::vector<float> g;
    for_live_rows(lens, H, T, [&](int64_t d, int64_t r) {
      for (int e = 0; e < width; ++e) {
        w.push_back(want[d * width + e]);
        g.push_back(packed[r * width + e]);
      }
    });
    return emu::max_err(w, g);
  };
  std::vector<double> rel_want(rel_grad0.begin(), rel_grad0.end());
  for (size_t e = 0; e < ref.drel.size(); ++e) rel_want[e] += ref.drel[e];
  const double e_out = err(ref.out, floats(vout), ql, Tq, D), e_lse = err(ref.lse, vlse, ql, Tq, 1),
               e_dq = err(ref.dq, vdq, ql, Tq, D), e_dk = err(ref.dk, floats(vdk), kl, Tk, D),
               e_dv = err(ref.dv, floats(vdv), kl, Tk, D),
               e_rel = emu::rel_err(rel_want, ref.drel_mass, rel_grad);

  const double tol = 2e-2;
  const bool ok = e_out <= tol && e_lse <= tol && e_dq <= tol && e_dk <= tol && e_dv <= tol &&
                  e_rel <= tol && differ == 0 && stray == 0;
  char extra[96] = "";
  if (c.alibi)
    std::snprintf(extra, sizeof extra, " alibi q+%lld k+%lld", static_cast<long long>(c.alibi_q),
                  static_cast<long long>(c.alibi_k));
  if (c.t5 >= 0)
    std::snprintf(extra, sizeof extra, " t5 max %lld q+%lld k+%lld table %.1e",
                  static_cast<long long>(c.t5), static_cast<long long>(c.alibi_q),
                  static_cast<long long>(c.alibi_k), e_rel);
  std::printf(
      "  %-4s varlen B%lld H%lld Tq%lld Tk%lld%s D%d%s drop%.1f%s: err out %.1e lse %.1e dq %.1e "
      "dk %.1e dv %.1e; %lld bits unlike dense, %lld stray\n",
      ok ? "ok" : "FAIL", static_cast<long long>(B), static_cast<long long>(H),
      static_cast<long long>(Tq), static_cast<long long>(Tk), c.k_lens.empty() ? "" : " cross", D,
      c.causal ? " causal" : "", c.dropout, extra, e_out, e_lse, e_dq, e_dk, e_dv,
      static_cast<long long>(differ), static_cast<long long>(stray));
  return ok;
}

}  // namespace

int main() {
  const std::vector<Case> cases = {
      {1, 2, 70, 70, 64, false, {}, 0.0f},
      {2, 1, 37, 100, 128, true, {100, 20}, 0.0f},  // Tq < Tk, padding, partial tiles
      {2, 1, 70, 5, 64, true, {5, 0}, 0.0f},        // fully masked rows and batch
      {1, 2, 65, 80, 64, false, {50}, 0.2f},        // dropout
      {1, 1, 33, 40, 128, true, {}, 0.1f},
      {1, 1, 1, 1, 64, false, {}, 0.0f},
      {1, 1, 150, 150, 64, true, {140}, 0.0f},  // the backward skips early query tiles
      {1, 1, 100, 100, 128, true, {}, 0.1f},
      // Packed documents, each a row with its length (nn::DocLayout): many
      // short and one-token documents, one filling the block; causal or not.
      {8, 1, 70, 70, 64, true, {1, 70, 3, 1, 17, 2, 40, 1}, 0.0f},
      {6, 2, 33, 33, 128, false, {33, 1, 5, 2, 1, 9}, 0.1f},
      // ALiBi against a materialized bias in double: symmetric and causal, 3 heads
      // (non-power-of-two slopes), Tq != Tk both ways, padding, dropout, offsets.
      {1, 3, 70, 70, 64, false, {}, 0.0f, true},
      {2, 2, 37, 100, 128, true, {100, 20}, 0.0f, true, 4, 1},
      {1, 3, 100, 40, 64, true, {30}, 0.1f, true},
      {1, 2, 33, 80, 128, false, {}, 0.0f, true, 0, 6},
      // T5's bias (a random table; its gradient added into a nonzero one)
      // against the table read and its gradient summed in double: distances
      // past max_distance, max_distance 0, Tq != Tk, padding, dropout,
      // offsets, packed documents.
      {1, 3, 70, 70, 64, false, {}, 0.0f, false, 0, 0, 8},
      {2, 2, 37, 100, 128, true, {100, 20}, 0.1f, false, 4, 1, 64},
      {1, 2, 100, 40, 64, false, {30}, 0.0f, false, 0, 0, 0},
      {6, 1, 33, 33, 64, true, {33, 1, 5, 2, 1, 9}, 0.0f, false, 0, 0, 16},
  };
  // The variable-length layout (cu_seqlens) against the same documents
  // dense: documents of length 1, one filling the block (64 queries, the
  // longest), ones across two tiles, 20 short ones, causal or not, head dims
  // 64 and 128, dropout, ALiBi, T5 with its gradient, different query and
  // key lengths (a document without keys, one without queries).
  const std::vector<VarCase> varlen = {
      {1, 64, true, {1, 64, 3, 1, 17, 2, 40, 1}, {}, 0.0f},
      {1, 64, false, {3, 7, 1, 9, 4, 2, 8, 5, 6, 1, 9, 2, 7, 3, 5, 8, 4, 6, 2, 1}, {}, 0.1f},
      {2, 64, true, {70, 1, 33, 5}, {}, 0.1f, true, 4, 1},
      {1, 128, true, {9, 40, 1, 16}, {}, 0.1f, false, 2, 0, 16},
      {2, 64, false, {5, 1, 30, 12, 0}, {70, 3, 7, 0, 9}, 0.1f, true, 0, 3},
      {1, 64, false, {20, 2, 40}, {3, 50, 70}, 0.0f, false, 0, 0, 8},
  };
  int failed = 0;
  uint32_t seed = 10;
  for (const Case& c : cases) failed += run_case(c, seed += 10) ? 0 : 1;
  for (const VarCase& c : varlen) failed += run_varlen(c, seed += 10) ? 0 : 1;
  const size_t n = cases.size() + varlen.size();
  std::printf("emulation: %zu of %zu cases within tolerance\n", n - failed, n);
  return failed ? 1 : 0;
}
