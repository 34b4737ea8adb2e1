// Linear attention (ops/linear_attention.h): per (batch, head) the feature
// rows of q and k are built once (linear_attention_features.cpp), then the
// queries are swept in chunks. A chunk of query rows [i0, i1) sees keys
// [0, n(i1 - 1)) with n(i) the visible count of row i (non-decreasing, by at
// most one a row): keys [0, n(i0)) through the running state S, z and keys
// [n(i0), n(i1 - 1)) (fewer than `chunk`) through a masked product inside
// the chunk. Not causal, every n(i) is the key length and the chunks only
// split the query GEMMs. The backward sweeps the chunks forward (dq, and the
// in-chunk parts of dk and dv) and then backward with suffix states
// U = sum a(q) g^T, y = sum dden phi(q) for the keys each chunk sees in full.
// Causal FAVOR+ (ops/linear_attention.h): key n carries its prefix
// stabilizer c_n, row m uses c_m = c of the last key it sees, and key n
// enters row m's sums times exp(c_n - c_m) <= 1: the states S, z are kept at
// the stabilizer of their last key and rescaled when it grows, U, y at that
// of their first row and rescaled when it falls. Otherwise every factor is 1
// and is not applied.
#include "ops/linear_attention.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <vector>

#include "core/error.h"
#include "ops/attention_common.h"
#include "ops/cpu_f32.h"
#include "ops/cpu_rows.h"
#include "ops/dispatch.h"
#include "ops/linear_attention_common.h"
#include "ops/rope_rows.h"

namespace rotor::ops {

namespace {

using detail::lin_gemm;

struct Dims {
  int64_t B, H, Tq, Tk, D, Dv, M;
};

Dims check_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& projection,
                const LinearAttentionOptions& o, const char* op) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    ROTOR_FAIL("{}: q, k, v must be [B, H, T, D], got {}, {}, {}", op, shape_str(q.shape()),
               shape_str(k.shape()), shape_str(v.shape()));
  const int64_t B = q.size(0), H = q.size(1), Tk = k.size(2);
  if (k.shape() != Shape{B, H, Tk, q.size(3)} || v.dim() != 4 || v.size(0) != B || v.size(1) != H ||
      v.size(2) != Tk)
    ROTOR_FAIL("{}: with q {} expected k [{}, {}, Tk, {}] and v [{}, {}, Tk, Dv], got {} and {}",
               op, shape_str(q.shape()), B, H, q.size(3), B, H, shape_str(k.shape()),
               shape_str(v.shape()));
  if (q.size(3) < 1) ROTOR_FAIL("{}: head dimension D must be >= 1, got {}", op, q.size(3));
  require_floating(q, op);
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) ROTOR_FAIL("{}: q, k, v dtypes differ", op);
  check_same_device(q, k, op);
  check_same_device(q, v, op);
  if (o.key_lengths.defined() &&
      (o.key_lengths.dtype() != DType::I32 || o.key_lengths.numel() != B))
    ROTOR_FAIL("{}: key_lengths must be i32 [{}], got {}", op, B, o.key_lengths.str());
  const Dims d{B,
               H,
               q.size(2),
               Tk,
               q.size(3),
               v.size(3),
               linear_feature_dim(o.feature_map, q.size(3), projection)};
  if (o.feature_map == LinearFeatureMap::Favor) {
    if (!projection.defined() || projection.dtype() != DType::F32 || projection.dim() != 2 ||
        projection.size(1) != d.D || projection.size(0) < 1)
      ROTOR_FAIL("{}: feature map favor needs a projection f32 [M >= 1, {}], got {}", op, d.D,
                 projection.defined() ? projection.str() : "none");
    check_same_device(q, projection, op);
  } else if (projection.defined()) {
    ROTOR_FAIL("{}: feature map {} takes no projection, got {}", op,
               linear_feature_map_name(o.feature_map), projection.str());
  }
  if (o.chunk < 1) ROTOR_FAIL("{}: chunk must be >= 1, got {}", op, o.chunk);
  if (!(std::isfinite(o.eps) && o.eps > 0.0f))
    ROTOR_FAIL("{}: eps must be finite and > 0, got {}", op, o.eps);
  if (!(std::isfinite(o.qk_scale) && o.qk_scale >= 0.0f))
    ROTOR_FAIL("{}: qk_scale must be finite and >= 0 (0: D^(-1/4)), got {}", op, o.qk_scale);
  if (o.rope == LinearRope::AfterFeatureMap && d.M % 2 != 0)
    ROTOR_FAIL("{}: rope after_feature_map rotates pairs of features: M = {} must be even", op,
               d.M);
  if (o.rope == LinearRope::BeforeFeatureMap && d.D % 2 != 0)
    ROTOR_FAIL("{}: rope before_feature_map rotates pairs of q and k: D = {} must be even", op,
               d.D);
  if (o.rope != LinearRope::None)
    check_rope_params(o.rope_params, o.rope == LinearRope::AfterFeatureMap ? d.M : d.D, op);
  return d;
}

void check_out(const Tensor& t, const Shape& shape, DType dtype, const Tensor& q,
               const char* what) {
  check_shape(t, shape, what);
  if (t.dtype() != dtype) ROTOR_FAIL("{}: expected {}, got {}", what, dtype_name(dtype), t.str());
  check_same_device(t, q, what);
}

// What one (batch, head) needs: its dims, the visible counts and the feature specs.
struct Head {
  const Dims& d;
  const LinearAttentionOptions& o;
  int64_t key_len, C;
  bool after;  // LinearRope::AfterFeatureMap
  detail::FeatureMapSpec qs, ks;
  // After the feature map: the factors of the query and key rows (width M),
  // made once per call.
  const rope::Rotation *q_after, *k_after;
  int64_t visible(int64_t i) const {
    const detail::AttentionDims ad{d.B, d.H, d.Tq, d.Tk, d.D};
    return detail::visible_keys(ad, o.causal, key_len, i);
  }
  // Per-key stabilizers c_n apply (causal FAVOR+).
  bool prefix() const { return o.causal && o.feature_map == LinearFeatureMap::Favor; }
};

// Floats of one (batch, head)'s workspace.
int64_t head_floats(const Dims& d, int64_t C, bool after, bool prefix, bool backward) {
  const int64_t copies = after ? 2 : 1;  // phi, and its rotation
  // features (and a(k) transposed), S, Z, P
  int64_t n = (d.Tq + d.Tk) * (d.D + copies * d.M) + d.Tk * d.M + d.M * d.Dv + d.M + C * C;
  if (prefix) n += d.Tk + d.Tk * d.M + d.Tk * d.Dv;  // c_n, rescaled key rows and v rows
  if (backward)  // G, dden, da (+ dphi_q), db (+ dphi_k), U^T, Y, dP, P^T, v^T, U, G^T
    n += d.Tq * (d.Dv + 1) + (d.Tq + d.Tk) * copies * d.M + d.M * d.Dv + d.M + 2 * C * C +
         d.Tk * d.Dv + d.Dv * d.M + d.Dv * d.Tq;
  if (backward && prefix) n += C * d.M;  // chunk rows of a(q)
  return n;
}

// One thread's slice of the workspace, handed out front to back; a take
// past the end (head_floats counting less than a head takes) fails loudly
// rather than writing into the next thread's slice.
class Arena {
 public:
  Arena(float* p, int64_t n) : p_(p), left_(n) {}
  float* take(int64_t n) {
    ROTOR_CHECK(n <= left_,
                "linear attention: a head takes {} more floats of workspace than the {} "
                "left of its slice",
                n - left_, left_);
    float* r = p_;
    p_ += n;
    left_ -= n;
    return r;
  }

 private:
  float* p_;
  int64_t left_;
};

// Feature rows of both sides (a = rotated phi after the feature map, else
// phi); with causal, bkT = a(k) transposed [M, Tk] (the masked products
// read it as a plain B); with prefix stabilizers ck [Tk] and scratches bs
// [Tk, M] and vs [Tk, Dv] for rescaled key and v rows (null otherwise).
struct Features {
  float *xq, *phq, *aq, *xk, *phk, *bk, *bkT, *ck, *bs, *vs;
  // The stabilizer of row i (c of the last key it sees; 0 if it sees none).
  float row_c(const Head& h, int64_t i) const {
    const int64_t n = h.visible(i);
    return n > 0 ? ck[n - 1] : 0.0f;
  }
};

Features make_features(const Head& h, const float* q, const float* k, Arena& w) {
  const Dims& d = h.d;
  Features f{};
  f.xq = w.take(d.Tq * d.D);
  f.phq = w.take(d.Tq * d.M);
  f.aq = h.after ? w.take(d.Tq * d.M) : f.phq;
  f.xk = w.take(d.Tk * d.D);
  f.phk = w.take(d.Tk * d.M);
  f.bk = h.after ? w.take(d.Tk * d.M) : f.phk;
  f.bkT = w.take(d.M * d.Tk);
  f.ck = h.prefix() ? w.take(d.Tk) : nullptr;
  f.bs = h.prefix() ? w.take(d.Tk * d.M) : nullptr;
  f.vs = h.prefix() ? w.take(d.Tk * d.Dv) : nullptr;
  detail::features_forward(h.qs, q, d.Tq, FavorStabilizer::Row, f.xq, f.phq);
  detail::features_forward(h.ks, k, h.key_len,
                           h.prefix() ? FavorStabilizer::Prefix : FavorStabilizer::Global, f.xk,
                           f.phk, f.ck);
  if (h.after) {
    detail::rotate_rows(f.phq, f.aq, d.Tq, d.M, h.o.rope_q_offset, h.qs.rope, false, h.q_after);
    detail::rotate_rows(f.phk, f.bk, h.key_len, d.M, h.o.rope_k_offset, h.qs.rope, false,
                        h.k_after);
  }
  if (h.o.causal) detail::transpose_block(f.bk, h.key_len, d.M, d.M, f.bkT, d.Tk);
  return f;
}

// The [nq, nk] products of chunk rows [i0, i0 + nq) of a (row stride lda)
// with keys [lo, lo + nk), whose rows are the columns of bT (row stride
// ldb); entries of keys a row does not see set to zero.
void masked_product(const Head& h, const float* a, int64_t lda, const float* bT, int64_t ldb,
                    int64_t i0, int64_t nq, int64_t lo, int64_t nk, float* out) {
  lin_gemm(false, false, nq, nk, lda, a + i0 * lda, lda, bT + lo, ldb, 0.0f, out, nk);
  for (int64_t r = 0; r < nq; ++r)
    for (int64_t j = std::max<int64_t>(0, h.visible(i0 + r) - lo); j < nk; ++j) out[r * nk + j] = 0;
}

// Whether c[0, n) all equal c0: then every factor exp(c[j] - c0) is exactly
// 1 and a rescale would leave its rows' bits as they are. The prefix
// stabilizers only grow when a key's largest logit beats every earlier
// one, so most chunks and states need no rescale at all.
bool all_equal(const float* c, int64_t n, float c0) {
  for (int64_t j = 0; j < n; ++j)
    if (c[j] != c0) return false;
  return true;
}

// Chunk rows [i0, i0 + nq) x keys [lo, lo + nk) of a masked product:
// entries scaled by exp(c_key - c_row) (prefix stabilizers) -- the masked
// entries stay zero.
void rescale_product(const Head& h, const Features& f, int64_t i0, int64_t nq, int64_t lo,
                     int64_t nk, float* P) {
  for (int64_t r = 0; r < nq; ++r) {
    const int64_t seen = std::min(nk, h.visible(i0 + r) - lo);
    const float cr = f.row_c(h, i0 + r);
    if (!all_equal(f.ck + lo, seen, cr)) detail::mul_exp_row(P + r * nk, f.ck + lo, cr, 1.0f, seen);
  }
}

// S += a(k)^T v [M, Dv] over keys [from, to) -- or, with transposed, S^T
// += v^T a(k) [Dv, M] (the backward's layout: its product G S^T is then a
// plain one, which oneDNN runs about 1.4x as fast at these shapes as one
// with B transposed; docs/design.md, "The CPU GEMM"); with prefix
// stabilizers S is at cS (the c of key from - 1) and moves to c_{to - 1}:
// key n's term times exp(c_n - c_{to - 1}), put on its row of v in the
// forward (Dv values a key rather than M, and the product of the causal
// copy a(k)^T stays a plain one) and on its row of a(k) in the transposed
// (backward) layout, whose product reads v^T.
// vT: v^T [Dv, Tk] where the caller keeps it (null: none).
void add_keys(const Head& h, const Features& f, const float* v, int64_t from, int64_t to, float* S,
              float& cS, bool transposed = false, const float* vT = nullptr) {
  const int64_t M = h.d.M, Dv = h.d.Dv;
  if (to <= from) return;
  const float* b = f.bk;
  if (f.ck) {
    const float cn = f.ck[to - 1];
    if (from > 0 && cS != cn) detail::scale_row_to(S, std::exp(cS - cn), S, M * Dv);
    if (!all_equal(f.ck + from, to - from, cn)) {
      if (!transposed) {  // prefix stabilizers are causal: a(k)^T is kept
        for (int64_t n = from; n < to; ++n)
          detail::scale_row_to(v + n * Dv, std::exp(f.ck[n] - cn), f.vs + n * Dv, Dv);
        v = f.vs;
      } else {
        for (int64_t n = from; n < to; ++n)
          detail::scale_row_to(f.bk + n * M, std::exp(f.ck[n] - cn), f.bs + n * M, M);
        b = f.bs;
      }
    }
    cS = cn;
  }
  // Where the rows are as stored, the transposed copies the causal sweeps
  // keep (a(k)^T, v^T) make these plain products.
  const int64_t n = to - from;
  if (transposed) {
    if (vT)
      lin_gemm(false, false, Dv, M, n, vT + from, h.d.Tk, b + from * M, M, 1.0f, S, M);
    else
      lin_gemm(true, false, Dv, M, n, v + from * Dv, Dv, b + from * M, M, 1.0f, S, M);
  } else if (b == f.bk && h.o.causal) {  // a(k)^T is made with causal
    lin_gemm(false, false, M, Dv, n, f.bkT + from, h.d.Tk, v + from * Dv, Dv, 1.0f, S, Dv);
  } else {
    lin_gemm(true, false, M, Dv, n, b + from * M, M, v + from * Dv, Dv, 1.0f, S, Dv);
  }
}

// The factor of the state S (at cS, holding keys [0, lo)) in row i's sums.
float state_factor(const Head& h, const Features& f, int64_t lo, float cS, int64_t i) {
  return f.ck && lo > 0 ? std::exp(cS - f.row_c(h, i)) : 1.0f;
}

// The denominators' key sums, one row at a time: Z_m = sum over the keys row
// m sees of phi(k_n) exp(c_n - c_m) [M], kept at the stabilizer of its last
// key (rescaled when a key raises it), then fn(m, Z_m) for every query row
// in order. den_m = phi(q_m) . Z_m; the backward's dphi(q_m) += dden_m Z_m.
// O(T M) for any visibility: the masked [chunk, chunk] products of the
// denominator are never formed.
template <class Fn>
void prefix_key_sums(const Head& h, const Features& f, float* Z, Fn&& fn) {
  const int64_t M = h.d.M;
  std::fill(Z, Z + M, 0.0f);
  int64_t added = 0;
  float cZ = 0.0f;
  for (int64_t m = 0; m < h.d.Tq; ++m) {
    for (const int64_t nv = h.visible(m); added < nv; ++added) {
      const float* p = f.phk + added * M;
      if (f.ck) {
        if (added > 0 && f.ck[added] != cZ)
          detail::scale_row_to(Z, std::exp(cZ - f.ck[added]), Z, M);
        cZ = f.ck[added];
      }
      detail::add_scaled_row(Z, 1.0f, p, M);
    }
    fn(m, static_cast<const float*>(Z));
  }
}

// The backward's key side of the denominators, rows last to first: Y_m =
// sum over rows m' >= m of dden_m' phi(q_m') exp(c_m - c_m') [M] (Y at the
// stabilizer of its earliest row), and every key n that row m is the first
// to see gets dphi(k_n) += exp(c_n - c_m) Y_m. Rows that see no key add
// nothing (they come first: visibility never falls).
void suffix_query_sums(const Head& h, const Features& f, const float* dden, float* Y, float* dphk) {
  const int64_t M = h.d.M;
  std::fill(Y, Y + M, 0.0f);
  float cY = 0.0f;
  bool any = false;
  for (int64_t m = h.d.Tq - 1; m >= 0; --m) {
    const int64_t nv = h.visible(m);
    if (nv == 0) break;
    const float cm = f.ck ? f.ck[nv - 1] : 0.0f;
    if (f.ck && any && cm != cY) detail::scale_row_to(Y, std::exp(cm - cY), Y, M);
    cY = cm;
    any = true;
    detail::add_scaled_row(Y, dden[m], f.phq + m * M, M);
    for (int64_t n = m > 0 ? h.visible(m - 1) : 0; n < nv; ++n)
      detail::add_scaled_row(dphk + n * M, f.ck ? std::exp(f.ck[n] - cm) : 1.0f, Y, M);
  }
}

void forward_head(const Head& h, const float* q, const float* k, const float* v, float* out,
                  float* den, Arena w) {
  const Dims& d = h.d;
  const int64_t M = d.M, Dv = d.Dv, C = h.C;
  const Features f = make_features(h, q, k, w);
  float* S = w.take(M * Dv);  // [M, Dv]
  float* Z = w.take(M);
  float* P = w.take(C * C);  // weights of the numerator (rotated after the feature map)
  prefix_key_sums(h, f, Z, [&](int64_t m, const float* Zm) {
    den[m] = static_cast<float>(detail::dot_row_f64(f.phq + m * M, Zm, M));
  });
  std::fill(S, S + M * Dv, 0.0f);
  int64_t done = 0;  // keys [0, done) are in S
  float cS = 0.0f;
  for (int64_t i0 = 0; i0 < d.Tq; i0 += C) {
    const int64_t nq = std::min(C, d.Tq - i0), lo = h.visible(i0), nk = h.visible(i0 + nq - 1) - lo;
    add_keys(h, f, v, done, lo, S, cS);
    done = lo;
    if (lo == 0)  // the state holds no key yet
      std::fill(out + i0 * Dv, out + (i0 + nq) * Dv, 0.0f);
    else
      lin_gemm(false, false, nq, Dv, M, f.aq + i0 * M, M, S, Dv, 0.0f, out + i0 * Dv, Dv);
    if (f.ck && lo > 0)
      for (int64_t r = i0; r < i0 + nq; ++r)
        if (const float e = state_factor(h, f, lo, cS, r); e != 1.0f)
          detail::scale_row_to(out + r * Dv, e, out + r * Dv, Dv);
    if (nk > 0) {
      masked_product(h, f.aq, M, f.bkT, d.Tk, i0, nq, lo, nk, P);
      if (f.ck) rescale_product(h, f, i0, nq, lo, nk, P);
      lin_gemm(false, false, nq, Dv, nk, P, nk, v + lo * Dv, Dv, 1.0f, out + i0 * Dv, Dv);
    }
    for (int64_t r = i0; r < i0 + nq; ++r) {
      const float inv = static_cast<float>(1.0 / (static_cast<double>(den[r]) + h.o.eps));
      detail::scale_row_to(out + r * Dv, inv, out + r * Dv, Dv);
    }
  }
}

// Keys [from, to), seen in full by the queries summed in U (kept as U^T
// [Dv, M]): db += v U^T and dv += a(k) U; with prefix stabilizers key n's
// terms times exp(c_n - cU) (U: scratch for U [M, Dv], so that both
// products read B as stored).
void key_grads_from_state(const Head& h, const Features& f, const float* v, int64_t from,
                          int64_t to, const float* UT, float cU, float* U, float* db, float* dv) {
  const int64_t M = h.d.M, Dv = h.d.Dv, n = to - from;
  if (n <= 0) return;
  const float *vv = v, *b = f.bk;
  if (f.ck && !all_equal(f.ck + from, n, cU)) {
    for (int64_t r = from; r < to; ++r) {
      const float e = std::exp(f.ck[r] - cU);
      detail::scale_row_to(v + r * Dv, e, f.vs + r * Dv, Dv);
      detail::scale_row_to(f.bk + r * M, e, f.bs + r * M, M);
    }
    vv = f.vs;
    b = f.bs;
  }
  detail::transpose_block(UT, Dv, M, M, U, Dv);
  lin_gemm(false, false, n, M, Dv, vv + from * Dv, Dv, UT, M, 1.0f, db + from * M, M);
  lin_gemm(false, false, n, Dv, M, b + from * M, M, U, Dv, 1.0f, dv + from * Dv, Dv);
}

void backward_head(const Head& h, const float* q, const float* k, const float* v, const float* out,
                   const float* den, const float* dout, float* dq, float* dk, float* dv, Arena w) {
  const Dims& d = h.d;
  const int64_t M = d.M, Dv = d.Dv, C = h.C;
  const Features f = make_features(h, q, k, w);
  float* S = w.take(M * Dv);
  float* Z = w.take(M);
  float* P = w.take(C * C);
  float* G = w.take(d.Tq * Dv);  // dnum = dout / (den + eps)
  float* dden = w.take(d.Tq);    // -dout . out / (den + eps)
  float* da = w.take(d.Tq * M);
  float* dphq = h.after ? w.take(d.Tq * M) : da;
  float* db = w.take(d.Tk * M);
  float* dphk = h.after ? w.take(d.Tk * M) : db;
  float* UT = w.take(Dv * M);  // the suffix state U^T [Dv, M]
  float* Y = w.take(M);
  float* dP = w.take(C * C);
  float* PT = w.take(C * C);                   // dP^T, then P^T
  float* as = f.ck ? w.take(C * M) : nullptr;  // rescaled chunk rows of a(q)
  float* vT = w.take(Dv * d.Tk);               // v^T [Dv, Tk] (made with causal)
  float* U = w.take(M * Dv);                   // U, made from U^T
  float* GT = w.take(Dv * d.Tq);               // G^T [Dv, Tq]
  if (d.Tk > 0 && h.o.causal) detail::transpose_block(v, h.key_len, Dv, Dv, vT, d.Tk);
  const float* vT_made = h.o.causal ? vT : nullptr;
  for (int64_t i = 0; i < d.Tq; ++i) {
    const double s = static_cast<double>(den[i]) + h.o.eps;
    detail::div_row_f64(dout + i * Dv, s, G + i * Dv, Dv);
    dden[i] = static_cast<float>(-detail::dot_row_f64(dout + i * Dv, out + i * Dv, Dv) / s);
  }
  // U^T += G^T a(q) over each chunk's rows: a plain product of G^T's columns.
  detail::transpose_block(G, d.Tq, Dv, Dv, GT, d.Tq);
  std::fill(S, S + M * Dv, 0.0f);
  std::fill(UT, UT + M * Dv, 0.0f);
  std::fill(da, da + d.Tq * M, 0.0f);
  std::fill(db, db + d.Tk * M, 0.0f);
  std::fill(dv, dv + d.Tk * Dv, 0.0f);
  // The denominators' part: dphi(q_m) = dden_m Z_m (without rotation dphq
  // is da, whose numerator parts the chunks add below), and its key side.
  prefix_key_sums(h, f, Z, [&](int64_t m, const float* Zm) {
    detail::scale_row_to(Zm, dden[m], dphq + m * M, M);
  });
  if (h.after) std::fill(dphk, dphk + d.Tk * M, 0.0f);
  suffix_query_sums(h, f, dden, Y, dphk);
  // Forward over the chunks: dq's numerator parts, and the in-chunk parts of
  // dk and dv.
  int64_t done = 0;
  float cS = 0.0f;
  for (int64_t i0 = 0; i0 < d.Tq; i0 += C) {
    const int64_t nq = std::min(C, d.Tq - i0), lo = h.visible(i0), nk = h.visible(i0 + nq - 1) - lo;
    add_keys(h, f, v, done, lo, S, cS, true, vT_made);  // S^T [Dv, M]
    done = lo;
    if (lo == 0) {      // the state holds no key yet: no part of da
    } else if (f.ck) {  // the state's part of da, times each row's factor
      float* dst = as;
      lin_gemm(false, false, nq, M, Dv, G + i0 * Dv, Dv, S, M, 0.0f, dst, M);
      for (int64_t r = 0; r < nq; ++r)
        detail::add_scaled_row(da + (i0 + r) * M, state_factor(h, f, lo, cS, i0 + r), dst + r * M,
                               M);
    } else {
      lin_gemm(false, false, nq, M, Dv, G + i0 * Dv, Dv, S, M, 1.0f, da + i0 * M, M);
    }
    if (nk == 0) continue;
    masked_product(h, f.aq, M, f.bkT, d.Tk, i0, nq, lo, nk, P);
    masked_product(h, G, Dv, vT, d.Tk, i0, nq, lo, nk, dP);
    if (f.ck) {
      rescale_product(h, f, i0, nq, lo, nk, P);
      rescale_product(h, f, i0, nq, lo, nk, dP);
    }
    lin_gemm(false, false, nq, M, nk, dP, nk, f.bk + lo * M, M, 1.0f, da + i0 * M, M);
    // dP^T and P^T as plain products of transposed copies.
    detail::transpose_block(dP, nq, nk, nk, PT, nq);
    lin_gemm(false, false, nk, M, nq, PT, nq, f.aq + i0 * M, M, 1.0f, db + lo * M, M);
    detail::transpose_block(P, nq, nk, nk, PT, nq);
    lin_gemm(false, false, nk, Dv, nq, PT, nq, G + i0 * Dv, Dv, 1.0f, dv + lo * Dv, Dv);
  }
  // Backward over the chunks: keys [n(i0), next) are seen in full exactly by
  // the chunks after this one, whose sum U holds.
  int64_t next = d.Tq > 0 ? h.visible(d.Tq - 1) : 0;
  float cU = 0.0f;  // prefix stabilizers: the c of U's first row
  bool u_any = false;
  for (int64_t i0 = d.Tq > 0 ? (d.Tq - 1) / C * C : -1; i0 >= 0; i0 -= C) {
    const int64_t nq = std::min(C, d.Tq - i0), lo = h.visible(i0);
    if (!f.ck || u_any) key_grads_from_state(h, f, v, lo, next, UT, cU, U, db, dv);
    next = lo;
    if (!f.ck) {
      lin_gemm(false, false, Dv, M, nq, GT + i0, d.Tq, f.aq + i0 * M, M, 1.0f, UT, M);
      continue;
    }
    // Rows that see no key add nothing; the first that sees one has the
    // chunk's smallest c, U's new reference.
    int64_t first = i0;
    while (first < i0 + nq && h.visible(first) == 0) ++first;
    if (first == i0 + nq) continue;
    const float c_new = f.row_c(h, first);
    if (u_any && c_new != cU) detail::scale_row_to(UT, std::exp(c_new - cU), UT, M * Dv);
    // The chunk's rows of a(q) times exp(c_new - c_row), 0 before `first`:
    // as they are when every factor is 1.
    const float* ar = f.aq + i0 * M;
    if (first > i0 || f.row_c(h, i0 + nq - 1) != c_new) {
      for (int64_t r = i0; r < i0 + nq; ++r)
        detail::scale_row_to(f.aq + r * M, r < first ? 0.0f : std::exp(c_new - f.row_c(h, r)),
                             as + (r - i0) * M, M);
      ar = as;
    }
    lin_gemm(false, false, Dv, M, nq, GT + i0, d.Tq, ar, M, 1.0f, UT, M);
    cU = c_new;
    u_any = true;
  }
  if (!f.ck || u_any) key_grads_from_state(h, f, v, 0, next, UT, cU, U, db, dv);
  if (h.after) {  // d phi += R^T d(R phi)
    detail::rotate_rows(da, da, d.Tq, M, h.o.rope_q_offset, h.qs.rope, true, h.q_after);
    detail::rotate_rows(db, db, h.key_len, M, h.o.rope_k_offset, h.qs.rope, true, h.k_after);
    detail::add_scaled_row(dphq, 1.0f, da, d.Tq * M);
    detail::add_scaled_row(dphk, 1.0f, db, h.key_len * M);
  }
  detail::features_backward(h.qs, f.xq, f.phq, dphq, d.Tq, dq);
  detail::features_backward(h.ks, f.xk, f.phk, dphk, h.key_len, dk);
  std::fill(dk + h.key_len * d.D, dk + d.Tk * d.D, 0.0f);
}

// Runs fn(head, b, h, workspace) for every (batch, head), in parallel, each
// thread on its own slice of one workspace tensor.
template <class Fn>
void for_each_head(const Dims& d, const LinearAttentionOptions& o, const Tensor& projection,
                   bool backward, const char* op, Fn&& fn) {
  AttentionOptions ao;
  ao.key_lengths = o.key_lengths;
  const auto key_len = detail::key_lengths_host({d.B, d.H, d.Tq, d.Tk, d.D}, ao, op);
  const bool after = o.rope == LinearRope::AfterFeatureMap;
  const int64_t C = std::min<int64_t>(o.chunk, std::max<int64_t>(d.Tq, 1));
  const float scale = o.qk_scale > 0.0f ? o.qk_scale : std::pow(static_cast<float>(d.D), -0.25f);
  const float* W = projection.defined() ? projection.data<float>() : nullptr;
  const bool before = o.rope == LinearRope::BeforeFeatureMap;
  // One rotation for q and k, resolved at the call's length.
  const rope::Params rp = rope::at_length(o.rope_params, after ? d.M : d.D,
                                          std::max(o.rope_q_offset + d.Tq, o.rope_k_offset + d.Tk));
  detail::FeatureMapSpec qs{o.feature_map, d.D, d.M, scale, W, before, rp, o.rope_q_offset};
  std::vector<float> wt;  // W^T [D, M], shared by every (batch, head)
  if (W) {
    wt.resize(static_cast<size_t>(d.D * d.M));
    for (int64_t j = 0; j < d.M; ++j)
      for (int64_t c = 0; c < d.D; ++c) wt[static_cast<size_t>(c * d.M + j)] = W[j * d.D + c];
    qs.Wt = wt.data();
  }
  detail::FeatureMapSpec ks = qs;
  ks.pos0 = o.rope_k_offset;
  // The rotation's factors, shared by every (batch, head): cos and sin of
  // each (position, pair) once per call rather than once per head, and
  // kept from call to call (shared_rope_table).
  std::shared_ptr<const std::vector<rope::Rotation>> q_table, k_table;
  if (after || before) {
    const int64_t width = after ? d.M : d.D;
    q_table = shared_rope_table(rp, width, o.rope_q_offset, d.Tq);
    k_table = shared_rope_table(rp, width, o.rope_k_offset, d.Tk);
  }
  const rope::Rotation* q_after = after ? q_table->data() : nullptr;
  const rope::Rotation* k_after = after ? k_table->data() : nullptr;
  if (before) {
    qs.table = q_table->data();
    ks.table = k_table->data();
  }
  const bool prefix = o.causal && o.feature_map == LinearFeatureMap::Favor;
  const int64_t per = head_floats(d, C, after, prefix, backward);
  const int threads = static_cast<int>(
      std::clamp<int64_t>(omp_get_max_threads(), 1, std::max<int64_t>(d.B * d.H, 1)));
  Tensor ws = Tensor::empty({threads, per});  // f32, counted by the allocator's statistics
  float* wp = ws.data<float>();
  // An exception may not leave an OpenMP region (it would end the process
  // without its message): the first one a head throws is kept, the heads
  // after it are skipped, and it is thrown again after the region.
  std::exception_ptr error;
  std::atomic<bool> failed{false};
// Heads are handed out one at a time (dynamic): on a machine where a core
// is taken away for a while the other threads take its heads instead of
// waiting at the end. Each head writes only its own outputs and each thread
// its own workspace, so the bits do not depend on which thread ran a head.
#pragma omp parallel for collapse(2) schedule(dynamic) num_threads(threads)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t hh = 0; hh < d.H; ++hh) {
      if (failed.load(std::memory_order_relaxed)) continue;
      try {
        const Head head{d, o, key_len[b], C, after, qs, ks, q_after, k_after};
        fn(head, b * d.H + hh, Arena(wp + omp_get_thread_num() * per, per));
      } catch (...) {
#pragma omp critical(rotor_linear_attention_error)
        if (!error) error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
  if (error) std::rethrow_exception(error);
}

}  // namespace

void linear_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& projection, const LinearAttentionOptions& options,
                              Tensor& out, Tensor& den) {
  constexpr const char* op = "linear_attention_forward";
  const Dims d = check_args(q, k, v, projection, options, op);
  check_out(out, {d.B, d.H, d.Tq, d.Dv}, q.dtype(), q, "linear_attention_forward out");
  check_out(den, {d.B, d.H, d.Tq}, DType::F32, q, "linear_attention_forward den");
  ROTOR_DISPATCH_CUDA(out, linear_attention_forward(q, k, v, projection, options, out, den));
  if (detail::F32Compute::needed({&q})) {
    detail::F32Compute f;
    Tensor out32 = f.output(out);
    linear_attention_forward(f.input(q), f.input(k), f.input(v), projection, options, out32, den);
    f.commit();
    return;
  }
  const float *pq = q.data<float>(), *pk = k.data<float>(), *pv = v.data<float>();
  float *po = out.data<float>(), *pden = den.data<float>();
  for_each_head(d, options, projection, false, op, [&](const Head& h, int64_t bh, Arena w) {
    forward_head(h, pq + bh * d.Tq * d.D, pk + bh * d.Tk * d.D, pv + bh * d.Tk * d.Dv,
                 po + bh * d.Tq * d.Dv, pden + bh * d.Tq, w);
  });
}

void linear_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& projection, const Tensor& out, const Tensor& den,
                               const Tensor& dout, const LinearAttentionOptions& options,
                               Tensor& dq, Tensor& dk, Tensor& dv) {
  constexpr const char* op = "linear_attention_backward";
  const Dims d = check_args(q, k, v, projection, options, op);
  check_out(out, {d.B, d.H, d.Tq, d.Dv}, q.dtype(), q, "linear_attention_backward out");
  check_out(den, {d.B, d.H, d.Tq}, DType::F32, q, "linear_attention_backward den");
  check_out(dout, out.shape(), q.dtype(), q, "linear_attention_backward dout");
  check_out(dq, q.shape(), q.dtype(), q, "linear_attention_backward dq");
  check_out(dk, k.shape(), q.dtype(), q, "linear_attention_backward dk");
  check_out(dv, v.shape(), q.dtype(), q, "linear_attention_backward dv");
  ROTOR_DISPATCH_CUDA(
      dq, linear_attention_backward(q, k, v, projection, out, den, dout, options, dq, dk, dv));
  if (detail::F32Compute::needed({&q})) {
    detail::F32Compute f;
    Tensor dq32 = f.output(dq), dk32 = f.output(dk), dv32 = f.output(dv);
    linear_attention_backward(f.input(q), f.input(k), f.input(v), projection, f.input(out), den,
                              f.input(dout), options, dq32, dk32, dv32);
    f.commit();
    return;
  }
  const float *pq = q.data<float>(), *pk = k.data<float>(), *pv = v.data<float>();
  const float *po = out.data<float>(), *pden = den.data<float>(), *pdo = dout.data<float>();
  float *pdq = dq.data<float>(), *pdk = dk.data<float>(), *pdv = dv.data<float>();
  for_each_head(d, options, projection, true, op, [&](const Head& h, int64_t bh, Arena w) {
    const int64_t qo = bh * d.Tq * d.D, ko = bh * d.Tk * d.D, vo = bh * d.Tk * d.Dv;
    const int64_t oo = bh * d.Tq * d.Dv;
    backward_head(h, pq + qo, pk + ko, pv + vo, po + oo, pden + bh * d.Tq, pdo + oo, pdq + qo,
                  pdk + ko, pdv + vo, w);
  });
}

}  // namespace rotor::ops
