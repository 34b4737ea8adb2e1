#include "nn/attention_core.h"

#include <mutex>
#include <set>

#include "core/error.h"
#include "core/logging.h"

namespace rotor::nn {

const char* attention_core_name(AttentionCore core) {
  switch (core) {
    case AttentionCore::Reference:
      return "reference";
    case AttentionCore::Rotor:
      return "rotor";
    case AttentionCore::Cudnn:
      return "cudnn";
  }
  return "?";
}

AttentionCoreChoice choose_attention_core(AttentionImpl impl, const AttentionCoreQuery& query) {
  auto cudnn_reason = [&]() -> std::string {
    return query.cudnn_unsupported ? query.cudnn_unsupported() : "cuDNN was not asked";
  };
  switch (impl) {
    case AttentionImpl::Reference:
      return {AttentionCore::Reference, ""};
    case AttentionImpl::Rotor:
      return {AttentionCore::Rotor, ""};
    case AttentionImpl::Cudnn: {
      const std::string why = cudnn_reason();
      if (!why.empty()) ROTOR_FAIL("attention.impl: cudnn: {}", why);
      return {AttentionCore::Cudnn, ""};
    }
    case AttentionImpl::Auto:
      break;
  }
  if (query.on_cpu) return {AttentionCore::Reference, ""};
  const bool long_enough = query.Tk >= kCudnnMinKeys;
  std::string not_cudnn;
  if (long_enough || !query.rotor_supported) {
    not_cudnn = cudnn_reason();
    if (not_cudnn.empty())
      return {AttentionCore::Cudnn,
              long_enough ? "attention.impl auto: cuDNN attention for sequences of " +
                                std::to_string(kCudnnMinKeys) + " keys or more"
                          : "attention.impl auto: cuDNN attention where rotor's kernel does not "
                            "take the head dim or batch"};
  } else {
    not_cudnn = "rotor's kernel below " + std::to_string(kCudnnMinKeys) +
                " keys (cuDNN from there on, where it serves the case)";
  }
  if (query.rotor_supported) return {AttentionCore::Rotor, "attention.impl auto: " + not_cudnn};
  return {AttentionCore::Reference,
          "attention.impl auto: the reference core (rotor's kernel does not take this head "
          "dim or batch; " +
              not_cudnn + ")"};
}

void log_once(const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!seen.insert(line).second) return;
  }
  log().info("{}", line);
}

}  // namespace rotor::nn
