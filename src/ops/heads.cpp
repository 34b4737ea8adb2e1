// CPU head split with RoPE fused in, and the head merge. The rotation's
// arithmetic is core/rope.h, shared with kernels/heads.cu.
#include "ops/heads.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "core/rope.h"
#include "ops/cpu_f32.h"
#include "ops/cpu_rows.h"
#include "ops/dispatch.h"
#include "ops/rope_rows.h"

namespace rotor::ops {

namespace {

struct Dims {
  int64_t B, T, P, H, D;
};

// packed [B, T, P*H*D] and parts[p] [B, H, T, D]: one floating dtype, one device.
Dims check_split(const Tensor& packed, const std::vector<Tensor>& parts, const SplitHeadsOptions& o,
                 const char* op) {
  if (packed.dim() != 3) ROTOR_FAIL("{}: expected [B, T, P*H*D], got {}", op, packed.str());
  require_floating(packed, op);
  // kernels/heads.cu passes at most three part pointers (q, k, v).
  if (parts.empty() || parts.size() > 3)
    ROTOR_FAIL("{}: 1 to 3 parts (q, k, v), got {}", op, parts.size());
  if (o.n_heads <= 0) ROTOR_FAIL("{}: n_heads must be > 0, got {}", op, o.n_heads);
  Dims d{packed.size(0), packed.size(1), static_cast<int64_t>(parts.size()), o.n_heads, 0};
  if (packed.size(2) % (d.P * d.H) != 0)
    ROTOR_FAIL("{}: width {} is not divisible by {} parts x {} heads", op, packed.size(2), d.P,
               d.H);
  d.D = packed.size(2) / (d.P * d.H);
  if (o.rope_parts < 0 || o.rope_parts > d.P)
    ROTOR_FAIL("{}: rope_parts must be in [0, {}], got {}", op, d.P, o.rope_parts);
  if (o.rope_parts > 0 && d.D % 2 != 0)
    ROTOR_FAIL("{}: RoPE rotates pairs and needs an even head dim, got {}", op, d.D);
  if (o.rope_parts > 0) check_rope_params(o.rope, d.D, op);
  if (o.positions) {
    if (static_cast<int64_t>(o.positions->size()) != d.B * packed.size(1))
      ROTOR_FAIL("{}: {} explicit positions for [B, T] = [{}, {}]", op, o.positions->size(), d.B,
                 packed.size(1));
    for (int32_t p : *o.positions)
      if (p < 0) ROTOR_FAIL("{}: negative explicit position {}", op, p);
  }
  for (const Tensor& p : parts) {
    check_shape(p, {d.B, d.H, d.T, d.D}, op);
    if (p.dtype() != packed.dtype())
      ROTOR_FAIL("{}: part {} differs in dtype from {}", op, p.str(), packed.str());
    check_same_device(p, packed, op);
  }
  return d;
}

// cos/sin of every (position, i): [P, R/2], shared by all batch rows, heads
// and parts; positions t + position_offset for t < T, or 0..max of the
// explicit positions (the length dynamic scaling sees: 1 + the largest).
std::shared_ptr<const std::vector<rope::Rotation>> rotation_table(const Dims& d,
                                                                  const SplitHeadsOptions& o) {
  if (!o.positions) return shared_rope_table(o.rope, d.D, o.position_offset, d.T);
  const int64_t rows = 1 + *std::max_element(o.positions->begin(), o.positions->end());
  return shared_rope_table(o.rope, d.D, 0, rows);
}

// The row of the rotation table of token t of row b.
inline int64_t row_position(const SplitHeadsOptions& o, int64_t b, int64_t t, int64_t T) {
  return o.positions ? (*o.positions)[static_cast<size_t>(b * T + t)] : t;
}

// Calls f(p, packed, split, rotations, scale) for every head row (b, t, p, h):
// its offsets in [B, T, P, H, D] and in [B, H, T, D], the rotations of its
// position ([R/2], ops/rope_rows.h: shared by all batch rows, heads and
// parts; null when part p is not rotated) and its scale. The order follows
// the side that is written: part by part in [B, H, T, D] order (the split),
// or with packed_order whole [P, H, D] rows of [B, T, P, H, D] at a time
// (its transpose), so that each thread's stores run on contiguously.
template <class F>
void for_each_head_row(const Dims& d, const SplitHeadsOptions& o, bool packed_order, F f) {
  const auto shared = o.rope_parts > 0 ? rotation_table(d, o) : nullptr;
  const rope::Rotation* table = shared ? shared->data() : nullptr;
  const int64_t half = rope::rotated_dims(o.rope, d.D) / 2;
  const auto row = [&](int64_t b, int64_t t, int64_t p, int64_t h) {
    const float s = p == 0 ? o.part0_scale : 1.0f;
    f(p, (((b * d.T + t) * d.P + p) * d.H + h) * d.D, ((b * d.H + h) * d.T + t) * d.D,
      p < o.rope_parts ? table + row_position(o, b, t, d.T) * half : nullptr, s);
  };
  if (packed_order) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t t = 0; t < d.T; ++t)
        for (int64_t p = 0; p < d.P; ++p)
          for (int64_t h = 0; h < d.H; ++h) row(b, t, p, h);
    return;
  }
  for (int64_t p = 0; p < d.P; ++p) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t h = 0; h < d.H; ++h)
        for (int64_t t = 0; t < d.T; ++t) row(b, t, p, h);
  }
}

// The f32 head split: x [B, T, P, H, D] -> parts[p] [B, H, T, D].
void split_f32(const Tensor& x, std::vector<Tensor>& parts, const Dims& d,
               const SplitHeadsOptions& o) {
  const float* xp = x.data<float>();
  std::vector<float*> out;
  for (Tensor& p : parts) out.push_back(p.data<float>());
  for_each_head_row(
      d, o, false, [&](int64_t p, int64_t packed, int64_t split, const rope::Rotation* r, float s) {
        const float* src = xp + packed;
        float* dst = out[static_cast<size_t>(p)] + split;
        if (!r) {
          detail::scale_row_to(src, s, dst, d.D);
          return;
        }
        // rope_row's bits (past R: copied) in vector loops, then the scale.
        rope_rows(o.rope, d.D, r, src, dst, 1, false);
        if (s != 1.0f) detail::scale_row_to(dst, s, dst, d.D);
      });
}

// The f32 transpose: dparts[p] [B, H, T, D] -> dx [B, T, P, H, D].
void split_back_f32(const std::vector<Tensor>& dparts, Tensor& dx, const Dims& d,
                    const SplitHeadsOptions& o) {
  float* dxp = dx.data<float>();
  std::vector<const float*> in;
  for (const Tensor& p : dparts) in.push_back(p.data<float>());
  for_each_head_row(
      d, o, true, [&](int64_t p, int64_t packed, int64_t split, const rope::Rotation* r, float s) {
        const float* src = in[static_cast<size_t>(p)] + split;
        float* dst = dxp + packed;
        if (!r) {
          detail::scale_row_to(src, s, dst, d.D);
          return;
        }
        // The scale, then rope_row's transpose (past R: copied) in vector loops.
        if (s != 1.0f) {
          detail::scale_row_to(src, s, dst, d.D);
          src = dst;
        }
        rope_rows(o.rope, d.D, r, src, dst, 1, true);
      });
}

// [B, H, T, D] <-> [B, T, H, D]: the merge and its transpose are one
// permutation; `split` is the [B, H, T, D] shape.
void permute_heads(const Tensor& src16, Tensor& dst16, const Shape& split, bool merge) {
  const int64_t B = split[0], H = split[1], T = split[2], D = split[3];
  detail::F32Compute f;
  const Tensor src = f.input(src16);
  Tensor dst = f.output(dst16);
  const float* from_p = src.data<float>();
  float* to_p = dst.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t at_split = ((b * H + h) * T + t) * D, at_merged = ((b * T + t) * H + h) * D;
        const float* from = from_p + (merge ? at_split : at_merged);
        float* to = to_p + (merge ? at_merged : at_split);
        for (int64_t i = 0; i < D; ++i) to[i] = from[i];
      }
  f.commit();
}

// split [B, H, T, D] and merged [B, T, H*D]: one floating dtype, one device.
void check_merge(const Tensor& split, const Tensor& merged, const char* op) {
  if (split.dim() != 4) ROTOR_FAIL("{}: expected heads [B, H, T, D], got {}", op, split.str());
  require_floating(split, op);
  check_shape(merged, {split.size(0), split.size(2), split.size(1) * split.size(3)}, op);
  if (merged.dtype() != split.dtype())
    ROTOR_FAIL("{}: {} differs in dtype from {}", op, merged.str(), split.str());
  check_same_device(merged, split, op);
}

}  // namespace

void split_heads_forward(const Tensor& x, std::vector<Tensor>& parts, const SplitHeadsOptions& o) {
  const Dims d = check_split(x, parts, o, "split_heads_forward");
  if (o.positions && !x.device().is_cpu()) {
    // Explicit positions: on the host, then back (see heads.h).
    std::vector<Tensor> host;
    for (const Tensor& p : parts)
      host.push_back(Tensor::empty(p.shape(), p.dtype(), Device::cpu()));
    split_heads_forward(x.to(Device::cpu()), host, o);
    for (size_t i = 0; i < parts.size(); ++i) parts[i].copy_from(host[i]);
    return;
  }
  ROTOR_DISPATCH_CUDA(x, split_heads_forward(x, parts, o));
  detail::F32Compute f;
  std::vector<Tensor> parts32;
  for (Tensor& p : parts) parts32.push_back(f.output(p));
  split_f32(f.input(x), parts32, d, o);
  f.commit();
}

void split_heads_backward(const std::vector<Tensor>& dparts, Tensor& dx,
                          const SplitHeadsOptions& o) {
  const Dims d = check_split(dx, dparts, o, "split_heads_backward");
  if (o.positions && !dx.device().is_cpu()) {
    std::vector<Tensor> host;
    for (const Tensor& p : dparts) host.push_back(p.to(Device::cpu()));
    Tensor dx_host = Tensor::empty(dx.shape(), dx.dtype(), Device::cpu());
    split_heads_backward(host, dx_host, o);
    dx.copy_from(dx_host);
    return;
  }
  ROTOR_DISPATCH_CUDA(dx, split_heads_backward(dparts, dx, o));
  detail::F32Compute f;
  std::vector<Tensor> dparts32;
  for (const Tensor& p : dparts) dparts32.push_back(f.input(p));
  Tensor dx32 = f.output(dx);
  split_back_f32(dparts32, dx32, d, o);
  f.commit();
}

void merge_heads_forward(const Tensor& x, Tensor& y) {
  check_merge(x, y, "merge_heads_forward");
  ROTOR_DISPATCH_CUDA(x, merge_heads_forward(x, y));
  permute_heads(x, y, x.shape(), true);
}

void merge_heads_backward(const Tensor& dy, Tensor& dx) {
  check_merge(dx, dy, "merge_heads_backward");
  ROTOR_DISPATCH_CUDA(dy, merge_heads_backward(dy, dx));
  permute_heads(dy, dx, dx.shape(), false);
}

}  // namespace rotor::ops
