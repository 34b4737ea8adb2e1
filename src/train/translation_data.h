// The data of a translation run: the tokenizer (trained when missing) and the
// binarized train/valid corpora (binarized from raw text when the config
// names raw text), as Marian does it: `rotor train` runs on plain files.
#pragma once

#include <memory>
#include <string>

#include "data/batcher.h"
#include "data/corpus.h"
#include "data/sentencepiece.h"
#include "models/transformer.h"
#include "config/config.h"

namespace rotor::train {

struct ParallelCorpus {
  std::shared_ptr<const data::MmapCorpus> src, tgt;
  bool defined() const { return src != nullptr; }
};

struct TranslationData {
  std::string spm_path;
  data::Tokenizer tokenizer;
  ParallelCorpus train, valid;
};

// data.train / data.valid are either prefixes made by `rotor prepare`
// (PREFIX.src.idx, PREFIX.tgt.idx) or raw text (PREFIX.<src_lang>,
// PREFIX.<tgt_lang>), binarized into OUTPUT_DIR/data/. `need_train` false
// skips the training corpus (validation or decoding only).
TranslationData load_translation_data(const Config& config, bool need_train = true);

// Checks, before a run creates anything, that data.train / data.valid name
// prepared data or raw text that exists (a rotor::Error naming the key).
void check_translation_data(const Config& config);

// The tokenizer path a config uses (data.spm_model or OUTPUT_DIR/spm.model).
std::string tokenizer_path(const Config& config);

// A batch from the batcher as model input on `device`.
models::TranslationBatch to_model_batch(const data::Batch& batch, Device device);

}  // namespace rotor::train
