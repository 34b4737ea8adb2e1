// Parameters live in two flat fp32 buffers, values and gradients (DESIGN.md
// decision 3): the optimizer is one multi-tensor step, all-reduce goes in
// large buckets and checkpoints are simple. Each parameter is a view into
// them. Layers register parameters in construction order; that order is the
// layout of the buffers and of the checkpoint.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace rotor::nn {

struct Init {
  enum class Kind { Zeros, Ones, Normal, Uniform, XavierUniform };
  Kind kind = Kind::Zeros;
  double a = 0.0;  // Normal: std; Uniform: bound; XavierUniform: gain
  int pad_row = -1;  // rows set to zero after init (the embedding pad row)

  static Init zeros() { return {Kind::Zeros, 0, -1}; }
  static Init ones() { return {Kind::Ones, 0, -1}; }
  static Init normal(double std, int pad_row = -1) { return {Kind::Normal, std, pad_row}; }
  static Init uniform(double bound) { return {Kind::Uniform, bound, -1}; }
  static Init xavier_uniform(double gain = 1.0) { return {Kind::XavierUniform, gain, -1}; }
};

struct Parameter {
  std::string name;  // Hugging Face style, e.g. model.encoder.layers.0.fc1.weight
  Shape shape;
  Init init;
  int64_t offset = 0;  // element offset in the flat buffers
  Tensor value;        // view of the flat values
  Tensor grad;         // view of the flat gradients
  bool no_decay = false;  // biases and norms: excluded from weight decay
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

  bool allocated() const { return values_.defined(); }
  int64_t numel() const { return numel_; }
  Tensor& values() { return values_; }  // f32 [numel]
  Tensor& grads() { return grads_; }    // f32 [numel]
  const std::vector<std::unique_ptr<Parameter>>& parameters() const { return params_; }
  Parameter* find(const std::string& name) const;
  // One view over consecutive parameters (registered back to back) with
  // `shape`: of the values, or of the gradients when grads is true.
  Tensor span(const std::vector<Parameter*>& params, const Shape& shape, bool grads) const;
  Device device() const { return values_.defined() ? values_.device() : Device::cpu(); }

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
  std::unordered_map<std::string, Parameter*> by_name_;
  Tensor values_, grads_;
  int64_t numel_ = 0;
  uint32_t next_layer_id_ = 1;
};

}  // namespace rotor::nn
