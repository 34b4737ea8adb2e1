// A tiny real SentencePiece model for tests (checkpoints whose tokenizer
// the Hugging Face export must read).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/sentencepiece.h"

namespace rotor::test {

// A real SentencePiece model of exactly `vocab` pieces at PATH (BPE over
// words of eight letters; [MASK] [CLS] [SEP] at ids 4, 5, 6 when `mlm`), for
// tests whose checkpoints need a tokenizer the Hugging Face export can read.
inline void write_tiny_spm_model(const std::string& path, int32_t vocab, bool mlm) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).parent_path() / ".tiny_spm";
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "text.txt");
    uint64_t x = 12345;
    for (int line = 0; line < 400; ++line) {
      for (int w = 0; w < 8; ++w) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const int len = 1 + static_cast<int>((x >> 60) % 5);
        for (int k = 0; k < len; ++k) f << static_cast<char>('a' + ((x >> (8 * k + 8)) & 7));
        f << (w + 1 < 8 ? " " : "\n");
      }
    }
  }
  data::SpmTrainOptions o;
  o.inputs = {(dir / "text.txt").string()};
  o.model_prefix = (dir / "spm").string();
  o.vocab_size = vocab;
  o.num_threads = 1;
  if (mlm) o.user_defined_symbols = {"[MASK]", "[CLS]", "[SEP]"};
  data::train_sentencepiece(o);
  fs::copy_file(dir / "spm.model", path, fs::copy_options::overwrite_existing);
  fs::remove_all(dir);
}

}  // namespace rotor::test
