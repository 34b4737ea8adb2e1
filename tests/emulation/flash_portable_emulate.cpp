// The device code of kernels/flash_attention.cu, the portable flash kernels
// (fp32 shared-memory tiles, every architecture and storage type), run on the
// CPU, for machines without a GPU (check_flash.sh --kernel portable beside it
// builds and runs it). The thread block, barriers, shuffles, atomicAdd and
// shared memory are cuda_emulation.h's (a std::thread per CUDA thread; shared
// memory starts as NaNs, so a read before a barrier orders the write shows).
//
// Launches as the launchers do them: the forward ((ceil(Tq / BQ), B H) blocks
// of 4 BQ threads), the delta pass (one warp per row, grid_for(rows * 32)
// blocks of kThreads), the backward ((ceil(Tk / BK), B H) blocks of 4 BK
// threads) into a zeroed fp32 dq buffer, and the cast. Results are compared
// with attention in double on the same inputs, rounded to the storage type
// (attention_reference.h): out, lse, dq, dk, dv, the error |got - ref| /
// max(1, |ref|), within 1e-5 for f32 (fp32 sums in another order), 4e-3 for
// f16 and 1.5e-2 for bf16 (their rounding of the stored out); T5's table
// gradient, added into a nonzero one, within the same bounds of the mass of
// its terms (rel_err).
//
// Built by tests/emulation/check_flash.sh --kernel portable as
//   c++ -std=c++20 -O2 -pthread -I. -Isrc -I<CUDA include> \
//       -DROTOR_FLASH_SECTION='"<generated>"' tests/emulation/flash_portable_emulate.cpp
// where <generated> holds the kernels' device section (see the script).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_reference.h"
#include "cuda_emulation.h"

// What the section includes, compiled as host code.
#include "core/philox.h"
#include "kernels/common.cuh"
#include "kernels/flash_attention.cuh"
#include "kernels/flash_common.cuh"

namespace rotor::kernels {
#include ROTOR_FLASH_SECTION
}  // namespace rotor::kernels

namespace {

using rotor::kernels::FlashParams;

struct Case {
  int64_t B, H, Tq, Tk;
  int D;
  rotor::DType dtype;
  bool causal;
  std::vector<int32_t> lengths;
  float dropout;
  bool alibi = false;
  int64_t bias_q = 0, bias_k = 0;  // ALiBi's and T5's positions of query 0 (less Tk - Tq), key 0
  int64_t t5 = -1;                 // T5's bias with max_distance t5 (a random table); -1: none
};

template <class T>
float f32(T x) {
  return rotor::kernels::to_f32(x);
}

template <class T>
std::vector<T> random_vec(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = rotor::kernels::from_f32<T>(u(g));
  return v;
}

template <class T>
std::vector<float> floats(const std::vector<T>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = f32(v[i]);
  return f;
}

// The launches of flash_attention_forward and flash_attention_backward.
template <class T, int D>
struct Launch {
  using Fwd = rotor::kernels::FwdTile<D>;
  using Bwd = rotor::kernels::BwdTile<D>;

  static void forward(const FlashParams& p, T* out, float* lse) {
    emu::run_grid(Fwd::BQ * 4, static_cast<unsigned>((p.Tq + Fwd::BQ - 1) / Fwd::BQ),
                  static_cast<unsigned>(p.B * p.H),
                  rotor::kernels::fwd_smem_bytes<D>() + rotor::kernels::flash_t5_smem(p, false),
                  [&] { rotor::kernels::flash_fwd_kernel<T, D>(p, out, lse); });
  }

  // delta by the kernel's own pass: its warp sums need a thread block.
  static void delta(const FlashParams& p, const T* out, const T* dout, float* delta) {
    const int64_t rows = p.B * p.H * p.Tq;
    const unsigned blocks = rotor::kernels::grid_for(rows * 32);
    for (unsigned b = 0; b < blocks; ++b)
      emu::run_block(rotor::kernels::kThreads, blocks, 1, b, 0, 0,
                     [&] { rotor::kernels::flash_delta_kernel<T>(out, dout, delta, rows, D); });
  }

  static void backward(const FlashParams& p, const float* lse, const T* dout, const float* delta,
                       T* dq, T* dk, T* dv, float* dq_accum) {
    emu::run_grid(
        Bwd::BK * 4, static_cast<unsigned>((p.Tk + Bwd::BK - 1) / Bwd::BK),
        static_cast<unsigned>(p.B * p.H),
        rotor::kernels::bwd_smem_bytes<D>() + rotor::kernels::flash_t5_smem(p, true),
        [&] { rotor::kernels::flash_bwd_kernel<T, D>(p, lse, dout, delta, dk, dv, dq_accum); });
    const int64_t n = p.B * p.H * p.Tq * D;
    emu::run_serial(rotor::kernels::grid_for(n), rotor::kernels::kThreads,
                    [&] { rotor::kernels::flash_cast_kernel<T>(dq_accum, dq, n); });
  }
};

template <class T, int D>
bool run_case(const Case& c, uint32_t seed) {
  const size_t nq = static_cast<size_t>(c.B * c.H * c.Tq * D),
               nk = static_cast<size_t>(c.B * c.H * c.Tk * D);
  const auto q = random_vec<T>(nq, seed, -2.0f, 2.0f), k = random_vec<T>(nk, seed + 1, -1.0f, 1.0f),
             v = random_vec<T>(nk, seed + 2, -1.0f, 1.0f),
             dout = random_vec<T>(nq, seed + 3, -1.0f, 1.0f);
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
  p.bias_q_offset = c.bias_q;
  p.bias_k_offset = c.bias_k;
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

  using L = Launch<T, D>;
  std::vector<T> out(nq), dq(nq), dk(nk), dv(nk);
  std::vector<float> lse(static_cast<size_t>(c.B * c.H * c.Tq)), delta(lse.size()),
      dq_accum(nq, 0.0f);
  L::forward(p, out.data(), lse.data());
  L::delta(p, out.data(), dout.data(), delta.data());
  L::backward(p, lse.data(), dout.data(), delta.data(), dq.data(), dk.data(), dv.data(),
              dq_accum.data());

  auto dbl = [](const std::vector<T>& a) {
    std::vector<double> d(a.size());
    for (size_t i = 0; i < a.size(); ++i) d[i] = f32(a[i]);
    return d;
  };
  emu::AttentionShape shape{c.B,       c.H,       c.Tq,    c.Tk,   D,          c.causal,
                            c.lengths, c.dropout, p.scale, p.seed, p.stream_id};
  shape.alibi = c.alibi;
  shape.bias_q_offset = c.bias_q;
  shape.bias_k_offset = c.bias_k;
  shape.rel.assign(rel.begin(), rel.end());
  shape.rel_max = c.t5 >= 0 ? c.t5 : 0;
  const emu::AttentionResult ref =
      emu::reference_attention(shape, dbl(q), dbl(k), dbl(v), dbl(dout));
  std::vector<double> rel_want(rel_grad0.begin(), rel_grad0.end());
  for (size_t e = 0; e < ref.drel.size(); ++e) rel_want[e] += ref.drel[e];

  using emu::max_err;
  const double e_out = max_err(ref.out, floats(out)), e_lse = max_err(ref.lse, lse),
               e_dq = max_err(ref.dq, floats(dq)), e_dk = max_err(ref.dk, floats(dk)),
               e_dv = max_err(ref.dv, floats(dv)),
               e_rel = emu::rel_err(rel_want, ref.drel_mass, rel_grad);
  const double tol = c.dtype == rotor::DType::F32    ? 1e-5
                     : c.dtype == rotor::DType::BF16 ? 1.5e-2
                                                     : 4e-3;
  const bool ok =
      e_out <= tol && e_lse <= tol && e_dq <= tol && e_dk <= tol && e_dv <= tol && e_rel <= tol;
  std::string what;
  for (int32_t l : c.lengths) what += (what.empty() ? " len " : ",") + std::to_string(l);
  if (c.causal) what += " causal";
  if (c.alibi) what += " alibi";
  if (c.t5 >= 0) what += " t5 max " + std::to_string(c.t5);
  if (c.alibi || c.t5 >= 0)
    what += " q+" + std::to_string(c.bias_q) + " k+" + std::to_string(c.bias_k);
  char table_err[32] = "";
  if (c.t5 >= 0) std::snprintf(table_err, sizeof table_err, " table %.1e", e_rel);
  std::printf(
      "  %-4s %-4s D%-3d B%lld H%lld Tq%-3lld Tk%-3lld drop%.1f%s: err out %.1e lse %.1e dq %.1e "
      "dk %.1e dv %.1e%s\n",
      ok ? "ok" : "FAIL", rotor::dtype_name(c.dtype), D, static_cast<long long>(c.B),
      static_cast<long long>(c.H), static_cast<long long>(c.Tq), static_cast<long long>(c.Tk),
      c.dropout, what.c_str(), e_out, e_lse, e_dq, e_dk, e_dv, table_err);
  std::fflush(stdout);
  return ok;
}

template <int D>
bool run_typed(const Case& c, uint32_t seed) {
  switch (c.dtype) {
    case rotor::DType::F16:
      return run_case<__half, D>(c, seed);
    case rotor::DType::BF16:
      return run_case<__nv_bfloat16, D>(c, seed);
    default:
      return run_case<float, D>(c, seed);
  }
}

}  // namespace

int main() {
  using rotor::DType;
  constexpr DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16;
  // B, H, Tq, Tk, D, dtype, causal, key lengths, dropout (, alibi, bias_q, bias_k, t5).
  const std::vector<Case> cases = {
      {1, 2, 65, 65, 32, F32, false, {}, 0.0f},
      {2, 1, 7, 70, 64, F32, true, {0, 50}, 0.0f},     // a 0-length row, Tq < Tk
      {2, 1, 70, 33, 128, F16, true, {33, 10}, 0.1f},  // Tq > Tk: rows that see nothing
      {1, 1, 1, 40, 64, BF16, true, {}, 0.1f},         // one query (decoding)
      // ALiBi against a materialized bias in double.
      {1, 3, 40, 40, 64, F32, false, {}, 0.0f, true},
      {2, 2, 33, 70, 32, F16, true, {70, 20}, 0.1f, true, 4, 1},
      // T5's bias: distances past max_distance (the edge rows), max_distance 0
      // (one row), Tq != Tk both ways, causal, padding, offsets, dropout, the
      // three storage types, packed documents (a row each, with its length).
      {1, 3, 65, 65, 64, F32, false, {}, 0.0f, false, 0, 0, 8},
      {2, 2, 7, 70, 32, F32, true, {0, 50}, 0.0f, false, 5, 9, 128},
      {1, 2, 70, 33, 128, F16, true, {20}, 0.1f, false, 0, 0, 16},
      {2, 1, 33, 70, 64, BF16, false, {50, 70}, 0.0f, false, 3, 0, 0},
      {6, 1, 33, 33, 32, F32, true, {33, 1, 5, 2, 1, 9}, 0.0f, false, 0, 0, 16},
  };
  int failed = 0;
  uint32_t seed = 10;
  for (const Case& c : cases) {
    seed += 10;
    const bool ok = c.D == 32   ? run_typed<32>(c, seed)
                    : c.D == 64 ? run_typed<64>(c, seed)
                                : run_typed<128>(c, seed);
    failed += ok ? 0 : 1;
  }
  std::printf("emulation: %zu of %zu cases within tolerance\n", cases.size() - failed,
              cases.size());
  return failed ? 1 : 0;
}
