#include "nn/parameters.h"

#include <cmath>

#include "core/philox.h"

namespace rotor::nn {

Parameter* ParameterStore::add(const std::string& name, const Shape& shape, Init init,
                               bool no_decay) {
  ROTOR_CHECK(!allocated(), "parameter {} added after allocation", name);
  ROTOR_CHECK(!by_name_.count(name), "duplicate parameter name {}", name);
  auto p = std::make_unique<Parameter>();
  p->name = name;
  p->shape = shape;
  p->init = init;
  p->offset = numel_;
  p->no_decay = no_decay;
  numel_ += shape_numel(shape);
  Parameter* raw = p.get();
  by_name_[name] = raw;
  params_.push_back(std::move(p));
  return raw;
}

void ParameterStore::allocate(Device device) {
  ROTOR_CHECK(!allocated(), "parameters allocated twice");
  values_ = Tensor::zeros({numel_}, DType::F32, device);
  grads_ = Tensor::zeros({numel_}, DType::F32, device);
  for (auto& p : params_) {
    int64_t n = shape_numel(p->shape);
    p->value = values_.narrow(p->offset, n).view(p->shape);
    p->grad = grads_.narrow(p->offset, n).view(p->shape);
  }
}

void ParameterStore::initialize(uint64_t seed) {
  ROTOR_CHECK(allocated(), "initialize before allocate");
  std::vector<float> host(static_cast<size_t>(numel_));
  for (size_t index = 0; index < params_.size(); ++index) {
    const Parameter& p = *params_[index];
    PhiloxRng rng(seed, rng_stream(0, static_cast<uint32_t>(index), RngPurpose::Init, 0));
    const int64_t n = shape_numel(p.shape);
    float* out = host.data() + p.offset;
    switch (p.init.kind) {
      case Init::Kind::Zeros:
        for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
        break;
      case Init::Kind::Ones:
        for (int64_t i = 0; i < n; ++i) out[i] = 1.0f;
        break;
      case Init::Kind::Normal:
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(rng.normal() * p.init.a);
        break;
      case Init::Kind::Uniform:
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * p.init.a);
        break;
      case Init::Kind::XavierUniform: {
        // Glorot & Bengio: bound = gain * sqrt(6 / (fan_in + fan_out)) for [out, in].
        ROTOR_CHECK(p.shape.size() == 2, "xavier init of non-matrix {}", p.name);
        double bound = p.init.a * std::sqrt(6.0 / static_cast<double>(p.shape[0] + p.shape[1]));
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
        break;
      }
    }
    if (p.init.pad_row >= 0) {
      int64_t width = p.shape.back();
      for (int64_t i = 0; i < width; ++i) out[p.init.pad_row * width + i] = 0.0f;
    }
  }
  values_.copy_from(Tensor::from_floats(host, {numel_}));
}

void ParameterStore::zero_grad() { grads_.zero_(); }

Parameter* ParameterStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Tensor ParameterStore::span(const std::vector<Parameter*>& params, const Shape& shape,
                            bool grads) const {
  ROTOR_CHECK(allocated(), "parameters used before allocation");
  ROTOR_CHECK(!params.empty(), "empty parameter span");
  int64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    ROTOR_CHECK(i == 0 || params[i]->offset == params[i - 1]->offset + shape_numel(params[i - 1]->shape),
                "parameters {} and {} are not contiguous", params[i - 1]->name, params[i]->name);
    total += shape_numel(params[i]->shape);
  }
  const Tensor& flat = grads ? grads_ : values_;
  return flat.narrow(params[0]->offset, total).view(shape);
}

}  // namespace rotor::nn
