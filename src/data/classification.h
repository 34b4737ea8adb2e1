// Sentence and sentence-pair classification data in GLUE's TSV layout
// (data/tsv.h reads the text). Sentences are tokenized with the
// run's SentencePiece model and packed as BERT packs them:
//
//   [CLS] a [SEP]            single sentences, token type 0
//   [CLS] a [SEP] b [SEP]    pairs: [CLS] a [SEP] of type 0, b [SEP] of type 1
//
// truncated to max_len tokens by removing tokens from the end of the longer
// sentence, one at a time (Hugging Face's "longest_first"; on a tie from b).
// Labels are class indices (the label's position in the label list), for
// regression numbers, or for task multilabel sets of label indices (a
// multi-hot row per example in the batch). A file without the label column (GLUE's test sets)
// reads without labels when labels are not required.
//
// Multiple choice (TsvFormat::choices = N): each example is a context and N
// candidates, packed as N pairs [CLS] context [SEP] choice_i [SEP] (types
// 0/1), each cut to max_len as above; its label is the right choice's index.
// A batch of B such examples holds B * N rows, example b's choices in rows
// b * N ... b * N + N - 1, and B labels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/batch_plan.h"
#include "data/batcher.h"  // BatchPosition, ShardRemainder
#include "data/sentencepiece.h"
#include "data/tsv.h"  // TsvFormat, parse_classification_tsv

namespace rotor::data {

// The special ids of the packing (the tokenizer's [CLS] and [SEP]).
struct PairSpecialIds {
  int32_t cls = -1, sep = -1;
  // Looks up [CLS] and [SEP]; a tokenizer without them is a rotor::Error
  // naming its file.
  static PairSpecialIds from_tokenizer(const Tokenizer& tokenizer);
};

// [CLS] a [SEP] (b [SEP]) truncated to max_len as described above; `types`
// gets the token type of each id. `b` may be empty (a single sentence).
void pack_example(const std::vector<int32_t>& a, const std::vector<int32_t>& b, bool pair,
                  int64_t max_len, const PairSpecialIds& special, std::vector<int32_t>& ids,
                  std::vector<int32_t>& types);

struct ClassificationExample {
  std::vector<int32_t> ids, types;  // packed, at most max_len
  int32_t label = -1;               // class index (classification with labels)
  float target = 0;                 // regression value (regression with labels)
  std::vector<int32_t> label_set;   // multilabel: sorted label indices (maybe none)
  // EHR patients (data/ehr.h, ehr_multilabel_set): per token the age id and
  // the visit position; empty for text.
  std::vector<int32_t> ages, positions;
  // Multiple choice: each choice's packed pair and its types (ids and types
  // are then empty).
  std::vector<std::vector<int32_t>> choice_ids, choice_types;
};

struct ClassificationSet {
  std::string path;
  std::vector<ClassificationExample> examples;
  bool has_labels = false;
  bool multilabel = false;  // label sets of num_labels labels
  int64_t num_labels = 0;   // the format's labels (classes, or a multilabel vocabulary)
  int64_t truncated = 0;    // examples cut to max_len (multiple choice: any of its pairs)
  int64_t choices = 0;      // N candidates per example, or 0 (data/tsv.h TsvFormat::choices)
  int64_t size() const { return static_cast<int64_t>(examples.size()); }
};

// Reads, parses (data/tsv.h, whose errors name FILE:LINE) and tokenizes a
// TSV file.
ClassificationSet read_classification_tsv(const std::string& path, const TsvFormat& format,
                                          const Tokenizer& tokenizer, bool require_labels);

// One batch on the CPU (tasks/data.h makes model inputs of it).
struct ClassificationHostBatch {
  std::vector<int64_t> indices;  // [B] example ids in the set
  Tensor input_ids;              // i32 [R, T]: right-padded with <pad>; R = B, or B * N
                                 // rows of multiple choice
  Tensor token_type_ids;         // i32 [R, T]
  Tensor lengths;                // i32 [R]: non-pad tokens per row
  Tensor age_ids, position_ids;  // i32 [B, T]: EHR examples' ages and visit positions, or
                                 // undefined (text)
  Tensor labels;                 // i32 [B]: class indices, or undefined
  Tensor targets;                // f32 [B]: regression values; multilabel f32 [B, C]
                                 // multi-hot rows; or undefined
  int64_t tokens = 0;            // non-pad tokens
  // Packed examples (make_classification_batch's pack_len > 0): R <= B rows
  // of several examples each; each token's example index in its row, host
  // [R*T] (-1: padding), and each example's [CLS], host [B] flat r * T + t
  // (multiple choice: each pair's, [B * N]).
  // Empty: one example a row (its [CLS] at r * T).
  std::vector<int32_t> documents, cls_positions;
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

// The batch of these examples (labels included when the set has them).
// pack_len > 0 (data.packing documents): the examples, in order, fill rows
// of at most pack_len tokens greedily (an example that does not fit the
// rest of a row starts the next one); labels and targets stay one per
// example. Multiple choice packs its B * N pairs the same way, in order
// (cls_positions then holds B * N [CLS], example b's choices at b * N ...).
ClassificationHostBatch make_classification_batch(const ClassificationSet& set,
                                                  const std::vector<int64_t>& indices,
                                                  bool regression, int64_t pack_len = 0);

// Batch size, shuffling, sharding (data/batch_plan.h); the last, partial
// batch is kept by default.
struct ClassificationBatcherOptions : BatchPlanOptions {
  int64_t pack_len = 0;  // > 0: each batch's examples packed into rows of this many tokens
  ClassificationBatcherOptions() { stream_layer = 3; }
};

// Batches of examples as data/batch_plan.h lays out an epoch (the shuffle
// stream keyed by layer 3).
class ClassificationBatcher {
 public:
  ClassificationBatcher(std::shared_ptr<const ClassificationSet> set, bool regression,
                        ClassificationBatcherOptions options);
  ClassificationHostBatch next();
  BatchPosition position() const { return plan_.position(); }
  void set_position(BatchPosition p) { plan_.set_position(p); }
  std::vector<std::vector<int64_t>> epoch_plan(uint64_t epoch) const {
    return plan_.epoch_plan(epoch);
  }
  int64_t batches_in_epoch() const { return plan_.batches_in_epoch(); }

 private:
  std::shared_ptr<const ClassificationSet> set_;
  bool regression_;
  ClassificationBatcherOptions opt_;
  BatchPlan plan_;
};

}  // namespace rotor::data
