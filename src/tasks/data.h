// The data side of the training tasks: which corpora and tokenizer a config
// names (through data/prepared.h, which both tasks share), and the batches
// of the data layer turned into model inputs on a device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/batcher.h"
#include "data/classification.h"
#include "data/corpus.h"
#include "data/ehr.h"
#include "data/lm.h"
#include "data/mlm.h"
#include "data/prepared.h"
#include "data/sentencepiece.h"
#include "models/bert.h"
#include "models/bert_classifier.h"
#include "models/decoder_lm.h"
#include "models/transformer.h"

namespace rotor::tasks {

// The tokenizer path a config uses: for data.tokenizer bytes the byte
// tokenizer's description OUTPUT_DIR/tokenizer.bytes; else data.spm_model,
// else the spiece.model of model.init_from (the tokenizer `rotor export`
// writes beside the weights; the spm.model of a rotor checkpoint there,
// checkpoint/init_checkpoint.h), else OUTPUT_DIR/spm.model.
std::string tokenizer_path(const Config& config);

// data.<key> ("train", "valid") as the task reads it: parallel
// (PREFIX.<src_lang>/<tgt_lang>) for translation, one text file for mlm.
data::CorpusSource corpus_source(const Config& config, const std::string& key);
// The splits as corpus_source reads them: data.train first (named or not),
// then data.valid and data.test where named.
std::vector<data::CorpusSource> corpus_splits(const Config& config);

// Checks, before a run creates anything, that data.train / data.valid name
// prepared data or raw text that exists, and that the tokenizer exists or can
// be trained (a rotor::Error naming the key).
void check_data(const Config& config);

// The tokenizer of the config, trained from the raw training text when
// missing (for mlm with [MASK] [CLS] [SEP] as ids 4, 5, 6); a byte
// tokenizer is written (never trained). Returns its path.
std::string ensure_tokenizer(const Config& config);

// The tokenizer of a task that never trains one (classification): the
// existing tokenizer_path(), or the byte tokenizer, written when missing.
std::string fixed_tokenizer(const Config& config);

// Before a resumed run writes anything: the tokenizer is the one the
// checkpoint `checkpoint_dir` holds a copy of, and the tokenizer the run owns
// and the corpora it binarized still match their fingerprints (the config's
// data keys, the text). For EHR data (data.format ehr): each prepare-ehr
// directory the checkpoint recorded (checkpoint::kEhrDataFile) has the same
// fingerprint now (its options, its inputs, its vocab.txt), and data.train's
// vocab.txt is the checkpoint's copy. A rotor::Error naming what changed
// otherwise.
void check_resumable_data(const Config& config, const std::string& checkpoint_dir);

// data.<key> binarized (or as prepared), its prefix: OUTPUT_DIR/data/<key>
// when made from raw text. Training text of translation is cleaned with
// data.max_len and data.max_len_ratio; validation and test text is kept
// whole, except that a model with a position table (learned, sinusoidal)
// drops the pairs it cannot hold (more than model.max_positions - 1 tokens a
// side), as training drops those over data.max_len; the log says how many.
std::string prepared_prefix(const Config& config, const std::string& key, const std::string& spm);

// A binarized corpus, its token ids checked against the run's tokenizer (a
// corpus prepared with another one is an error naming the file and the
// sentence, not a wrong embedding lookup later).
std::shared_ptr<const data::MmapCorpus> open_corpus(const std::string& prefix,
                                                    const data::Tokenizer& tokenizer);

// A split of a prepare-ehr directory (data.format ehr) for the tasks that read
// them (mlm, multilabel): a rotor::Error when model.age_vocab_size cannot
// hold its age ids, or, given the training split, when its vocabulary
// differs from the training split's (not one prepare-ehr output).
std::shared_ptr<const data::EhrSplit> open_ehr_split(const Config& config,
                                                     const std::string& prefix,
                                                     const data::EhrSplit* train = nullptr);

// What an EHR run's checkpoints hold besides the weights: the directory's
// vocab.txt (checkpoint::kEhrVocabFile) and the fingerprints of its data
// (checkpoint::kEhrDataFile: data::ehr_fingerprint of each split's directory,
// by key). Nothing for text.
std::vector<std::pair<std::string, std::string>> ehr_checkpoint_files(const Config& config);

// The batcher options every task sets alike (data::MlmBatcherOptions,
// LmBatcherOptions, ClassificationBatcherOptions): train.batch_size rows,
// shuffled by `seed`, rank r of world_size reading its own shard.
template <class Options>
Options batcher_options(const Config& config, int rank, int world_size) {
  Options o;
  o.batch_size = config.train.batch_size;
  o.seed = static_cast<uint64_t>(config.seed);
  o.rank = rank;
  o.world_size = world_size;
  return o;
}

// Batches of the data layer as model inputs on `device`.
models::MlmBatch to_model_batch(const data::MlmHostBatch& batch, Device device);
models::LmBatch to_model_batch(const data::LmHostBatch& batch, Device device);

}  // namespace rotor::tasks
