// The device code of kernels/flash_attention.cu, the portable flash kernels
// (fp32 shared-memory tiles, every architecture and storage type), run on the
// CPU, for machines without a GPU (check_flash.sh --kernel portable beside it
// builds and runs it). The thread block, barriers, shuffles, atomicAdd and
// shared memory are cuda_emulation.h's (a fiber per CUDA thread; shared
// memory starts as NaNs, so a read before a barrier orders the write shows).
//
// Launches as the launchers do them: the forward ((ceil(Tq / BQ), B H) blocks
// of 4 BQ threads), the delta pass (one warp per row, grid_for(rows * 32)
// blocks of kThreads, rows = flash_q_rows), the backward ((ceil(Tk / BK), B H)
// blocks of 4 BK threads) into a zeroed fp32 dq buffer, and the cast; outputs
// start as NaNs, so a row no kernel writes fails. Results are compared
// with attention in double on the same inputs, rounded to the storage type
// (attention_reference.h): out, lse, dq, dk, dv, the error |got - ref| /
// max(1, |ref|), within 1e-5 for f32 (fp32 sums in another order), 4e-3 for
// f16 and 1.5e-2 for bf16 (their rounding of the stored out); T5's table
// gradient, added into a nonzero one, within the same bounds of the mass of
// its terms (rel_err).
//
// Variable-length cases (FlashCore's cu_seqlens; run_varlen): documents of
// chosen lengths, run in that layout (buffers of exactly total_q and total_k
// rows per head, so that --asan sees any access past them) and regrouped in
// the dense one (key_lengths = each document's keys; other finite values in
// the rows past a document, dout zero there). Every document's out, lse, dq,
// dk, dv must be bitwise equal in the two layouts and within the bounds above
// of attention in double; T5's table gradient (shared atomics in thread
// order) within the bounds only.
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
#include <cstring>
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

using rotor::kernels::flash_k_rows;
using rotor::kernels::flash_q_rows;
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

// A variable-length call (FlashCore's cu_seqlens): documents of q_lens
// queries and k_lens keys (empty: q_lens), H heads.
struct VarCase {
  int64_t H;
  int D;
  rotor::DType dtype;
  bool causal;
  std::vector<int32_t> q_lens, k_lens;
  float dropout;
  bool alibi = false;
  int64_t bias_q = 0, bias_k = 0;
  int64_t t5 = -1;
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
    const int64_t rows = flash_q_rows(p);
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
    const int64_t n = flash_q_rows(p) * D;
    emu::run_serial(rotor::kernels::grid_for(n), rotor::kernels::kThreads,
                    [&] { rotor::kernels::flash_cast_kernel<T>(dq_accum, dq, n); });
  }
};

// What one call of the emulated kernels writes, sized as flash_backward_begin
// sizes it (flash_q_rows, flash_k_rows: exactly total_q, total_k rows of each
// head in the variable-length layout) and filled with NaNs first, so a row
// that no kernel writes fails every comparison.
template <class T>
struct Outputs {
  std::vector<T> out, dq, dk, dv;
  std::vector<float> lse;
};

// flash_attention_forward, then flash_attention_backward with
// flash_backward_begin's work (a zeroed dq_accum, the delta pass).
template <class T, int D>
Outputs<T> run_kernels(const FlashParams& p, const T* dout) {
  using L = Launch<T, D>;
  const auto q_rows = static_cast<size_t>(flash_q_rows(p)),
             k_rows = static_cast<size_t>(flash_k_rows(p));
  const T nan = rotor::kernels::from_f32<T>(NAN);
  Outputs<T> o{std::vector<T>(q_rows * D, nan), std::vector<T>(q_rows * D, nan),
               std::vector<T>(k_rows * D, nan), std::vector<T>(k_rows * D, nan),
               std::vector<float>(q_rows, NAN)};
  std::vector<float> delta(q_rows, NAN), dq_accum(q_rows * D, 0.0f);
  L::forward(p, o.out.data(), o.lse.data());
  L::delta(p, o.out.data(), dout, delta.data());
  L::backward(p, o.lse.data(), dout, delta.data(), o.dq.data(), o.dk.data(), o.dv.data(),
              dq_accum.data());
  return o;
}

template <class T>
std::vector<double> doubles(const std::vector<T>& a) {
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = f32(a[i]);
  return d;
}

double tolerance(rotor::DType dt) {
  return dt == rotor::DType::F32 ? 1e-5 : dt == rotor::DType::BF16 ? 1.5e-2 : 4e-3;
}

// T5: a random table, and a gradient that starts nonzero (the kernel adds into it).
struct T5Table {
  std::vector<float> rel, grad0;
};
T5Table t5_table(int64_t rel_max, int64_t H, uint32_t seed) {
  const int64_t rows = rel_max >= 0 ? (2 * rel_max + 1) * H : 0;
  T5Table t{std::vector<float>(static_cast<size_t>(rows)),
            std::vector<float>(static_cast<size_t>(rows))};
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (float& x : t.rel) x = u(g);
  for (float& x : t.grad0) x = 0.25f * u(g);
  return t;
}

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
  const T5Table table = t5_table(c.t5, c.H, seed + 7);
  const std::vector<float>& rel = table.rel;
  std::vector<float> rel_grad = table.grad0;
  if (c.t5 >= 0) {
    p.rel = rel.data();
    p.rel_max = c.t5;
    p.rel_grad = rel_grad.data();
  }

  const Outputs<T> o = run_kernels<T, D>(p, dout.data());

  emu::AttentionShape shape{c.B,       c.H,       c.Tq,    c.Tk,   D,          c.causal,
                            c.lengths, c.dropout, p.scale, p.seed, p.stream_id};
  shape.alibi = c.alibi;
  shape.bias_q_offset = c.bias_q;
  shape.bias_k_offset = c.bias_k;
  shape.rel.assign(rel.begin(), rel.end());
  shape.rel_max = c.t5 >= 0 ? c.t5 : 0;
  const emu::AttentionResult ref =
      emu::reference_attention(shape, doubles(q), doubles(k), doubles(v), doubles(dout));
  std::vector<double> rel_want(table.grad0.begin(), table.grad0.end());
  for (size_t e = 0; e < ref.drel.size(); ++e) rel_want[e] += ref.drel[e];

  using emu::max_err;
  const double e_out = max_err(ref.out, floats(o.out)), e_lse = max_err(ref.lse, o.lse),
               e_dq = max_err(ref.dq, floats(o.dq)), e_dk = max_err(ref.dk, floats(o.dk)),
               e_dv = max_err(ref.dv, floats(o.dv)),
               e_rel = emu::rel_err(rel_want, ref.drel_mass, rel_grad);
  const double tol = tolerance(c.dtype);
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

// A variable-length case (the file's comment). The two layouts' rows agree
// bitwise because both walk the same tiles in the same order: what the dense
// call adds for its rows past a document is masked or exactly zero (dout is
// zero there). The reference is one call on the dense layout, a document
// being one of its batch rows. T5's table gradient takes shared-memory
// atomics in whatever order the block's threads reach them: not bitwise.
template <class T, int D>
bool run_varlen(const VarCase& c, uint32_t seed) {
  const std::vector<int32_t>& ql = c.q_lens;
  const std::vector<int32_t>& kl = c.k_lens.empty() ? c.q_lens : c.k_lens;
  const auto B = static_cast<int64_t>(ql.size());
  const int64_t H = c.H;
  std::vector<int32_t> cu_q(B + 1, 0), cu_k(B + 1, 0);
  for (int64_t n = 0; n < B; ++n) {
    cu_q[n + 1] = cu_q[n] + ql[n];
    cu_k[n + 1] = cu_k[n] + kl[n];
  }
  const int64_t Tq = *std::max_element(ql.begin(), ql.end()),
                Tk = *std::max_element(kl.begin(), kl.end()), total_q = cu_q[B], total_k = cu_k[B];
  // Row indices of (document n, head h, row i): variable-length, dense.
  auto vq = [&](int64_t n, int64_t h, int64_t i) { return h * total_q + cu_q[n] + i; };
  auto vk = [&](int64_t n, int64_t h, int64_t j) { return h * total_k + cu_k[n] + j; };
  auto dq_row = [&](int64_t n, int64_t h, int64_t i) { return (n * H + h) * Tq + i; };
  auto dk_row = [&](int64_t n, int64_t h, int64_t j) { return (n * H + h) * Tk + j; };

  const auto vq_n = static_cast<size_t>(H * total_q * D),
             vk_n = static_cast<size_t>(H * total_k * D),
             dq_n = static_cast<size_t>(B * H * Tq * D), dk_n = static_cast<size_t>(B * H * Tk * D);
  const auto q = random_vec<T>(vq_n, seed, -2.0f, 2.0f),
             k = random_vec<T>(vk_n, seed + 1, -1.0f, 1.0f),
             v = random_vec<T>(vk_n, seed + 2, -1.0f, 1.0f),
             dout = random_vec<T>(vq_n, seed + 3, -1.0f, 1.0f);
  auto qd = random_vec<T>(dq_n, seed + 4, -2.0f, 2.0f),
       kd = random_vec<T>(dk_n, seed + 5, -1.0f, 1.0f),
       vd = random_vec<T>(dk_n, seed + 6, -1.0f, 1.0f);
  std::vector<T> doutd(dq_n, rotor::kernels::from_f32<T>(0.0f));
  auto copy_row = [](std::vector<T>& dst, int64_t dr, const std::vector<T>& src, int64_t sr) {
    std::copy_n(src.begin() + sr * D, D, dst.begin() + dr * D);
  };
  for (int64_t n = 0; n < B; ++n)
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < ql[n]; ++i) {
        copy_row(qd, dq_row(n, h, i), q, vq(n, h, i));
        copy_row(doutd, dq_row(n, h, i), dout, vq(n, h, i));
      }
      for (int64_t j = 0; j < kl[n]; ++j) {
        copy_row(kd, dk_row(n, h, j), k, vk(n, h, j));
        copy_row(vd, dk_row(n, h, j), v, vk(n, h, j));
      }
    }

  FlashParams p;
  p.H = H;
  p.B = B;
  p.Tq = Tq;
  p.Tk = Tk;
  p.D = D;
  p.scale = 1.0f / std::sqrt(static_cast<float>(D));
  p.causal = c.causal;
  p.dropout = c.dropout;
  p.seed = 4321;
  p.stream_id = rotor::rng_stream(5, 3, rotor::RngPurpose::AttentionDropout, 0);
  p.alibi = c.alibi;
  p.bias_q_offset = c.bias_q;
  p.bias_k_offset = c.bias_k;
  const T5Table table = t5_table(c.t5, H, seed + 7);
  std::vector<float> grad_v = table.grad0, grad_d = table.grad0;
  if (c.t5 >= 0) {
    p.rel = table.rel.data();
    p.rel_max = c.t5;
  }
  FlashParams pv = p, pd = p;
  pv.q = q.data();
  pv.k = k.data();
  pv.v = v.data();
  pv.cu_seqlens_q = cu_q.data();
  pv.cu_seqlens_k = cu_k.data();
  pv.total_q = total_q;
  pv.total_k = total_k;
  pd.q = qd.data();
  pd.k = kd.data();
  pd.v = vd.data();
  pd.key_lengths = kl.data();
  if (c.t5 >= 0) {
    pv.rel_grad = grad_v.data();
    pd.rel_grad = grad_d.data();
  }
  if (!rotor::kernels::flash_params_valid(pv) || !rotor::kernels::flash_params_valid(pd)) {
    std::printf("  FAIL varlen case: flash_params_valid rejects it\n");
    return false;
  }
  const Outputs<T> ov = run_kernels<T, D>(pv, dout.data());
  const Outputs<T> od = run_kernels<T, D>(pd, doutd.data());

  emu::AttentionShape shape{B, H, Tq, Tk, D, c.causal, kl, c.dropout, p.scale, p.seed, p.stream_id};
  shape.alibi = c.alibi;
  shape.bias_q_offset = c.bias_q;
  shape.bias_k_offset = c.bias_k;
  shape.rel.assign(table.rel.begin(), table.rel.end());
  shape.rel_max = c.t5 >= 0 ? c.t5 : 0;
  const emu::AttentionResult ref =
      emu::reference_attention(shape, doubles(qd), doubles(kd), doubles(vd), doubles(doutd));
  std::vector<double> rel_want(table.grad0.begin(), table.grad0.end());
  for (size_t e = 0; e < ref.drel.size(); ++e) rel_want[e] += ref.drel[e];

  // The documents' rows: the variable-length results beside the reference's
  // rows, and whether the dense call's rows have the same bits.
  std::vector<float> got_out, got_lse, got_dq, got_dk, got_dv;
  std::vector<double> ref_out, ref_lse, ref_dq, ref_dk, ref_dv;
  std::string differs;
  auto gather = [&](const char* name, const std::vector<T>& vlen, const std::vector<T>& dense,
                    const std::vector<double>& r, int64_t vr, int64_t dr, std::vector<float>& got,
                    std::vector<double>& want) {
    for (int e = 0; e < D; ++e) {
      got.push_back(f32(vlen[vr * D + e]));
      want.push_back(r[dr * D + e]);
    }
    if (std::memcmp(&vlen[vr * D], &dense[dr * D], D * sizeof(T)) != 0 &&
        differs.find(name) == std::string::npos)
      differs += std::string(" ") + name;
  };
  for (int64_t n = 0; n < B; ++n)
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < ql[n]; ++i) {
        const int64_t vr = vq(n, h, i), dr = dq_row(n, h, i);
        gather("out", ov.out, od.out, ref.out, vr, dr, got_out, ref_out);
        gather("dq", ov.dq, od.dq, ref.dq, vr, dr, got_dq, ref_dq);
        got_lse.push_back(ov.lse[vr]);
        ref_lse.push_back(ref.lse[dr]);
        if (std::memcmp(&ov.lse[vr], &od.lse[dr], sizeof(float)) != 0 &&
            differs.find("lse") == std::string::npos)
          differs += " lse";
      }
      for (int64_t j = 0; j < kl[n]; ++j) {
        const int64_t vr = vk(n, h, j), dr = dk_row(n, h, j);
        gather("dk", ov.dk, od.dk, ref.dk, vr, dr, got_dk, ref_dk);
        gather("dv", ov.dv, od.dv, ref.dv, vr, dr, got_dv, ref_dv);
      }
    }

  using emu::max_err;
  const double e_out = max_err(ref_out, got_out), e_lse = max_err(ref_lse, got_lse),
               e_dq = max_err(ref_dq, got_dq), e_dk = max_err(ref_dk, got_dk),
               e_dv = max_err(ref_dv, got_dv),
               e_rel = emu::rel_err(rel_want, ref.drel_mass, grad_v);
  const double tol = tolerance(c.dtype);
  const bool ok = differs.empty() && e_out <= tol && e_lse <= tol && e_dq <= tol && e_dk <= tol &&
                  e_dv <= tol && e_rel <= tol;
  std::string what = " q";
  for (int32_t l : ql) what += (what.size() == 2 ? " " : ",") + std::to_string(l);
  if (!c.k_lens.empty()) {
    what += " k";
    for (size_t n = 0; n < kl.size(); ++n) what += (n ? "," : " ") + std::to_string(kl[n]);
  }
  if (c.causal) what += " causal";
  if (c.alibi) what += " alibi";
  if (c.t5 >= 0) what += " t5 max " + std::to_string(c.t5);
  if (c.alibi || c.t5 >= 0)
    what += " q+" + std::to_string(c.bias_q) + " k+" + std::to_string(c.bias_k);
  char table_err[32] = "";
  if (c.t5 >= 0) std::snprintf(table_err, sizeof table_err, " table %.1e", e_rel);
  const std::string same = differs.empty() ? "bitwise = dense" : "differs from dense in" + differs;
  std::printf(
      "  %-4s %-4s D%-3d varlen H%lld drop%.1f%s: %s; err out %.1e lse %.1e dq %.1e dk %.1e "
      "dv %.1e%s\n",
      ok ? "ok" : "FAIL", rotor::dtype_name(c.dtype), D, static_cast<long long>(H), c.dropout,
      what.c_str(), same.c_str(), e_out, e_lse, e_dq, e_dk, e_dv, table_err);
  std::fflush(stdout);
  return ok;
}

template <class T, int D>
bool run_one(const Case& c, uint32_t seed) {
  return run_case<T, D>(c, seed);
}
template <class T, int D>
bool run_one(const VarCase& c, uint32_t seed) {
  return run_varlen<T, D>(c, seed);
}

template <int D, class C>
bool run_typed(const C& c, uint32_t seed) {
  switch (c.dtype) {
    case rotor::DType::F16:
      return run_one<__half, D>(c, seed);
    case rotor::DType::BF16:
      return run_one<__nv_bfloat16, D>(c, seed);
    default:
      return run_one<float, D>(c, seed);
  }
}

template <class C>
bool run_any(const C& c, uint32_t seed) {
  return c.D == 32   ? run_typed<32>(c, seed)
         : c.D == 64 ? run_typed<64>(c, seed)
                     : run_typed<128>(c, seed);
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
  // The variable-length layout: H, D, dtype, causal, the documents' query
  // lengths, their key lengths (empty: the same), dropout (, alibi, bias_q,
  // bias_k, t5). Each ends on a document shorter than a tile, so that a row
  // read or written past it would leave the buffer.
  std::vector<int32_t> short_docs;  // 20 documents of 1 to 9 tokens
  for (int32_t n = 0; n < 20; ++n) short_docs.push_back(n * 4 % 9 + 1);
  const std::vector<VarCase> var_cases = {
      // Documents of one token, one as long as the forward tile (BQ 64 at D 32)
      // and over two key tiles; T5 with its gradient.
      {1, 32, F32, true, {1, 64, 9, 37, 1}, {}, 0.0f, false, 2, 0, 8},
      // Documents filling a backward key tile and query tile (32 at D 64).
      {1, 64, F16, false, {32, 5, 32, 1, 17}, {}, 0.1f},
      // Many short documents (several in one tile's rows), ALiBi with offsets.
      {1, 128, BF16, true, short_docs, {}, 0.1f, true, 3, 1},
      // Cross-attention: other key lengths, a document without queries, one
      // without keys (its rows see nothing).
      {1, 64, F16, false, {3, 0, 20, 9, 1}, {17, 40, 1, 0, 5}, 0.1f, false, 0, 4, 16},
  };
  int failed = 0;
  uint32_t seed = 10;
  for (const Case& c : cases) {
    seed += 10;
    failed += run_any(c, seed) ? 0 : 1;
  }
  for (const VarCase& c : var_cases) {
    seed += 10;
    failed += run_any(c, seed) ? 0 : 1;
  }
  const size_t all = cases.size() + var_cases.size();
  std::printf("emulation: %zu of %zu cases within tolerance (%zu variable-length)\n", all - failed,
              all, var_cases.size());
  return failed ? 1 : 0;
}
