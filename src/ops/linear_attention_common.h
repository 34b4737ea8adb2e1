// The pieces of linear attention (ops/linear_attention.h) on raw f32 rows:
// the feature maps with their backward, the rotation of feature rows and a
// GEMM that accepts empty sizes. The sweeps of linear_attention.cpp call
// them per (batch, head); a CUDA version maps the feature map and rotation to
// one fused kernel and the products to batched GEMMs.
#pragma once

#include <cstdint>

#include "ops/linear_attention.h"

namespace rotor::ops::detail {

// C = op(A) op(B) + beta C, row-major (cblas_sgemm, alpha 1); any size may be 0.
void lin_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

struct FeatureMapSpec {
  LinearFeatureMap map;
  int64_t D, M;
  float scale;          // multiplies x (after the rotation, which commutes with it)
  const float* W;       // Favor: [M, D]
  bool rotate = false;  // rotate x before phi (LinearRope::BeforeFeatureMap)
  rope::Params rope{};  // resolved at the call's length (rope::at_length)
  int64_t pos0 = 0;     // position of row 0
  // With rotate: the factors of rows pos0.. (rope_table of width D), made
  // once per call; null: rotate_rows makes them.
  const rope::Rotation* table = nullptr;
  // Favor, optional: W transposed, [D, M], made once per call. The logits
  // then come from a plain product (x Wt), which oneDNN runs about 1.4x as
  // fast as x W^T at these shapes (T 128, D 32, M 110); null: x W^T.
  const float* Wt = nullptr;
};

// x [n, D] -> xs [n, D] = scale (R x or x), phi [n, M]; c [n] (optional)
// receives each row's stabilizer (0 for Elu1 and Relu).
void features_forward(const FeatureMapSpec& s, const float* x, int64_t n, FavorStabilizer stab,
                      float* xs, float* phi, float* c = nullptr);
// dphi [n, M] (overwritten as scratch) -> dx [n, D] (written), the stabilizer
// held constant.
void features_backward(const FeatureMapSpec& s, const float* xs, const float* phi, float* dphi,
                       int64_t n, float* dx);
// out row r = R_{pos0 + r} in row r (back: the transpose) for rows of
// `width` under the settings p (core/rope.h with head dim `width`; p resolved
// at the call's length); in may equal out. table: the factors of rows
// pos0.. (rope_table(p, width, pos0, >= n)), or null to make them here --
// every (batch, head) of a call shares one table, made once.
void rotate_rows(const float* in, float* out, int64_t n, int64_t width, int64_t pos0,
                 const rope::Params& p, bool back, const rope::Rotation* table = nullptr);

}  // namespace rotor::ops::detail
