// The one place where an experiment config becomes model options: the
// encoder-decoder of task translation and the BERT/RoFormer encoder of task
// mlm. Everything that builds a model from a config (training, the bench,
// decoding, export) goes through these two functions.
#pragma once

#include <cstdint>

#include "config/config.h"
#include "models/bert.h"
#include "models/transformer.h"

namespace rotor::models {

// The translation model of `config` for a vocabulary of `vocab_size` pieces.
TransformerConfig transformer_config(const Config& config, int64_t vocab_size);

// The masked-LM model of `config`. Throws rotor::Error for a config that
// BERT/RoFormer cannot express (pre-LN).
BertConfig bert_config(const Config& config, int64_t vocab_size);

}  // namespace rotor::models
