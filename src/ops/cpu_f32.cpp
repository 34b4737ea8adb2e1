#include "ops/cpu_f32.h"

#include "ops/elementwise.h"

namespace rotor::ops::detail {

namespace {
bool is_16bit(const Tensor& t) {
  return t.defined() && (t.dtype() == DType::F16 || t.dtype() == DType::BF16);
}
}  // namespace

bool F32Compute::needed(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (t && is_16bit(*t)) return true;
  return false;
}

Tensor F32Compute::input(const Tensor& t) const {
  if (!is_16bit(t)) return t;
  ROTOR_CHECK(t.is_cpu(), "F32Compute on a device tensor {}", t.str());
  Tensor f = Tensor::empty(t.shape(), DType::F32, Device::cpu());
  cast(t, f);  // exact: every f16/bf16 value is an f32 value
  return f;
}

Tensor F32Compute::output(Tensor& t, bool read) {
  if (!is_16bit(t)) return t;
  ROTOR_CHECK(t.is_cpu(), "F32Compute on a device tensor {}", t.str());
  Tensor f = read ? input(t) : Tensor::empty(t.shape(), DType::F32, Device::cpu());
  outputs_.emplace_back(t, f);
  return f;
}

void F32Compute::commit() {
  for (auto& [target, buffer] : outputs_) cast(buffer, target);  // round to nearest even
  outputs_.clear();
}

}  // namespace rotor::ops::detail
