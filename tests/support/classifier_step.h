// One training step of a sequence classifier on a host batch, for the
// packing tests that hold packed rows to one example a row (CPU and GPU).
#pragma once

#include <vector>

#include "data/classification.h"
#include "models/bert_classifier.h"
#include "nn/parameters.h"
#include "tasks/classifier/outputs.h"

namespace rotor::test {

struct ClassifierStep {
  models::ClassificationSums sums;
  std::vector<float> scores;  // [B, C] (multiple choice: [B, N])
  std::vector<float> grads;   // every parameter's gradient, on the host
};

// Zeroes the gradients, runs forward_loss and backward(1) on `batch` moved
// to ctx.device, and reads the gradients back.
inline ClassifierStep classifier_step(models::BertForSequenceClassification& model,
                                      nn::ParameterStore& store,
                                      const data::ClassificationHostBatch& batch,
                                      const nn::Context& ctx) {
  ClassifierStep s;
  store.zero_grad();
  s.sums = model.forward_loss(tasks::to_model_batch(batch, ctx.device), ctx, &s.scores);
  model.backward(1.0f);
  s.grads = store.grads().to(Device::cpu()).to_floats();
  return s;
}

}  // namespace rotor::test
