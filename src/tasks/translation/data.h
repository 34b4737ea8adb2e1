// Task translation's data: the tokenizer and the parallel corpora of a run
// (prepared from raw text through tasks/data.h when needed), and its batches
// as model inputs.
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "data/sentencepiece.h"
#include "models/transformer.h"

namespace rotor::tasks {

struct ParallelCorpus {
  std::shared_ptr<const data::MmapCorpus> src, tgt;
  bool defined() const { return src != nullptr; }
};

struct TranslationData {
  std::string spm_path;
  data::Tokenizer tokenizer;
  ParallelCorpus train, valid, test;
};

// The tokenizer and corpora of a translation run. `need_train` false skips
// the training corpus (validation or decoding only).
// Every split of a model with a position table is checked to fit it (a
// prepared corpus may hold longer sentences): a rotor::Error naming the
// split's key, the file and the sentence otherwise, before training.
TranslationData load_translation_data(const Config& config, bool need_train = true);

// The model's batch of `batch`: its padded rows, or with `variable_length`
// (data.packing documents) its pairs laid end to end, one row per side with
// no padding, and each token's pair index (models::TranslationBatch).
models::TranslationBatch to_model_batch(const data::Batch& batch, Device device,
                                        bool variable_length = false);

}  // namespace rotor::tasks
