// kernels/attention_reference.cu (the row kernels of the reference attention
// core) run on the CPU (emulate_cu.py, kernel_emulation.h) and held to the
// CPU reference attention, ops::attention_forward / attention_backward
// (src/ops/attention.cpp), with the launchers called as
// src/ops/attention_cuda.cpp calls them. The CPU op is used whole, made to
// expose its row arithmetic: with D = Tk, k = v = the identity and scale 1,
// its scores Q K^T are q itself and its output (P o M) V is the dropped
// probabilities, bit for bit (every product but one is an exact zero); in
// the backward dP = dout V^T is dout and dQ = dS K is dS, and
// score_bias_grad (with a zero score_bias, which the backward does not read)
// is the unscaled dS, g. So the CPU's probs, dropped probs, dS, g and T5
// table gradient are compared with the kernels' for the same scores, masks
// and dP.
//   - attention_softmax_forward: f32, f16, bf16 outputs; causal with Tq <
//     Tk, Tq == Tk and Tq > Tk (rows with no visible key), key_lengths
//     (one of 0; -3 and Tk + 4 given to the kernel, which clamps them, the
//     CPU getting 0 and Tk), dropout (also dropped given with p = 0), ALiBi
//     with bias offsets (H = 3: an extra head's slope), T5 with offsets
//     (rel_max past and below the distances), the dense (TUPE) bias, T5 and
//     dense together; Tk = 1, 9 (one warp), 70 (three warps), 300 (each of
//     256 threads loops). The dropout mask and scale are compared bitwise:
//     f32 dropped = probs * detail::dropout_factors (the CPU's Philox draw
//     of the same flat [B, H, Tq, Tk] indices); 16-bit dropped zero exactly
//     where the CPU drops.
//   - attention_dropout_probs: bitwise against the 16-bit (or f32) rounding
//     of probs * dropout_factors, over two blocks; p = 0 copies.
//   - attention_softmax_backward: with dropout, masks and scale; g null,
//     separate, and aliasing dp_dropped (what the op does for T5 alone).
//   - attention_rel_bias_grad (+ attention_rel_bias_diagonals): on the
//     CPU's g, against the CPU's table gradient (accumulated into a nonzero
//     grad), run twice for the same bits; diag written exactly within its
//     size; 149 and 129 diagonals (two blocks of the diagonal kernel, edge
//     rows read by more than 32 diagonals; these two on the CPU's probs
//     only) and rows no diagonal reads.
//   - tupe_untie_cls and its backward (ops::tupe_untie_cls*): bitwise (one
//     thread sums the column in double in the CPU's order); T = 1, 6, 300.
//   - refusals: an integer dtype, H = 0 or T = 0 for TUPE; no rows: nothing.
// Tolerances, as rel_err (max |diff| / max(1, max |ref|)): f32 2e-6 -- the
// kernels use expf and fp32 block sums (at most ceil(Tk / threads) + 10
// roundings), the CPU its vector exp and double sums, a few ulps of values
// <= ~1.5; with ALiBi 4e-6 (the kernel adds the bias with one fma, the CPU
// rounds the bias and then the sum: half an ulp of a score up to ~10 moves
// a probability by ~1e-6 relative). 16-bit outputs (probs, dropped, dS)
// against the unrounded f32 CPU values: half an ulp of the type, 2^-11
// (f16) or 2^-8 (bf16) of max(1, max |ref|), plus the f32 part: 5e-4 and
// 4e-3. The T5 gradient, summed in double in another order and rounded to
// f32 once: one f32 ulp (2^-23).
#include "core/philox.h"
#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops/tupe_cls.h"
//
#include "emulate_common.h"
#include "emulated/attention_reference.inc"

namespace {

using rotor::DType;
using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;
using Mask = rotor::kernels::AttentionMask;

double tolerance(DType dt, bool alibi) {
  return dt == DType::F32 ? (alibi ? 4e-6 : 2e-6) : dt == DType::F16 ? 5e-4 : 4e-3;
}

constexpr uint64_t kSeed = 0x1234abcd5678ull;
const uint64_t kStream = rotor::rng_stream(9, 2, rotor::RngPurpose::AttentionDropout, 1);

// [B, H, T, T]: the identity in every (b, h).
Tensor identity(int64_t B, int64_t H, int64_t T) {
  std::vector<float> v(static_cast<size_t>(B * H * T * T), 0.0f);
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t t = 0; t < T; ++t) v[static_cast<size_t>((bh * T + t) * T + t)] = 1.0f;
  return Tensor::from_floats(v, {B, H, T, T});
}

// The CPU's dropout factors (0 or 1 / (1 - p)) of flat elements 0 .. n - 1.
std::vector<float> factors(int64_t n, float p) {
  std::vector<float> f(static_cast<size_t>(n));
  rotor::ops::detail::dropout_factors(kSeed, kStream, 0, n, p, f.data());
  return f;
}

struct Case {
  DType dt = DType::F32;
  int64_t B = 1, H = 1, Tq = 1, Tk = 1;
  bool causal = false;
  std::vector<int32_t> key_lengths;         // empty: none
  std::vector<int32_t> kernel_key_lengths;  // the kernel's, when they differ (clamped)
  float dropout = 0.0f;
  bool alibi = false;
  int64_t q_off = 0, k_off = 0;
  int64_t rel_max = -1;  // T5's table when >= 0
  bool dense = false;
  float scale = 0.5f;
  enum { kNone, kSeparate, kAlias } g = kNone;
  bool dropped_anyway = false;  // dropped given with dropout 0
  bool table_only = false;      // only the T5 table kernels (on the CPU's probs and g)
  const char* note = "";
};

void row_case(const Case& c) {
  char what[96];
  std::snprintf(what, sizeof what, "attn %s B%lld H%lld Tq%lld Tk%lld %s", rotor::dtype_name(c.dt),
                static_cast<long long>(c.B), static_cast<long long>(c.H),
                static_cast<long long>(c.Tq), static_cast<long long>(c.Tk), c.note);
  const DType dt = c.dt;
  const int64_t B = c.B, H = c.H, Tq = c.Tq, Tk = c.Tk, S = B * H * Tq * Tk;
  const rotor::Shape shape{B, H, Tq, Tk};
  const double tol = tolerance(dt, c.alibi);

  // ---- the CPU reference: scores q against the identity keys and values
  const auto scores = randoms(static_cast<size_t>(S), 61, -3.0f, 3.0f);
  const Tensor q = Tensor::from_floats(scores, shape);
  const Tensor eye = identity(B, H, Tk);
  rotor::ops::AttentionOptions o;
  o.scale = 1.0f;
  o.causal = c.causal;
  if (!c.key_lengths.empty()) o.key_lengths = Tensor::from_ints(c.key_lengths, {B});
  o.dropout = c.dropout;
  o.seed = kSeed;
  o.stream = kStream;
  o.alibi = c.alibi;
  o.bias_q_offset = c.q_off;
  o.bias_k_offset = c.k_off;
  const int64_t rows = 2 * c.rel_max + 1;
  if (c.rel_max >= 0) {
    o.rel_bias =
        Tensor::from_floats(randoms(static_cast<size_t>(rows * H), 63, -2.0f, 2.0f), {rows, H});
    o.rel_max = c.rel_max;
  }
  if (c.dense) o.score_bias = Tensor::from_floats(randoms(static_cast<size_t>(S), 64), shape);
  Tensor out_ref = Tensor::zeros(shape), probs_ref = Tensor::zeros(shape);
  rotor::ops::attention_forward(q, eye, eye, o, out_ref, probs_ref);

  // ---- the kernel, given what attention_cuda.cpp's mask_of gives it
  const std::vector<int32_t>& klen =
      c.kernel_key_lengths.empty() ? c.key_lengths : c.kernel_key_lengths;
  Mask m;
  m.B = B;
  m.H = H;
  m.Tq = Tq;
  m.Tk = Tk;
  m.causal = c.causal;
  m.key_lengths = klen.empty() ? nullptr : klen.data();
  m.dropout = c.dropout;
  m.seed = kSeed;
  m.stream_id = kStream;
  m.alibi = c.alibi;
  m.bias_q_offset = c.q_off;
  m.bias_k_offset = c.k_off;
  m.rel = c.rel_max >= 0 ? o.rel_bias.data<float>() : nullptr;
  m.rel_max = c.rel_max >= 0 ? c.rel_max : 0;
  m.bias = c.dense ? o.score_bias.data<float>() : nullptr;
  Tensor probs = Tensor::full(shape, NAN, dt), dropped = Tensor::full(shape, NAN, dt);
  const bool with_dropped = c.dropout > 0.0f || c.dropped_anyway;
  if (c.table_only)
    probs = probs_ref;
  else
    check_status(what, ke::attention_softmax_forward_emulated(
                           scores.data(), probs.raw(), with_dropped ? dropped.raw() : nullptr, dt,
                           m, nullptr));
  const auto p = probs.to_floats();
  if (!c.table_only) check(what, "probs", rel_err(p, probs_ref.to_floats()), tol);
  if (with_dropped && !c.table_only) {
    const auto d = dropped.to_floats();
    check(what, "dropped", rel_err(d, out_ref.to_floats()), tol);
    const auto f = factors(S, c.dropout);
    if (dt == DType::F32) {
      std::vector<float> want(p.size());
      for (size_t e = 0; e < p.size(); ++e) want[e] = p[e] == 0.0f ? 0.0f : p[e] * f[e];
      check_bits(what, "dropout mask and scale", d, want);
    } else {
      bool same = true;
      for (size_t e = 0; e < p.size(); ++e)
        same &= (d[e] == 0.0f) == (f[e] == 0.0f || p[e] == 0.0f);
      check_true(what, "dropout mask", same);
    }
  }

  // ---- the backward on the kernel's probabilities
  const Tensor P32 = Tensor::from_floats(p, shape);
  auto dp = randoms(static_cast<size_t>(S), 65);
  rotor::ops::AttentionOptions ob = o;
  ob.scale = c.scale;
  if (!c.dense) ob.score_bias = Tensor::zeros(shape);  // lets score_bias_grad take g
  ob.score_bias_grad = Tensor::zeros(shape);
  const auto grad0 = randoms(static_cast<size_t>(std::max<int64_t>(rows, 0) * H), 66);
  if (c.rel_max >= 0) ob.rel_bias_grad = Tensor::from_floats(grad0, {rows, H});
  Tensor ds_ref = Tensor::zeros(shape), dk_ref = Tensor::zeros({B, H, Tk, Tk}),
         dv_ref = Tensor::zeros({B, H, Tk, Tk});
  rotor::ops::attention_backward(q, eye, eye, P32, Tensor::from_floats(dp, shape), ob, ds_ref,
                                 dk_ref, dv_ref);  // dq = dS
  const auto g_ref = ob.score_bias_grad.to_floats();

  if (!c.table_only) {
    Tensor ds = Tensor::full(shape, NAN, dt);
    std::vector<float> gbuf(static_cast<size_t>(S), NAN);
    float* g = c.g == Case::kNone ? nullptr : c.g == Case::kAlias ? dp.data() : gbuf.data();
    check_status(what, ke::attention_softmax_backward_emulated(probs.raw(), dp.data(), ds.raw(), dt,
                                                               c.scale, m, g, nullptr));
    check(what, "ds", rel_err(ds.to_floats(), ds_ref.to_floats()), tol);
    if (g)
      check(what, c.g == Case::kAlias ? "g (=dp)" : "g",
            rel_err(c.g == Case::kAlias ? dp : gbuf, g_ref), tolerance(DType::F32, c.alibi));
  }

  // ---- T5's table gradient, on the CPU's g
  if (c.rel_max < 0) return;
  const int64_t ndiag = ke::attention_rel_bias_diagonals_emulated(m);
  check_true(what, "diagonals", ndiag == B * H * (Tq + Tk - 1));
  std::vector<float> grad[2] = {grad0, grad0};
  for (auto& gr : grad) {
    std::vector<double> diag(static_cast<size_t>(ndiag) + 1, NAN);
    check_status(what, ke::attention_rel_bias_grad_emulated(g_ref.data(), diag.data(), gr.data(), m,
                                                            nullptr));
    check_true(what, "diag within its size", std::isnan(diag.back()));
  }
  check(what, "rel grad", rel_err(grad[0], ob.rel_bias_grad.to_floats()), std::ldexp(1.0, -23));
  check_bits(what, "rel grad run twice", grad[1], grad[0]);
}

void dropout_probs_case(DType dt, int64_t B, int64_t H, int64_t Tq, int64_t Tk, float pdrop) {
  char what[96];
  std::snprintf(what, sizeof what, "attn_dropout_probs %s %lldx%lldx%lldx%lld p %.2f",
                rotor::dtype_name(dt), static_cast<long long>(B), static_cast<long long>(H),
                static_cast<long long>(Tq), static_cast<long long>(Tk), pdrop);
  const int64_t S = B * H * Tq * Tk;
  auto v = randoms(static_cast<size_t>(S), 71, 0.0f, 1.0f);
  for (size_t e = 0; e < v.size(); e += 7) v[e] = 0.0f;  // masked probabilities
  const Tensor probs = Tensor::from_floats(v, {S}, dt);
  const auto p = probs.to_floats(), f = factors(S, pdrop);
  std::vector<float> want(p.size());
  for (size_t e = 0; e < p.size(); ++e) want[e] = p[e] * f[e];
  Mask m;
  m.B = B;
  m.H = H;
  m.Tq = Tq;
  m.Tk = Tk;
  m.dropout = pdrop;
  m.seed = kSeed;
  m.stream_id = kStream;
  Tensor dropped = Tensor::full({S}, NAN, dt);
  check_status(what,
               ke::attention_dropout_probs_emulated(probs.raw(), dropped.raw(), dt, m, nullptr));
  check_bits(what, "dropped", dropped.to_floats(), Tensor::from_floats(want, {S}, dt).to_floats());
}

void tupe_case(int64_t H, int64_t T) {
  char what[96];
  std::snprintf(what, sizeof what, "tupe_untie_cls H%lld T%lld", static_cast<long long>(H),
                static_cast<long long>(T));
  const auto c0 = randoms(static_cast<size_t>(H * T * T), 81);
  const auto theta = randoms(static_cast<size_t>(2 * H), 82, -3.0f, 3.0f);
  Tensor c_ref = Tensor::from_floats(c0, {H, T, T});
  rotor::ops::tupe_untie_cls(c_ref, Tensor::from_floats(theta, {2, H}));
  auto c = c0;
  check_status(what, ke::tupe_untie_cls_emulated(c.data(), theta.data(), H, T, nullptr));
  check_bits(what, "c", c, c_ref.to_floats());

  const auto g0 = randoms(static_cast<size_t>(H * T * T), 83);
  const auto dtheta0 = randoms(static_cast<size_t>(2 * H), 84);
  Tensor g_ref = Tensor::from_floats(g0, {H, T, T}),
         dtheta_ref = Tensor::from_floats(dtheta0, {2, H});
  rotor::ops::tupe_untie_cls_backward(g_ref, dtheta_ref);
  auto g = g0, dtheta = dtheta0;
  check_status(what, ke::tupe_untie_cls_backward_emulated(g.data(), dtheta.data(), H, T, nullptr));
  check_bits(what, "g", g, g_ref.to_floats());
  check_bits(what, "dtheta", dtheta, dtheta_ref.to_floats());
}

void refusal_cases() {
  float buf[64] = {};
  double diag[8] = {};
  Mask m;
  m.B = 1;
  m.H = 1;
  m.Tq = 2;
  m.Tk = 2;
  const int before = emu::launches();
  bool refused =
      ke::attention_softmax_forward_emulated(buf, buf, nullptr, DType::I32, m, nullptr) ==
          cudaErrorInvalidValue &&
      ke::attention_dropout_probs_emulated(buf, buf, DType::I32, m, nullptr) ==
          cudaErrorInvalidValue &&
      ke::attention_softmax_backward_emulated(buf, buf, buf, DType::I32, 1.0f, m, nullptr,
                                              nullptr) == cudaErrorInvalidValue &&
      ke::tupe_untie_cls_emulated(buf, buf, 0, 2, nullptr) == cudaErrorInvalidValue &&
      ke::tupe_untie_cls_emulated(buf, buf, 2, 0, nullptr) == cudaErrorInvalidValue &&
      ke::tupe_untie_cls_backward_emulated(buf, buf, 70000, 2, nullptr) == cudaErrorInvalidValue;
  check_true("attention_reference refuses i32, H 0, T 0", "refused",
             refused && emu::launches() == before);
  m.Tq = 0;  // no rows, no scores: nothing to do
  const bool empty =
      ke::attention_softmax_forward_emulated(buf, buf, buf, DType::F32, m, nullptr) ==
          cudaSuccess &&
      ke::attention_dropout_probs_emulated(buf, buf, DType::F32, m, nullptr) == cudaSuccess &&
      ke::attention_softmax_backward_emulated(buf, buf, buf, DType::F32, 1.0f, m, buf, nullptr) ==
          cudaSuccess &&
      ke::attention_rel_bias_diagonals_emulated(m) == 0 &&
      ke::attention_rel_bias_grad_emulated(buf, diag, buf, m, nullptr) == cudaSuccess;
  check_true("attention_reference Tq 0", "no launch", empty && emu::launches() == before);
}

void run() {
  row_case({.dt = DType::F32,
            .B = 2,
            .H = 2,
            .Tq = 4,
            .Tk = 4,
            .causal = true,
            .key_lengths = {4, 2},
            .dropout = 0.2f,
            .dense = true,
            .g = Case::kSeparate,
            .note = "causal lens drop dense"});
  row_case({.dt = DType::F16,
            .B = 2,
            .H = 2,
            .Tq = 4,
            .Tk = 4,
            .causal = true,
            .key_lengths = {4, 2},
            .dropout = 0.2f,
            .dense = true,
            .g = Case::kSeparate,
            .note = "causal lens drop dense"});
  row_case({.dt = DType::BF16,
            .B = 1,
            .H = 3,
            .Tq = 5,
            .Tk = 9,
            .causal = true,
            .dropout = 0.1f,
            .alibi = true,
            .q_off = 3,
            .k_off = 1,
            .note = "causal alibi drop"});
  row_case({.dt = DType::F32,
            .B = 1,
            .H = 3,
            .Tq = 5,
            .Tk = 9,
            .key_lengths = {6},
            .alibi = true,
            .q_off = 1,
            .k_off = 4,
            .scale = 2.0f,
            .g = Case::kSeparate,
            .note = "alibi lens"});
  row_case({.dt = DType::F32,
            .B = 2,
            .H = 2,
            .Tq = 3,
            .Tk = 7,
            .causal = true,
            .q_off = 2,
            .rel_max = 3,
            .g = Case::kAlias,
            .note = "causal t5 g=dp"});
  row_case({.dt = DType::F16,
            .B = 1,
            .H = 2,
            .Tq = 6,
            .Tk = 5,
            .key_lengths = {3},
            .k_off = 2,
            .rel_max = 20,
            .g = Case::kAlias,
            .note = "t5 wide, Tq > Tk, g=dp"});
  row_case({.dt = DType::F32,
            .B = 2,
            .H = 1,
            .Tq = 5,
            .Tk = 3,
            .causal = true,
            .key_lengths = {3, 0},
            .dropout = 0.3f,
            .g = Case::kSeparate,
            .note = "rows without keys, drop"});
  row_case({.dt = DType::F32,
            .B = 1,
            .H = 1,
            .Tq = 2,
            .Tk = 300,
            .key_lengths = {290},
            .dropout = 0.5f,
            .dense = true,
            .scale = 0.125f,
            .g = Case::kSeparate,
            .note = "threads loop, drop dense"});
  row_case({.dt = DType::BF16,
            .B = 1,
            .H = 2,
            .Tq = 2,
            .Tk = 70,
            .causal = true,
            .dropped_anyway = true,
            .note = "three warps, dropped with p 0"});
  row_case({.dt = DType::F32, .note = "one key"});
  row_case({.dt = DType::F32,
            .B = 2,
            .H = 1,
            .Tq = 2,
            .Tk = 5,
            .key_lengths = {0, 5},
            .kernel_key_lengths = {-3, 9},
            .g = Case::kSeparate,
            .note = "lengths clamped"});
  row_case({.dt = DType::F16,
            .B = 1,
            .H = 1,
            .Tq = 3,
            .Tk = 40,
            .q_off = 5,
            .rel_max = 6,
            .dense = true,
            .g = Case::kSeparate,
            .note = "t5 dense"});
  row_case({.dt = DType::F32,
            .B = 1,
            .H = 1,
            .Tq = 70,
            .Tk = 80,
            .k_off = 7,
            .rel_max = 3,
            .table_only = true,
            .note = "149 diagonals"});
  row_case({.dt = DType::F32,
            .B = 2,
            .H = 2,
            .Tq = 90,
            .Tk = 40,
            .q_off = 4,
            .k_off = 1,
            .rel_max = 12,
            .table_only = true,
            .note = "129 diagonals, Tq > Tk"});

  for (DType dt : {DType::F32, DType::F16, DType::BF16}) dropout_probs_case(dt, 1, 2, 3, 50, 0.4f);
  dropout_probs_case(DType::F32, 1, 1, 2, 3, 0.0f);

  tupe_case(3, 6);
  tupe_case(1, 1);
  tupe_case(2, 300);
  refusal_cases();
}

const Register reg("attention_reference", run);

}  // namespace
