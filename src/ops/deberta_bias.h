// DeBERTa's disentangled attention terms (He et al. 2021, eq. 4 with
// DeBERTa-v2's shared projections) as a dense bias of the attention scores,
// for the materialized core (ops::AttentionOptions::score_bias):
//   bias[b, h, i, j] = q[b, h, i] . kr[row(i, j), h]          (content-to-position)
//                      + scale k[b, h, j] . qr[row(i, j), h]  (position-to-content)
// row(i, j) from `rows` (i32 [Tq, Tk], core/deberta_bias.h), kr and qr the
// layer's key and query projections of the shared relative embeddings
// [S, H * D]. q is the already scaled query (1/sqrt(3 D), the head split),
// so scale = 1/sqrt(3 D) makes the position-to-content term match. Term
// (a), q . k, is the core's own. CPU only; per (batch, head) GEMMs.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace rotor::ops {

// q [B, H, Tq, D], k [B, H, Tk, D], kr, qr [S, H * D], f32 on the CPU ->
// bias f32 [B, H, Tq, Tk] (overwritten).
void deberta_bias_forward(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                          const std::vector<int32_t>& rows, float scale, Tensor& bias);
// The gradients for dbias [B, H, Tq, Tk]: added into dq and dk; written
// into dkr and dqr [S, H * D] (summed over the batch in a fixed order).
void deberta_bias_backward(const Tensor& q, const Tensor& k, const Tensor& kr, const Tensor& qr,
                           const std::vector<int32_t>& rows, float scale, const Tensor& dbias,
                           Tensor& dq, Tensor& dk, Tensor& dkr, Tensor& dqr);

}  // namespace rotor::ops
