// kernels/flash_attention.cu (the portable flash kernels: fp32 shared-memory
// tiles, every architecture and storage type) run whole on the CPU, launchers
// included (emulate_cu.py, kernel_emulation.h), and held to their CPU twin,
// ops::flash_attention_forward / flash_attention_backward
// (src/ops/flash_attention.cpp) on CPU tensors with the same
// ops::AttentionOptions. The launchers get the FlashParams that
// src/ops/flash_attention_cuda.cpp's params_of builds from those tensors and
// options (copied below), and the backward the scratch that glue gives it (an
// fp32 dQ accumulator of every q row and delta, here filled with NaNs: the
// launcher must zero and overwrite them). Every output starts as NaNs, so an
// element no kernel writes fails. The backwards of both get the CPU
// forward's out and lse, so that each comparison sees identical inputs.
//   Cases (f32, f16, bf16; head dims 32, 64, 128 -- flash_attention_supports'
//   three): several forward query tiles (BQ 64, or 32 at D 128) and key tiles
//   (BK 32), backward key tiles (BK 32) over query tiles (BQ 32, 16 at D 128),
//   causal with Tq < Tk and Tq > Tk (rows that see nothing: zero output,
//   lse -inf), the causal skip of early query tiles, key_lengths (a 0 length:
//   zero rows; padded key tiles that only write zeros; -3 and Tk + 4 given to
//   the kernel, which clamps them, the CPU getting 0 and Tk), dropout (the
//   kernel's Philox mask is the CPU's), ALiBi with bias offsets, T5's
//   relative bias (rel_max 0, past and within the distances, offsets; its
//   table gradient added into a nonzero one), one query (decoding), Tk = 0
//   (backward's early answer), Tq = 0 (no forward launch); the
//   variable-length layout (cu_seqlens, [1, H, total, D]) with documents of
//   one token, documents filling a tile, many short documents, cross-attention
//   with a document without queries and one without keys, and one where no
//   document has keys (max_seqlen_k 0).
//   Refusals: flash_attention_supports for every head dim around the three;
//   head dims 16 and 96, B H = 0 or > 65535, Tq or Tk < 0, rel_max < 0 or >
//   t5::kFlashMaxDistance, rel_grad without rel, cu_seqlens_q without
//   cu_seqlens_k or with key_lengths, total_q < 0, an integer dtype: both
//   launchers answer cudaErrorInvalidValue, launch nothing and write no output.
// Tolerances, as rel_err (max |diff| / max(1, max |ref|)):
//   - f32 outputs (out, dq, dk, dv) and lse for every storage type: 1e-5. Both
//     compute in fp32 from the same (rounded) inputs, in another order: the
//     kernel's key tiles are 32 wide (the CPU's 64), so the online softmax
//     rescales at other points; its dot products are FMA chains, its dQ the
//     atomic sum of per-key-tile partial sums; ALiBi's bias is one FMA where
//     the CPU rounds the bias then the sum (half an ulp of a score up to ~35
//     moves a probability by ~2e-6). A sum of n <= 140 terms in another
//     order differs by at most ~n 2^-24 ~ 8e-6 of its mass: 1e-5 (seen:
//     <= 3e-7).
//   - 16-bit outputs (out, dq, dk, dv): both round their fp32 values once
//     (from_f32 / the CPU's F32Compute), so they differ by at most one ulp of
//     the type (where the fp32 values straddle a rounding boundary), which is
//     at most 2^-10 (f16) or 2^-7 (bf16) of max(1, max |ref|), plus the fp32
//     part: 1e-3 and 8e-3 (seen: one ulp, 1.2e-4 for f16, 0 to 3e-8 for bf16).
//   - T5's table gradient (f32 for every storage type): the kernel sums each
//     score's dS in fp32 with shared atomics per block and then global
//     atomics, the CPU in double, rounded once into the f32 gradient: up to
//     ~1300 terms per row (rel_max 0: every score of a head), each
//     p (dP - D) with p a probability, so their mass is a few units, at fp32
//     relative 2^-24 per addition: 1e-5 (seen: <= 2e-6).
#include "core/philox.h"
#include "core/t5_bias.h"
#include "ops/attention.h"
#include "ops/flash_attention.h"
//
#include "emulate_common.h"
#include "emulated/flash_attention.inc"

namespace {

using rotor::DType;
using rotor::Shape;
using rotor::Tensor;
using rotor::kernels::FlashParams;
using rotor::ops::AttentionOptions;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

// src/ops/flash_attention_cuda.cpp's params_of, as it is there.
FlashParams params_of(const Tensor& q, const Tensor& k, const Tensor& v,
                      const AttentionOptions& o) {
  FlashParams p;
  p.q = q.raw();
  p.k = k.raw();
  p.v = v.raw();
  p.B = q.size(0);
  p.H = q.size(1);
  p.Tq = q.size(2);
  p.Tk = k.size(2);
  p.D = static_cast<int>(q.size(3));
  p.scale = o.scale;
  p.causal = o.causal;
  if (o.key_lengths.defined()) p.key_lengths = o.key_lengths.data<int32_t>();
  p.dropout = o.dropout;
  p.seed = o.seed;
  p.stream_id = o.stream;
  p.alibi = o.alibi;
  p.bias_q_offset = o.bias_q_offset;
  p.bias_k_offset = o.bias_k_offset;
  if (o.cu_seqlens_q.defined()) {  // N documents end to end: [1, H, total, D]
    p.B = o.cu_seqlens_q.numel() - 1;
    p.Tq = o.max_seqlen_q;
    p.Tk = o.max_seqlen_k;
    p.cu_seqlens_q = o.cu_seqlens_q.data<int32_t>();
    p.cu_seqlens_k = o.cu_seqlens_k.data<int32_t>();
    p.total_q = q.size(2);
    p.total_k = k.size(2);
  }
  if (o.rel_bias.defined()) {
    p.rel = o.rel_bias.data<float>();  // f32 [2 rel_max + 1, H]
    p.rel_max = o.rel_max;
  }
  return p;
}

// Stored outputs of the storage type; kF32Tol for lse and T5's gradient.
double tolerance(DType dt) {
  return dt == DType::F32 ? 1e-5 : dt == DType::F16 ? 1e-3 : 8e-3;
}
constexpr double kF32Tol = 1e-5;

constexpr uint64_t kSeed = 0x5eed1234abcdull;
const uint64_t kStream = rotor::rng_stream(7, 4, rotor::RngPurpose::AttentionDropout, 0);

struct Case {
  const char* note = "";
  DType dt = DType::F32;
  int D = 32;
  int64_t B = 1, H = 1, Tq = 1, Tk = 1;  // dense; with q_lens B, Tq, Tk are the documents'
  bool causal = false;
  std::vector<int32_t> key_lengths;         // empty: none
  std::vector<int32_t> kernel_key_lengths;  // the kernel's, when they differ (it clamps)
  float dropout = 0.0f;
  bool alibi = false;
  int64_t q_off = 0, k_off = 0;
  int64_t rel_max = -1;  // T5's table when >= 0
  // The variable-length layout when q_lens is not empty (k_lens empty: q_lens).
  std::vector<int32_t> q_lens, k_lens;
};

std::vector<float> all_nan(size_t n) {
  return std::vector<float>(n, NAN);
}

void flash_case(const Case& c) {
  const DType dt = c.dt;
  const int64_t D = c.D, H = c.H;
  const bool varlen = !c.q_lens.empty();
  const std::vector<int32_t>& kl = c.k_lens.empty() ? c.q_lens : c.k_lens;
  int64_t B = c.B, Tq = c.Tq, Tk = c.Tk, total_q = 0, total_k = 0;
  std::vector<int32_t> cu_q{0}, cu_k{0};
  if (varlen) {
    B = static_cast<int64_t>(c.q_lens.size());
    Tq = Tk = 0;
    for (int64_t n = 0; n < B; ++n) {
      cu_q.push_back(cu_q.back() + c.q_lens[n]);
      cu_k.push_back(cu_k.back() + kl[n]);
      Tq = std::max<int64_t>(Tq, c.q_lens[n]);
      Tk = std::max<int64_t>(Tk, kl[n]);
    }
    total_q = cu_q.back();
    total_k = cu_k.back();
  }
  char what[120];
  if (varlen)
    std::snprintf(what, sizeof what, "flash %s D%lld H%lld varlen N%lld Tq%lld Tk%lld %s",
                  rotor::dtype_name(dt), static_cast<long long>(D), static_cast<long long>(H),
                  static_cast<long long>(B), static_cast<long long>(Tq), static_cast<long long>(Tk),
                  c.note);
  else
    std::snprintf(what, sizeof what, "flash %s D%lld B%lld H%lld Tq%lld Tk%lld %s",
                  rotor::dtype_name(dt), static_cast<long long>(D), static_cast<long long>(B),
                  static_cast<long long>(H), static_cast<long long>(Tq), static_cast<long long>(Tk),
                  c.note);
  const double tol = tolerance(dt);

  // ---- inputs (rounded to the storage type; both sides read the same bits)
  const Shape qs = varlen ? Shape{1, H, total_q, D} : Shape{B, H, Tq, D};
  const Shape ks = varlen ? Shape{1, H, total_k, D} : Shape{B, H, Tk, D};
  const Shape ls{qs[0], qs[1], qs[2]};
  const int64_t nq = qs[0] * qs[1] * qs[2] * D, nk = ks[0] * ks[1] * ks[2] * D;
  const unsigned seed = static_cast<unsigned>(11 * (B + 3 * H + 7 * Tq + 13 * Tk + D));
  const Tensor q = Tensor::from_floats(randoms(static_cast<size_t>(nq), seed, -2.0f, 2.0f), qs, dt);
  const Tensor k = Tensor::from_floats(randoms(static_cast<size_t>(nk), seed + 1), ks, dt);
  const Tensor v = Tensor::from_floats(randoms(static_cast<size_t>(nk), seed + 2), ks, dt);
  const Tensor dout = Tensor::from_floats(randoms(static_cast<size_t>(nq), seed + 3), qs, dt);

  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(D));
  o.causal = c.causal;
  if (!c.key_lengths.empty()) o.key_lengths = Tensor::from_ints(c.key_lengths, {B});
  o.dropout = c.dropout;
  o.seed = kSeed;
  o.stream = kStream;
  o.alibi = c.alibi;
  o.bias_q_offset = c.q_off;
  o.bias_k_offset = c.k_off;
  if (varlen) {
    o.cu_seqlens_q = Tensor::from_ints(cu_q, {B + 1});
    o.cu_seqlens_k = Tensor::from_ints(cu_k, {B + 1});
    o.max_seqlen_q = Tq;
    o.max_seqlen_k = Tk;
  }
  const int64_t rel_rows = 2 * c.rel_max + 1;
  std::vector<float> grad0;
  if (c.rel_max >= 0) {
    o.rel_bias = Tensor::from_floats(randoms(static_cast<size_t>(rel_rows * H), seed + 4, -2, 2),
                                     {rel_rows, H});
    o.rel_max = c.rel_max;
    grad0 = randoms(static_cast<size_t>(rel_rows * H), seed + 5, -0.25f, 0.25f);
  }

  // ---- forward: the CPU twin, then the launcher on the same tensors
  Tensor out_ref = Tensor::zeros(qs, dt), lse_ref = Tensor::zeros(ls);
  rotor::ops::flash_attention_forward(q, k, v, o, out_ref, lse_ref);
  AttentionOptions ko = o;  // what the kernel is given (key lengths it clamps)
  if (!c.kernel_key_lengths.empty()) ko.key_lengths = Tensor::from_ints(c.kernel_key_lengths, {B});
  const FlashParams pf = params_of(q, k, v, ko);
  Tensor out = Tensor::full(qs, NAN, dt), lse = Tensor::full(ls, NAN);
  const int launches_before = emu::launches();
  check_status(what,
               ke::flash_attention_forward_emulated(pf, out.raw(), lse.data<float>(), dt, nullptr));
  if (pf.Tq == 0) check_true(what, "no launch", emu::launches() == launches_before);
  check(what, "out", rel_err(out.to_floats(), out_ref.to_floats()), tol);
  check(what, "lse", rel_err(lse.to_floats(), lse_ref.to_floats()), kF32Tol);

  // ---- backward, both on the CPU forward's out and lse
  if (c.rel_max >= 0) o.rel_bias_grad = Tensor::from_floats(grad0, {rel_rows, H});
  Tensor dq_ref = Tensor::zeros(qs, dt), dk_ref = Tensor::zeros(ks, dt),
         dv_ref = Tensor::zeros(ks, dt);
  rotor::ops::flash_attention_backward(q, k, v, out_ref, lse_ref, dout, o, dq_ref, dk_ref, dv_ref);

  FlashParams pb = params_of(q, k, v, ko);
  Tensor rel_grad;
  if (c.rel_max >= 0) {
    rel_grad = Tensor::from_floats(grad0, {rel_rows, H});
    pb.rel_grad = rel_grad.data<float>();
  }
  // The glue's scratch: every q row (q.size(0) q.size(1) q.size(2)).
  const auto rows = static_cast<size_t>(qs[0] * qs[1] * qs[2]);
  std::vector<float> dq_accum = all_nan(rows * static_cast<size_t>(D)), delta = all_nan(rows);
  Tensor dq = Tensor::full(qs, NAN, dt), dk = Tensor::full(ks, NAN, dt),
         dv = Tensor::full(ks, NAN, dt);
  check_status(what, ke::flash_attention_backward_emulated(
                         pb, out_ref.raw(), lse_ref.data<float>(), dout.raw(), dq.raw(), dk.raw(),
                         dv.raw(), dq_accum.data(), delta.data(), dt, nullptr));
  check(what, "dq", rel_err(dq.to_floats(), dq_ref.to_floats()), tol);
  check(what, "dk", rel_err(dk.to_floats(), dk_ref.to_floats()), tol);
  check(what, "dv", rel_err(dv.to_floats(), dv_ref.to_floats()), tol);
  if (c.rel_max >= 0)
    check(what, "relgrad", rel_err(rel_grad.to_floats(), o.rel_bias_grad.to_floats()), kF32Tol);
}

// ---- refusals: each invalid FlashParams is answered cudaErrorInvalidValue by
// both launchers before any launch or write.
struct Refusal {
  std::vector<float> q, k, v, dout, out, lse, dq, dk, dv, dq_accum, delta, rel, rel_grad;
  std::vector<int32_t> lengths{4}, cu{0, 4};
  FlashParams base;
  Refusal()
      : q(randoms(128, 91)),
        k(randoms(128, 92)),
        v(randoms(128, 93)),
        dout(randoms(128, 94)),
        out(randoms(128, 95)),
        lse(randoms(4, 96)),
        dq(all_nan(128)),
        dk(all_nan(128)),
        dv(all_nan(128)),
        dq_accum(all_nan(128)),
        delta(all_nan(4)),
        rel(randoms(3, 97)),
        rel_grad(randoms(3, 98)) {
    base.q = q.data();
    base.k = k.data();
    base.v = v.data();
    base.B = base.H = 1;
    base.Tq = base.Tk = 4;
    base.D = 32;
    base.scale = 0.25f;
  }
  void expect(const char* note, const FlashParams& p, DType dt = DType::F32) {
    char what[96];
    std::snprintf(what, sizeof what, "flash refuses %s", note);
    std::vector<float> fout = all_nan(128), flse = all_nan(4);
    const std::vector<float> lse0 = lse, grad0 = rel_grad;
    const int before = emu::launches();
    const cudaError_t ef =
        ke::flash_attention_forward_emulated(p, fout.data(), flse.data(), dt, nullptr);
    const cudaError_t eb = ke::flash_attention_backward_emulated(
        p, out.data(), lse.data(), dout.data(), dq.data(), dk.data(), dv.data(), dq_accum.data(),
        delta.data(), dt, nullptr);
    const auto nan_all = [](const std::vector<float>& x) {
      return std::all_of(x.begin(), x.end(), [](float e) { return std::isnan(e); });
    };
    check_true(what, "status", ef == cudaErrorInvalidValue && eb == cudaErrorInvalidValue);
    check_true(what, "nothing",
               emu::launches() == before && nan_all(fout) && nan_all(flse) && nan_all(dq) &&
                   nan_all(dk) && nan_all(dv) && nan_all(delta) && same_bits(rel_grad, grad0));
  }
};

void refusals() {
  bool supports_ok = true;
  for (int d : {0, 1, 16, 31, 32, 33, 48, 64, 80, 96, 127, 128, 129, 256})
    supports_ok =
        supports_ok && ke::flash_attention_supports_emulated(d) == (d == 32 || d == 64 || d == 128);
  check_true("flash_attention_supports 32, 64, 128 only", "supports", supports_ok);

  Refusal r;
  FlashParams p = r.base;
  p.D = 16;
  r.expect("head dim 16", p);
  p.D = 96;
  r.expect("head dim 96", p);
  p = r.base;
  p.B = 0;
  r.expect("B = 0", p);
  p = r.base;
  p.H = 0;
  r.expect("H = 0", p);
  p = r.base;
  p.B = 65536;
  r.expect("B H = 65536", p);
  p = r.base;
  p.Tq = -1;
  r.expect("Tq = -1", p);
  p = r.base;
  p.Tk = -1;
  r.expect("Tk = -1", p);
  p = r.base;
  p.rel = r.rel.data();
  p.rel_max = -1;
  r.expect("rel_max = -1", p);
  p.rel_max = rotor::t5::kFlashMaxDistance + 1;
  r.expect("rel_max = kFlashMaxDistance + 1", p);
  p = r.base;
  p.rel_grad = r.rel_grad.data();
  r.expect("rel_grad without rel", p);
  p = r.base;
  p.cu_seqlens_q = r.cu.data();
  p.total_q = p.total_k = 4;
  r.expect("cu_seqlens_q without _k", p);
  p.cu_seqlens_k = r.cu.data();
  p.key_lengths = r.lengths.data();
  r.expect("cu_seqlens with key_lengths", p);
  p.key_lengths = nullptr;
  p.total_q = -1;
  r.expect("total_q = -1", p);
  r.expect("an i32 dtype", r.base, DType::I32);
}

void run() {
  constexpr DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16;
  auto dense = [](const char* note, DType dt, int D, int64_t B, int64_t H, int64_t Tq, int64_t Tk) {
    Case c;
    c.note = note;
    c.dt = dt;
    c.D = D;
    c.B = B;
    c.H = H;
    c.Tq = Tq;
    c.Tk = Tk;
    return c;
  };
  auto docs = [](const char* note, DType dt, int D, int64_t H, std::vector<int32_t> q_lens,
                 std::vector<int32_t> k_lens = {}) {
    Case c;
    c.note = note;
    c.dt = dt;
    c.D = D;
    c.H = H;
    c.q_lens = std::move(q_lens);
    c.k_lens = std::move(k_lens);
    return c;
  };
  std::vector<Case> cases;
  // Two forward query tiles, three key tiles both ways.
  cases.push_back(dense("", F32, 32, 1, 2, 65, 65));
  {
    Case c = dense("causal len 0,50", F32, 64, 2, 1, 7, 70);  // a zero row; padded key tiles
    c.causal = true;
    c.key_lengths = {0, 50};
    cases.push_back(c);
  }
  {
    Case c = dense("causal len 20,9 drop .1", F16, 64, 2, 1, 40, 20);  // rows seeing nothing
    c.causal = true;
    c.key_lengths = {20, 9};
    c.dropout = 0.1f;
    cases.push_back(c);
  }
  {
    Case c = dense("causal drop .2", BF16, 32, 1, 2, 33, 70);
    c.causal = true;
    c.dropout = 0.2f;
    cases.push_back(c);
  }
  {
    Case c = dense("causal skips tiles", F32, 64, 1, 1, 70, 70);  // bwd starts at query tile 64
    c.causal = true;
    cases.push_back(c);
  }
  {
    Case c = dense("drop .1", F32, 128, 1, 1, 40, 40);  // D 128: BQ 32 forward, 16 backward
    c.dropout = 0.1f;
    cases.push_back(c);
  }
  {
    Case c = dense("causal", F16, 128, 1, 1, 17, 35);
    c.causal = true;
    cases.push_back(c);
  }
  cases.push_back(dense("", BF16, 64, 2, 1, 20, 45));
  {
    Case c = dense("len -3,24 (kernel) 0,20 (cpu)", F32, 32, 2, 1, 9, 20);
    c.key_lengths = {0, 20};
    c.kernel_key_lengths = {-3, 24};
    cases.push_back(c);
  }
  {
    Case c = dense("one query causal drop .1", BF16, 64, 1, 2, 1, 40);
    c.causal = true;
    c.dropout = 0.1f;
    cases.push_back(c);
  }
  {
    Case c = dense("alibi q+4 k+1", F32, 32, 1, 3, 40, 40);
    c.alibi = true;
    c.q_off = 4;
    c.k_off = 1;
    cases.push_back(c);
  }
  {
    Case c = dense("alibi causal len 70,20 drop .1 k+3", F16, 64, 2, 2, 33, 70);
    c.alibi = true;
    c.causal = true;
    c.key_lengths = {70, 20};
    c.dropout = 0.1f;
    c.k_off = 3;
    cases.push_back(c);
  }
  {
    Case c = dense("t5 max 8 q+2", F32, 64, 1, 2, 65, 65);  // distances past rel_max
    c.rel_max = 8;
    c.q_off = 2;
    cases.push_back(c);
  }
  {
    Case c = dense("t5 max 128 causal len 0,50 drop .1 q+5 k+9", F16, 32, 2, 1, 7, 70);
    c.rel_max = 128;
    c.causal = true;
    c.key_lengths = {0, 50};
    c.dropout = 0.1f;
    c.q_off = 5;
    c.k_off = 9;
    cases.push_back(c);
  }
  {
    Case c = dense("t5 max 0", BF16, 32, 1, 2, 40, 33);  // one row: every score shares it
    c.rel_max = 0;
    cases.push_back(c);
  }
  {
    Case c = dense("t5 max 16 Tk 0", F32, 32, 1, 2, 5, 0);  // no keys: out 0, dq 0, no dk
    c.rel_max = 16;
    cases.push_back(c);
  }
  cases.push_back(dense("Tq 0", F16, 64, 2, 1, 0, 9));  // no forward launch; dk, dv zero

  // The variable-length layout.
  {
    Case c = docs("causal t5 max 8 q+2", F32, 32, 2, {1, 64, 9, 37, 1});
    c.causal = true;
    c.rel_max = 8;
    c.q_off = 2;
    cases.push_back(c);
  }
  {
    Case c = docs("drop .1", F16, 64, 1, {32, 5, 32, 1, 17});
    c.dropout = 0.1f;
    cases.push_back(c);
  }
  {
    std::vector<int32_t> short_docs;  // 12 documents of 1 to 9 tokens
    for (int32_t n = 0; n < 12; ++n) short_docs.push_back(n * 4 % 9 + 1);
    Case c = docs("causal alibi q+3 k+1 drop .1", BF16, 32, 2, short_docs);
    c.causal = true;
    c.alibi = true;
    c.q_off = 3;
    c.k_off = 1;
    c.dropout = 0.1f;
    cases.push_back(c);
  }
  {
    Case c = docs("cross t5 max 16 k+4 drop .1", F16, 64, 1, {3, 0, 20, 9, 1}, {17, 40, 1, 0, 5});
    c.rel_max = 16;
    c.k_off = 4;
    c.dropout = 0.1f;
    cases.push_back(c);
  }
  {
    Case c = docs("no keys", F32, 32, 2, {3, 2}, {0, 0});  // max_seqlen_k 0
    c.causal = true;
    cases.push_back(c);
  }
  for (const Case& c : cases) flash_case(c);
  refusals();
}

const Register reg("flash_attention", run);

}  // namespace
