// Greedy packing of documents into rows (data.packing documents): items
// arrive in order and fill rows of `capacity` tokens; an item that does not
// fit the rest of the open row starts the next one (the rest is padding).
// One rule for every task that packs (data/lm.h, data/mlm.h,
// data/ehr_mlm.h, data/classification.h), so that they cannot drift apart.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace rotor::data {

// What a packed text document is (data.document_separator; data/lm.h,
// data/mlm.h): a sentence (line), or a paragraph -- the non-blank sentences
// between blank ones. A sentence is blank when its content (without a
// trailing </s>) is empty or only tokens of blank_tokens (the byte
// tokenizer's spaces, tabs, carriage returns and line breaks).
struct TextDocuments {
  bool paragraphs = false;
  std::vector<int32_t> blank_tokens;
  bool blank(std::span<const int32_t> content) const {
    return std::all_of(content.begin(), content.end(), [&](int32_t t) {
      return std::find(blank_tokens.begin(), blank_tokens.end(), t) != blank_tokens.end();
    });
  }
};

class RowPacker {
 public:
  explicit RowPacker(int64_t capacity) : capacity_(capacity) {}
  // The next item of `length` tokens (>= 1); returns its offset in its row
  // (0: it starts a row).
  int64_t add(int64_t length) {
    if (items_ == 0 || used_ + length > capacity_) {
      starts_.push_back(items_);
      used_ = 0;
    }
    const int64_t offset = used_;
    used_ += length;
    ++items_;
    return offset;
  }
  // Rows so far; the last is rows() - 1.
  int64_t rows() const { return static_cast<int64_t>(starts_.size()); }
  // Each row's first item, then the item count: row r holds items
  // [bounds[r], bounds[r + 1]). {0} without items.
  std::vector<uint64_t> bounds() && {
    starts_.push_back(items_);
    return std::move(starts_);
  }

 private:
  int64_t capacity_;
  int64_t used_ = 0;
  uint64_t items_ = 0;
  std::vector<uint64_t> starts_;
};

}  // namespace rotor::data
