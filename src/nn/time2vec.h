// Time2Vec (Kazemi et al. 2019) of a scalar per token, here the patient's age
// (model.age_embedding time2vec): k + 1 learned features of
// tau = age id / age_range,
//
//   f_0(tau) = w_0 tau + b_0                 (the linear, non-periodic term)
//   f_i(tau) = sin(w_i tau + b_i)            i = 1 .. k (periodic terms)
//
// projected to d_model by a learned linear layer and summed at the input
// instead of an age table. Parameters, after NAME:
//   NAME.weight [k + 1] (w), NAME.bias [k + 1] (b),
//   NAME.projection.{weight [d, k + 1], bias [d]}.
// w_i start from N(0, 2 pi) (periods of about the age range and shorter),
// b_i from U(-pi, pi); the projection from N(0, init_std). The features are
// computed on the host (N x (k + 1) values, nothing beside the encoder), the
// projection where the activations are.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/context.h"
#include "nn/linear.h"
#include "nn/parameters.h"

namespace rotor::nn {

class Time2Vec {
 public:
  // k periodic terms (k >= 1); ages are ids in [0, age_range).
  Time2Vec(ParameterStore& store, const std::string& name, int64_t k, int64_t age_range,
           int64_t dim, double init_std);
  // ages i32 [N] -> [N, dim]; keeps what backward needs.
  Tensor forward(const Tensor& ages, const Context& ctx);
  // dy [N, dim]: accumulates the gradients of w, b and the projection.
  void backward(const Tensor& dy);

  int64_t periodic() const { return k_; }

 private:
  Parameter *w_, *b_;
  std::unique_ptr<Linear> projection_;
  int64_t k_, age_range_;
  std::vector<float> tau_;  // saved by forward: [N]
};

}  // namespace rotor::nn
