// model.init_from and a classifier's label rows (checkpoint/import_hf.h,
// checkpoint/init_checkpoint.h): the parameters with a row per label
// (models::has_label_rows: the output layer, label attention's queries,
// weights and biases) are read by label name when both the checkpoint and
// the task name their labels, so that a row never lands on another label:
//
//   - the same labels in the same order: every row as it is (as before);
//   - the same labels in another order: the rows reordered to the task's;
//   - some labels shared: their rows read, the others' rows keep their
//     fresh initialization;
//   - none shared, or a checkpoint (or task) whose labels have no names and
//     whose row count differs: every label row keeps its fresh
//     initialization (the encoder, the pooler and RoFormer's dense layer
//     still load).
//
// Every case but the first adds a note to the init_from summary line.
// Names: a Hugging Face directory's config.json id2label (transformers'
// default names LABEL_0, LABEL_1, ... name nothing), a rotor checkpoint's
// labels.txt (task multilabel) or config.yaml data.labels (task
// classification); the task's: its data.labels, or its multilabel
// vocabulary. Regression and multiple choice name no labels.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/tensor.h"
#include "nn/parameters.h"

namespace rotor::checkpoint {

struct LabelRows {
  // Per row of the model, the checkpoint's row it reads, or -1 (kept as
  // initialized).
  std::vector<int64_t> source;
  bool identity = true;  // every row from the same row: loaded as it is
  bool none = false;     // no row read
  std::string note;      // "" when identity
};

// How the model's `to_rows` rows (labels `to`, empty: unnamed) read a
// checkpoint's `from_rows` rows (labels `from`, empty: unnamed); `where`
// names the checkpoint in the note.
LabelRows map_label_rows(const std::vector<std::string>& from, int64_t from_rows,
                         const std::vector<std::string>& to, int64_t to_rows,
                         const std::string& where);

// The rows parameter `p` reads from a checkpoint's tensor of shape `shape`:
// every row as it is (identity) for a parameter without label rows
// (models::has_label_rows) or one whose trailing dimensions differ (the
// caller's shape check names it); else map_label_rows, its note added to
// `notes` once.
LabelRows label_rows_of(const nn::Parameter& p, const Shape& shape,
                        const std::vector<std::string>& from, const std::vector<std::string>& to,
                        const std::string& where, std::vector<std::string>& notes);

// `value` (the model's parameter, as initialized) with the rows `m` reads
// from `source` (the checkpoint's values, shaped [from_rows, ...] with the
// parameter's trailing dimensions: checked by the caller).
void read_label_rows(Tensor& value, const std::vector<float>& source, const LabelRows& m);

// The label names of a Hugging Face config.json (id2label; empty when it
// has none, or only transformers' default names).
std::vector<std::string> hf_label_names(const nlohmann::ordered_json& config,
                                        const std::string& where);

// The label names a rotor checkpoint directory holds (labels.txt, else its
// config's data.labels for task classification without regression or
// choices; else empty).
std::vector<std::string> checkpoint_label_names(const std::string& dir, const Config& config);

}  // namespace rotor::checkpoint
