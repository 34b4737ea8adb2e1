// `rotor prepare`: encode text with a SentencePiece model and binarize it
// (see corpus.h for the format), cleaning the data the way fairseq/Moses
// recipes do. Parallel: SRC+TGT -> OUT.src.{bin,idx} and OUT.tgt.{bin,idx},
// line i of one aligned with line i of the other. Monolingual: SRC -> OUT.{bin,idx}.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "data/utf8.h"  // find_invalid_utf8, for the users of prepare

namespace rotor::data {

struct PrepareOptions {
  std::string spm_model;
  std::string src;
  std::string tgt;  // empty: monolingual
  std::string output_prefix;
  // Cleaning, on token counts without the eos: a pair is dropped when either
  // side is empty, shorter than min_len, longer than max_len, or (parallel)
  // max(len)/min(len) > max_len_ratio. 0 disables max_len / max_len_ratio.
  int64_t max_len = 250;
  int64_t min_len = 1;
  double max_len_ratio = 1.5;
  int num_threads = 0;      // 0 = hardware threads
  bool append_eos = false;  // store </s> (id 3) after every sentence
  // Every line keeps its line break ("\n", and a "\r" before it), so that
  // the sentences together are the file's bytes exactly (task lm with a byte
  // tokenizer reads them as one stream, without end-of-text tokens).
  bool keep_line_ends = false;
  size_t chunk_lines = 65536;  // lines encoded per parallel round (bounded memory)
  // Called once every output is written whole, just before they replace the
  // earlier ones (the caller's fingerprint goes there: an earlier corpus keeps
  // its fingerprint when this one fails).
  std::function<void()> before_commit;
};

struct PrepareStats {
  int64_t lines = 0;  // input lines (pairs)
  int64_t kept = 0;
  int64_t dropped_empty = 0;
  int64_t dropped_short = 0;
  int64_t dropped_long = 0;
  int64_t dropped_ratio = 0;
  int64_t src_tokens = 0;  // tokens written, eos included when appended
  int64_t tgt_tokens = 0;
  double seconds = 0;
  std::string summary() const;  // one line: kept/dropped per reason, tokens, time
};

// Throws rotor::Error (one line naming the file, and the line where one
// applies) on a missing file, mismatched line counts, an empty corpus (or
// nothing left after cleaning) and invalid UTF-8 (a byte tokenizer takes any
// bytes, and checks none). Outputs appear atomically.
PrepareStats prepare_corpus(const PrepareOptions& options);

}  // namespace rotor::data
