// Task lm's config row (config/tasks.h TaskSpec).
#include <fmt/format.h>

#include "config/tasks.h"
#include "tasks/specs.h"

namespace rotor::tasks {
namespace {

std::optional<ConfigProblem> lm_rules(const Config& c) {
  if (c.model.decoder_layers < 1)
    return ConfigProblem{"model.decoder_layers",
                         fmt::format("task lm counts its causal layers here; got {}, at least 1",
                                     c.model.decoder_layers),
                         {"task"}};
  return std::nullopt;
}

// Pre-LN, as GPT-2, GPT-NeoX and fairseq's transformer_lm train.
void lm_defaults(Config& c, const KeyOrigins& written) {
  if (!written.written("model.norm")) c.model.norm = NormPlacement::Pre;
}

}  // namespace

const TaskSpec kLmSpec{
    .name = "lm",
    .model = ModelFamily::Decoder,
    .metrics = {{ValidMetric::Loss}, {ValidMetric::Accuracy, true}},
    .required_data = {{"data.train", &DataConfig::train,
                       "a text file, or a prefix prepared by `rotor prepare`"}},
    .rules = lm_rules,
    .defaults = lm_defaults,
    .byte_line_ends = true,
    .packs_documents = true,
    .hf_export = HfExport::CausalLm,
    .commands = {"eval", "generate"},
};

}  // namespace rotor::tasks
