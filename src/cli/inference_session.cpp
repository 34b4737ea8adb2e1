#include "cli/inference_session.h"

#include <algorithm>

#include "cli/inference_config.h"
#include "config/tasks.h"
#include "core/error.h"

namespace rotor::cli {

InferenceSession::InferenceSession(std::string_view cmd, const std::string& checkpoint,
                                   const std::vector<std::string>& sets, std::string_view device)
    : cmd_(cmd),
      held_(checkpoint),
      config_(load_inference_config(cmd, held_.dir(), sets)),
      device_(resolve_device(device)) {
  if (!task_serves(config_.task, cmd_))
    ROTOR_FAIL("{}: {} is a task-{} checkpoint; {} runs {} models", cmd_, dir(),
               to_string(config_.task), cmd_, tasks_serving(cmd_));
}

const data::Tokenizer& InferenceSession::tokenizer() {
  if (!tokenizer_)
    tokenizer_ = std::make_unique<data::Tokenizer>(data::Tokenizer::load(dir() + "/spm.model"));
  return *tokenizer_;
}

nn::Context InferenceSession::context() const {
  nn::Context ctx;
  ctx.training = false;
  ctx.device = device_;
  // The updates done when the checkpoint was saved: its forward passes are
  // those of update done - 1 (nn::Context::update), whose random attention
  // features (FAVOR+, nn/attention_kind.h feature_draw) the run's validation
  // of this checkpoint used.
  if (config_.attention.kind != nn::AttentionKind::Softmax) {
    const int64_t done = checkpoint::load_trainer_state(dir()).step;
    ctx.update = static_cast<uint64_t>(std::max<int64_t>(done - 1, 0));
  }
  return ctx;
}

}  // namespace rotor::cli
