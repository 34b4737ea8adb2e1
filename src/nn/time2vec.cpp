#include "nn/time2vec.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace rotor::nn {

Time2Vec::Time2Vec(ParameterStore& store, const std::string& name, int64_t k, int64_t age_range,
                   int64_t dim, double init_std)
    : k_(k), age_range_(age_range) {
  ROTOR_CHECK(k >= 1 && age_range >= 1, "Time2Vec: {} periodic terms, age range {}", k, age_range);
  w_ = store.add(name + ".weight", {k + 1}, Init::normal(2 * std::numbers::pi), true);
  b_ = store.add(name + ".bias", {k + 1}, Init::uniform(std::numbers::pi), true);
  projection_ = std::make_unique<Linear>(store, name + ".projection", k + 1, dim, true,
                                         Init::normal(init_std));
}

Tensor Time2Vec::forward(const Tensor& ages, const Context& ctx) {
  const std::vector<int32_t> ids = ages.to_ints();
  const std::vector<float> w = w_->value.to_floats(), b = b_->value.to_floats();
  const size_t n = ids.size(), m = static_cast<size_t>(k_ + 1);
  tau_.resize(n);
  std::vector<float> f(n * m);
  for (size_t t = 0; t < n; ++t) {
    const float tau = static_cast<float>(ids[t]) / static_cast<float>(age_range_);
    tau_[t] = tau;
    f[t * m] = w[0] * tau + b[0];
    for (size_t i = 1; i < m; ++i) f[t * m + i] = std::sin(w[i] * tau + b[i]);
  }
  const Tensor features =  // [N, k + 1]
      Tensor::from_floats(f, {static_cast<int64_t>(n), k_ + 1}, ctx.dtype, ctx.device);
  return projection_->forward(features, ctx);  // [N, dim]
}

void Time2Vec::backward(const Tensor& dy) {
  const std::vector<float> df = projection_->backward(dy).to_floats();  // [N, k + 1]
  const std::vector<float> w = w_->value.to_floats(), b = b_->value.to_floats();
  std::vector<float> gw = w_->grad.to_floats(), gb = b_->grad.to_floats();
  const size_t m = static_cast<size_t>(k_ + 1);
  ROTOR_CHECK(df.size() == tau_.size() * m, "Time2Vec backward: {} gradients for {} ages",
              df.size(), tau_.size());
  std::vector<double> sw(m, 0.0), sb(m, 0.0);
  for (size_t t = 0; t < tau_.size(); ++t) {
    const double tau = tau_[t];
    sw[0] += df[t * m] * tau;
    sb[0] += df[t * m];
    for (size_t i = 1; i < m; ++i) {
      const double g = df[t * m + i] * std::cos(w[i] * tau + b[i]);  // d sin(z) / dz
      sw[i] += g * tau;
      sb[i] += g;
    }
  }
  for (size_t i = 0; i < m; ++i) {
    gw[i] += static_cast<float>(sw[i]);
    gb[i] += static_cast<float>(sb[i]);
  }
  w_->grad.copy_from(Tensor::from_floats(gw, w_->grad.shape(), DType::F32, w_->grad.device()));
  b_->grad.copy_from(Tensor::from_floats(gb, b_->grad.shape(), DType::F32, b_->grad.device()));
  tau_.clear();
}

}  // namespace rotor::nn
