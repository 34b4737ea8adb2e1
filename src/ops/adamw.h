// Adam and AdamW (Loshchilov & Hutter) on flat fp32 buffers, PyTorch's
// formulations (torch.optim.Adam and torch.optim.AdamW):
//   g = grad * grad_multiplier + l2 * p     (Adam: weight decay as L2 on the gradient)
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr * wd * p                        (AdamW: decoupled weight decay)
//   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace rotor::ops {

struct AdamWOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // decoupled (AdamW)
  float l2 = 0.0f;            // coupled, added to the gradient (Adam)
  int64_t step = 1;           // 1-based, for bias correction
  // Every gradient is multiplied by it first: the trainer passes
  // 1/(tokens*loss_scale) times the clipping coefficient.
  float grad_multiplier = 1.0f;
  Tensor device_scale;  // optional f32 [1] on the device, multiplies grad_multiplier
};

// params, grads, m, v: f32 tensors of the same element count on one device.
void adamw_step(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWOptions& options);

}  // namespace rotor::ops
