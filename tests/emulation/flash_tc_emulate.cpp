// The device code of kernels/flash_attention_tc.cu run on the CPU, for the
// machines without an sm_80+ GPU (check_flash.sh beside it builds and runs
// it). The thread block, barriers, shuffles and shared memory are
// cuda_emulation.h's (a fiber per CUDA thread). The PTX the kernels
// wrap is emulated as the PTX ISA defines it, lane by lane:
//   - ldmatrix .x4 / .x2 (.trans): every lane posts its row address to its
//     warp's exchange slot; register m of lane 4g + t then reads row g,
//     elements 2t and 2t + 1 of matrix m (rows 8m .. 8m + 7 at the addresses
//     of lanes 8m .. 8m + 7), or with .trans elements g of rows 2t and 2t + 1;
//     each address must be 16-byte aligned and inside the block's shared memory;
//   - mma.sync m16n8k16: every lane posts its A and B registers, and each lane
//     rebuilds the 16 x 16 A and 16 x 8 B tiles from the fragment layout of the
//     kernel's header comment and computes its own four C elements (a double
//     sum of the exact products of the 16-bit elements, added to C in fp32);
//   - cp.async: a copy is recorded when issued (its destination is poisoned
//     with NaNs right away) and done when a cp.async.wait_group retires its
//     group, zero-filling when src_bytes is 0; copies still outstanding when a
//     thread exits are an error;
//   - shuffles go through the same exchange slots. Each warp-collective call
//     checks that all 32 lanes made the same call (same kind, full mask).
// The element types are cuda_fp16.h / cuda_bf16.h (host conversions, round to
// nearest even). Kernels without barriers (the RoPE table, the dq cast) run
// their threads one after the other.
//
// Launches as the launchers do them: the RoPE table (grid_for(n) blocks of
// kThreads), the forward ((ceil(Tq / BQ), B H) blocks of 128), delta =
// rowsum(dO o O) on the host in fp32 from the emulated out, the backward
// ((ceil(Tk / BK), B H) blocks of 128) into a zeroed fp32 dq buffer and the dq
// cast (grid_for(B H Tq D / 2) blocks), the blocks of a grid one after the
// other, into out, lse, dq, dk and dv that start as NaNs. Results are compared
// with attention in double on the same 16-bit inputs (attention_reference.h:
// RoPE by the fp32 cos/sin of src/core/rope.h, dropout by philox_uniform on
// the flat [B, H, Tq, Tk] index): out, lse, dq, dk, dv, the error
// |got - ref| / max(1, |ref|), within 4e-3 for f16 and 1.5e-2 for bf16 (their
// 16-bit rounding of P, dS and the rotated q, k); T5's table gradient (added
// into a nonzero one) within the same bounds of the mass of its terms
// (attention_reference.h, rel_err).
//
// The variable-length cases (FlashCore's cu_seqlens) run each set of
// documents twice: laid end to end ([H, total, D]) and as the dense call that
// regroups them ([B, H, Tq, D] with key lengths; rows past a document random,
// dout zero there), both grids in reverse block order (a write past a
// document's rows then lands on the next document's, already written).
// Every document row of out, lse, dq, dk and dv must be bitwise equal in the
// two (the tile walks are the same: the dense call's extra rows and tiles add
// exact zeros, and dq's atomics come in the same order), and within the
// tolerances above of attention in double. The buffers hold exactly the
// call's rows: check_flash.sh --asan sees an access past them.
//
// Built by tests/emulation/check_flash.sh as
//   c++ -std=c++20 -O2 -pthread -I. -Isrc -I<CUDA include> \
//       -DROTOR_FLASH_SECTION='"<generated>"' tests/emulation/flash_tc_emulate.cpp
// where <generated> holds the kernels' device section (see the script).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_reference.h"
#include "cuda_emulation.h"

// What the section includes, compiled as host code.
#include "kernels/common.cuh"
#include "kernels/flash_attention_tc.cuh"
#include "kernels/flash_common.cuh"

namespace rotor::kernels {
namespace {

#include "tc_ptx_emulation.h"  // the PTX wrappers of the kernel file, emulated

}  // namespace

#define ROTOR_TC_BODY 1
#include ROTOR_FLASH_SECTION

}  // namespace rotor::kernels

namespace {

using rotor::kernels::FlashParams;
using rotor::kernels::FlashRope;

struct Case {
  int64_t B, H, Tq, Tk;
  int D;
  bool bf16, causal;
  std::vector<int32_t> lengths;
  float dropout;
  bool rope;
  int64_t q_offset = 0, k_offset = 0;
  bool alibi = false;  // ALiBi's bias, query 0 at alibi_q + Tk - Tq and key 0 at alibi_k
  int64_t alibi_q = 0, alibi_k = 0;  // the positions of T5's bias too
  int64_t t5 = -1;                   // T5's bias with max_distance t5 (a random table); -1: none
};

// A variable-length case (FlashCore's cu_seqlens): document n has q_lens[n]
// queries and k_lens[n] keys (k_lens empty: q_lens), laid end to end; the
// rest as in Case. It runs against the dense call of dense_of (the same
// documents regrouped as [B, H, Tq, D], Tq and Tk the longest, key lengths
// k_lens).
struct VarCase {
  int64_t H;
  int D;
  bool bf16, causal;
  std::vector<int32_t> q_lens, k_lens;
  float dropout;
  bool rope;
  int64_t q_offset = 0, k_offset = 0;
  bool alibi = false;
  int64_t alibi_q = 0, alibi_k = 0;
  int64_t t5 = -1;
};

Case dense_of(const VarCase& v) {
  const std::vector<int32_t>& kl = v.k_lens.empty() ? v.q_lens : v.k_lens;
  return Case{static_cast<int64_t>(v.q_lens.size()),
              v.H,
              *std::max_element(v.q_lens.begin(), v.q_lens.end()),
              *std::max_element(kl.begin(), kl.end()),
              v.D,
              v.bf16,
              v.causal,
              kl,
              v.dropout,
              v.rope,
              v.q_offset,
              v.k_offset,
              v.alibi,
              v.alibi_q,
              v.alibi_k,
              v.t5};
}

// Every block of a (gx, gy) grid, one after the other: in order, or
// reversed (the last first, another order a GPU may run them in; a write past
// a document's rows then lands on the next document's rows after they were
// written, and shows).
void run_grid(bool reversed, int threads, unsigned gx, unsigned gy, size_t smem,
              const std::function<void()>& body) {
  if (!reversed) return emu::run_grid(threads, gx, gy, smem, body);
  for (unsigned by = gy; by-- > 0;)
    for (unsigned bx = gx; bx-- > 0;) emu::run_block(threads, gx, gy, bx, by, smem, body);
}

// The launches of flash_tc_forward and flash_tc_backward.
template <class T, int D>
struct Launch {
  using Fwd = rotor::kernels::TcFwd<D>;
  using Bwd = rotor::kernels::TcBwd<D>;

  static void rope_table(const FlashParams& p, const FlashRope& r, std::vector<float2>& table) {
    if (!r.enabled) return;
    const int64_t positions = std::max(r.q_offset + p.Tq, r.k_offset + p.Tk);
    const int64_t n = positions * (p.D / 2);
    table.assign(static_cast<size_t>(n), make_float2(NAN, NAN));
    emu::run_serial(rotor::kernels::grid_for(n), rotor::kernels::kThreads, [&] {
      rotor::kernels::tc_rope_table_kernel(table.data(), positions, p.D,
                                           rotor::rope::at_length(r.params, p.D, positions));
    });
  }

  static void forward(const FlashParams& p, const FlashRope& r, const float2* table, T* out,
                      float* lse, bool reversed) {
    const unsigned gx = static_cast<unsigned>((p.Tq + Fwd::BQ - 1) / Fwd::BQ),
                   gy = static_cast<unsigned>(p.B * p.H);
    run_grid(reversed, rotor::kernels::kTcThreads, gx, gy, rotor::kernels::tc_fwd_smem_of<T, D>(p),
             [&] { rotor::kernels::flash_tc_fwd_kernel<T, D>(p, r, table, out, lse, p); });
  }

  static void backward(const FlashParams& p, const FlashRope& r, const float2* table,
                       const float* lse, const T* dout, const float* delta, T* dq, T* dk, T* dv,
                       float* dq_accum, bool reversed) {
    const unsigned gx = static_cast<unsigned>((p.Tk + Bwd::BK - 1) / Bwd::BK),
                   gy = static_cast<unsigned>(p.B * p.H);
    run_grid(reversed, rotor::kernels::kTcThreads, gx, gy, rotor::kernels::tc_bwd_smem_of<T, D>(p),
             [&] {
               rotor::kernels::flash_tc_bwd_kernel<T, D>(p, r, table, lse, dout, delta, dk, dv,
                                                         dq_accum, p);
             });
    const int64_t q_elems = rotor::kernels::flash_q_rows(p) * p.D;
    if (q_elems > 0)
      emu::run_serial(rotor::kernels::grid_for(q_elems / 2), rotor::kernels::kThreads, [&] {
        rotor::kernels::flash_tc_dq_kernel<T>(dq_accum, dq, q_elems / 2, p, r, table);
      });
  }
};

template <class T>
float f32(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(x);
  else
    return __half2float(x);
}
template <class T>
T round_to(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(x);
  else
    return __float2half_rn(x);
}

template <class T>
std::vector<T> random_vec(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = round_to<T>(u(g));
  return v;
}

template <class T>
std::vector<float> floats(const std::vector<T>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = f32(v[i]);
  return f;
}

// What the emulated kernels give for one call.
template <class T>
struct Outputs {
  std::vector<T> out, dq, dk, dv;
  std::vector<float> lse, rel_grad;
};

// One call's launches: the forward, delta = rowsum(dO o O) on the host in fp32
// from the emulated out, the backward into a zeroed fp32 dq buffer and the dq
// cast. out, lse, dq, dk and dv are exactly the call's rows (flash_q_rows,
// flash_k_rows: AddressSanitizer sees a row past them) and start as NaNs (a
// row left unwritten shows). T5's gradient (with p.rel_grad) is added into a
// copy of rel_grad0.
template <class T, int D>
Outputs<T> run_kernels(FlashParams p, const FlashRope& r, const std::vector<T>& dout,
                       const std::vector<float>& rel_grad0, bool reversed) {
  using L = Launch<T, D>;
  const auto q_rows = static_cast<size_t>(rotor::kernels::flash_q_rows(p)),
             k_rows = static_cast<size_t>(rotor::kernels::flash_k_rows(p));
  const T nan = round_to<T>(NAN);
  Outputs<T> o{std::vector<T>(q_rows * D, nan), std::vector<T>(q_rows * D, nan),
               std::vector<T>(k_rows * D, nan), std::vector<T>(k_rows * D, nan),
               std::vector<float>(q_rows, NAN), rel_grad0};
  if (p.rel_grad) p.rel_grad = o.rel_grad.data();
  std::vector<float2> table;
  L::rope_table(p, r, table);
  L::forward(p, r, table.data(), o.out.data(), o.lse.data(), reversed);
  std::vector<float> delta(q_rows), dq_accum(q_rows * D, 0.0f);
  for (size_t i = 0; i < q_rows; ++i) {
    float s = 0;
    for (int d = 0; d < D; ++d) s += f32(o.out[i * D + d]) * f32(dout[i * D + d]);
    delta[i] = s;
  }
  L::backward(p, r, table.data(), o.lse.data(), dout.data(), delta.data(), o.dq.data(), o.dk.data(),
              o.dv.data(), dq_accum.data(), reversed);
  return o;
}

// A variable-length call's rows: row i of document n of head h is row
// h total + cu[n] + i (cu: the prefix sums of lens) of a [H, total, w]
// buffer, and row (n H + h) T + i of the dense [B, H, T, w] one.
struct Rows {
  int64_t H, T;
  std::vector<int32_t> lens, cu;
  int64_t total() const { return cu.back(); }
  // f(dense row, variable-length row) for every row of every document.
  template <class F>
  void each(F f) const {
    const auto B = static_cast<int64_t>(lens.size());
    for (int64_t n = 0; n < B; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < lens[n]; ++i) f((n * H + h) * T + i, h * total() + cu[n] + i);
  }
};
Rows rows_of(int64_t H, int64_t T, const std::vector<int32_t>& lens) {
  Rows r{H, T, lens, {0}};
  for (int32_t l : lens) r.cu.push_back(r.cu.back() + l);
  return r;
}
// Copies the document rows (w elements each) of a dense buffer into a
// variable-length one (to_var), or of a variable-length one into a dense one.
template <class V>
void copy_rows(const Rows& rows, size_t w, const V& from, V& to, bool to_var) {
  rows.each([&](int64_t d, int64_t v) {
    const auto f = static_cast<size_t>(to_var ? d : v), t = static_cast<size_t>(to_var ? v : d);
    std::copy_n(&from[f * w], w, &to[t * w]);
  });
}

// One case. Dense (q_lens empty): the emulated kernels against attention in
// double. Variable-length (q_lens: the documents' queries, c = dense_of(the
// VarCase)): the kernels on the documents laid end to end and on the dense
// call that regroups them (padding rows random, dout zero there), both grids
// run reversed; every document row of out, lse, dq, dk and dv must be
// bitwise equal in the two, and the document rows, put back in the dense
// result, within the tolerance of attention in double (T5's table gradient:
// the variable-length call's).
template <class T, int D>
bool run_case(const Case& c, uint32_t seed, const std::vector<int32_t>& q_lens = {}) {
  const bool var = !q_lens.empty();
  const size_t nq = static_cast<size_t>(c.B * c.H * c.Tq * D),
               nk = static_cast<size_t>(c.B * c.H * c.Tk * D);
  const auto q = random_vec<T>(nq, seed, -2.0f, 2.0f), k = random_vec<T>(nk, seed + 1, -1.0f, 1.0f),
             v = random_vec<T>(nk, seed + 2, -1.0f, 1.0f);
  auto dout = random_vec<T>(nq, seed + 3, -1.0f, 1.0f);
  for (int64_t bh = 0; var && bh < c.B * c.H; ++bh)
    for (int64_t i = q_lens[static_cast<size_t>(bh / c.H)]; i < c.Tq; ++i)
      std::fill_n(&dout[static_cast<size_t>((bh * c.Tq + i) * D)], D, round_to<T>(0.0f));
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
  std::vector<float> rel(static_cast<size_t>(rel_rows)), rel_grad0(rel.size());
  {
    std::mt19937 g(seed + 7);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (float& x : rel) x = u(g);
    for (float& x : rel_grad0) x = 0.25f * u(g);
  }
  if (c.t5 >= 0) {
    p.rel = rel.data();
    p.rel_max = c.t5;
    p.rel_grad = rel_grad0.data();  // run_kernels adds into a copy
  }
  FlashRope r;
  r.enabled = c.rope;
  r.q_offset = c.q_offset;
  r.k_offset = c.k_offset;

  // The emulated kernels.
  Outputs<T> got = run_kernels<T, D>(p, r, dout, rel_grad0, var);
  bool bits = true;  // variable-length: its document rows equal the dense call's
  if (var) {
    const Rows qr = rows_of(c.H, c.Tq, q_lens), kr = rows_of(c.H, c.Tk, c.lengths);
    std::vector<T> qv(static_cast<size_t>(c.H * qr.total() * D)), dov(qv.size()),
        kv(static_cast<size_t>(c.H * kr.total() * D)), vv(kv.size());
    copy_rows(qr, D, q, qv, true);
    copy_rows(qr, D, dout, dov, true);
    copy_rows(kr, D, k, kv, true);
    copy_rows(kr, D, v, vv, true);
    FlashParams pv = p;
    pv.q = qv.data();
    pv.k = kv.data();
    pv.v = vv.data();
    pv.key_lengths = nullptr;
    pv.cu_seqlens_q = qr.cu.data();
    pv.cu_seqlens_k = kr.cu.data();
    pv.total_q = qr.total();
    pv.total_k = kr.total();
    if (!rotor::kernels::flash_params_valid(pv)) emu::fail("invalid variable-length parameters");
    Outputs<T> gv = run_kernels<T, D>(pv, r, dov, rel_grad0, true);
    // The document rows back into the dense result.
    const Outputs<T> dense = got;
    copy_rows(qr, D, gv.out, got.out, false);
    copy_rows(qr, 1, gv.lse, got.lse, false);
    copy_rows(qr, D, gv.dq, got.dq, false);
    copy_rows(kr, D, gv.dk, got.dk, false);
    copy_rows(kr, D, gv.dv, got.dv, false);
    got.rel_grad = gv.rel_grad;
    auto same = [](const auto& a, const auto& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof a[0]) == 0;
    };
    bits = same(got.out, dense.out) && same(got.lse, dense.lse) && same(got.dq, dense.dq) &&
           same(got.dk, dense.dk) && same(got.dv, dense.dv);
  }

  // The same attention in double: rotated q, k; the gradients rotated back.
  auto dbl = [](const std::vector<T>& a) {
    std::vector<double> d(a.size());
    for (size_t i = 0; i < a.size(); ++i) d[i] = f32(a[i]);
    return d;
  };
  emu::AttentionShape shape{c.B,         c.H,       c.Tq,       c.Tk,       D,
                            c.causal,    c.lengths, c.dropout,  p.scale,    p.seed,
                            p.stream_id, c.rope,    c.q_offset, c.k_offset, r.params};
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
  const double e_out = max_err(ref.out, floats(got.out)), e_lse = max_err(ref.lse, got.lse),
               e_dq = max_err(ref.dq, floats(got.dq)), e_dk = max_err(ref.dk, floats(got.dk)),
               e_dv = max_err(ref.dv, floats(got.dv)),
               e_rel = emu::rel_err(rel_want, ref.drel_mass, got.rel_grad);
  const double tol = c.bf16 ? 1.5e-2 : 4e-3;
  const bool ok = bits && e_out <= tol && e_lse <= tol && e_dq <= tol && e_dk <= tol &&
                  e_dv <= tol && e_rel <= tol;
  char table_err[32] = "";
  if (c.t5 >= 0) std::snprintf(table_err, sizeof table_err, " table %.1e", e_rel);
  auto list = [](const char* name, const std::vector<int32_t>& v) {
    std::string s;
    for (int32_t l : v) s += (s.empty() ? name : ",") + std::to_string(l);
    return s;
  };
  const std::string lengths =
      var ? list(" docs q ", q_lens) + list(" k ", c.lengths) : list(" len ", c.lengths);
  std::printf(
      "  %-4s %s D%-3d B%lld H%lld Tq%-3lld Tk%-3lld%s%s drop%.1f%s%s%s: %serr out %.1e lse %.1e "
      "dq %.1e dk %.1e dv %.1e%s\n",
      ok ? "ok" : "FAIL", c.bf16 ? "bf16" : "f16 ", D, static_cast<long long>(c.B),
      static_cast<long long>(c.H), static_cast<long long>(c.Tq), static_cast<long long>(c.Tk),
      c.causal ? " causal" : "", lengths.c_str(), c.dropout,
      c.rope
          ? (" rope q+" + std::to_string(c.q_offset) + " k+" + std::to_string(c.k_offset)).c_str()
          : "",
      c.alibi
          ? (" alibi q+" + std::to_string(c.alibi_q) + " k+" + std::to_string(c.alibi_k)).c_str()
          : "",
      c.t5 >= 0 ? (" t5 max " + std::to_string(c.t5) + " q+" + std::to_string(c.alibi_q) + " k+" +
                   std::to_string(c.alibi_k))
                      .c_str()
                : "",
      var ? (bits ? "bits = dense, " : "bits DIFFER from dense, ") : "", e_out, e_lse, e_dq, e_dk,
      e_dv, table_err);
  std::fflush(stdout);
  return ok;
}

template <int D>
bool run_typed(const Case& c, uint32_t seed, const std::vector<int32_t>& q_lens) {
  return c.bf16 ? run_case<__nv_bfloat16, D>(c, seed, q_lens)
                : run_case<__half, D>(c, seed, q_lens);
}
bool run_any(const Case& c, uint32_t seed, const std::vector<int32_t>& q_lens = {}) {
  return c.D == 32   ? run_typed<32>(c, seed, q_lens)
         : c.D == 64 ? run_typed<64>(c, seed, q_lens)
                     : run_typed<128>(c, seed, q_lens);
}

}  // namespace

int main() {
  // B, H, Tq, Tk, D, bf16, causal, key lengths, dropout, rope, q_offset, k_offset
  // (, alibi, alibi_q, alibi_k).
  const std::vector<Case> cases = {
      {1, 2, 65, 65, 32, false, false, {}, 0.0f, false},
      {2, 1, 7, 129, 32, true, true, {0, 100}, 0.0f, true},     // a 0-length row, partial
      {1, 1, 1, 65, 32, false, true, {}, 0.1f, true, 64, 0},    // one query (decoding)
      {2, 1, 129, 65, 64, false, true, {40, 65}, 0.1f, false},  // Tq > Tk: rows see nothing
      {1, 2, 65, 129, 64, true, false, {}, 0.1f, true, 0, 11},  // k_offset
      {1, 1, 129, 129, 64, false, true, {120}, 0.1f, true},     // everything at once
      {2, 2, 129, 129, 32, true, true, {129, 64}, 0.1f, true, 0, 7},
      {1, 1, 7, 1, 64, true, true, {}, 0.0f, false},  // Tq > Tk = 1: only the last row sees
      {1, 1, 1, 1, 128, false, false, {}, 0.0f, false},
      {2, 1, 129, 65, 128, false, false, {65, 30}, 0.1f, true, 3, 0},
      {2, 1, 65, 7, 128, true, true, {7, 3}, 0.1f, false},
      {1, 1, 129, 129, 128, false, true, {}, 0.0f, true, 5, 5},
      {1, 1, 7, 65, 128, true, false, {0}, 0.0f, true},  // the only row is empty
      {1, 1, 65, 129, 128, true, true, {}, 0.1f, true, 64, 0},
      // ALiBi (head h's -slope |p_i - p_j| against a materialized bias in double): 3
      // heads (the non-power-of-two slopes), symmetric and causal, Tq != Tk both ways,
      // padding, dropout, position offsets, one query.
      {1, 3, 65, 65, 64, false, false, {}, 0.0f, false, 0, 0, true},
      {2, 2, 7, 129, 32, true, true, {0, 100}, 0.0f, false, 0, 0, true},
      {1, 4, 129, 65, 128, false, true, {40}, 0.1f, false, 0, 0, true, 5, 9},
      {1, 3, 65, 129, 64, true, false, {100}, 0.0f, false, 0, 0, true, 3, 0},
      {2, 2, 1, 65, 32, false, true, {65, 30}, 0.0f, false, 0, 0, true, 0, 2},
      // Packed documents as the layer hands them over (nn::DocLayout; the
      // cu_seqlens of data.packing documents): each document a row of its
      // own, padded to the longest, with its length -- many short ones,
      // one-token ones and one filling the whole block, causal (the LM) and
      // not (the encoders), RoPE and ALiBi counting from 0 in every row.
      {8, 1, 65, 65, 64, false, true, {1, 65, 3, 1, 17, 2, 40, 1}, 0.0f, true},
      {6, 2, 33, 33, 32, true, false, {33, 1, 5, 2, 1, 9}, 0.1f, false},
      {4, 1, 129, 129, 128, false, true, {129, 1, 64, 2}, 0.0f, false, 0, 0, true},
      // T5's bias (a random [2 max + 1, H] table, its gradient added into a
      // nonzero one, against the table read and its gradient summed in
      // double): distances past max_distance (the edge rows), max_distance 0
      // (one row), Tq != Tk both ways, causal, padding, position offsets,
      // dropout, RoPE in the kernel, packed documents.
      {1, 3, 65, 65, 64, false, false, {}, 0.0f, false, 0, 0, false, 0, 0, 8},
      {2, 2, 7, 129, 32, true, true, {0, 100}, 0.0f, false, 0, 0, false, 5, 9, 128},
      {1, 2, 129, 65, 64, false, true, {40}, 0.1f, true, 0, 0, false, 0, 0, 16},
      {2, 1, 65, 129, 64, true, false, {100, 129}, 0.0f, false, 0, 0, false, 3, 0, 0},
      {4, 1, 65, 65, 32, false, true, {65, 1, 30, 2}, 0.0f, true, 0, 0, false, 0, 0, 32},
  };
  // The variable-length layout (H, D, bf16, causal, the documents' queries,
  // their keys (empty: as many), dropout, rope, q_offset, k_offset, alibi,
  // alibi_q, alibi_k, t5), each against the dense call of the same documents
  // regrouped (run_case): one-token documents and one as long as the longest
  // (two query tiles), 20 short ones and an empty one, causal and not,
  // dropout, RoPE, ALiBi and T5 (and its gradient) counting from 0 in every
  // document, two heads, and cross attention (queries and keys of different
  // lengths, a document without keys, one without queries).
  const std::vector<int32_t> short_docs = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2,
                                           3, 4, 5, 6, 7, 8, 9, 5, 0, 3};
  const std::vector<VarCase> var_cases = {
      {1, 64, false, true, {1, 65, 3, 1, 17}, {}, 0.0f, true},
      {1, 32, true, false, short_docs, {}, 0.1f, false},
      {1, 128, true, true, {33, 1, 2}, {}, 0.1f, true, 3, 0, true, 5, 2},
      {1, 64, false, true, {40, 1, 65, 7}, {}, 0.1f, true, 0, 0, false, 0, 0, 16},
      {2, 32, true, true, {9, 1, 2, 33}, {}, 0.0f, false, 0, 0, false, 3, 0, 4},
      {1, 64, false, false, {5, 1, 30, 12, 0}, {17, 0, 1, 70, 4}, 0.1f, false, 0, 0, true},
      {1, 128, false, false, {3, 33, 1}, {40, 2, 9}, 0.0f, true, 1, 4},
  };
  int failed = 0, total = 0;
  uint32_t seed = 10;
  for (const Case& c : cases) {
    seed += 10;
    failed += run_any(c, seed) ? 0 : 1;
    ++total;
  }
  for (const VarCase& c : var_cases) {
    seed += 10;
    failed += run_any(dense_of(c), seed, c.q_lens) ? 0 : 1;
    ++total;
  }
  std::printf("emulation: %d of %d cases within tolerance\n", total - failed, total);
  return failed ? 1 : 0;
}
