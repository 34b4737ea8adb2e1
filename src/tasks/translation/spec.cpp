// Task translation's config row (config/tasks.h TaskSpec).
#include <fmt/format.h>

#include "config/tasks.h"
#include "tasks/specs.h"

namespace rotor::tasks {
namespace {}  // namespace

const TaskSpec kTranslationSpec{
    .name = "translation",
    .model = ModelFamily::EncoderDecoder,
    .length_key = "data.max_len",
    .length = &DataConfig::max_len,
    .metrics = {{ValidMetric::Loss}, {ValidMetric::Bleu}, {ValidMetric::Chrf}},
    .required_data = {{"data.train", &DataConfig::train,
                       "a text prefix (PREFIX.SRC_LANG, PREFIX.TGT_LANG), or a prefix prepared by "
                       "`rotor prepare`"}},
    .parallel_text = true,
    .label_smoothing = true,
    .packs_documents = true,
    .commands = {"translate"},
};

}  // namespace rotor::tasks
