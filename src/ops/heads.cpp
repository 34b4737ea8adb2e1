#include "ops/heads.h"

#include <cmath>

#include "ops/cpu_f32.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {

struct Dims {
  int64_t B, T, P, H, D;
};

Dims check_split(const Tensor& x, const std::vector<Tensor>& parts, const SplitHeadsOptions& o,
                 const char* what) {
  ROTOR_CHECK(x.dim() == 3, "{}: x must be [B, T, P*H*D], got {}", what, x.str());
  ROTOR_CHECK(!parts.empty() && o.n_heads > 0, "{}: no parts or heads", what);
  Dims d{x.size(0), x.size(1), static_cast<int64_t>(parts.size()), o.n_heads, 0};
  ROTOR_CHECK(x.size(2) % (d.P * d.H) == 0, "{}: width {} not divisible by {} parts x {} heads",
              what, x.size(2), d.P, d.H);
  d.D = x.size(2) / (d.P * d.H);
  ROTOR_CHECK(o.rotary_parts == 0 || d.D % 2 == 0, "{}: RoPE needs an even head dim, got {}", what,
              d.D);
  ROTOR_CHECK(o.rotary_parts <= d.P, "{}: {} rotary parts of {}", what, o.rotary_parts, d.P);
  for (const Tensor& p : parts) {
    check_shape(p, {d.B, d.H, d.T, d.D}, what);
    ROTOR_CHECK(p.dtype() == x.dtype() && p.device() == x.device(), "{}: part {} vs x {}", what,
                p.str(), x.str());
  }
  return d;
}

// cos/sin of (t + offset) * theta_i for t < T, i < D/2, angles in double.
void rope_table(int64_t T, int64_t D, float base, int64_t offset, std::vector<float>& cos_t,
                std::vector<float>& sin_t) {
  int64_t half = D / 2;
  cos_t.resize(static_cast<size_t>(T * half));
  sin_t.resize(cos_t.size());
  for (int64_t i = 0; i < half; ++i) {
    double theta = std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / D);
    for (int64_t t = 0; t < T; ++t) {
      double angle = static_cast<double>(t + offset) * theta;
      cos_t[t * half + i] = static_cast<float>(std::cos(angle));
      sin_t[t * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

}  // namespace

void split_heads_forward(const Tensor& x, std::vector<Tensor>& parts, const SplitHeadsOptions& o) {
  Dims d = check_split(x, parts, o, "split_heads_forward");
  ROTOR_DISPATCH_CUDA(x, split_heads_forward(x, parts, o));
  if (detail::F32Compute::needed({&x})) {
    detail::F32Compute f;
    std::vector<Tensor> parts32;
    for (Tensor& p : parts) parts32.push_back(f.output(p));
    split_heads_forward(f.input(x), parts32, o);
    f.commit();
    return;
  }
  require_f32(x, "split_heads_forward");
  std::vector<float> cos_t, sin_t;
  if (o.rotary_parts > 0) rope_table(d.T, d.D, o.rope_base, o.position_offset, cos_t, sin_t);
  const float* xp = x.data<float>();
  const int64_t half = d.D / 2;
  for (int64_t p = 0; p < d.P; ++p) {
    float* out = parts[static_cast<size_t>(p)].data<float>();
    const bool rotate = p < o.rotary_parts;
    const float s = p == 0 ? o.part0_scale : 1.0f;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < d.B; ++b) {
      for (int64_t h = 0; h < d.H; ++h) {
        for (int64_t t = 0; t < d.T; ++t) {
          const float* src = xp + (((b * d.T + t) * d.P + p) * d.H + h) * d.D;  // [B,T,P,H,D]
          float* dst = out + ((b * d.H + h) * d.T + t) * d.D;                   // [B,H,T,D]
          if (!rotate) {
            for (int64_t i = 0; i < d.D; ++i) dst[i] = src[i] * s;
            continue;
          }
          for (int64_t i = 0; i < half; ++i) {
            float c = cos_t[t * half + i], sn = sin_t[t * half + i];
            float x0 = src[2 * i], x1 = src[2 * i + 1];
            dst[2 * i] = (x0 * c - x1 * sn) * s;
            dst[2 * i + 1] = (x1 * c + x0 * sn) * s;
          }
        }
      }
    }
  }
}

void split_heads_backward(const std::vector<Tensor>& dparts, Tensor& dx,
                          const SplitHeadsOptions& o) {
  Dims d = check_split(dx, dparts, o, "split_heads_backward");
  ROTOR_DISPATCH_CUDA(dx, split_heads_backward(dparts, dx, o));
  if (detail::F32Compute::needed({&dx})) {
    detail::F32Compute f;
    std::vector<Tensor> dparts32;
    for (const Tensor& p : dparts) dparts32.push_back(f.input(p));
    Tensor dx32 = f.output(dx);
    split_heads_backward(dparts32, dx32, o);
    f.commit();
    return;
  }
  require_f32(dx, "split_heads_backward");
  std::vector<float> cos_t, sin_t;
  if (o.rotary_parts > 0) rope_table(d.T, d.D, o.rope_base, o.position_offset, cos_t, sin_t);
  float* dxp = dx.data<float>();
  const int64_t half = d.D / 2;
  for (int64_t p = 0; p < d.P; ++p) {
    const float* g = dparts[static_cast<size_t>(p)].data<float>();
    const bool rotate = p < o.rotary_parts;
    const float s = p == 0 ? o.part0_scale : 1.0f;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < d.B; ++b) {
      for (int64_t h = 0; h < d.H; ++h) {
        for (int64_t t = 0; t < d.T; ++t) {
          const float* src = g + ((b * d.H + h) * d.T + t) * d.D;
          float* dst = dxp + (((b * d.T + t) * d.P + p) * d.H + h) * d.D;
          if (!rotate) {
            for (int64_t i = 0; i < d.D; ++i) dst[i] = src[i] * s;
            continue;
          }
          // The rotation is orthogonal: its transpose rotates by -m theta.
          for (int64_t i = 0; i < half; ++i) {
            float c = cos_t[t * half + i], sn = sin_t[t * half + i];
            float g0 = src[2 * i] * s, g1 = src[2 * i + 1] * s;
            dst[2 * i] = g0 * c + g1 * sn;
            dst[2 * i + 1] = g1 * c - g0 * sn;
          }
        }
      }
    }
  }
}

namespace {
// [B, H, T, D] <-> [B, T, H, D]: the merge and its transpose are one permutation.
void permute_heads(const float* src, float* dst, int64_t B, int64_t H, int64_t T, int64_t D,
                   bool merge) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t split = ((b * H + h) * T + t) * D, merged = ((b * T + t) * H + h) * D;
        const float* from = src + (merge ? split : merged);
        float* to = dst + (merge ? merged : split);
        for (int64_t i = 0; i < D; ++i) to[i] = from[i];
      }
}
}  // namespace

void merge_heads_forward(const Tensor& x, Tensor& y) {
  ROTOR_CHECK(x.dim() == 4, "merge_heads_forward: x must be [B, H, T, D], got {}", x.str());
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), D = x.size(3);
  check_shape(y, {B, T, H * D}, "merge_heads_forward");
  ROTOR_DISPATCH_CUDA(x, merge_heads_forward(x, y));
  if (detail::F32Compute::needed({&x})) {
    detail::F32Compute f;
    Tensor y32 = f.output(y);
    merge_heads_forward(f.input(x), y32);
    f.commit();
    return;
  }
  require_f32(x, "merge_heads_forward");
  permute_heads(x.data<float>(), y.data<float>(), B, H, T, D, true);
}

void merge_heads_backward(const Tensor& dy, Tensor& dx) {
  ROTOR_CHECK(dx.dim() == 4, "merge_heads_backward: dx must be [B, H, T, D], got {}", dx.str());
  const int64_t B = dx.size(0), H = dx.size(1), T = dx.size(2), D = dx.size(3);
  check_shape(dy, {B, T, H * D}, "merge_heads_backward");
  ROTOR_DISPATCH_CUDA(dy, merge_heads_backward(dy, dx));
  if (detail::F32Compute::needed({&dy})) {
    detail::F32Compute f;
    Tensor dx32 = f.output(dx);
    merge_heads_backward(f.input(dy), dx32);
    f.commit();
    return;
  }
  require_f32(dy, "merge_heads_backward");
  permute_heads(dy.data<float>(), dx.data<float>(), B, H, T, D, false);
}

}  // namespace rotor::ops
