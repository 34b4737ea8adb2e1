// Prepared data: what data.train / data.valid name, and how it becomes the
// binarized corpora and the tokenizer a run reads. Both tasks use this one
// module, so that translation and masked-LM runs treat raw text alike:
//
//   a corpus named by a config key is either a prefix made by `rotor prepare`
//   (monolingual PREFIX.{bin,idx}; parallel PREFIX.src.* and PREFIX.tgt.*)
//   or raw text (monolingual: the file itself; parallel: PREFIX.<src_lang>
//   and PREFIX.<tgt_lang>). Raw text is binarized on first use into the run's
//   directory and reused by later runs (and by the other ranks) while its
//   fingerprint (data/fingerprint.h: the text's and the tokenizer's hashes,
//   the languages, the cleaning limits) matches; else it is binarized again.
//   A prepared prefix whose fingerprint names another tokenizer is an error.
//
//   the tokenizer (data.spm_model, or OUTPUT_DIR/spm.model) is trained from
//   the raw training text when it is missing. One the run owns (OUTPUT_DIR/
//   spm.model) is trained again when its fingerprint (the training text, the
//   vocabulary size, the model type, ...) no longer matches; one the user
//   names is used as it is.
#pragma once

#include <string>
#include <vector>

#include "data/fingerprint.h"
#include "data/sentencepiece.h"

namespace rotor::data {

struct CorpusSource {
  std::string key;   // the config key that names it, for messages ("data.train")
  std::string path;  // the file or prefix it names
  // Both set: a parallel corpus; both empty: monolingual.
  std::string src_lang, tgt_lang;

  bool parallel() const { return !src_lang.empty(); }
  // The files of a prepared prefix exist.
  bool is_prepared() const;
  // The raw text files it would be read from (one monolingual, two parallel).
  std::vector<std::string> raw_files() const;
  // A rotor::Error naming the key when it names neither prepared data nor raw
  // text that exists.
  void check_exists() const;
};

// Cleaning while binarizing (token counts; 0 disables a limit). Empty lines
// are always dropped (with keep_line_ends no line is empty).
struct CleanOptions {
  // Every line keeps its line break (PrepareOptions::keep_line_ends).
  bool keep_line_ends = false;
  int64_t max_len = 0;
  double max_len_ratio = 0;
  std::string max_len_key;  // what sets max_len, for the log ("data.max_len")
};

// What binarizing the raw text of `source` with the tokenizer `spm` and
// `clean` records (the text and the tokenizer are hashed now).
Fingerprint data_fingerprint(const CorpusSource& source, const std::string& spm,
                             const CleanOptions& clean);

// What training a tokenizer from the raw text of `train` with `options`
// records (inputs and model_prefix aside).
Fingerprint tokenizer_fingerprint(const CorpusSource& train, const SpmTrainOptions& options);

// The index files whose presence marks PREFIX as prepared for `source`'s layout.
std::vector<std::string> prepared_files(const CorpusSource& source, const std::string& prefix);

// A rotor::Error naming both tokenizers when the prepared prefix of `source`
// records another tokenizer than `spm` (compared by content). A prefix without
// a fingerprint (older rotor, other tools) is accepted.
void check_prepared_tokenizer(const CorpusSource& source, const std::string& spm);

// A rotor::Error naming the key when the prepared prefix of `source` records
// that its lines lost their line breaks (prepared without --keep-line-ends);
// one without a fingerprint is accepted.
void check_prepared_line_ends(const CorpusSource& source);

// The prepared prefix of `source`: its own path when it is prepared (its
// tokenizer checked as above); else `out_prefix`, binarized from its raw text
// with the tokenizer `spm` unless an earlier run made it with the same
// fingerprint. The files appear atomically (an interrupted binarization
// leaves nothing behind), the fingerprint last.
std::string ensure_prepared(const CorpusSource& source, const std::string& spm,
                            const std::string& out_prefix, const CleanOptions& clean);

// Writes the byte tokenizer with `symbols` to `path` unless it holds it.
void ensure_byte_tokenizer(const std::string& path, const std::vector<std::string>& symbols);

// Trains the tokenizer `spm_path` (PREFIX.model) from the raw text of
// `train` when it does not exist yet, or when `owned` and its fingerprint no
// longer matches; `options` gives everything but inputs and model_prefix. A
// prepared `train` cannot train one: a rotor::Error.
void ensure_tokenizer(const std::string& spm_path, const CorpusSource& train,
                      SpmTrainOptions options, bool owned);

}  // namespace rotor::data
