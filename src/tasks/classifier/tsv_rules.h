// The config rules that the tasks reading GLUE-style TSV files share
// (classification and multilabel, src/tasks/*/spec.cpp): the columns and the
// label list. Part of the tasks' config rows, so config/ only (linked by the
// config fuzzer as well).
#pragma once

#include <optional>

#include "config/config.h"
#include "config/tasks.h"

namespace rotor::tasks {

// The TSV columns (data/tsv.h reads them) and that data.seq_len holds an
// example's [CLS] a [SEP] (b [SEP]).
std::optional<ConfigProblem> tsv_rules(const Config& c);

// data.labels: no empty label, none listed twice.
std::optional<ConfigProblem> distinct_labels(const DataConfig& d);

}  // namespace rotor::tasks
