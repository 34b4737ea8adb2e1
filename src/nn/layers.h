// Small layers: layer norm, dropout, token embedding, position encodings.
#pragma once

#include <string>

#include "nn/context.h"
#include "nn/kinds.h"
#include "nn/parameters.h"

namespace rotor::nn {

// Layer normalization, or with rms RMSNorm (model.norm_type rms_norm: no
// mean subtracted, no bias; PREFIX.weight only).
class LayerNorm {
 public:
  LayerNorm(ParameterStore& store, const std::string& prefix, int64_t dim, float eps,
            bool rms = false);
  Tensor forward(const Tensor& x, const Context& ctx);  // x [N, dim]
  Tensor backward(const Tensor& dy);                    // -> dx [N, dim]
  // residual + backward(dy) in one pass (ops::layer_norm_backward_add).
  Tensor backward_add(const Tensor& dy, const Tensor& residual);  // -> [N, dim]
  Tensor apply(const Tensor& x, const Context& ctx) const;
  // Drops what forward saved for the backward (activation checkpointing).
  void release() { x_ = mean_ = rstd_ = Tensor(); }

 private:
  // beta's value and gradient: the parameter's, or (RMSNorm) f32 zeros and
  // a scratch gradient on the device of x.
  const Tensor& beta(const Context& ctx) const;
  Tensor& dbeta();

  Parameter *gamma_, *beta_ = nullptr;
  int64_t dim_;
  float eps_;
  bool rms_;
  mutable Tensor zero_beta_, dbeta_scratch_;  // RMSNorm: f32 [dim]
  Tensor x_, mean_, rstd_;                    // saved: x [N, dim]; mean, rstd f32 [N]
};

// Dropout keyed by (layer id, step): the backward regenerates the mask.
class Dropout {
 public:
  Dropout(ParameterStore& store, float p) : p_(p), layer_id_(store.next_layer_id()) {}
  Tensor forward(const Tensor& x, const Context& ctx);
  // residual + forward(x) in one pass (ops::dropout_add_forward); its
  // backward for x is backward(), for residual the identity.
  Tensor forward_add(const Tensor& residual, const Tensor& x, const Context& ctx);
  Tensor backward(const Tensor& dy);
  float p() const { return p_; }

 private:
  float p_;
  uint32_t layer_id_;
  bool active_ = false;
  uint64_t seed_ = 0, stream_ = 0;
};

// Token embedding [V, d], scaled by `scale` on lookup; its pad row stays zero
// and gets no gradient (fairseq).
class Embedding {
 public:
  Embedding(ParameterStore& store, const std::string& name, int64_t vocab, int64_t dim, int pad_id,
            Init init);
  // ids i32 [N] -> [N, dim]
  Tensor forward(const Tensor& ids, const Context& ctx);
  // Accumulates into the table gradient; ids are those of the matching forward.
  void backward(const Tensor& ids, const Tensor& dy);
  Tensor apply(const Tensor& ids, const Context& ctx) const;
  Parameter* table() const { return table_; }
  void set_scale(float s) { scale_ = s; }
  float scale() const { return scale_; }

 private:
  Parameter* table_;
  int pad_id_;
  float scale_ = 1.0f;
};

// The position encoding of a model's embeddings (nn/position.h): adds the
// table of an encoding that adds one -- a parameter (learned) or a fixed one
// (sinusoidal) -- and nothing for the others (RoPE acts inside attention).
class PositionEncoding {
 public:
  PositionEncoding(ParameterStore& store, const std::string& name, PositionKind kind,
                   int64_t max_positions, int64_t dim, double init_std);
  // x [B, T, d] += pos[t + offset] in place.
  void add(Tensor& x, int64_t offset, const Context& ctx) const;
  // Accumulates the learned table's gradient from dx [B, T, d].
  void backward(const Tensor& dx, int64_t offset);
  // Explicit positions (model.position_source visit): x [B, T, d] +=
  // pos[positions[b*T + t]], positions i32 [B*T] on x's device; a position
  // at or beyond max_positions is a rotor::Error. And its backward.
  void add_at(Tensor& x, const Tensor& positions, const Context& ctx) const;
  void backward_at(const Tensor& dx, const Tensor& positions);
  PositionKind kind() const { return kind_; }

 private:
  Tensor rows(int64_t T, int64_t offset, const Context& ctx) const;  // [T, d]
  PositionKind kind_;
  int64_t max_positions_, dim_;
  Parameter* table_ = nullptr;  // a learned table
  Tensor fixed_;                // a fixed table [max_positions, d] on the CPU
};

}  // namespace rotor::nn
