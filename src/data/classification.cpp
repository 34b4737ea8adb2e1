#include "data/classification.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "core/io.h"
#include "core/philox.h"
#include "data/row_packer.h"

namespace rotor::data {

PairSpecialIds PairSpecialIds::from_tokenizer(const Tokenizer& tok) {
  PairSpecialIds s;
  auto need = [&](const char* piece) {
    const int32_t id = tok.piece_to_id(piece);
    if (id == tok.unk_id() || id < 0)
      ROTOR_FAIL(
          "tokenizer {} has no {} symbol: classification packs [CLS] a [SEP] b [SEP] "
          "(train it with rotor spm-train --user-defined-symbols \"[MASK],[CLS],[SEP]\")",
          tok.path(), piece);
    return id;
  };
  s.cls = need("[CLS]");
  s.sep = need("[SEP]");
  return s;
}

void pack_example(const std::vector<int32_t>& a, const std::vector<int32_t>& b, bool pair,
                  int64_t max_len, const PairSpecialIds& special, std::vector<int32_t>& ids,
                  std::vector<int32_t>& types) {
  const int64_t specials = pair ? 3 : 2;
  ROTOR_CHECK(max_len >= specials, "max_len {} cannot hold the special tokens", max_len);
  int64_t la = static_cast<int64_t>(a.size()), lb = pair ? static_cast<int64_t>(b.size()) : 0;
  // longest_first: one token at a time from the longer side (b on a tie).
  while (la + lb + specials > max_len) {
    if (la > lb)
      --la;
    else
      --lb;
  }
  ids.clear();
  types.clear();
  ids.push_back(special.cls);
  ids.insert(ids.end(), a.begin(), a.begin() + la);
  ids.push_back(special.sep);
  types.assign(ids.size(), 0);
  if (pair) {
    ids.insert(ids.end(), b.begin(), b.begin() + lb);
    ids.push_back(special.sep);
    types.resize(ids.size(), 1);
  }
}

namespace {

// Encodes texts[i] into out[i] on up to two threads per core.
void encode_all(const Tokenizer& tok, const std::vector<std::string_view>& texts,
                std::vector<std::vector<int32_t>>& out) {
  out.assign(texts.size(), {});
  const size_t n = texts.size();
  const size_t threads = std::max<size_t>(
      1, std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), n / 256 + 1));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = t * n / threads; i < (t + 1) * n / threads; ++i)
        out[i] = tok.encode(texts[i]);
    });
  for (auto& th : pool) th.join();
}

// Multiple choice: each example's N pairs [CLS] context [SEP] choice [SEP].
void pack_choices(const TsvRows& rows, const Tokenizer& tok, int64_t max_len,
                  ClassificationSet& set) {
  std::vector<std::string_view> flat;  // every example's choices, in order
  for (const auto& c : rows.candidates) flat.insert(flat.end(), c.begin(), c.end());
  std::vector<std::vector<int32_t>> context, choice;
  encode_all(tok, rows.s1, context);
  encode_all(tok, flat, choice);
  const PairSpecialIds special = PairSpecialIds::from_tokenizer(tok);
  const size_t N = static_cast<size_t>(set.choices);
  for (size_t i = 0; i < set.examples.size(); ++i) {
    ClassificationExample& ex = set.examples[i];
    ex.choice_ids.resize(N);
    ex.choice_types.resize(N);
    bool cut = false;
    for (size_t k = 0; k < N; ++k) {
      const std::vector<int32_t>& b = choice[i * N + k];
      cut = cut || static_cast<int64_t>(context[i].size() + b.size()) + 3 > max_len;
      pack_example(context[i], b, /*pair=*/true, max_len, special, ex.choice_ids[k],
                   ex.choice_types[k]);
    }
    set.truncated += cut;
  }
}

}  // namespace

ClassificationSet read_classification_tsv(const std::string& path, const TsvFormat& f,
                                          const Tokenizer& tok, bool require_labels) {
  const std::string text = read_file(path, kMaxTsvBytes);
  const TsvRows rows = parse_classification_tsv(text, path, f, require_labels);
  ClassificationSet set;
  set.path = path;
  set.has_labels = rows.has_labels;
  set.multilabel = f.multilabel;
  set.num_labels = static_cast<int64_t>(f.labels.size());
  set.choices = f.choices;
  set.examples.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows.has_labels) continue;
    if (f.multilabel)
      set.examples[i].label_set = rows.label_sets[i];
    else if (f.regression)
      set.examples[i].target = rows.targets[i];
    else
      set.examples[i].label = rows.labels[i];
  }
  if (f.choices > 0) {
    pack_choices(rows, tok, f.max_len, set);
    return set;
  }
  const bool pair = !f.sentence2.empty();
  std::vector<std::vector<int32_t>> a, b;
  encode_all(tok, rows.s1, a);
  if (pair) encode_all(tok, rows.s2, b);
  const PairSpecialIds special = PairSpecialIds::from_tokenizer(tok);
  const int64_t specials = pair ? 3 : 2;
  for (size_t i = 0; i < set.examples.size(); ++i) {
    static const std::vector<int32_t> kNone;
    const std::vector<int32_t>& bi = pair ? b[i] : kNone;
    if (static_cast<int64_t>(a[i].size() + bi.size()) + specials > f.max_len) ++set.truncated;
    pack_example(a[i], bi, pair, f.max_len, special, set.examples[i].ids, set.examples[i].types);
  }
  return set;
}

namespace {

// Where each of n units (an example, or a multiple-choice pair: `per` units
// an example of `indices`) of these lengths goes: one a row, or with
// pack_len > 0 greedily into rows of at most pack_len tokens, in order (a
// unit that does not fit the rest of a row starts the next one).
struct UnitLayout {
  std::vector<int64_t> row, offset;
  std::vector<int32_t> doc;  // the unit's index within its row
  int64_t rows = 0, width = 0;

  UnitLayout(const std::vector<int64_t>& lengths, int64_t pack_len,
             const std::vector<int64_t>& indices, int64_t per) {
    const size_t n = lengths.size();
    row.assign(n, 0);
    offset.assign(n, 0);
    doc.assign(n, 0);
    RowPacker packer(pack_len);
    for (size_t u = 0; u < n; ++u) {
      const int64_t len = lengths[u];
      if (pack_len > 0) {
        ROTOR_CHECK(
            len <= pack_len, "classification batch: example {}{} has {} tokens, more than {}",
            indices[u / static_cast<size_t>(per)],
            per > 1 ? fmt::format(" choice {}", u % static_cast<size_t>(per)) : "", len, pack_len);
        const int64_t at = packer.add(len);
        if (at > 0) doc[u] = doc[u - 1] + 1;
        rows = packer.rows();
        row[u] = rows - 1;
        offset[u] = at;
        width = std::max(width, at + len);
      } else {
        row[u] = rows++;
        width = std::max(width, len);
      }
    }
  }
  int64_t start(size_t u) const { return row[u] * width + offset[u]; }
};

// make_classification_batch of multiple choice: the B * N pairs, example
// b's choice k the unit b * N + k, one a row or packed.
ClassificationHostBatch make_choice_batch(const ClassificationSet& set,
                                          const std::vector<int64_t>& indices, int64_t pack_len) {
  const int64_t B = static_cast<int64_t>(indices.size()), N = set.choices;
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < B; ++b) {
    const ClassificationExample& ex = set.examples[static_cast<size_t>(indices[b])];
    ROTOR_CHECK(static_cast<int64_t>(ex.choice_ids.size()) == N,
                "classification batch: example {} has {} choices, not {}", indices[b],
                ex.choice_ids.size(), N);
    for (const auto& pair : ex.choice_ids) lengths.push_back(static_cast<int64_t>(pair.size()));
  }
  const UnitLayout at(lengths, pack_len, indices, N);
  const int64_t R = at.rows, T = at.width;
  std::vector<int32_t> ids(static_cast<size_t>(R * T), kPadId), types(ids.size(), 0);
  std::vector<int32_t> row_lengths(static_cast<size_t>(R), 0), labels;
  ClassificationHostBatch batch;
  batch.indices = indices;
  if (pack_len > 0) batch.documents.assign(ids.size(), -1);
  for (int64_t b = 0; b < B; ++b) {
    const ClassificationExample& ex = set.examples[static_cast<size_t>(indices[b])];
    for (int64_t k = 0; k < N; ++k) {
      const size_t u = static_cast<size_t>(b * N + k);
      const std::vector<int32_t>& pair = ex.choice_ids[static_cast<size_t>(k)];
      const std::vector<int32_t>& ty = ex.choice_types[static_cast<size_t>(k)];
      std::copy(pair.begin(), pair.end(), ids.begin() + at.start(u));
      std::copy(ty.begin(), ty.end(), types.begin() + at.start(u));
      if (pack_len > 0) {
        std::fill_n(batch.documents.begin() + at.start(u), pair.size(), at.doc[u]);
        batch.cls_positions.push_back(static_cast<int32_t>(at.start(u)));
      }
      row_lengths[static_cast<size_t>(at.row[u])] += static_cast<int32_t>(pair.size());
      batch.tokens += static_cast<int64_t>(pair.size());
    }
    labels.push_back(ex.label);
  }
  batch.input_ids = Tensor::from_ints(ids, {R, T});
  batch.token_type_ids = Tensor::from_ints(types, {R, T});
  batch.lengths = Tensor::from_ints(row_lengths, {R});
  if (set.has_labels) batch.labels = Tensor::from_ints(labels, {B});
  return batch;
}

}  // namespace

ClassificationHostBatch make_classification_batch(const ClassificationSet& set,
                                                  const std::vector<int64_t>& indices,
                                                  bool regression, int64_t pack_len) {
  const int64_t B = static_cast<int64_t>(indices.size());
  ROTOR_CHECK(B > 0, "an empty classification batch");
  if (set.choices > 0) return make_choice_batch(set, indices, pack_len);
  // Each example's row and offset: one a row, or packed greedily.
  std::vector<int64_t> lengths;
  for (int64_t i : indices)
    lengths.push_back(static_cast<int64_t>(set.examples[static_cast<size_t>(i)].ids.size()));
  const UnitLayout at(lengths, pack_len, indices, 1);
  const int64_t R = at.rows, T = at.width;
  std::vector<int32_t> ids(static_cast<size_t>(R * T), kPadId), types(ids.size(), 0);
  // EHR examples carry ages and visit positions (all of a set or none).
  const bool ehr = !set.examples[static_cast<size_t>(indices[0])].ages.empty();
  std::vector<int32_t> ages(ehr ? ids.size() : 0, 0), positions(ages.size(), 0);
  std::vector<int32_t> row_lengths(static_cast<size_t>(R), 0), labels;
  std::vector<float> targets;
  const int64_t C = set.num_labels;
  if (set.multilabel) targets.assign(static_cast<size_t>(B * C), 0.0f);
  ClassificationHostBatch batch;
  batch.indices = indices;
  if (pack_len > 0) batch.documents.assign(ids.size(), -1);
  for (int64_t r = 0; r < B; ++r) {
    const ClassificationExample& ex = set.examples[static_cast<size_t>(indices[r])];
    const size_t u = static_cast<size_t>(r);
    const int64_t start = at.start(u);
    std::copy(ex.ids.begin(), ex.ids.end(), ids.begin() + start);
    std::copy(ex.types.begin(), ex.types.end(), types.begin() + start);
    if (ehr) {
      ROTOR_CHECK(ex.ages.size() == ex.ids.size() && ex.positions.size() == ex.ids.size(),
                  "classification batch: example {} lacks ages or positions", indices[r]);
      std::copy(ex.ages.begin(), ex.ages.end(), ages.begin() + start);
      std::copy(ex.positions.begin(), ex.positions.end(), positions.begin() + start);
    }
    if (pack_len > 0) {
      std::fill_n(batch.documents.begin() + start, ex.ids.size(), at.doc[u]);
      batch.cls_positions.push_back(static_cast<int32_t>(start));
    }
    row_lengths[static_cast<size_t>(at.row[u])] += static_cast<int32_t>(ex.ids.size());
    batch.tokens += static_cast<int64_t>(ex.ids.size());
    if (set.multilabel)
      for (int32_t k : ex.label_set) targets[static_cast<size_t>(r * C + k)] = 1.0f;
    else if (regression)
      targets.push_back(ex.target);
    else
      labels.push_back(ex.label);
  }
  batch.input_ids = Tensor::from_ints(ids, {R, T});
  batch.token_type_ids = Tensor::from_ints(types, {R, T});
  batch.lengths = Tensor::from_ints(row_lengths, {R});
  if (ehr) {
    batch.age_ids = Tensor::from_ints(ages, {R, T});
    batch.position_ids = Tensor::from_ints(positions, {R, T});
  }
  if (set.has_labels && set.multilabel) batch.targets = Tensor::from_floats(targets, {B, C});
  if (set.has_labels && !set.multilabel && regression)
    batch.targets = Tensor::from_floats(targets, {B});
  if (set.has_labels && !set.multilabel && !regression)
    batch.labels = Tensor::from_ints(labels, {B});
  return batch;
}

ClassificationBatcher::ClassificationBatcher(std::shared_ptr<const ClassificationSet> set,
                                             bool regression, ClassificationBatcherOptions o)
    : set_(std::move(set)), regression_(regression), opt_(o), plan_(set_ ? set_->size() : 0, o) {
  ROTOR_CHECK(set_ && set_->size() > 0, "ClassificationBatcher needs examples");
}

ClassificationHostBatch ClassificationBatcher::next() {
  return make_classification_batch(*set_, *plan_.next().ids, regression_, opt_.pack_len);
}

}  // namespace rotor::data
