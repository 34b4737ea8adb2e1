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
//
// On CUDA the products are ops::gemm (cuBLASLt) on r's heads split out, G =
// q r_h^T [Tq, L] per (batch, head) and the per-head vectors scale v_h
// r_h^T [L] and scale k u_h [Tk], and xl_shift_* below move G's rows onto
// the scores' diagonals (the relative shift) and back (kernels/xl_shift.cu;
// detail::xl_bias_*_composed). On the CPU one pass per (batch, head) does
// the same with sgemm and the shift fused.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace rotor::ops {

// q [B, H, Tq, D], k [B, H, Tk, D], r [L, H * D], u, v [H, D], all f32 on
// one device -> bias f32 [B, H, Tq, Tk] (overwritten).
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

namespace detail {
// The device-generic path (products and shift ops) that CUDA runs; on the
// CPU xl_bias_forward / _backward run fused per-(batch, head) loops instead,
// and tests/cpu/test_xl_bias.cpp holds this path to them on the CPU.
void xl_bias_forward_composed(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u,
                              const Tensor& v, float scale, int64_t q_offset, Tensor& bias);
void xl_bias_backward_composed(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u,
                               const Tensor& v, float scale, int64_t q_offset, const Tensor& dbias,
                               Tensor& dq, Tensor& dk, Tensor& dr, Tensor& du, Tensor& dv);
}  // namespace detail

// The relative shift, with base(i) = q_offset + i + Tk - 1 the row of
// distance 0 for query i: g f32 [B, H, Tq, L], gv f32 [H, L], cu f32
// [B, H, Tk] -> bias[b, h, i, j] = g[b, h, i, base(i) - j] + gv[h, base(i)
// - j] + cu[b, h, j] (overwritten), L = q_offset + Tq + Tk - 1.
void xl_shift_forward(const Tensor& g, const Tensor& gv, const Tensor& cu, int64_t q_offset,
                      Tensor& bias);
// Its backward for dbias [B, H, Tq, Tk], all overwritten: dg[b, h, i, l] =
// dbias[b, h, i, base(i) - l] (0 where that key does not exist), dgv[h, l]
// = the sum of dg[., h, ., l] over batch and queries, dcu[b, h, j] = the
// sum of dbias[b, h, ., j] over queries. Sums in double, in a fixed order
// (the same bits on every run).
void xl_shift_backward(const Tensor& dbias, int64_t q_offset, Tensor& dg, Tensor& dgv, Tensor& dcu);

}  // namespace rotor::ops
