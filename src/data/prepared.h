// Prepared data: what data.train / data.valid name, and how it becomes the
// binarized corpora and the tokenizer a run reads. Both tasks use this one
// module, so that translation and masked-LM runs treat raw text alike:
//
//   a corpus named by a config key is either a prefix made by `rotor prepare`
//   (monolingual PREFIX.{bin,idx}; parallel PREFIX.src.* and PREFIX.tgt.*)
//   or raw text (monolingual: the file itself; parallel: PREFIX.<src_lang>
//   and PREFIX.<tgt_lang>). Raw text is binarized on first use into the run's
//   directory and reused by later runs (and by the other ranks) while it is
//   newer than the text and the tokenizer.
//
//   the tokenizer (data.spm_model, or OUTPUT_DIR/spm.model) is trained from
//   the raw training text when it is missing.
#pragma once

#include <string>
#include <vector>

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
// are always dropped.
struct CleanOptions {
  int64_t max_len = 0;
  double max_len_ratio = 0;
  std::string max_len_key;  // what sets max_len, for the log ("data.max_len")
};

// The prepared prefix of `source`: its own path when it is prepared; else
// `out_prefix`, binarized from its raw text with the tokenizer `spm` unless
// an earlier run already made it from the same text and tokenizer. The files
// appear atomically (an interrupted binarization leaves nothing behind).
std::string ensure_prepared(const CorpusSource& source, const std::string& spm,
                            const std::string& out_prefix, const CleanOptions& clean);

// Trains the tokenizer `spm_path` (PREFIX.model) from the raw text of
// `train` when it does not exist yet; `options` gives everything but inputs
// and model_prefix. A prepared `train` cannot train one: a rotor::Error.
void ensure_tokenizer(const std::string& spm_path, const CorpusSource& train,
                      SpmTrainOptions options);

}  // namespace rotor::data
