#include "nn/attention_plan.h"

#include <fmt/format.h>

#include <mutex>
#include <set>

#include "core/logging.h"
#include "nn/attention_kind.h"

namespace rotor::nn {

const char* attention_core_name(AttentionCore core) {
  switch (core) {
    case AttentionCore::Reference:
      return "reference";
    case AttentionCore::Rotor:
      return "rotor";
    case AttentionCore::Cudnn:
      return "cudnn";
    case AttentionCore::Linear:
      return "linear";
  }
  return "?";
}

const char* rope_placement_name(RopePlacement placement) {
  switch (placement) {
    case RopePlacement::None:
      return "none";
    case RopePlacement::HeadSplit:
      return "head split";
    case RopePlacement::Core:
      return "core";
  }
  return "?";
}

std::string AttentionPlan::str() const {
  // Softmax, the default kind, goes unnamed.
  std::string s = kind == AttentionKind::Softmax ? "" : fmt::format("{}: ", kind.name());
  s += attention_core_name(core);
  if (core == AttentionCore::Rotor)
    s += fmt::format(" ({})", on_gpu ? ops::flash_kernel_name(kernel) : "cpu");
  if (core == AttentionCore::Linear)
    s += fmt::format(" ({}, M {})", ops::linear_feature_map_name(linear.feature_map),
                     linear.features);
  if (rope != RopePlacement::None) s += fmt::format(", RoPE in the {}", rope_placement_name(rope));
  if (alibi) s += ", ALiBi in the core";
  if (rel_bias) s += ", T5 bias in the core";
  if (varlen) s += ", documents end to end";
  if (core == AttentionCore::Linear && linear.rope != ops::LinearRope::None)
    s += fmt::format(" ({})", ops::linear_rope_name(linear.rope));
  return s;
}

AttentionPlan plan_attention(const AttentionCase& c, const ops::AttentionDevice& device) {
  AttentionPlan p = c.kind->plan(c, device);
  p.kind = c.kind;
  return p;
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
