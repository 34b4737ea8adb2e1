// The device code of kernels/linear_attention.cu (kernels/
// linear_attention_device.cuh) run on the CPU through cuda_emulation.h (a
// fiber per CUDA thread, __syncthreads a barrier, static __shared__
// arrays shared by the block's threads since blocks run one at a time) and
// compared with the CPU op (src/ops/linear_attention*.cpp):
//   - the fused feature/rotation kernel (features, with favor's key
//     stabilizers from key_stabilizers) against detail::features_forward and
//     detail::rotate_rows: elu1, relu, favor x none / after / before, f32;
//   - the causal path (features, chunk_forward, grad_prep, chunk_backward,
//     features_backward) against ops::linear_attention_forward/backward with
//     causal, padding and Tq != Tk: out, den, dq, dk, dv within 1e-5 of the
//     largest entry (chunk sizes differ: the kernels' 32 rows, the op's 3).
// The non-causal products are cuBLASLt GEMMs and are not emulated here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "cuda_emulation.h"

#undef __shared__
#define __shared__ static
#define ROTOR_LINATTN_SHARED_FLOATS(name) \
  float* name = reinterpret_cast<float*>(emu::shared_memory())

// In a CUDA build rotor_lib holds the real kernels under these names (the
// host stubs of the __global__ functions): the emulated copies live in a
// namespace of their own.
#define linattn linattn_emulated
#include "kernels/linear_attention_device.cuh"
#undef __shared__

#include "ops/linear_attention.h"
#include "ops/linear_attention_chunked.h"
#include "ops/linear_attention_common.h"

namespace {

using namespace rotor;
namespace la = rotor::kernels::linattn;

int failures = 0;

double rel(const std::vector<float>& got, const std::vector<float>& ref) {
  double d = 0, s = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    d = std::max(d, std::abs(double(got[i]) - ref[i]));
    s = std::max(s, std::abs(double(ref[i])));
  }
  return s > 0 ? d / s : d;
}

void check(const char* what, const char* name, double err, double tol) {
  const bool ok = err <= tol && std::isfinite(err);
  std::printf("emulation: %-40s %-6s rel err %.3g %s\n", what, name, err, ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

std::vector<float> randoms(size_t n, unsigned seed, float lo = -0.25f, float hi = 1.0f) {
  std::vector<float> v(n);
  unsigned s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * float(s >> 8) / float(1u << 24);
  }
  return v;
}

void run_features(la::FeatureArgs f, bool backward = false) {
  const size_t smem = sizeof(float) * size_t(f.D + (backward ? 1 : 2) * f.M);
  emu::run_grid(la::kRowThreads, unsigned(f.BH * f.T), 1, smem, [&] {
    if (backward)
      la::features_backward(f);
    else
      la::features(f);
  });
}

// Features of one side: the kernel against the CPU's features_forward.
void feature_case(ops::LinearFeatureMap map, ops::LinearRope rope, bool causal) {
  const int64_t BH = 2, T = 5, D = 6, M = map == ops::LinearFeatureMap::Favor ? 8 : D;
  const auto x = randoms(size_t(BH * T * D), 3);
  const auto W = ops::favor_projection(1, 0, 0, M, D).to_floats();
  rope::Params p;
  p.theta = 10.0;
  la::FeatureArgs f;
  f.x = x.data();
  f.BH = BH;
  f.T = T;
  f.D = D;
  f.M = M;
  f.W = W.data();
  f.scale = 0.7f;
  f.map = int(map);
  f.rotate_before = rope == ops::LinearRope::BeforeFeatureMap;
  f.rotate_after = rope == ops::LinearRope::AfterFeatureMap;
  f.rope = p;
  f.pos0 = 3;
  std::vector<float> xs(size_t(BH * T * D)), phi(size_t(BH * T * M)), a(phi.size());
  std::vector<float> rowmax(size_t(BH * T)), stab(rowmax.size());
  f.xs = xs.data();
  f.phi = phi.data();
  f.a = a.data();
  if (map == ops::LinearFeatureMap::Favor) {  // key stabilizers, as the glue does
    la::FeatureArgs m = f;
    m.only_max = true;
    m.rowmax = rowmax.data();
    run_features(m);
    emu::run_grid(la::kRowThreads, unsigned(BH), 1, 0,
                  [&] { la::key_stabilizers(rowmax.data(), nullptr, 1, T, causal, stab.data()); });
    f.stab = stab.data();
  }
  run_features(f);
  ops::detail::FeatureMapSpec s{map, D, M, 0.7f, W.data(), f.rotate_before, p, 3};
  std::vector<float> xs_ref(xs.size()), phi_ref(phi.size()), a_ref(phi.size());
  for (int64_t bh = 0; bh < BH; ++bh) {
    ops::detail::features_forward(
        s, x.data() + bh * T * D, T,
        causal ? ops::FavorStabilizer::Prefix : ops::FavorStabilizer::Global,
        xs_ref.data() + bh * T * D, phi_ref.data() + bh * T * M);
    ops::detail::rotate_rows(phi_ref.data() + bh * T * M, a_ref.data() + bh * T * M, T, M, 3, p,
                             false);
  }
  char what[96];
  std::snprintf(what, sizeof what, "features %s %s%s", ops::linear_feature_map_name(map),
                ops::linear_rope_name(rope), causal ? " prefix" : "");
  check(what, "phi", rel(phi, phi_ref), 1e-5);
  if (f.rotate_after) check(what, "R phi", rel(a, a_ref), 1e-5);
}

// The chunks in parallel (ops/linear_attention_chunked.h, what CUDA runs for
// Tq == Tk) on the CPU backend, from the same features, stabilizers, G and
// dden as the sequential kernels' ChunkArgs a: out, den and the five
// feature gradients within 1e-5 of theirs.
void chunked_case(const char* what, const la::ChunkArgs& a, float eps, int64_t T,
                  const std::vector<float>& da, const std::vector<float>& dphq,
                  const std::vector<float>& db, const std::vector<float>& dphk,
                  const std::vector<float>& dv, const std::vector<float>& out) {
  const int64_t BH = int64_t(out.size()) / (T * a.Dv), M = a.M, Dv = a.Dv;
  ops::linear_chunked::Inputs in;
  in.H = a.H;
  in.BH = BH;
  in.T = T;
  in.M = M;
  in.Dv = Dv;
  in.L = 8;
  in.key_len = a.key_len;
  in.phq = a.phq;
  in.aq = a.aq;
  in.phk = a.phk;
  in.bk = a.bk;
  in.v = a.v;
  in.ck = a.ck;
  const bool after = a.aq != a.phq;
  std::vector<float> num(out.size()), den(size_t(BH * T)), o(out.size());
  std::vector<float> cda(da.size()), cdphq(da.size()), cdb(db.size()), cdphk(db.size());
  std::vector<float> cdv(dv.size());
  ops::linear_chunked::CpuBackend be;
  ops::linear_chunked::forward(be, in, num.data(), den.data());
  for (size_t i = 0; i < o.size(); ++i) o[i] = num[i] / (den[i / size_t(Dv)] + eps);
  ops::linear_chunked::backward(be, in, a.G, a.dden, cda.data(), after ? cdphq.data() : cda.data(),
                                cdb.data(), after ? cdphk.data() : cdb.data(), cdv.data());
  const std::vector<float> den_e(a.den, a.den + BH * T);
  char w[128];
  std::snprintf(w, sizeof w, "%s chunked", what);
  check(w, "out", rel(o, out), 1e-5);
  check(w, "den", rel(den, den_e), 1e-5);
  check(w, "da", rel(cda, da), 1e-5);
  if (after) check(w, "dphq", rel(cdphq, dphq), 1e-5);
  check(w, "db", rel(cdb, db), 1e-5);
  if (after) check(w, "dphk", rel(cdphk, dphk), 1e-5);
  check(w, "dv", rel(cdv, dv), 1e-5);
}

// The causal path, forward and backward, against the CPU op.
void causal_case(ops::LinearFeatureMap map, ops::LinearRope rope, int64_t Tq, int64_t Tk,
                 std::vector<int32_t> key_len) {
  const int64_t B = 2, H = 1, BH = B * H, D = 4, Dv = 3;
  const int64_t M = map == ops::LinearFeatureMap::Favor ? 6 : D;
  Tensor q = Tensor::from_floats(randoms(size_t(BH * Tq * D), 11), {B, H, Tq, D});
  Tensor k = Tensor::from_floats(randoms(size_t(BH * Tk * D), 12), {B, H, Tk, D});
  Tensor v = Tensor::from_floats(randoms(size_t(BH * Tk * Dv), 13, -1, 1), {B, H, Tk, Dv});
  Tensor g = Tensor::from_floats(randoms(size_t(BH * Tq * Dv), 14, -1, 1), {B, H, Tq, Dv});
  Tensor proj =
      map == ops::LinearFeatureMap::Favor ? ops::favor_projection(5, 0, 0, M, D) : Tensor();
  ops::LinearAttentionOptions o;
  o.feature_map = map;
  o.rope = rope;
  o.causal = true;
  o.chunk = 3;
  o.rope_params.theta = 10.0;
  o.rope_q_offset = Tk - Tq;
  if (!key_len.empty()) o.key_lengths = Tensor::from_ints(key_len, {B});
  Tensor out = Tensor::empty({B, H, Tq, Dv}), den = Tensor::empty({B, H, Tq});
  ops::linear_attention_forward(q, k, v, proj, o, out, den);
  Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()),
         dv = Tensor::empty(v.shape());
  ops::linear_attention_backward(q, k, v, proj, out, den, g, o, dq, dk, dv);

  // The glue's sequence on the emulated kernels.
  const auto qv = q.to_floats(), kv = k.to_floats(), vv = v.to_floats(), gv = g.to_floats();
  const auto W = proj.defined() ? proj.to_floats() : std::vector<float>();
  const bool after = rope == ops::LinearRope::AfterFeatureMap;
  la::FeatureArgs base;
  base.BH = BH;
  base.H = H;
  base.D = D;
  base.M = M;
  base.W = W.empty() ? nullptr : W.data();
  base.scale = std::pow(float(D), -0.25f);
  base.map = int(map);
  base.rotate_before = rope == ops::LinearRope::BeforeFeatureMap;
  base.rotate_after = after;
  base.rope = o.rope_params;
  std::vector<float> xq(size_t(BH * Tq * D)), phq(size_t(BH * Tq * M)), aq(phq.size());
  std::vector<float> xk(size_t(BH * Tk * D)), phk(size_t(BH * Tk * M)), bk(phk.size());
  std::vector<float> rowmax(size_t(BH * Tk)), ck(rowmax.size());
  la::FeatureArgs fq = base, fk = base;
  fq.x = qv.data();
  fq.T = Tq;
  fq.pos0 = o.rope_q_offset;
  fq.xs = xq.data();
  fq.phi = phq.data();
  fq.a = after ? aq.data() : phq.data();
  run_features(fq);
  fk.x = kv.data();
  fk.T = Tk;
  fk.key_len = key_len.empty() ? nullptr : key_len.data();
  fk.xs = xk.data();
  fk.phi = phk.data();
  fk.a = after ? bk.data() : phk.data();
  const bool favor = map == ops::LinearFeatureMap::Favor;
  if (favor) {
    la::FeatureArgs m = fk;
    m.only_max = true;
    m.rowmax = rowmax.data();
    run_features(m);
    emu::run_grid(la::kRowThreads, unsigned(BH), 1, 0,
                  [&] { la::key_stabilizers(rowmax.data(), fk.key_len, H, Tk, true, ck.data()); });
    fk.stab = ck.data();
  }
  run_features(fk);
  std::vector<float> S(size_t(BH * M * Dv)), z(size_t(BH * M)), U(S.size()), y(z.size());
  std::vector<float> out_e(size_t(BH * Tq * Dv)), den_e(size_t(BH * Tq));
  la::ChunkArgs a;
  a.H = H;
  a.Tq = Tq;
  a.Tk = Tk;
  a.M = M;
  a.Dv = Dv;
  a.key_len = fk.key_len;
  a.phq = phq.data();
  a.aq = fq.a;
  a.phk = phk.data();
  a.bk = fk.a;
  a.v = vv.data();
  a.ck = favor ? ck.data() : nullptr;
  a.S = S.data();
  a.z = z.data();
  a.eps = o.eps;
  a.out = out_e.data();
  a.den = den_e.data();
  emu::run_grid(la::kChunkThreads, unsigned(BH), 1, 0, [&] { la::chunk_forward(a); });
  std::vector<float> G(out_e.size()), dden(den_e.size());
  emu::run_grid(la::kRowThreads, unsigned(BH * Tq), 1, 0, [&] {
    la::grad_prep(gv.data(), out_e.data(), DType::F32, den_e.data(), o.eps, Dv, G.data(),
                  dden.data());
  });
  std::vector<float> da(phq.size()), dphq(phq.size()), db(phk.size()), dphk(phk.size());
  std::vector<float> dv_e(vv.size()), dq_e(qv.size()), dk_e(kv.size());
  a.G = G.data();
  a.dden = dden.data();
  a.U = U.data();
  a.y = y.data();
  a.da = da.data();
  a.dphq = after ? dphq.data() : da.data();
  a.db = db.data();
  a.dphk = after ? dphk.data() : db.data();
  a.dv = dv_e.data();
  emu::run_grid(la::kChunkThreads, unsigned(BH), 1, 0, [&] { la::chunk_backward(a); });
  fq.dphi = a.dphq;
  fq.da = after ? da.data() : nullptr;
  fq.dx = dq_e.data();
  fk.dphi = a.dphk;
  fk.da = after ? db.data() : nullptr;
  fk.dx = dk_e.data();
  run_features(fq, true);
  run_features(fk, true);
  char what[96];
  std::snprintf(what, sizeof what, "causal %s %s Tq %lld Tk %lld%s",
                ops::linear_feature_map_name(map), ops::linear_rope_name(rope), (long long)Tq,
                (long long)Tk, key_len.empty() ? "" : " padded");
  check(what, "out", rel(out_e, out.to_floats()), 1e-5);
  check(what, "den", rel(den_e, den.to_floats()), 1e-5);
  check(what, "dq", rel(dq_e, dq.to_floats()), 1e-5);
  check(what, "dk", rel(dk_e, dk.to_floats()), 1e-5);
  check(what, "dv", rel(dv_e, dv.to_floats()), 1e-5);
  if (Tq == Tk) chunked_case(what, a, o.eps, Tq, da, dphq, db, dphk, dv_e, out_e);
}

}  // namespace

int main() {
  using ops::LinearFeatureMap;
  using ops::LinearRope;
  for (auto map : {LinearFeatureMap::Elu1, LinearFeatureMap::Relu, LinearFeatureMap::Favor})
    for (auto rope : {LinearRope::None, LinearRope::AfterFeatureMap, LinearRope::BeforeFeatureMap})
      for (bool causal : {false, true}) {
        if (causal && map != LinearFeatureMap::Favor) continue;
        feature_case(map, rope, causal);
      }
  for (auto map : {LinearFeatureMap::Elu1, LinearFeatureMap::Favor})
    for (auto rope :
         {LinearRope::None, LinearRope::AfterFeatureMap, LinearRope::BeforeFeatureMap}) {
      causal_case(map, rope, 40, 40, {});
      causal_case(map, rope, 37, 45, {45, 30});
    }
  causal_case(LinearFeatureMap::Relu, LinearRope::AfterFeatureMap, 70, 70, {0, 65});
  std::printf("emulation: %s\n", failures ? "FAILED" : "all cases within tolerance");
  return failures ? 1 : 0;
}
