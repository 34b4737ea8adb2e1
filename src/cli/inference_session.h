// A checkpoint opened for inference: what `translate`, `generate`, `eval`,
// `predict` and `mlm-logits` share, as train::Session is what `train` and
// `bench` share. It gives
//   - the checkpoint directory, held while it is read (checkpoint.h
//     HeldCheckpoint: a run pruning there leaves it);
//   - its config, with the command's --set overrides of model.rope.*
//     (cli/inference_config.h), refused unless its task is one the command
//     runs;
//   - its tokenizer (spm.model) and the device;
//   - the model the command builds in the session's parameter store,
//     allocated on the device with the checkpoint's weights loaded;
//   - the nn::Context of inference: training off, the device, and the
//     training update the checkpoint was saved after, so that attention
//     kinds with random features (FAVOR+) draw the features of that
//     update, as the run's own validation of it did.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "core/device.h"
#include "data/sentencepiece.h"
#include "nn/context.h"
#include "nn/parameters.h"

namespace rotor::cli {

class InferenceSession {
 public:
  // `cmd` names the command ("eval"); the checkpoint's task must list it
  // among its commands (config/tasks.h TaskSpec::commands). The checkpoint
  // is read as the command's first work.
  InferenceSession(std::string_view cmd, const std::string& checkpoint,
                   const std::vector<std::string>& sets, std::string_view device);

  const std::string& dir() const { return held_.dir(); }
  const Config& config() const { return config_; }
  Config& config() { return config_; }  // what a command reads besides (labels.txt)
  Device device() const { return device_; }
  // The checkpoint's tokenizer, loaded on first use.
  const data::Tokenizer& tokenizer();

  // The model `make(store)` builds, allocated on the device and loaded with
  // the checkpoint's weights (every parameter, checked); kept by the session.
  template <class Model, class Make>
  Model& load_model(Make&& make) {
    auto model = make(store_);
    store_.allocate(device_);
    checkpoint::load_weights(dir(), store_);
    Model& m = *model;
    model_ = std::shared_ptr<void>(std::move(model));
    return m;
  }

  nn::Context context() const;

 private:
  std::string cmd_;
  checkpoint::HeldCheckpoint held_;
  Config config_;
  Device device_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  nn::ParameterStore store_;
  std::shared_ptr<void> model_;  // the loaded model (its type is the command's)
};

}  // namespace rotor::cli
