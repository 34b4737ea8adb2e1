// The device code of kernels/flash_attention_sm70.cu run on the CPU, for the
// machines without a V100 (scripts/build_sm70.sh builds and runs it). Every
// CUDA thread of a block is a std::thread; __syncthreads and __syncwarp are
// std::barriers, shuffles go through a per-warp exchange array, atomicAdd is
// an atomic_ref. A WMMA fragment is the whole 16 x 16 tile, held by every lane
// (loads read it whole, mma_sync computes it with fp32 sums of exact products,
// stores write it from lane 0), so the emulation checks the kernels' tiling,
// indexing, masks, dropout draws and synchronization, not the tensor cores'
// rounding. Shared memory starts as NaNs for every block. Results are compared
// with attention computed in double on the same fp16-rounded inputs: out, lse,
// dq, dk, dv within 2e-2 of max(1, |ref|). Under ThreadSanitizer
// (build_sm70.sh --tsan) a shared-memory access that no barrier orders is
// reported; shuffles count as warp barriers here, so a missing __syncwarp next
// to one goes unseen.
//
// Built by scripts/build_sm70.sh as
//   c++ -std=c++20 -O2 -pthread -I. -Isrc -I<CUDA include> \
//       -DROTOR_SM70_SECTION='"<generated>"' tests/scripts/flash_sm70_emulate.cpp
// where <generated> holds the kernels' device section (from `namespace {` to
// `#endif  // ROTOR_FLASH_SM70_DEVICE`, its `extern __shared__` line replaced
// by `unsigned char* smem_raw = emu::shared_memory();`), closed by `}`.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/philox.h"
#include "kernels/flash_attention.cuh"

namespace emu {

struct Block {
  std::unique_ptr<std::barrier<>> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<float> exchange;  // [warps, 32] for the shuffles
};
alignas(128) unsigned char g_shared[128 * 1024];
thread_local uint3 t_thread, t_block, t_dim;
thread_local Block* t_blk = nullptr;

inline unsigned char* shared_memory() {
  return g_shared;
}
inline int lane() {
  return static_cast<int>(t_thread.x & 31);
}
inline int warp() {
  return static_cast<int>(t_thread.x >> 5);
}

// Runs body on `threads` threads as block (bx, by).
inline void run_block(int threads, unsigned bx, unsigned by, const std::function<void()>& body) {
  // Shared memory starts as NaNs: a read of anything the block did not write shows.
  std::memset(g_shared, 0xff, sizeof g_shared);
  Block blk;
  blk.all = std::make_unique<std::barrier<>>(threads);
  for (int w = 0; w < threads / 32; ++w) blk.warps.push_back(std::make_unique<std::barrier<>>(32));
  blk.exchange.assign(static_cast<size_t>(threads), 0.0f);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      t_thread = make_uint3(static_cast<unsigned>(t), 0, 0);
      t_block = make_uint3(bx, by, 0);
      t_dim = make_uint3(static_cast<unsigned>(threads), 1, 1);
      t_blk = &blk;
      body();
    });
  for (auto& th : pool) th.join();
}

}  // namespace emu

#define threadIdx (emu::t_thread)
#define blockIdx (emu::t_block)
#define blockDim (emu::t_dim)

inline void __syncthreads() {
  emu::t_blk->all->arrive_and_wait();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  emu::t_blk->warps[static_cast<size_t>(emu::warp())]->arrive_and_wait();
}
inline float __shfl_sync(unsigned, float v, int src) {
  float* x = emu::t_blk->exchange.data() + emu::warp() * 32;
  x[emu::lane()] = v;
  __syncwarp();
  const float r = x[src & 31];
  __syncwarp();  // read before the next shuffle writes
  return r;
}
inline float __shfl_xor_sync(unsigned mask, float v, int m) {
  return __shfl_sync(mask, v, emu::lane() ^ m);
}
inline float atomicAdd(float* p, float v) {
  return std::atomic_ref<float>(*p).fetch_add(v);
}

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

#undef __device__
#undef __forceinline__
#define __device__
#define __forceinline__ inline

// The masks and the dropout draw the kernels share, compiled as host code.
#include "kernels/flash_common.cuh"

namespace rotor::kernels {
#include ROTOR_SM70_SECTION

// The launchers' grids, block by block.
template <int D>
void emulate_forward(const FlashParams& p, __half* out, float* lse) {
  using C = Sm70Fwd<D>;
  for (unsigned by = 0; by < p.B * p.H; ++by)
    for (unsigned bx = 0; bx < (p.Tq + C::BQ - 1) / C::BQ; ++bx)
      emu::run_block(C::kWarps * 32, bx, by, [&] { fwd_block<D>(p, out, lse); });
}
template <int D>
void emulate_backward(const FlashParams& p, const float* lse, const __half* dout,
                      const float* delta, __half* dk, __half* dv, float* dq_accum) {
  using C = Sm70Bwd<D>;
  for (unsigned by = 0; by < p.B * p.H; ++by)
    for (unsigned bx = 0; bx < (p.Tk + C::BK - 1) / C::BK; ++bx)
      emu::run_block(C::kWarps * 32, bx, by,
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
};

std::vector<__half> random_half(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<__half> v(n);
  for (auto& x : v) x = __float2half_rn(u(g));
  return v;
}

double max_err(const std::vector<double>& ref, const std::vector<float>& got) {
  double e = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    if (std::isinf(ref[i]) || std::isinf(got[i])) {
      if (ref[i] != static_cast<double>(got[i])) return INFINITY;
      continue;
    }
    e = std::max(e, std::abs(ref[i] - got[i]) / std::max(1.0, std::abs(ref[i])));
  }
  return e;
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
  const float keep = c.dropout > 0 ? 1.0f / (1.0f - c.dropout) : 1.0f;

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
  std::vector<double> r_out(nq, 0), r_lse(lse.size()), r_dq(nq, 0), r_dk(nk, 0), r_dv(nk, 0);
  auto h = [](const std::vector<__half>& a, size_t i) {
    return static_cast<double>(__half2float(a[i]));
  };
  for (int64_t bh = 0; bh < c.B * c.H; ++bh) {
    const int64_t b = bh / c.H;
    int64_t len = c.lengths.empty() ? c.Tk : std::clamp<int64_t>(c.lengths[b], 0, c.Tk);
    for (int64_t i = 0; i < c.Tq; ++i) {
      int64_t n = len;
      if (c.causal) n = std::min(n, std::max<int64_t>(0, i + (c.Tk - c.Tq) + 1));
      const size_t qi = static_cast<size_t>((bh * c.Tq + i) * D);
      if (n == 0) {
        r_lse[bh * c.Tq + i] = -INFINITY;
        continue;
      }
      std::vector<double> s(n), pm(n), mk(n);
      double m = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += h(q, qi + d) * h(k, (bh * c.Tk + j) * D + d);
        s[j] = dot * p.scale;
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(s[j] - m);
      r_lse[bh * c.Tq + i] = m + std::log(sum);
      for (int64_t j = 0; j < n; ++j) {
        const uint64_t flat = static_cast<uint64_t>((bh * c.Tq + i) * c.Tk + j);
        mk[j] = c.dropout == 0
                    ? 1.0
                    : (rotor::philox_uniform(p.seed, p.stream_id, flat) >= c.dropout ? keep : 0.0);
        pm[j] = std::exp(s[j] - m) / sum;
        for (int d = 0; d < D; ++d) r_out[qi + d] += pm[j] * mk[j] * h(v, (bh * c.Tk + j) * D + d);
      }
      double del = 0;
      for (int d = 0; d < D; ++d) del += h(dout, qi + d) * r_out[qi + d];
      for (int64_t j = 0; j < n; ++j) {
        const size_t kj = static_cast<size_t>((bh * c.Tk + j) * D);
        double dp = 0;
        for (int d = 0; d < D; ++d) dp += h(dout, qi + d) * h(v, kj + d);
        const double ds = pm[j] * (dp * mk[j] - del) * p.scale;
        for (int d = 0; d < D; ++d) {
          r_dv[kj + d] += pm[j] * mk[j] * h(dout, qi + d);
          r_dk[kj + d] += ds * h(q, qi + d);
          r_dq[qi + d] += ds * h(k, kj + d);
        }
      }
    }
  }
  const double e_out = max_err(r_out, floats(out)), e_lse = max_err(r_lse, lse),
               e_dq = max_err(r_dq, dq), e_dk = max_err(r_dk, floats(dk)),
               e_dv = max_err(r_dv, floats(dv));
  const double tol = 2e-2;
  const bool ok = e_out <= tol && e_lse <= tol && e_dq <= tol && e_dk <= tol && e_dv <= tol;
  std::printf(
      "  %-4s B%lld H%lld Tq%lld Tk%lld D%d%s%s drop%.1f: err out %.1e lse %.1e dq %.1e dk %.1e dv "
      "%.1e\n",
      ok ? "ok" : "FAIL", static_cast<long long>(c.B), static_cast<long long>(c.H),
      static_cast<long long>(c.Tq), static_cast<long long>(c.Tk), D, c.causal ? " causal" : "",
      c.lengths.empty() ? "" : " lengths", c.dropout, e_out, e_lse, e_dq, e_dk, e_dv);
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
  };
  int failed = 0;
  uint32_t seed = 10;
  for (const Case& c : cases) failed += run_case(c, seed += 10) ? 0 : 1;
  std::printf("emulation: %zu of %zu cases within tolerance\n", cases.size() - failed,
              cases.size());
  return failed ? 1 : 0;
}
