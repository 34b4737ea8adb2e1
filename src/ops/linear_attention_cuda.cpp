// CUDA glue for linear attention (ops/linear_attention.h): the fused feature
// and rotation kernels of kernels/linear_attention.cu on q and k (favor keys
// in two passes: their logits' row maxima, then the features with the key
// stabilizers of key_stabilizers); not causal, the products as cuBLASLt
// GEMMs batched over B H (S = a(K)^T V, z = 1^T phi(K), num = a(Q) S, den =
// phi(Q) z; backward U = a(Q)^T G, y = dden^T phi(Q), db = V U^T, dv = a(K) U,
// da = G S^T); causal with Tq == Tk, the chunks in parallel
// (ops/linear_attention_chunked.h: cuBLASLt products batched over the
// chunks, kernels/linear_attention_chunks.cu between them); other causal
// calls, the chunked kernels (one block per (batch, head)).
// Everything between the input and output casts is f32.
#if ROTOR_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/elementwise.cuh"
#include "kernels/gemm_cublaslt.cuh"
#include "kernels/linear_attention.cuh"
#include "kernels/linear_attention_chunks.cuh"
#include "ops/attention_common.h"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"
#include "ops/linear_attention_chunked.h"

namespace rotor::ops::cuda_impl {
namespace {

using cuda_glue::DeviceScope;
using cuda_glue::Scratch;
namespace la = kernels::linattn;

// f32 scratch buffers from the pool, freed together at scope exit.
class Floats {
 public:
  explicit Floats(int device) : device_(device) {}
  float* take(int64_t n) {
    parts_.push_back(std::make_unique<Scratch>(sizeof(float) * static_cast<size_t>(n), device_));
    return parts_.back()->as<float>();
  }

 private:
  int device_;
  std::vector<std::unique_ptr<Scratch>> parts_;
};

struct Call {
  int64_t B, H, BH, Tq, Tk, D, Dv, M;
  bool causal, favor, after;
  const int32_t* key_len;
  cudaStream_t stream;
  void* gemm_ws;
};

// Row-major contiguous f32 GEMM, batched with strides (0: broadcast), D =
// op(A) op(B) + beta D; K = 0 gives beta D. `batch` products (default B H).
void gemm(const Call& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t sa, const float* b, int64_t sb, float* d, int64_t sd, float beta = 0.0f,
          int64_t batch = -1) {
  if (batch < 0) batch = c.BH;
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {
    if (beta == 0.0f) ROTOR_CUDA_CHECK(kernels::fill(d, DType::F32, batch * sd, 0.0f, c.stream));
    return;
  }
  kernels::GemmArgs g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.a = a;
  g.stride_a = sa;
  g.b = b;
  g.stride_b = sb;
  g.c = d;
  g.d = d;
  g.stride_cd = sd;
  g.beta = beta;
  const kernels::GemmStatus s = kernels::gemm_cublaslt(g, c.gemm_ws, c.stream);
  if (!s.ok()) ROTOR_FAIL("linear attention: cuBLASLt failed in {} (status {})", s.what, s.code);
}

// gemm above, under a name that a Backend's member gemm does not hide.
void batched_gemm(const Call& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                  int64_t sa, const float* b, int64_t sb, float* d, int64_t sd, float beta,
                  int64_t batch) {
  gemm(c, ta, tb, m, n, k, a, sa, b, sb, d, sd, beta, batch);
}

// Causal calls with Tq == Tk run the chunks in parallel
// (ops/linear_attention_chunked.h): cuBLASLt products batched over B H C
// chunks of kParallelChunk rows. ROTOR_LINEAR_CAUSAL=sequential keeps the
// sequential kernels (one block per (batch, head)), for comparison.
constexpr int64_t kParallelChunk = 64;

bool chunks_in_parallel(const Call& c) {
  static const bool sequential = [] {
    const char* e = std::getenv("ROTOR_LINEAR_CAUSAL");
    return e && std::string(e) == "sequential";
  }();
  return c.causal && c.Tq == c.Tk && !sequential;
}

class CudaBackend : public linear_chunked::Backend {
 public:
  CudaBackend(const Call& c, Floats& w) : c_(c), w_(w) {}
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t sa,
            const float* b, int64_t sb, float* d, int64_t sd, int64_t batch, float beta) override {
    batched_gemm(c_, ta, tb, m, n, k, a, sa, b, sb, d, sd, beta, batch);
  }
  void rows(const float* src, int64_t src_rows, float* dst, int64_t dst_rows, int64_t X, int64_t BH,
            const float* scale) override {
    ROTOR_CUDA_CHECK(kernels::la_chunk_rows(src, src_rows, dst, dst_rows, X, BH, scale, c_.stream));
  }
  void factors(const float* ck, const int32_t* key_len, int64_t H, int64_t BH, int64_t T,
               int64_t Tpad, int64_t L, float* s, float* f, float* g, float* decay) override {
    ROTOR_CUDA_CHECK(
        kernels::la_chunk_factors(ck, key_len, H, BH, T, Tpad, L, s, f, g, decay, c_.stream));
  }
  void scan(float* x, int64_t BH, int64_t C, int64_t E, const float* decay, bool reverse) override {
    ROTOR_CUDA_CHECK(kernels::la_chunk_scan(x, BH, C, E, decay, reverse, c_.stream));
  }
  void weights(float* p, const float* s, const float* coef, const int32_t* key_len, int64_t H,
               int64_t T, int64_t BH, int64_t C, int64_t L, bool multiply) override {
    ROTOR_CUDA_CHECK(
        kernels::la_chunk_weights(p, s, coef, key_len, H, T, BH, C, L, multiply, c_.stream));
  }
  void fill(float* p, int64_t n, float value) override {
    ROTOR_CUDA_CHECK(kernels::fill(p, DType::F32, n, value, c_.stream));
  }
  float* take(int64_t n) override { return w_.take(std::max<int64_t>(n, 1)); }

 private:
  const Call& c_;
  Floats& w_;
};

// Feature rows of q and k (as the CPU op's Features).
struct Rows {
  float *xq, *phq, *aq, *xk, *phk, *bk, *ck;
  la::FeatureArgs fq, fk;
};

Rows features(const Call& c, const Tensor& q, const Tensor& k, const Tensor& projection,
              const LinearAttentionOptions& o, Floats& w) {
  la::FeatureArgs base;
  base.dt = q.dtype();
  base.BH = c.BH;
  base.H = c.H;
  base.D = c.D;
  base.M = c.M;
  base.W = c.favor ? static_cast<const float*>(projection.raw()) : nullptr;
  base.scale = o.qk_scale > 0.0f ? o.qk_scale : std::pow(static_cast<float>(c.D), -0.25f);
  base.map = o.feature_map == LinearFeatureMap::Elu1   ? la::kElu1
             : o.feature_map == LinearFeatureMap::Relu ? la::kRelu
                                                       : la::kFavor;
  base.rotate_before = o.rope == LinearRope::BeforeFeatureMap;
  base.rotate_after = c.after;
  base.rope = rope::at_length(o.rope_params, c.after ? c.M : c.D,
                              std::max(o.rope_q_offset + c.Tq, o.rope_k_offset + c.Tk));
  Rows r{};
  r.fq = base;
  r.fq.x = q.raw();
  r.fq.T = c.Tq;
  r.fq.pos0 = o.rope_q_offset;
  r.fq.xs = r.xq = w.take(c.BH * c.Tq * c.D);
  r.fq.phi = r.phq = w.take(c.BH * c.Tq * c.M);
  r.fq.a = r.aq = c.after ? w.take(c.BH * c.Tq * c.M) : r.phq;
  ROTOR_CUDA_CHECK(la::launch_features(r.fq, c.stream));
  r.fk = base;
  r.fk.x = k.raw();
  r.fk.T = c.Tk;
  r.fk.pos0 = o.rope_k_offset;
  r.fk.key_len = c.key_len;
  r.fk.xs = r.xk = w.take(c.BH * c.Tk * c.D);
  r.fk.phi = r.phk = w.take(c.BH * c.Tk * c.M);
  r.fk.a = r.bk = c.after ? w.take(c.BH * c.Tk * c.M) : r.phk;
  r.ck = nullptr;
  if (c.favor) {  // the key stabilizers: global, or the running max with causal
    float* rowmax = w.take(c.BH * c.Tk);
    float* stab = w.take(c.BH * c.Tk);
    la::FeatureArgs m = r.fk;
    m.only_max = true;
    m.rowmax = rowmax;
    ROTOR_CUDA_CHECK(la::launch_features(m, c.stream));
    ROTOR_CUDA_CHECK(
        la::launch_key_stabilizers(rowmax, c.key_len, c.H, c.BH, c.Tk, c.causal, stab, c.stream));
    r.fk.stab = stab;
    if (c.causal) r.ck = stab;
  }
  ROTOR_CUDA_CHECK(la::launch_features(r.fk, c.stream));
  return r;
}

linear_chunked::Inputs chunked_inputs(const Call& c, const Rows& r, const float* v32) {
  linear_chunked::Inputs in;
  in.H = c.H;
  in.BH = c.BH;
  in.T = c.Tq;
  in.M = c.M;
  in.Dv = c.Dv;
  in.L = kParallelChunk;
  in.key_len = c.key_len;
  in.phq = r.phq;
  in.aq = r.aq;
  in.phk = r.phk;
  in.bk = r.bk;
  in.v = v32;
  in.ck = r.ck;
  return in;
}

// v in f32 (a cast copy unless it is f32).
const float* f32_of(const Call& c, const Tensor& t, Floats& w) {
  if (t.dtype() == DType::F32) return static_cast<const float*>(t.raw());
  float* p = w.take(t.numel());
  ROTOR_CUDA_CHECK(kernels::cast(t.raw(), t.dtype(), p, DType::F32, t.numel(), c.stream));
  return p;
}

// One cuBLASLt workspace per device, taken from the pool once and kept.
void* gemm_workspace(int device) {
  static void* spaces[64] = {};
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (!spaces[device]) spaces[device] = cuda::pool_alloc(kernels::kGemmWorkspaceBytes, device);
  return spaces[device];
}

Call make_call(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& projection,
               const LinearAttentionOptions& o, const DeviceScope& s, Tensor& kl_device) {
  Call c{};
  c.B = q.size(0);
  c.H = q.size(1);
  c.BH = c.B * c.H;
  c.Tq = q.size(2);
  c.Tk = k.size(2);
  c.D = q.size(3);
  c.Dv = v.size(3);
  c.M = linear_feature_dim(o.feature_map, c.D, projection);
  c.causal = o.causal;
  c.favor = o.feature_map == LinearFeatureMap::Favor;
  c.after = o.rope == LinearRope::AfterFeatureMap;
  c.key_len = nullptr;
  if (o.key_lengths.defined()) {  // checked on the host, used on the device
    AttentionOptions ao;
    ao.key_lengths = o.key_lengths.to(Device::cpu());
    (void)detail::key_lengths_host({c.B, c.H, c.Tq, c.Tk, c.D}, ao, "linear_attention");
    kl_device = o.key_lengths.to(q.device());
    c.key_len = static_cast<const int32_t*>(kl_device.raw());
  }
  c.stream = s.stream();
  c.gemm_ws = gemm_workspace(s.index());
  return c;
}

}  // namespace

void linear_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& projection, const LinearAttentionOptions& o,
                              Tensor& out, Tensor& den) {
  DeviceScope s(out);
  Tensor kl;
  const Call c = make_call(q, k, v, projection, o, s, kl);
  Floats w(s.index());
  const Rows r = features(c, q, k, projection, o, w);
  const float* v32 = f32_of(c, v, w);
  float* S = w.take(c.BH * c.M * c.Dv);
  float* z = w.take(c.BH * c.M);
  float* pden = static_cast<float*>(den.raw());
  if (chunks_in_parallel(c)) {
    float* num = w.take(c.BH * c.Tq * c.Dv);
    CudaBackend be(c, w);
    linear_chunked::forward(be, chunked_inputs(c, r, v32), num, pden);
    ROTOR_CUDA_CHECK(la::launch_normalize(num, pden, o.eps, c.BH * c.Tq, c.Dv, out.raw(),
                                          out.dtype(), c.stream));
    return;
  }
  if (c.causal) {
    la::ChunkArgs a;
    a.H = c.H;
    a.Tq = c.Tq;
    a.Tk = c.Tk;
    a.M = c.M;
    a.Dv = c.Dv;
    a.key_len = c.key_len;
    a.phq = r.phq;
    a.aq = r.aq;
    a.phk = r.phk;
    a.bk = r.bk;
    a.v = v32;
    a.ck = r.ck;
    a.S = S;
    a.z = z;
    a.eps = o.eps;
    a.out = out.raw();
    a.dt = out.dtype();
    a.den = pden;
    ROTOR_CUDA_CHECK(la::launch_chunk_forward(a, c.BH, c.stream));
    return;
  }
  const int64_t M = c.M, Dv = c.Dv, Tq = c.Tq, Tk = c.Tk;
  float* ones = w.take(std::max<int64_t>(Tk, 1));
  ROTOR_CUDA_CHECK(kernels::fill(ones, DType::F32, Tk, 1.0f, c.stream));
  gemm(c, true, false, M, Dv, Tk, r.bk, Tk * M, v32, Tk * Dv, S, M * Dv);  // S = a(K)^T V
  gemm(c, false, false, 1, M, Tk, ones, 0, r.phk, Tk * M, z, M);           // z = 1^T phi(K)
  float* num = w.take(c.BH * Tq * Dv);
  gemm(c, false, false, Tq, Dv, M, r.aq, Tq * M, S, M * Dv, num, Tq * Dv);  // a(Q) S
  gemm(c, false, false, Tq, 1, M, r.phq, Tq * M, z, M, pden, Tq);           // phi(Q) z
  ROTOR_CUDA_CHECK(
      la::launch_normalize(num, pden, o.eps, c.BH * Tq, Dv, out.raw(), out.dtype(), c.stream));
}

void linear_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& projection, const Tensor& out, const Tensor& den,
                               const Tensor& dout, const LinearAttentionOptions& o, Tensor& dq,
                               Tensor& dk, Tensor& dv) {
  DeviceScope s(dq);
  Tensor kl;
  const Call c = make_call(q, k, v, projection, o, s, kl);
  const int64_t M = c.M, Dv = c.Dv, Tq = c.Tq, Tk = c.Tk, BH = c.BH;
  Floats w(s.index());
  Rows r = features(c, q, k, projection, o, w);
  const float* v32 = f32_of(c, v, w);
  float* G = w.take(BH * Tq * Dv);
  float* dden = w.take(BH * Tq);
  ROTOR_CUDA_CHECK(la::launch_grad_prep(dout.raw(), out.raw(), out.dtype(),
                                        static_cast<const float*>(den.raw()), o.eps, BH * Tq, Dv, G,
                                        dden, c.stream));
  float* da = w.take(BH * Tq * M);
  float* dphq = c.after ? w.take(BH * Tq * M) : da;
  float* db = w.take(BH * Tk * M);
  float* dphk = c.after ? w.take(BH * Tk * M) : db;
  float* dv32 = dv.dtype() == DType::F32 ? static_cast<float*>(dv.raw()) : w.take(BH * Tk * Dv);
  float* S = w.take(BH * M * Dv);
  float* z = w.take(BH * M);
  float* U = w.take(BH * M * Dv);
  float* y = w.take(BH * M);
  la::FeatureArgs fq = r.fq, fk = r.fk;
  fq.dx = dq.raw();
  fk.dx = dk.raw();
  if (chunks_in_parallel(c)) {
    CudaBackend be(c, w);
    linear_chunked::backward(be, chunked_inputs(c, r, v32), G, dden, da, dphq, db, dphk, dv32);
    fq.dphi = dphq;
    fk.dphi = dphk;
  } else if (c.causal) {
    la::ChunkArgs a;
    a.H = c.H;
    a.Tq = Tq;
    a.Tk = Tk;
    a.M = M;
    a.Dv = Dv;
    a.key_len = c.key_len;
    a.phq = r.phq;
    a.aq = r.aq;
    a.phk = r.phk;
    a.bk = r.bk;
    a.v = v32;
    a.ck = r.ck;
    a.S = S;
    a.z = z;
    a.eps = o.eps;
    a.G = G;
    a.dden = dden;
    a.U = U;
    a.y = y;
    a.da = da;
    a.dphq = dphq;
    a.db = db;
    a.dphk = dphk;
    a.dv = dv32;
    ROTOR_CUDA_CHECK(la::launch_chunk_backward(a, BH, c.stream));
    fq.dphi = dphq;
    fk.dphi = dphk;
  } else {
    float* ones = w.take(std::max<int64_t>(Tk, 1));
    ROTOR_CUDA_CHECK(kernels::fill(ones, DType::F32, Tk, 1.0f, c.stream));
    gemm(c, true, false, M, Dv, Tk, r.bk, Tk * M, v32, Tk * Dv, S, M * Dv);    // S = a(K)^T V
    gemm(c, false, false, 1, M, Tk, ones, 0, r.phk, Tk * M, z, M);             // z = 1^T phi(K)
    gemm(c, true, false, M, Dv, Tq, r.aq, Tq * M, G, Tq * Dv, U, M * Dv);      // U = a(Q)^T G
    gemm(c, false, false, 1, M, Tq, dden, Tq, r.phq, Tq * M, y, M);            // y = dden^T phi(Q)
    gemm(c, false, true, Tk, M, Dv, v32, Tk * Dv, U, M * Dv, db, Tk * M);      // db = V U^T
    gemm(c, false, false, Tk, Dv, M, r.bk, Tk * M, U, M * Dv, dv32, Tk * Dv);  // dv = a(K) U
    gemm(c, false, true, Tq, M, Dv, G, Tq * Dv, S, M * Dv, da, Tq * M);        // da = G S^T
    // The rank-one parts: dphi(Q) += dden z^T, dphi(K) += 1 y^T.
    fq.dphi = c.after ? nullptr : da;
    fq.coef = dden;
    fq.vec = z;
    fk.dphi = c.after ? nullptr : db;
    fk.vec = y;
  }
  fq.da = c.after ? da : nullptr;
  fk.da = c.after ? db : nullptr;
  ROTOR_CUDA_CHECK(la::launch_features_backward(fq, c.stream));
  ROTOR_CUDA_CHECK(la::launch_features_backward(fk, c.stream));
  if (dv.dtype() != DType::F32)
    ROTOR_CUDA_CHECK(kernels::cast(dv32, DType::F32, dv.raw(), dv.dtype(), dv.numel(), c.stream));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
