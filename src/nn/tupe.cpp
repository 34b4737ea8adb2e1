#include "nn/tupe.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/heads.h"
#include "ops/reduce.h"
#include "ops/tupe_cls.h"

namespace rotor::nn {

TupeBias::TupeBias(ParameterStore& store, const std::string& prefix, int64_t max_positions,
                   int64_t d, int64_t heads, double init_std)
    : max_positions_(max_positions), d_(d), heads_(heads) {
  ROTOR_CHECK(heads > 0 && d % heads == 0, "TUPE: {} heads do not divide d_model {}", heads, d);
  table_ =
      store.add(prefix + ".position_embeddings.weight", {max_positions, d}, Init::normal(init_std));
  uq_ = std::make_unique<Linear>(store, prefix + ".q_proj", d, d, false, Init::normal(init_std));
  uk_ = std::make_unique<Linear>(store, prefix + ".k_proj", d, d, false, Init::normal(init_std));
  cls_ = store.add(prefix + ".cls", {2, heads}, Init::zeros(), true);
}

void TupeBias::prepare(int64_t B, int64_t T, const Context& ctx) {
  ROTOR_CHECK(T <= max_positions_, "TUPE: {} positions exceed model.max_positions = {}", T,
              max_positions_);
  B_ = B;
  T_ = T;
  // The correlation does not depend on the input: it computes in f32 from
  // the f32 masters whatever the activations' dtype (fp16/bf16 training too).
  Context c32 = ctx;
  c32.dtype = DType::F32;
  const Tensor p = table_->value.narrow(0, T);  // [T, d]
  pq_ = uq_->forward(p, c32);                   // f32 [T, d]
  pk_ = uk_->forward(p, c32);                   // f32 [T, d]
  const int64_t H = heads_, D = d_ / heads_;
  const Device dev = pq_.device();
  // C_h = pq_h pk_h^T / sqrt(2 D): the heads split out, one batched product.
  pqh_ = Tensor::empty({1, H, T, D}, DType::F32, dev);  // [1, H, T, D]
  pkh_ = Tensor::empty({1, H, T, D}, DType::F32, dev);  // [1, H, T, D]
  ops::merge_heads_backward(pq_.view({1, T, d_}), pqh_);
  ops::merge_heads_backward(pk_.view({1, T, d_}), pkh_);
  Tensor c = Tensor::empty({1, H, T, T}, DType::F32, dev);  // [1, H, T, T]
  ops::GemmOptions o;
  o.trans_b = true;
  o.alpha = scale();
  ops::gemm(pqh_, pkh_, c, o);
  // [CLS] untied: its row theta_1, its column (below it) theta_2.
  Tensor c3 = c.view({H, T, T});  // [H, T, T]
  ops::tupe_untie_cls(c3, cls_->value);
  if (!bias_.defined() || bias_.shape() != Shape{B, H, T, T} || bias_.device() != dev) {
    bias_ = Tensor::empty({B, H, T, T}, DType::F32, dev);       // [B, H, T, T]
    bias_grad_ = Tensor::empty({B, H, T, T}, DType::F32, dev);  // [B, H, T, T]
  }
  for (int64_t b = 0; b < B; ++b) {
    Tensor row = bias_.narrow(b, 1);  // [1, H, T, T]
    row.copy_from(c);
  }
  bias_grad_.zero_();
}

void TupeBias::backward() {
  ROTOR_CHECK(pq_.defined(), "TUPE: backward before a forward");
  const int64_t H = heads_, D = d_ / heads_, T = T_;
  const Device dev = pq_.device();
  // G_h = sum over the batch of the layers' gradients.
  Tensor g = Tensor::empty({1, H, T, T}, DType::F32, dev);  // [1, H, T, T]
  Tensor flat = g.view({H * T * T});                        // [H T T]
  ops::sum_rows(bias_grad_.view({B_, H * T * T}), flat, false);
  // theta_2 gets the sum of [CLS]'s column; theta_1 none (softmax cancels
  // it: its gradient is exactly zero, and the round-off it would collect is
  // what Adam turns into steps of ~lr, as for the key bias,
  // nn/attention.cpp). The positions get neither row nor column.
  Tensor g3 = g.view({H, T, T});  // [H, T, T]
  ops::tupe_untie_cls_backward(g3, cls_->grad);
  // dpq_h = scale G_h pk_h, dpk_h = scale G_h^T pq_h, the heads merged back.
  Tensor dpqh = Tensor::empty({1, H, T, D}, DType::F32, dev);  // [1, H, T, D]
  Tensor dpkh = Tensor::empty({1, H, T, D}, DType::F32, dev);  // [1, H, T, D]
  ops::GemmOptions a;
  a.alpha = scale();
  ops::gemm(g, pkh_, dpqh, a);
  a.trans_a = true;
  ops::gemm(g, pqh_, dpkh, a);
  Tensor dpq = Tensor::empty({1, T, d_}, DType::F32, dev);  // [1, T, d]
  Tensor dpk = Tensor::empty({1, T, d_}, DType::F32, dev);  // [1, T, d]
  ops::merge_heads_forward(dpqh, dpq);
  ops::merge_heads_forward(dpkh, dpk);
  const Tensor dp_q = uq_->backward(dpq.view({T, d_}));   // [T, d]
  const Tensor dp_k = uk_->backward(dpk.view({T, d_}));   // [T, d]
  Tensor both = Tensor::empty({T, d_}, DType::F32, dev);  // [T, d]: dp_q + dp_k
  ops::add(dp_q, dp_k, both);
  Tensor rows = table_->grad.narrow(0, T);  // [T, d]
  ops::add(rows, both, rows);
  pq_ = pk_ = pqh_ = pkh_ = Tensor();
}

}  // namespace rotor::nn
