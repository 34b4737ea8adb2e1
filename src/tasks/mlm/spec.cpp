// Task mlm's config row (config/tasks.h TaskSpec).
#include <fmt/format.h>

#include "config/tasks.h"
#include "tasks/specs.h"

namespace rotor::tasks {
namespace {

std::optional<ConfigProblem> mlm_rules(const Config& c) {
  const DataConfig& d = c.data;
  if (d.mask_token_prob + d.random_token_prob > 1.0 + 1e-12)
    return ConfigProblem{"data.random_token_prob",
                         fmt::format("data.mask_token_prob + data.random_token_prob = {} + {} "
                                     "exceeds 1",
                                     d.mask_token_prob, d.random_token_prob),
                         {"data.mask_token_prob"}};
  if (d.seq_len < 2)  // a block is [CLS] and at least one token (data/mlm.h)
    return ConfigProblem{"data.seq_len",
                         fmt::format("{} is too short for [CLS] + tokens; at least 2", d.seq_len)};
  if (d.packing == Packing::Documents && d.seq_len < 3 && d.format == DataFormat::Text)
    return ConfigProblem{"data.seq_len",
                         fmt::format("{} is too short for a packed document's [CLS] + tokens + "
                                     "[SEP]; at least 3",
                                     d.seq_len),
                         {"data.packing"}};
  return std::nullopt;
}

}  // namespace

const TaskSpec kMlmSpec{
    .name = "mlm",
    .model = ModelFamily::BertEncoder,
    .metrics = {{ValidMetric::Loss}, {ValidMetric::Accuracy, true}},
    .required_data = {{"data.train", &DataConfig::train,
                       "a text file, or a prefix prepared by `rotor prepare`"}},
    .rules = mlm_rules,
    .mlm_symbols = true,
    .reads_ehr = true,
    .packs_documents = true,
    .hf_export = HfExport::MaskedLm,
    .loss_tokens = "masked",
    .read_tokens = "all input tokens",
    .commands = {"eval", "mlm-logits"},
};

}  // namespace rotor::tasks
