// Feature maps of linear attention and their gradients, the rotation of
// feature rows, and the public linear_attention_features / favor_projection.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "core/favor.h"
#include "core/rope.h"
#include "ops/cpu_gemm.h"
#include "ops/cpu_rows.h"
#include "ops/dispatch.h"
#include "ops/linear_attention_common.h"
#include "ops/rope_rows.h"

namespace rotor::ops {

namespace detail {

void lin_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  if (!trans_a && !trans_b &&
      cpu_small_sgemm(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), a,
                      static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
                      static_cast<int>(ldc)))
    return;
  cpu_sgemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
            static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
            static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void rotate_rows(const float* in, float* out, int64_t n, int64_t width, int64_t pos0,
                 const rope::Params& p, bool back, const rope::Rotation* table) {
  std::vector<rope::Rotation> own;
  if (!table) {
    own = rope_table(p, width, pos0, n);
    table = own.data();
  }
  rope_rows(p, width, table, in, out, n, back);
}

void features_forward(const FeatureMapSpec& s, const float* x, int64_t n, FavorStabilizer stab,
                      float* xs, float* phi, float* c) {
  const int64_t D = s.D, M = s.M;
  if (s.rotate) {
    rotate_rows(x, xs, n, D, s.pos0, s.rope, false, s.table);
    scale_row_to(xs, s.scale, xs, n * D);
  } else {
    scale_row_to(x, s.scale, xs, n * D);
  }
  switch (s.map) {
    case LinearFeatureMap::Elu1:
      elu1_row(xs, phi, n * D);
      if (c) std::fill(c, c + n, 0.0f);
      return;
    case LinearFeatureMap::Relu:
      relu_row(xs, phi, n * D);
      if (c) std::fill(c, c + n, 0.0f);
      return;
    case LinearFeatureMap::Favor:
      break;
  }
  // Favor: logits w_j . x by one GEMM, then exp(logit - |x|^2/2 - c) / sqrt(M).
  if (s.Wt)
    lin_gemm(false, false, n, M, D, xs, D, s.Wt, M, 0.0f, phi, M);
  else
    lin_gemm(false, true, n, M, D, xs, D, s.W, D, 0.0f, phi, M);
  float global = 0.0f;
  if (stab == FavorStabilizer::Global && n > 0) {
    global = max_row(phi, n * M);
  }
  const float inv_sqrt_m = static_cast<float>(1.0 / std::sqrt(static_cast<double>(M)));
  const RowShift shift = stab == FavorStabilizer::Row      ? RowShift::Row
                         : stab == FavorStabilizer::Global ? RowShift::Global
                         : stab == FavorStabilizer::Prefix ? RowShift::Prefix
                                                           : RowShift::None;
  favor_shift_rows(phi, xs, n, M, D, shift, global, c);
  exp_scale_row(phi, n * M, inv_sqrt_m);
}

void features_backward(const FeatureMapSpec& s, const float* xs, const float* phi, float* dphi,
                       int64_t n, float* dx) {
  const int64_t D = s.D, M = s.M;
  switch (s.map) {
    case LinearFeatureMap::Elu1:
      // d/dx (elu(x) + 1) = 1 for x > 0, exp(x) = phi otherwise.
      elu1_grad_row(xs, phi, dphi, dx, n * D);
      break;
    case LinearFeatureMap::Relu:
      relu_grad_row(xs, dphi, dx, n * D);
      break;
    case LinearFeatureMap::Favor: {
      // d phi_j / dx = phi_j (w_j - x): with t = dphi o phi,
      // dx = t W - x rowsum(t) (the row sums in double lanes).
      std::vector<double> sums(static_cast<size_t>(n));
      mul_sum_rows(phi, dphi, n, M, sums.data());
      lin_gemm(false, false, n, D, M, dphi, M, s.W, D, 0.0f, dx, D);
      sub_scaled_rows(dx, sums.data(), xs, n, D);
      break;
    }
  }
  scale_row_to(dx, s.scale, dx, n * D);
  if (s.rotate) rotate_rows(dx, dx, n, D, s.pos0, s.rope, true, s.table);
}

}  // namespace detail

const char* linear_feature_map_name(LinearFeatureMap map) {
  switch (map) {
    case LinearFeatureMap::Elu1:
      return "elu1";
    case LinearFeatureMap::Relu:
      return "relu";
    case LinearFeatureMap::Favor:
      return "favor";
  }
  return "?";
}

const char* linear_rope_name(LinearRope rope) {
  switch (rope) {
    case LinearRope::None:
      return "none";
    case LinearRope::AfterFeatureMap:
      return "after_feature_map";
    case LinearRope::BeforeFeatureMap:
      return "before_feature_map";
  }
  return "?";
}

int64_t linear_feature_dim(LinearFeatureMap map, int64_t head_dim, const Tensor& projection) {
  if (map != LinearFeatureMap::Favor) return head_dim;
  return projection.defined() && projection.dim() == 2 ? projection.size(0) : 0;
}

void linear_attention_features(const Tensor& x, const Tensor& projection, LinearFeatureMap map,
                               float scale, FavorStabilizer stabilizer, Tensor& phi) {
  constexpr const char* op = "linear_attention_features";
  if (x.dim() < 1 || x.dtype() != DType::F32 || !x.is_cpu())
    ROTOR_FAIL("{}: x must be f32 [..., D] on the CPU, got {}", op, x.str());
  const int64_t D = x.size(-1), rows = D > 0 ? x.numel() / D : 0;
  if (map == LinearFeatureMap::Favor) {
    if (!projection.defined() || projection.dtype() != DType::F32 ||
        projection.shape() != Shape{projection.size(0), D} || projection.size(0) < 1 ||
        !projection.is_cpu())
      ROTOR_FAIL("{}: favor needs a projection f32 [M, {}] on the CPU, got {}", op, D,
                 projection.defined() ? projection.str() : "none");
  } else if (projection.defined()) {
    ROTOR_FAIL("{}: feature map {} takes no projection, got {}", op, linear_feature_map_name(map),
               projection.str());
  }
  if (!std::isfinite(scale) || scale < 0.0f)
    ROTOR_FAIL("{}: scale must be finite and >= 0 (0: D^(-1/4)), got {}", op, scale);
  const int64_t M = linear_feature_dim(map, D, projection);
  Shape out_shape = x.shape();
  out_shape.back() = M;
  check_shape(phi, out_shape, "linear_attention_features phi");
  if (phi.dtype() != DType::F32 || !phi.is_cpu())
    ROTOR_FAIL("{}: phi must be f32 on the CPU, got {}", op, phi.str());
  detail::FeatureMapSpec s{map, D, M, scale > 0.0f ? scale : std::pow(float(D), -0.25f),
                           projection.defined() ? projection.data<float>() : nullptr};
  std::vector<float> xs(static_cast<size_t>(rows * D));
  detail::features_forward(s, x.data<float>(), rows, stabilizer, xs.data(), phi.data<float>());
}

Tensor favor_projection(uint64_t seed, uint64_t draw, uint32_t layer, int64_t features, int64_t dim,
                        Device device) {
  // The last 64 draws made are kept (a model asks for the same one per layer
  // every forward until the next redraw): their Gram-Schmidt runs once.
  struct Kept {
    uint64_t seed, draw;
    uint32_t layer;
    int64_t features, dim;
    std::shared_ptr<const std::vector<float>> w;
  };
  static std::mutex mu;
  static std::vector<Kept> kept;  // most recently used first
  std::shared_ptr<const std::vector<float>> w;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < kept.size() && !w; ++i) {
      const Kept& e = kept[i];
      if (e.seed == seed && e.draw == draw && e.layer == layer && e.features == features &&
          e.dim == dim) {
        w = e.w;
        std::rotate(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(i),
                    kept.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      }
    }
  }
  if (!w) {
    w = std::make_shared<const std::vector<float>>(
        favor::projection(seed, draw, layer, features, dim));
    std::lock_guard<std::mutex> lock(mu);
    kept.insert(kept.begin(), Kept{seed, draw, layer, features, dim, w});
    if (kept.size() > 64) kept.pop_back();
  }
  return Tensor::from_floats(*w, {features, dim}, DType::F32, device);
}

}  // namespace rotor::ops
