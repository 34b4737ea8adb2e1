// Head layout changes around the attention core, with RoPE fused in
// (docs/design.md, The attention block): the projection output [B, T, P*H*D]
// is split into P <= 3 parts laid out [B, H, T, D]; queries and keys are
// rotated (RoFormer eq. 34 under model.rope's settings, core/rope.h) at
// positions t + position_offset (or at explicit per-token positions) and the
// queries scaled. The backward rotates the
// gradients back. No separate RoPE pass exists.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rope.h"
#include "core/tensor.h"

namespace rotor::ops {

struct SplitHeadsOptions {
  int64_t n_heads = 1;
  int rope_parts = 0;  // the first rope_parts parts are rotated (2: q and k)
  // The rotation's settings; dynamic_ntk is resolved at the call's length
  // position_offset + T (rope::at_length).
  rope::Params rope{};
  int64_t position_offset = 0;
  // Explicit positions, host i32 [B*T] (row b's token t at positions[b*T + t],
  // each >= 0), instead of t + position_offset: BEHRT's visit positions
  // (model.position_source visit). On a GPU the split then runs on the host
  // (copies there and back): correct, not fast.
  const std::vector<int32_t>* positions = nullptr;
  float part0_scale = 1.0f;  // multiplies part 0 after rotation (1/sqrt(D) for queries)
};

// x [B, T, P*H*D] -> parts[p] [B, H, T, D] for p < P = parts.size() (1 to 3),
// all of one floating dtype. RoPE needs an even D and settings
// valid for it (ops/rope_rows.h, check_rope_params).
void split_heads_forward(const Tensor& x, std::vector<Tensor>& parts,
                         const SplitHeadsOptions& options);
// dparts[p] [B, H, T, D] -> dx [B, T, P*H*D] (written).
void split_heads_backward(const std::vector<Tensor>& dparts, Tensor& dx,
                          const SplitHeadsOptions& options);
// x [B, H, T, D] -> y [B, T, H*D], and its transpose.
void merge_heads_forward(const Tensor& x, Tensor& y);
void merge_heads_backward(const Tensor& dy, Tensor& dx);

}  // namespace rotor::ops
