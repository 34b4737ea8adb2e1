// Linear attention with rotary positions (RoFormer section 3.3 / 4.4, eq. 19;
// Katharopoulos et al. 2020; Performer's FAVOR+), docs/design.md "Linear
// attention". Per batch row and head, with feature map phi: R^D -> R^M and
// q, k scaled by qk_scale first (default D^(-1/4) each, so that
// phi(q).phi(k) estimates exp(q.k / sqrt(D)) for FAVOR+, the softmax kernel):
//
//   out_m = num_m / (den_m + eps),
//   num_m = sum_{n visible from m} (R_m a(q_m)) . (R_n a(k_n)) v_n
//   den_m = sum_{n visible from m} phi(q_m) . phi(k_n)
//
// where the rotary placement says what a and R are:
//   None:             no rotation; a = phi.
//   AfterFeatureMap:  eq. 19: R_p rotates the M-dim features at position p
//                     (interleaved pairs as core/rope.h, theta_i =
//                     base^(-2i/M), M even); the denominator stays unrotated,
//                     so the numerator weights may be negative (never clamped).
//   BeforeFeatureMap: q and k are rotated (core/rope.h, theta_i =
//                     base^(-2i/D), D even) before phi, and the rotated phi
//                     serves numerator and denominator alike (positive weights).
// Query row m sits at position rope_q_offset + m, key row n at rope_k_offset + n.
// Visibility is that of ops/attention.h: n < key_lengths[b], and with causal
// n <= m + (Tk - Tq). A query that sees no key gets a zero output.
//
// Feature maps: Elu1 elu(x) + 1 and Relu max(x, 0) (M = D, no projection);
// Favor: phi_j(x) = exp(w_j.x - |x|^2/2 - c) / sqrt(M) with the rows w_j of
// `projection` f32 [M, D] (drawn by favor_projection, never trained) and the
// stabilizers of Performer: per query row c = max_j w_j.x; for the keys of
// query m, c = max over the keys m sees and j of w_j.x -- without causal one
// constant (every row sees every non-padded key), with causal a running max
// that no future key moves: key n is stored with its own prefix max c_n and
// enters row m's sums times exp(c_n - c_m) <= 1 (the chunked sweeps rescale
// the running state when c grows). The stabilizers cancel in the ratio (up
// to eps) and are constants for the gradient.
//
// Cost per (batch, head): O(T M (D + Dv)) time and O(T M + M Dv) memory. Not
// causal: S = sum_n a(k_n) v_n^T [M, Dv] and z = sum_n phi(k_n) [M], then one
// GEMM over the queries. Causal: queries in chunks of `chunk` rows; the keys a
// chunk sees in full come from the running state S, z (fp32), the rest by a
// [chunk, chunk] masked product inside the chunk; the backward runs the same
// chunks forward (dq) and backward (suffix states for dk, dv). fp32 compute;
// f16/bf16 tensors are computed in f32 and rounded once (ops/cpu_f32.h). CUDA
// tensors go to src/ops/linear_attention_cuda.cpp (fused feature kernels,
// cuBLASLt GEMMs without causal; with causal and Tq == Tk the chunks in
// parallel, ops/linear_attention_chunked.h, else the sequential chunked
// kernels; f32 states).
#pragma once

#include <cstdint>

#include "core/rope.h"
#include "core/tensor.h"

namespace rotor::ops {

enum class LinearFeatureMap { Elu1, Relu, Favor };
enum class LinearRope { None, AfterFeatureMap, BeforeFeatureMap };
const char* linear_feature_map_name(LinearFeatureMap map);  // "elu1", "relu", "favor"
const char* linear_rope_name(LinearRope rope);  // "none", "after_feature_map", "before_feature_map"

struct LinearAttentionOptions {
  LinearFeatureMap feature_map = LinearFeatureMap::Elu1;
  float qk_scale = 0.0f;  // multiplies q and k before phi; 0: D^(-1/4)
  bool causal = false;
  Tensor key_lengths;  // optional i32 [B]: keys n >= key_lengths[b] are padding
  int64_t chunk = 16;  // causal: query rows per chunk (>= 1)
  float eps = 1e-6f;   // added to the denominator (> 0)
  LinearRope rope = LinearRope::None;
  // The rotation's settings, applied to rows of features (M wide after the
  // feature map, D before it); dynamic_ntk resolved at length
  // max(rope_q_offset + Tq, rope_k_offset + Tk), one base for q and k.
  rope::Params rope_params{};
  int64_t rope_q_offset = 0, rope_k_offset = 0;
};

// Feature dimension M: D for Elu1 and Relu, projection.size(0) for Favor.
int64_t linear_feature_dim(LinearFeatureMap map, int64_t head_dim, const Tensor& projection);

// q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv] (one floating dtype),
// projection f32 [M, D] for Favor (undefined otherwise) -> out [B, H, Tq, Dv]
// (q's dtype) and den f32 [B, H, Tq] (den_m without eps, for the backward).
void linear_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& projection, const LinearAttentionOptions& options,
                              Tensor& out, Tensor& den);

// From the forward's out and den: writes dq, dk, dv (shapes of q, k, v). The
// projection gets no gradient.
void linear_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& projection, const Tensor& out, const Tensor& den,
                               const Tensor& dout, const LinearAttentionOptions& options,
                               Tensor& dq, Tensor& dk, Tensor& dv);

// The feature map alone, without rotation: x f32 [..., D] -> phi f32 [..., M],
// x scaled by `scale` (0: D^(-1/4)) first. For Favor, `stabilizer` says which
// constant is subtracted inside exp: none, each row's max, the max over all
// rows, or the running max over rows 0..r (what the op uses for queries, for
// keys without and with causal respectively).
enum class FavorStabilizer { None, Row, Global, Prefix };
void linear_attention_features(const Tensor& x, const Tensor& projection, LinearFeatureMap map,
                               float scale, FavorStabilizer stabilizer, Tensor& phi);

// f32 [features, dim] on `device`: favor::projection (core/favor.h), a pure
// function of (seed, draw, layer); the last 64 made are kept and copied.
Tensor favor_projection(uint64_t seed, uint64_t draw, uint32_t layer, int64_t features, int64_t dim,
                        Device device = Device::cpu());

}  // namespace rotor::ops
