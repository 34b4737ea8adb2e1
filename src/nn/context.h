// What a forward pass needs to know beyond its inputs: training or not, the
// device and dtype of activations, and the keys of its random streams.
#pragma once

#include <cstdint>

#include "core/philox.h"
#include "core/tensor.h"

namespace rotor::nn {

struct Context {
  bool training = false;
  Device device = Device::cpu();
  DType dtype = DType::F32;  // activations
  uint64_t seed = 0;
  uint64_t step = 0;  // micro-batch counter: a new dropout mask every micro-batch
  uint32_t rank = 0;

  uint64_t stream(uint32_t layer_id, RngPurpose purpose) const {
    return rng_stream(step, layer_id, purpose, rank);
  }
  Tensor empty(const Shape& shape) const { return Tensor::empty(shape, dtype, device); }
  Tensor zeros(const Shape& shape) const { return Tensor::zeros(shape, dtype, device); }
};

}  // namespace rotor::nn
