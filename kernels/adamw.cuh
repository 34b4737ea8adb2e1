// AdamW on flat buffers (PyTorch's formulation, as src/ops/adamw.h states).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

struct AdamWArgs {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0;
  float step_size = 0;        // lr / (1 - beta1^t), computed in double on the host
  float bc2_sqrt = 1;         // sqrt(1 - beta2^t)
  float decay = 1;            // 1 - lr * weight_decay (AdamW)
  float l2 = 0;               // Adam's L2 term, added to the gradient
  float grad_multiplier = 1;  // ops::AdamWOptions::grad_multiplier: gradients times it first
  const float* device_scale = nullptr;  // optional [1], multiplies grad_multiplier
};

// params, m, v: f32 [n]; grads: [n] of grad_dt (any floating dtype).
cudaError_t adamw_step(float* params, const void* grads, DType grad_dt, float* m, float* v,
                       int64_t n, const AdamWArgs& args, cudaStream_t stream);

}  // namespace rotor::kernels
