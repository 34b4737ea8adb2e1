// Binarized token corpora, memory-mapped for reading.
//
// A corpus PREFIX is two files, every integer little-endian:
//   PREFIX.bin  int32 token ids of all sentences, concatenated, no separators.
//   PREFIX.idx  a 48-byte header followed by uint64 offsets[count + 1]:
//                 char[8] magic       "ROTORIDX"
//                 uint32  version     1
//                 uint32  dtype       1 = int32 tokens
//                 uint64  count       number of sentences
//                 uint64  vocab_size  the tokenizer's vocabulary size (0 = unknown)
//                 uint64  tokens      total tokens (= offsets[count])
//                 uint64  reserved    0
//               offsets are in tokens: sentence i is bin[offsets[i], offsets[i+1]),
//               so its length is offsets[i+1] - offsets[i]; offsets[0] = 0.
// CorpusWriter writes both under temporary names and renames them when
// finished (.bin first, then .idx, which commits): a crash leaves no torn
// corpus, and a reader checks that the .bin holds exactly `tokens` ids.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rotor::data {

inline constexpr char kIdxMagic[8] = {'R', 'O', 'T', 'O', 'R', 'I', 'D', 'X'};
inline constexpr uint32_t kIdxVersion = 1;
inline constexpr uint32_t kIdxDtypeI32 = 1;
inline constexpr size_t kIdxHeaderBytes = 48;

class MmapCorpus {
 public:
  MmapCorpus() = default;
  ~MmapCorpus();
  MmapCorpus(MmapCorpus&& other) noexcept;
  MmapCorpus& operator=(MmapCorpus&& other) noexcept;
  MmapCorpus(const MmapCorpus&) = delete;
  MmapCorpus& operator=(const MmapCorpus&) = delete;

  // Maps PREFIX.idx and PREFIX.bin. Throws rotor::Error naming the file when
  // one is missing, truncated, has a bad magic/version/dtype, or the two disagree.
  static MmapCorpus open(const std::string& prefix);

  size_t size() const { return count_; }
  uint64_t vocab_size() const { return vocab_size_; }
  uint64_t num_tokens() const { return tokens_; }
  const std::string& prefix() const { return prefix_; }

  std::span<const int32_t> sentence(size_t i) const;  // i < size()

  // A rotor::Error naming PREFIX.bin and the sentence when a token id is not
  // in [0, vocab_size); `source` says whose vocabulary ("of the tokenizer
  // spm.model"). open() checks the ids against the index's vocab_size when it
  // records one.
  void check_ids(uint64_t vocab_size, std::string_view source) const;
  int64_t length(size_t i) const { return static_cast<int64_t>(offsets_[i + 1] - offsets_[i]); }

 private:
  void release();
  std::string prefix_;
  void* idx_map_ = nullptr;
  size_t idx_bytes_ = 0;
  void* bin_map_ = nullptr;
  size_t bin_bytes_ = 0;
  const uint64_t* offsets_ = nullptr;  // [count + 1]
  const int32_t* tokens_ptr_ = nullptr;
  size_t count_ = 0;
  uint64_t vocab_size_ = 0;
  uint64_t tokens_ = 0;
};

// Appends sentences, then finish() commits PREFIX.bin and PREFIX.idx. A
// writer destroyed without finish() removes its temporary files. Several
// corpora that belong together (a parallel pair) seal() each first (every
// byte written and synced, the step that can fail) and commit() each after
// (renames only), so that one failing leaves the earlier set as it was.
class CorpusWriter {
 public:
  CorpusWriter(const std::string& prefix, uint64_t vocab_size);
  ~CorpusWriter();
  CorpusWriter(const CorpusWriter&) = delete;
  CorpusWriter& operator=(const CorpusWriter&) = delete;

  void add(std::span<const int32_t> tokens);
  void seal();
  void commit();
  void finish() {
    seal();
    commit();
  }
  size_t size() const { return offsets_.size() - 1; }

 private:
  std::string prefix_, bin_tmp_, idx_tmp_;
  std::FILE* bin_ = nullptr;
  uint64_t vocab_size_ = 0;
  std::vector<uint64_t> offsets_{0};
  bool sealed_ = false, finished_ = false;
};

}  // namespace rotor::data
