// Transformer-XL's relative position terms (Dai et al. 2019, eq. 4: terms
// (b), (c) and (d)) as a dense bias of the attention scores, for the
// materialized core (ops::AttentionOptions::score_bias):
//   bias[b, h, i, j] = (q[b, h, i] + scale v[h]) . r[row(i, j), h]
//                      + scale u[h] . k[b, h, j]
// with query i at position q_offset + i, key j at j, and
// row(i, j) = (q_offset + i - j) + (Tk - 1): r holds one projected
// sinusoid per relative distance from -(Tk - 1) to q_offset + Tq - 1
// (L = q_offset + Tq + Tk - 1 rows of H heads of D). q is the already scaled
// query (the layer multiplies it by scale = 1/sqrt(D) in the head split), so
// u and v are scaled here to match. Term (a), q . k, is the core's own.
// CPU only; per (batch, head) GEMMs for the r products.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace rotor::ops {

// q [B, H, Tq, D], k [B, H, Tk, D], r [L, H * D], u, v [H, D], all f32 on
// the CPU -> bias f32 [B, H, Tq, Tk] (overwritten).
void xl_bias_forward(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u,
                     const Tensor& v, float scale, int64_t q_offset, Tensor& bias);
// The gradients of the same for dbias [B, H, Tq, Tk]: added into dq, dk,
// du and dv; written into dr [L, H * D].
void xl_bias_backward(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u,
                      const Tensor& v, float scale, int64_t q_offset, const Tensor& dbias,
                      Tensor& dq, Tensor& dk, Tensor& dr, Tensor& du, Tensor& dv);
// The relative distances' sinusoids: row l is distance l - (Tk - 1), its
// first d/2 columns sin(x w_c), the rest cos(x w_c), w_c = 10000^(-2c/d)
// (the table of Vaswani et al. over signed distances), f32 [L, d] on the CPU.
Tensor xl_distance_table(int64_t rows, int64_t first_distance, int64_t d);

}  // namespace rotor::ops
