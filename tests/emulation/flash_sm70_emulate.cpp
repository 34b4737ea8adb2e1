// The device code of kernels/flash_attention_sm70.cu run on the CPU, for the
// machines without a V100 (scripts/build_sm70.sh builds and runs it). The
// thread block, barriers, shuffles, atomicAdd and shared memory are
// cuda_emulation.h's (a std::thread per CUDA thread). A WMMA fragment is the whole 16 x 16 tile,
// held by every lane (loads read it whole, mma_sync computes it with fp32 sums of exact products,
// stores write it from lane 0), so the emulation checks the kernels' tiling,
// indexing, masks, dropout draws and synchronization, not the tensor cores'
// rounding. Results are compared with attention computed in double
// (attention_reference.h) on the same fp16-rounded inputs: out, lse,
// dq, dk, dv within 2e-2 of max(1, |ref|). Under ThreadSanitizer
// (build_sm70.sh --tsan) a shared-memory access that no barrier orders is
// reported; shuffles count as warp barriers here, so a missing __syncwarp next
// to one goes unseen.
//
// Built by scripts/build_sm70.sh as
//   c++ -std=c++20 -O2 -pthread -I. -Isrc -I<CUDA include> \
//       -DROTOR_SM70_SECTION='"<generated>"' tests/emulation/flash_sm70_emulate.cpp
// where <generated> holds the kernels' device section (from `namespace {` to
// `#endif  // ROTOR_FLASH_SM70_DEVICE`, its `extern __shared__` line replaced
// by `unsigned char* smem_raw = emu::shared_memory();`), closed by `}`.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "attention_reference.h"
#include "core/philox.h"
#include "cuda_emulation.h"
#include "kernels/flash_attention.cuh"

namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  float x[16][16];
};

template <class F>
void fill_fragment(F& f, float v) {
  for (auto& row : f.x)
    for (float& e : row) e = v;
}
template <class Use, class L>
void load_matrix_sync(fragment<Use, 16, 16, 16, __half, L>& f, const __half* p, unsigned ldm) {
  for (unsigned r = 0; r < 16; ++r)
    for (unsigned c = 0; c < 16; ++c)
      f.x[r][c] = __half2float(std::is_same_v<L, row_major> ? p[r * ldm + c] : p[c * ldm + r]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t l) {
  for (unsigned r = 0; r < 16; ++r)
    for (unsigned c = 0; c < 16; ++c)
      f.x[r][c] = l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}
template <class A, class B>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const A& a, const B& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  fragment<accumulator, 16, 16, 16, float> t = c;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      for (int k = 0; k < 16; ++k) t.x[i][j] += a.x[i][k] * b.x[k][j];
  d = t;
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t l) {
  // On the device each lane stores the elements it loaded for the same
  // layout, so an accumulator read and written back in place is no race; here
  // every lane reads the whole tile, so lane 0 writes once all have.
  __syncwarp();
  if (emu::lane() != 0) return;
  for (unsigned r = 0; r < 16; ++r)
    for (unsigned c = 0; c < 16; ++c)
      (l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[r][c];
}
}  // namespace nvcuda::wmma

// The masks and the dropout draw the kernels share, compiled as host code.
#include "kernels/flash_common.cuh"

namespace rotor::kernels {
#include ROTOR_SM70_SECTION

// The launchers' grids, block by block.
template <int D>
void emulate_forward(const FlashParams& p, __half* out, float* lse) {
  using C = Sm70Fwd<D>;
  emu::run_grid(C::kWarps * 32, static_cast<unsigned>((p.Tq + C::BQ - 1) / C::BQ),
                static_cast<unsigned>(p.B * p.H), C::smem + flash_t5_smem(p, false),
                [&] { fwd_block<D>(p, out, lse); });
}
template <int D>
void emulate_backward(const FlashParams& p, const float* lse, const __half* dout,
                      const float* delta, __half* dk, __half* dv, float* dq_accum) {
  using C = Sm70Bwd<D>;
  emu::run_grid(C::kWarps * 32, static_cast<unsigned>((p.Tk + C::BK - 1) / C::BK),
                static_cast<unsigned>(p.B * p.H), C::smem + flash_t5_smem(p, true),
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

  // The emulated kernels (delta = rowsum(dout o out) as the preprocessing pass computes it).
  std::vector<__half> out(nq), dk(nk), dv(nk);
  std::vector<float> lse(static_cast<size_t>(c.B * c.H * c.Tq)), delta(lse.size()), dq(nq, 0.0f);
  if (D == 64)
    rotor::kernels::emulate_forward<64>(p, out.data(), lse.data());
  else
    rotor::kernels::emulate_forward<128>(p, out.data(), lse.data());
  for (size_t r = 0; r < delta.size(); ++r) {
    float s = 0;
    for (int d = 0; d < D; ++d) s += __half2float(out[r * D + d]) * __half2float(dout[r * D + d]);
    delta[r] = s;
  }
  if (D == 64)
    rotor::kernels::emulate_backward<64>(p, lse.data(), dout.data(), delta.data(), dk.data(),
                                         dv.data(), dq.data());
  else
    rotor::kernels::emulate_backward<128>(p, lse.data(), dout.data(), delta.data(), dk.data(),
                                          dv.data(), dq.data());

  // The same attention in double.
  auto dbl = [](const std::vector<__half>& a) {
    std::vector<double> d(a.size());
    for (size_t i = 0; i < a.size(); ++i) d[i] = __half2float(a[i]);
    return d;
  };
  emu::AttentionShape shape{c.B,       c.H,       c.Tq,    c.Tk,   D,          c.causal,
                            c.lengths, c.dropout, p.scale, p.seed, p.stream_id};
  shape.alibi = c.alibi;
  shape.bias_q_offset = c.alibi_q;
  shape.bias_k_offset = c.alibi_k;
  shape.rel.assign(rel.begin(), rel.end());
  shape.rel_max = c.t5 >= 0 ? c.t5 : 0;
  const emu::AttentionResult ref =
      emu::reference_attention(shape, dbl(q), dbl(k), dbl(v), dbl(dout));
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
  int failed = 0;
  uint32_t seed = 10;
  for (const Case& c : cases) failed += run_case(c, seed += 10) ? 0 : 1;
  std::printf("emulation: %zu of %zu cases within tolerance\n", cases.size() - failed,
              cases.size());
  return failed ? 1 : 0;
}
