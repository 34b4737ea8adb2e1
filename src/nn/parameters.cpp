#include "nn/parameters.h"

#include <algorithm>
#include <cmath>

#include "core/philox.h"
#include "ops/elementwise.h"

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
        for (int64_t i = 0; i < n; ++i)
          out[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * p.init.a);
        break;
      case Init::Kind::Values:
        ROTOR_CHECK(p.init.values && static_cast<int64_t>(p.init.values->size()) == n,
                    "{}: {} initial values for {} elements", p.name,
                    p.init.values ? p.init.values->size() : 0, n);
        std::copy(p.init.values->begin(), p.init.values->end(), out);
        break;
      case Init::Kind::XavierUniform: {
        // Glorot & Bengio: bound = gain * sqrt(6 / (fan_in + fan_out)) for [out, in].
        ROTOR_CHECK(p.shape.size() == 2, "xavier init of non-matrix {}", p.name);
        double bound = p.init.a * std::sqrt(6.0 / static_cast<double>(p.shape[0] + p.shape[1]));
        for (int64_t i = 0; i < n; ++i)
          out[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
        break;
      }
    }
    if (p.init.pad_row >= 0) {
      int64_t width = p.shape.back();
      for (int64_t i = 0; i < width; ++i) out[p.init.pad_row * width + i] = 0.0f;
    }
  }
  values_.copy_from(Tensor::from_floats(host, {numel_}));
  refresh_compute_copy();
}

const Tensor& Parameter::value_in(DType dtype) const {
  if (dtype == DType::F32) return value;
  ROTOR_CHECK(value_lp.defined() && value_lp.dtype() == dtype,
              "parameter {} read as {}, but the store keeps {} (ParameterStore::set_compute_dtype)",
              name, dtype_name(dtype),
              value_lp.defined() ? dtype_name(value_lp.dtype()) : "no copy");
  return value_lp;
}

void ParameterStore::set_compute_dtype(DType dtype) {
  ROTOR_CHECK(allocated(), "set_compute_dtype before allocate");
  ROTOR_CHECK(is_floating(dtype), "compute dtype {} is not floating", dtype_name(dtype));
  if (dtype == compute_dtype()) return;
  values_lp_ = dtype == DType::F32 ? Tensor() : Tensor::empty({numel_}, dtype, values_.device());
  for (auto& p : params_)
    p->value_lp = values_lp_.defined()
                      ? values_lp_.narrow(p->offset, shape_numel(p->shape)).view(p->shape)
                      : Tensor();
  refresh_compute_copy();
}

void ParameterStore::refresh_compute_copy() {
  if (values_lp_.defined()) ops::cast(values_, values_lp_);
}

void ParameterStore::zero_grad() {
  grads_.zero_();
}

Parameter* ParameterStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Tensor ParameterStore::span(const std::vector<Parameter*>& params, const Shape& shape, bool grads,
                            DType dtype) const {
  ROTOR_CHECK(allocated(), "parameters used before allocation");
  ROTOR_CHECK(!params.empty(), "empty parameter span");
  int64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    ROTOR_CHECK(
        i == 0 || params[i]->offset == params[i - 1]->offset + shape_numel(params[i - 1]->shape),
        "parameters {} and {} are not contiguous", params[i - 1]->name, params[i]->name);
    total += shape_numel(params[i]->shape);
  }
  ROTOR_CHECK(grads || dtype == DType::F32 || dtype == compute_dtype(),
              "parameters {}... read as {}, but the store keeps {} (set_compute_dtype)",
              params[0]->name, dtype_name(dtype), dtype_name(compute_dtype()));
  // [numel]: f32, or the 16-bit copy
  const Tensor& flat = grads ? grads_ : dtype == DType::F32 ? values_ : values_lp_;
  return flat.narrow(params[0]->offset, total).view(shape);
}

}  // namespace rotor::nn
