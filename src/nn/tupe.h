// TUPE's untied positional correlation (Ke, He & Liu 2021, "Rethinking
// Positional Encoding in Language Pre-training"; model.position tupe): the
// positions do not enter the token embeddings; instead every layer's score
// of query i and key j adds
//   (p_i U^Q)_h . (p_j U^K)_h / sqrt(2 D)
// for head h, with p a learned table of absolute positions and U^Q, U^K
// projections of their own (the content term is scaled by 1/sqrt(2 D) too,
// nn::MultiHeadAttentionOptions::tupe). The term does not depend on the
// input, so the model computes it once per forward and every layer adds it,
// as the authors' implementation does. The [CLS] token (position 0 in every
// task that builds the BERT encoder) is untied from the positions: its row
// (what [CLS] attends to) takes a learned scalar theta_1 per head, and its
// column (what attends to [CLS]) theta_2. theta_1 shifts all of a row's
// scores alike, which softmax cancels: it is kept, as the paper has it, with
// a gradient of exactly zero.
//
// The layers receive it as the materialized core's dense bias [B, H, T, T]
// (ops::AttentionOptions::score_bias) and add their gradients of it into
// bias_grad(); backward() then carries the sum to p, U^Q, U^K and theta.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "nn/context.h"
#include "nn/linear.h"
#include "nn/parameters.h"

namespace rotor::nn {

class TupeBias {
 public:
  // Registers PREFIX.position_embeddings.weight [max_positions, d],
  // PREFIX.q_proj.weight and PREFIX.k_proj.weight [d, d] and PREFIX.cls
  // [2, heads] (theta_1, theta_2).
  TupeBias(ParameterStore& store, const std::string& prefix, int64_t max_positions, int64_t d,
           int64_t heads, double init_std);
  // The correlations of positions 0..T-1 as bias() [B, H, T, T] in f32 on
  // the model's device, and bias_grad() zeroed: once per forward, before the
  // layers.
  void prepare(int64_t B, int64_t T, const Context& ctx);
  const Tensor& bias() const { return bias_; }
  Tensor& bias_grad() { return bias_grad_; }
  // After the layers' backward: the gradients of p (rows 0..T-1), U^Q, U^K
  // and theta from bias_grad().
  void backward();

 private:
  int64_t max_positions_, d_, heads_;
  Parameter* table_;
  std::unique_ptr<Linear> uq_, uk_;
  Parameter* cls_;
  Tensor pq_, pk_;           // saved: p U^Q^T and p U^K^T, [T, d]
  Tensor pqh_, pkh_;         // the same split into heads, [1, H, T, D]
  Tensor bias_, bias_grad_;  // f32 [B, H, T, T]
  int64_t B_ = 0, T_ = 0;
  // The correlation's 1/sqrt(2 D).
  float scale() const { return 1.0f / std::sqrt(2.0f * static_cast<float>(d_ / heads_)); }
};

}  // namespace rotor::nn
