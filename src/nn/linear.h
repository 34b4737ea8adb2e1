// Linear layer y = x W^T + b, W [out, in] as in PyTorch and Hugging Face.
// Several parameters may form one fused layer (the QKV projection,
// docs/design.md, "The attention block"): their weights are registered back to back, so the flat
// buffer holds them as one [sum(out), in] matrix while each keeps its own name.
#pragma once

#include <string>
#include <vector>

#include "nn/context.h"
#include "nn/parameters.h"
#include "ops/gemm.h"

namespace rotor::nn {

class Linear {
 public:
  // One layer: PREFIX.weight [out, in] and PREFIX.bias [out].
  Linear(ParameterStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias,
         Init weight_init, ops::Activation activation = ops::Activation::None);
  // A fused layer over several prefixes with output widths outs.
  Linear(ParameterStore& store, const std::vector<std::string>& prefixes, int64_t in,
         const std::vector<int64_t>& outs, bool bias, Init weight_init);

  // Grouped-query attention (nn/attention.h, model.kv_heads): the layer
  // computes `rows.size()` outputs, output r with stored row rows[r] (weight
  // and bias), so that several outputs share one stored row; the backward adds
  // their gradients into it. out_features() is then rows.size(); weight()
  // and the gradients stay the stored [stored rows, in].
  void share_rows(const std::vector<int32_t>& rows);
  bool has_bias() const { return !biases_.empty(); }

  // x [N, in] -> y [N, out] (the activation applied when configured).
  Tensor forward(const Tensor& x, const Context& ctx);
  // dy [N, out] -> dx [N, in] (undefined when !need_dx); accumulates dW, db.
  Tensor backward(const Tensor& dy, bool need_dx = true);
  // Forward without saving anything (decoding).
  Tensor apply(const Tensor& x, const Context& ctx) const;
  // Drops what forward saved for the backward (activation checkpointing).
  void release() { x_ = pre_ = shared_w_ = Tensor(); }

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return rows_.empty() ? out_ : static_cast<int64_t>(rows_.size()); }
  // The weight and bias as `dtype` (the activations' dtype: the f32 masters or
  // the store's 16-bit copy); their gradients are f32.
  Tensor weight(DType dtype = DType::F32) const {
    return store_->span(weights_, {out_, in_}, false, dtype);
  }
  Tensor weight_grad() const { return store_->span(weights_, {out_, in_}, true); }
  Tensor bias(DType dtype = DType::F32) const {
    return biases_.empty() ? Tensor() : store_->span(biases_, {out_}, false, dtype);
  }
  Tensor bias_grad() const {
    return biases_.empty() ? Tensor() : store_->span(biases_, {out_}, true);
  }

 private:
  ParameterStore* store_;
  std::vector<Parameter*> weights_, biases_;
  int64_t in_, out_;
  ops::Activation activation_;
  Tensor x_, pre_;             // saved for backward: input [N, in] and pre-activation [N, out]
  std::vector<int32_t> rows_;  // share_rows' map (empty: none)
  mutable Tensor rows_index_;  // i32 [out]: rows_ on the parameters' device
  Tensor shared_w_;            // [out, in]: forward's gathered weight, for the backward's dx
  // The weight and bias the GEMM uses: the stored ones, or gathered by rows_.
  Tensor used_weight(DType dtype) const;
  Tensor used_bias(DType dtype) const;
};

}  // namespace rotor::nn
