#include "nn/tupe.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/cpu_gemm.h"

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
  ROTOR_CHECK(ctx.device.is_cpu(), "model.position tupe runs on the CPU only so far");
  ROTOR_CHECK(T <= max_positions_, "TUPE: {} positions exceed model.max_positions = {}", T,
              max_positions_);
  B_ = B;
  T_ = T;
  const Tensor p = table_->value.narrow(0, T);  // [T, d]
  pq_ = uq_->forward(p, ctx);                   // [T, d]
  pk_ = uk_->forward(p, ctx);                   // [T, d]
  const int64_t H = heads_, D = d_ / heads_;
  const float scale = 1.0f / std::sqrt(2.0f * static_cast<float>(D));
  std::vector<float> c(static_cast<size_t>(H * T * T));  // [H, T, T]
  for (int64_t h = 0; h < H; ++h)
    ops::cpu_sgemm(CblasNoTrans, CblasTrans, static_cast<int>(T), static_cast<int>(T),
                   static_cast<int>(D), scale, pq_.data<float>() + h * D, static_cast<int>(d_),
                   pk_.data<float>() + h * D, static_cast<int>(d_), 0.0f, c.data() + h * T * T,
                   static_cast<int>(T));
  // [CLS] untied: its row theta_1, its column (below it) theta_2.
  const float* theta = cls_->value.data<float>();  // [2, H]
  for (int64_t h = 0; h < H; ++h) {
    float* ch = c.data() + h * T * T;
    for (int64_t j = 0; j < T; ++j) ch[j] = theta[h];
    for (int64_t i = 1; i < T; ++i) ch[i * T] = theta[H + h];
  }
  if (!bias_.defined() || bias_.shape() != Shape{B, H, T, T}) {
    bias_ = Tensor::empty({B, H, T, T});
    bias_grad_ = Tensor::empty({B, H, T, T});
  }
  float* pb = bias_.data<float>();
  for (int64_t b = 0; b < B; ++b) std::copy(c.begin(), c.end(), pb + b * H * T * T);
  bias_grad_.zero_();
}

void TupeBias::backward() {
  ROTOR_CHECK(pq_.defined(), "TUPE: backward before a forward");
  const int64_t H = heads_, D = d_ / heads_, T = T_;
  const float scale = 1.0f / std::sqrt(2.0f * static_cast<float>(D));
  // G_h = sum over the batch of the layers' gradients, in a fixed order.
  std::vector<float> g(static_cast<size_t>(H * T * T), 0.0f);
  const float* pg = bias_grad_.data<float>();
  for (int64_t e = 0; e < H * T * T; ++e) {
    double s = 0.0;
    for (int64_t b = 0; b < B_; ++b) s += pg[b * H * T * T + e];
    g[static_cast<size_t>(e)] = static_cast<float>(s);
  }
  // theta_1 adds one constant to all of [CLS]'s scores, which softmax
  // cancels: its gradient is exactly zero, and it gets none (the round-off
  // it would collect is what Adam turns into steps of ~lr, as for the key
  // bias, nn/attention.cpp). theta_2 gets the sum of [CLS]'s column.
  float* dtheta = cls_->grad.data<float>();
  for (int64_t h = 0; h < H; ++h) {
    float* gh = g.data() + h * T * T;
    double col = 0.0;
    for (int64_t j = 0; j < T; ++j) gh[j] = 0.0f;
    for (int64_t i = 1; i < T; ++i) {
      col += gh[i * T];
      gh[i * T] = 0.0f;
    }
    dtheta[H + h] += static_cast<float>(col);
  }
  // C_h = scale pq_h pk_h^T: dpq_h = scale G_h pk_h, dpk_h = scale G_h^T pq_h.
  Tensor dpq = Tensor::empty({T, d_}), dpk = Tensor::empty({T, d_});  // [T, d] each
  for (int64_t h = 0; h < H; ++h) {
    ops::cpu_sgemm(CblasNoTrans, CblasNoTrans, static_cast<int>(T), static_cast<int>(D),
                   static_cast<int>(T), scale, g.data() + h * T * T, static_cast<int>(T),
                   pk_.data<float>() + h * D, static_cast<int>(d_), 0.0f, dpq.data<float>() + h * D,
                   static_cast<int>(d_));
    ops::cpu_sgemm(CblasTrans, CblasNoTrans, static_cast<int>(T), static_cast<int>(D),
                   static_cast<int>(T), scale, g.data() + h * T * T, static_cast<int>(T),
                   pq_.data<float>() + h * D, static_cast<int>(d_), 0.0f, dpk.data<float>() + h * D,
                   static_cast<int>(d_));
  }
  const Tensor dp_q = uq_->backward(dpq), dp_k = uk_->backward(dpk);  // [T, d] each
  float* dtable = table_->grad.data<float>();
  const float* a = dp_q.data<float>();
  const float* b = dp_k.data<float>();
  for (int64_t e = 0; e < T * d_; ++e) dtable[e] += a[e] + b[e];
  pq_ = pk_ = Tensor();
}

}  // namespace rotor::nn
