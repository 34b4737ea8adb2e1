// DeBERTa's disentangled attention terms (He et al. 2021, eq. 4 with
// DeBERTa-v2's shared projections) as a dense bias of the attention scores,
// for the materialized core (ops::AttentionOptions::score_bias):
//   bias[b, h, i, j] = q[b, h, i] . kr[row(i, j), h]          (content-to-position)
//                      + scale k[b, h, j] . qr[row(i, j), h]  (position-to-content)
// row(i, j) from `rows` (i32 [Tq, Tk], core/deberta_bias.h), kr and qr the
// layer's key and query projections of the shared relative embeddings
// [S, H * D]. q is the already scaled query (1/sqrt(3 D), the head split),
// so scale = 1/sqrt(3 D) makes the position-to-content term match. Term
// (a), q . k, is the core's own.
//
// On CUDA the products C2P = q kr_h^T [Tq, S] and P2C = k qr_h^T [Tk, S]
// per (batch, head) are ops::gemm (cuBLASLt) on kr's and qr's heads split
// out; deberta_gather picks each score's row out of them and
// deberta_scatter sums the scores' gradients back into rows
// (kernels/deberta_rows.cu; detail::deberta_bias_*_composed). On the CPU
// one pass per (batch, head) does the same with sgemm and the rows fused.
#pragma once

#include "core/tensor.h"

namespace rotor::ops {

// q [B, H, Tq, D], k [B, H, Tk, D], kr, qr [S, H * D], f32, and rows i32
// [Tq, Tk] (each in [0, S)), all on one device -> bias f32 [B, H, Tq, Tk]
// (overwritten).
void deberta_bias_forward(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                          const Tensor& rows, float scale, Tensor& bias);
// The gradients for dbias [B, H, Tq, Tk]: added into dq and dk; written
// into dkr and dqr [S, H * D].
void deberta_bias_backward(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                           const Tensor& rows, float scale, const Tensor& dbias, Tensor& dq,
                           Tensor& dk, Tensor& dkr, Tensor& dqr);

namespace detail {
// The device-generic path (products, gather and scatter) that CUDA runs; on
// the CPU deberta_bias_forward / _backward run fused per-(batch, head)
// loops instead, and tests/cpu/test_deberta_bias.cpp holds this path to
// them on the CPU.
void deberta_bias_forward_composed(const Tensor& q, const Tensor& k, const Tensor& kr,
                                   const Tensor& qr, const Tensor& rows, float scale, Tensor& bias);
void deberta_bias_backward_composed(const Tensor& q, const Tensor& k, const Tensor& kr,
                                    const Tensor& qr, const Tensor& rows, float scale,
                                    const Tensor& dbias, Tensor& dq, Tensor& dk, Tensor& dkr,
                                    Tensor& dqr);
}  // namespace detail

// bias[bh, i, j] = c2p[bh, i, r] + scale p2c[bh, j, r], r = rows[i, j]:
// c2p f32 [B, H, Tq, S], p2c f32 [B, H, Tk, S], bias f32 [B, H, Tq, Tk].
void deberta_gather(const Tensor& c2p, const Tensor& p2c, const Tensor& rows, float scale,
                    Tensor& bias);
// Its backward, both outputs overwritten: dc2p[bh, i, s] = the sum of
// dbias[bh, i, j] over the keys j with rows[i, j] = s (j increasing);
// dp2c[bh, j, s] = the sum of scale dbias[bh, i, j] over the queries i with
// rows[i, j] = s (i increasing). The same bits on every device.
void deberta_scatter(const Tensor& dbias, const Tensor& rows, float scale, Tensor& dc2p,
                     Tensor& dp2c);

}  // namespace rotor::ops
