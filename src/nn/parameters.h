// Parameters live in two flat fp32 buffers, values and gradients (docs/design.md,
// "Flat parameter buffers"): the optimizer is one multi-tensor step, all-reduce goes in
// large buckets and checkpoints are simple. Each parameter is a view into
// them. Layers register parameters in construction order; that order is the
// layout of the buffers and of the checkpoint.
//
// Mixed precision (decision 5): with a 16-bit compute dtype the store also
// holds a low-precision copy of the values (same offsets), rounded from the
// f32 masters by refresh_compute_copy() — one cast over the flat buffer,
// which the trainer runs whenever the masters change (initialize, load,
// broadcast, every optimizer step). Layers read their weights in the dtype of
// their activations (Parameter::value_in); gradients stay f32.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace rotor::nn {

struct Init {
  enum class Kind { Zeros, Ones, Normal, Uniform, XavierUniform, Values };
  Kind kind = Kind::Zeros;
  double a = 0.0;    // Normal: std; Uniform: bound; XavierUniform: gain
  int pad_row = -1;  // rows set to zero after init (the embedding pad row)
  // Values: the parameter's initial elements, as many as it has (a head's
  // bias started at the label prior, models/bert_classifier.h).
  std::shared_ptr<const std::vector<float>> values;

  static Init zeros() { return {Kind::Zeros, 0, -1, nullptr}; }
  static Init ones() { return {Kind::Ones, 0, -1, nullptr}; }
  static Init normal(double std, int pad_row = -1) { return {Kind::Normal, std, pad_row, nullptr}; }
  static Init uniform(double bound) { return {Kind::Uniform, bound, -1, nullptr}; }
  static Init xavier_uniform(double gain = 1.0) { return {Kind::XavierUniform, gain, -1, nullptr}; }
  static Init from_values(std::vector<float> v) {
    return {Kind::Values, 0, -1, std::make_shared<const std::vector<float>>(std::move(v))};
  }
};

struct Parameter {
  std::string name;  // Hugging Face style, e.g. model.encoder.layers.0.fc1.weight
  Shape shape;
  Init init;
  int64_t offset = 0;     // element offset in the flat buffers
  Tensor value;           // f32 [shape], a view of the flat values
  Tensor grad;            // f32 [shape], a view of the flat gradients
  Tensor value_lp;        // 16-bit [shape], a view of the copy (undefined without one)
  bool no_decay = false;  // biases and norms: excluded from weight decay

  // The value as `dtype`: the f32 master, or the 16-bit copy of that dtype
  // (a rotor::Error when the store keeps none).
  const Tensor& value_in(DType dtype) const;
};

class ParameterStore {
 public:
  // Registers a parameter (before allocate()). Names are unique.
  Parameter* add(const std::string& name, const Shape& shape, Init init, bool no_decay = false);
  // A unique id per layer instance, for its random streams.
  uint32_t next_layer_id() { return next_layer_id_++; }

  // Allocates the flat buffers on `device` and makes the views.
  void allocate(Device device);
  // Fills every parameter from its init, each from its own Philox stream keyed
  // by (seed, parameter index): independent of device and thread count.
  void initialize(uint64_t seed);
  void zero_grad();

  // Keeps a copy of the values in `dtype` (f16/bf16) for the layers to read,
  // refreshed here from the masters; F32 drops it. After allocate().
  void set_compute_dtype(DType dtype);
  DType compute_dtype() const { return values_lp_.defined() ? values_lp_.dtype() : DType::F32; }
  // Rounds the f32 masters into the 16-bit copy (a no-op without one).
  void refresh_compute_copy();

  bool allocated() const { return values_.defined(); }
  int64_t numel() const { return numel_; }
  Tensor& values() { return values_; }  // f32 [numel]
  Tensor& grads() { return grads_; }    // f32 [numel]
  const Tensor& grads() const { return grads_; }
  const std::vector<std::unique_ptr<Parameter>>& parameters() const { return params_; }
  Parameter* find(const std::string& name) const;
  // One view over consecutive parameters (registered back to back) with
  // `shape`: of the values (in `dtype`: the masters or the 16-bit copy), or
  // of the gradients when grads is true.
  Tensor span(const std::vector<Parameter*>& params, const Shape& shape, bool grads,
              DType dtype = DType::F32) const;
  Device device() const { return values_.defined() ? values_.device() : Device::cpu(); }

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
  std::unordered_map<std::string, Parameter*> by_name_;
  Tensor values_, grads_;  // f32 [numel]
  Tensor values_lp_;       // 16-bit copy of values_ [numel], or undefined
  int64_t numel_ = 0;
  uint32_t next_layer_id_ = 1;
};

}  // namespace rotor::nn
