// The text layer of GLUE-style TSV files (data/classification.h tokenizes
// what it returns): one example per line, fields separated by tabs, no
// quoting (GLUE's files hold raw quotes), the first line a header naming the
// columns (or, without one, columns named by their 0-based index). Lines end
// in "\n", "\r\n" or a lone "\r"; a UTF-8 byte-order mark before the first
// line is skipped; blank lines hold no example.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rotor::data {

struct TsvFormat {
  std::string sentence1 = "sentence";  // column names (or indices when !header)
  std::string sentence2;               // "" = single sentences
  std::string label = "label";
  bool header = true;
  std::vector<std::string> labels;  // class i is labels[i]; empty with regression
  bool regression = false;
  // The label column holds a list of labels from `labels` (task
  // multilabel), separated by label_separator: each label trimmed of spaces,
  // a field of spaces or nothing an empty list, the same label twice counted
  // once. With separator ' ' any run of spaces separates; with another, an
  // empty label between separators ("a,,b", "a,") is an error.
  bool multilabel = false;
  char label_separator = ',';
  int64_t max_len = 128;  // tokens per example, specials included
  // Multiple choice (data.choices): N >= 2 reads the fixed layout
  //   label<TAB>context<TAB>choice_1<TAB>...<TAB>choice_N
  // (the first line a header to skip when `header`; the column names and
  // `labels` are not read), the label the 0-based index of the right choice.
  // Without labels (require_labels false) a file may have N + 1 columns,
  // context<TAB>choice_1...; its header (else its first example) decides, and
  // every line must then have as many fields.
  int64_t choices = 0;
};

// The examples of a TSV text, untokenized: views into the text.
struct TsvRows {
  std::vector<std::string_view> s1, s2;  // s2 empty for single sentences
  // Multiple choice: s1 the contexts, candidates[i] the example's N choices.
  std::vector<std::vector<std::string_view>> candidates;
  bool has_labels = false;
  std::vector<int32_t> labels;                   // class indices (classification with labels)
  std::vector<float> targets;                    // regression values (regression with labels)
  std::vector<std::vector<int32_t>> label_sets;  // multilabel: sorted label indices
  size_t size() const { return s1.size(); }
};

// Parses `text`, the contents of the file `path` (named in errors). Errors are
// a rotor::Error naming PATH:LINE: invalid UTF-8, a line whose fields are not
// as many as the header's (without a header: fewer than the columns it
// needs), a label not in format.labels, an empty label in a list, a regression label that is not a
// number a float holds ("+0.5" is one, 1e300 is not), a missing column (the
// header's columns are listed), no examples; with format.choices, a line
// without N + 2 fields (N + 1 without labels) or a label that is not an
// integer from 0 to N - 1. Without the label column the
// rows have no labels, which is an error when `require_labels`.
TsvRows parse_classification_tsv(std::string_view text, const std::string& path,
                                 const TsvFormat& format, bool require_labels);

// Task multilabel's label vocabulary when data.labels names none: the
// distinct labels of the label column of `text` (the training file), sorted
// by their bytes. format.labels is ignored; the file's errors are
// parse_classification_tsv's.
std::vector<std::string> label_vocabulary(std::string_view text, const std::string& path,
                                          const TsvFormat& format);

}  // namespace rotor::data
