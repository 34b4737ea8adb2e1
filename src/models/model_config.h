// The one place where an experiment config becomes model options: the
// encoder-decoder of task translation, the BERT/RoFormer encoder of task mlm
// and its classifier of task classification. Everything that builds a model
// from a config (training, the bench, decoding, prediction, export, import)
// goes through these functions.
#pragma once

#include <cstdint>

#include "config/config.h"
#include "models/bert.h"
#include "models/bert_classifier.h"
#include "models/transformer.h"

namespace rotor::models {

// The translation model of `config` for a vocabulary of `vocab_size` pieces.
TransformerOptions transformer_options(const Config& config, int64_t vocab_size);

// The masked-LM model of `config`. Throws rotor::Error for a config that
// BERT/RoFormer cannot express (pre-LN).
BertOptions bert_options(const Config& config, int64_t vocab_size);

// The sequence classifier of task classification: the encoder of
// bert_options, data.labels.size() classes (or one output with
// data.regression), the head's dropout model.dropout.
BertClassifierOptions bert_classifier_options(const Config& config, int64_t vocab_size);

}  // namespace rotor::models
