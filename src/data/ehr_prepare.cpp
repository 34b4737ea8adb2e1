#include "data/ehr_prepare.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "core/hash.h"
#include "core/io.h"
#include "core/json_io.h"
#include "core/philox.h"
#include "data/corpus.h"
#include "data/ehr.h"
#include "data/fingerprint.h"

namespace fs = std::filesystem;

namespace rotor::data {

std::string EhrPrepareStats::summary() const {
  return fmt::format(
      "prepare-ehr: {} patients, kept {}, dropped: fewer visits {}, no label {}; examples: train "
      "{}, valid {}, test {}; {} codes in the vocabulary, {} ages; {} tokens ({} <unk>)",
      patients, kept, dropped_few_visits, dropped_no_label, train, valid, test,
      vocab_size - kEhrFirstCode, age_vocab_size, tokens, unknown_tokens);
}

int64_t parse_ehr_labels(const std::string& labels) {
  if (labels.empty() || labels == "next_visit") return 0;
  const std::string prefix = "window:";
  if (labels.compare(0, prefix.size(), prefix) == 0) {
    const char* b = labels.data() + prefix.size();
    const char* e = labels.data() + labels.size();
    int64_t months = 0;
    auto [p, ec] = std::from_chars(b, e, months);
    if (ec == std::errc() && p == e && b != e && months >= 1 && months <= 1200) return months;
  }
  ROTOR_FAIL(
      "prepare-ehr: --labels must be next_visit or window:MONTHS (MONTHS from 1 to 1200), "
      "got '{}'",
      labels);
}

namespace {

enum Split { kTrain = 0, kValid = 1, kTest = 2 };
const char* const kSplitNames[] = {"train", "valid", "test"};

// A per-patient random stream, keyed by the seed, the purpose and the id:
// independent of the input's order and of the other patients.
PhiloxRng patient_rng(uint64_t seed, std::string_view purpose, const std::string& id) {
  return PhiloxRng(seed, hash64(std::string(purpose) + '\0' + id));
}

Split split_of(const EhrPrepareOptions& o, const std::string& id) {
  const double u = patient_rng(o.seed, "split", id).uniform();
  if (u < o.test_fraction) return kTest;
  if (u < o.test_fraction + o.valid_fraction) return kValid;
  return kTrain;
}

// One example: the visits [0, history) of a patient, and its label codes.
struct Example {
  const EhrPatient* patient;
  size_t history;
  std::vector<std::string> labels;
};

// The cut-off and labels of `p` under the label rule; false when it has none.
bool make_example(const EhrPrepareOptions& o, int64_t window, const EhrPatient& p, Example& ex) {
  ex.patient = &p;
  ex.history = p.visits.size();
  if (o.labels.empty()) return true;
  const size_t n = p.visits.size();
  if (n < 2) return false;
  std::vector<size_t> cuts;
  for (size_t c = 0; c + 1 < n; ++c)
    if (window == 0 || p.visits[c + 1].age_months - p.visits[c].age_months <= window)
      cuts.push_back(c);
  if (cuts.empty()) return false;
  const size_t c = cuts[patient_rng(o.seed, "cut-off", p.id).below(cuts.size())];
  ex.history = c + 1;
  std::set<std::string> labels;
  for (size_t j = c + 1; j < n; ++j) {
    if (window == 0 ? j > c + 1 : p.visits[j].age_months - p.visits[c].age_months > window) break;
    labels.insert(p.visits[j].codes.begin(), p.visits[j].codes.end());
  }
  ex.labels.assign(labels.begin(), labels.end());
  return true;
}

}  // namespace

DirectoryWriter ehr_prepare_writer() {
  return {"prepare-ehr", [](const std::string& name) {
            // What an earlier prepare-ehr wrote: ehr.json, vocab.txt, and each
            // split's SPLIT.{bin,idx,patients,labels.bin,labels.idx}.
            if (name == "ehr.json" || name == "vocab.txt") return true;
            for (const char* split : kSplitNames)
              for (const char* ext : {".bin", ".idx", ".patients", ".labels.bin", ".labels.idx"})
                if (name == std::string(split) + ext) return true;
            return false;
          }};
}

EhrPrepareStats prepare_ehr(const EhrPrepareOptions& o) {
  const int64_t window = parse_ehr_labels(o.labels);
  if (o.age_unit != "years" && o.age_unit != "months")
    ROTOR_FAIL("prepare-ehr: --age-unit must be years or months, got '{}'", o.age_unit);
  if (o.age_bin < 1) ROTOR_FAIL("prepare-ehr: --age-bin must be at least 1, got {}", o.age_bin);
  const bool csv = o.jsonl.empty();
  const std::vector<EhrPatient> patients =
      csv ? read_ehr_csv(o.events, o.patients, o.columns) : read_ehr_jsonl(o.jsonl);
  EhrPrepareStats st;
  st.patients = static_cast<int64_t>(patients.size());

  std::vector<Example> examples[3];
  for (const EhrPatient& p : patients) {
    if (static_cast<int64_t>(p.visits.size()) < o.min_visits) {
      ++st.dropped_few_visits;
      continue;
    }
    Example ex;
    if (!make_example(o, window, p, ex)) {
      ++st.dropped_no_label;
      continue;
    }
    examples[split_of(o, p.id)].push_back(std::move(ex));
  }
  // The vocabulary: codes of the training patients (all their visits).
  std::map<std::string, int64_t> counts;
  for (const Example& ex : examples[kTrain])
    for (const EhrVisit& v : ex.patient->visits)
      for (const std::string& c : v.codes) ++counts[c];
  std::vector<std::pair<std::string, int64_t>> codes;
  for (const auto& [code, n] : counts)
    if (n >= o.min_count) codes.emplace_back(code, n);
  std::stable_sort(codes.begin(), codes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::unordered_map<std::string, int32_t> ids;
  std::string vocab = "<pad>\t0\n<unk>\t0\n<s>\t0\n</s>\t0\n[MASK]\t0\n[CLS]\t0\n[SEP]\t0\n";
  for (const auto& [code, n] : codes) {
    ids.emplace(code, kEhrFirstCode + static_cast<int32_t>(ids.size()));
    vocab += fmt::format("{}\t{}\n", code, n);
  }
  st.vocab_size = kEhrFirstCode + static_cast<int64_t>(codes.size());
  for (int s = 0; s < 3; ++s) st.kept += static_cast<int64_t>(examples[s].size());
  if (st.kept == 0)
    ROTOR_FAIL("prepare-ehr: no patient left of {} (fewer than --min-visits {}: {}, no label: {})",
               st.patients, o.min_visits, st.dropped_few_visits, st.dropped_no_label);
  if (examples[kTrain].empty())
    ROTOR_FAIL("prepare-ehr: the training split is empty ({} patients kept)", st.kept);
  if (codes.empty()) {
    // Every token would be <unk>: a directory that training refuses.
    int64_t most = 0;
    for (const auto& [code, n] : counts) most = std::max(most, n);
    ROTOR_FAIL(
        "prepare-ehr: no code is left: the most frequent of the {} codes of the training split "
        "occurs {} times, fewer than --min-count {}; lower --min-count",
        counts.size(), most, o.min_count);
  }

  Fingerprint f("rotor prepare-ehr");
  f.setting("--labels", o.labels)
      .setting("--min-visits", o.min_visits)
      .setting("--min-count", o.min_count)
      .setting("--age-unit", o.age_unit)
      .setting("--age-bin", o.age_bin)
      .setting("--valid-fraction", o.valid_fraction)
      .setting("--test-fraction", o.test_fraction)
      .setting("--seed", o.seed);
  if (csv) {
    f.setting("--patient-column", o.columns.patient_id)
        .setting("--time-column", o.columns.time)
        .setting("--visit-column", o.columns.visit_id)
        .setting("--code-column", o.columns.code)
        .setting("--birth-column", o.columns.birth_date);
    f.file("--events", o.events).file("--patients", o.patients);
  } else {
    f.file("--jsonl", o.jsonl);
  }

  // The directory is written whole or not at all (core/io.h write_directory):
  // a failure leaves an earlier one as it was, and nothing mixes the two.
  const int64_t months_per_id = (o.age_unit == "years" ? 12 : 1) * o.age_bin;
  int64_t max_age = 0;
  const auto write_splits = [&](const std::string& dir) {
    atomic_write_file(dir + "/vocab.txt", vocab);
    std::vector<int32_t> buf, label_buf;
    for (int s = 0; s < 3; ++s) {
      const std::string prefix = dir + "/" + kSplitNames[s];
      CorpusWriter out(prefix, 0);
      std::unique_ptr<CorpusWriter> labels_out;
      if (!o.labels.empty())
        labels_out = std::make_unique<CorpusWriter>(prefix + ".labels", st.vocab_size);
      std::string ids_text;
      for (const Example& ex : examples[s]) {
        ids_text += ex.patient->id + "\n";
        buf.clear();
        for (size_t v = 0; v < ex.history; ++v) {
          const EhrVisit& visit = ex.patient->visits[v];
          const int64_t age = visit.age_months / months_per_id;
          max_age = std::max(max_age, age);
          auto put = [&](int32_t code) {
            buf.insert(buf.end(), {code, static_cast<int32_t>(age), static_cast<int32_t>(v)});
          };
          for (const std::string& c : visit.codes) {
            auto it = ids.find(c);
            st.unknown_tokens += it == ids.end();
            put(it == ids.end() ? kEhrUnk : it->second);
          }
          put(kEhrSep);
        }
        st.tokens += static_cast<int64_t>(buf.size() / kEhrChannels);
        out.add(buf);
        if (labels_out) {
          label_buf.clear();
          for (const std::string& c : ex.labels)
            if (auto it = ids.find(c); it != ids.end()) label_buf.push_back(it->second);
          std::sort(label_buf.begin(), label_buf.end());
          labels_out->add(label_buf);
        }
      }
      atomic_write_file(prefix + ".patients", ids_text);
      out.finish();
      if (labels_out) labels_out->finish();
    }
  };
  st.train = static_cast<int64_t>(examples[kTrain].size());
  st.valid = static_cast<int64_t>(examples[kValid].size());
  st.test = static_cast<int64_t>(examples[kTest].size());

  json_io::Json meta = json_io::Json::object();
  meta["format"] = "rotor-ehr-1";
  meta["vocab_size"] = st.vocab_size;
  meta["age_vocab_size"] = 0;  // known once the splits are written
  meta["age_unit"] = o.age_unit;
  meta["age_bin"] = o.age_bin;
  meta["labels"] = o.labels;
  meta["examples"] = {{"train", st.train}, {"valid", st.valid}, {"test", st.test}};
  meta["fingerprint"] = f.to_json();
  write_directory(o.output_dir, ehr_prepare_writer(), [&](const std::string& dir) {
    write_splits(dir);
    st.age_vocab_size = max_age + 1;
    meta["age_vocab_size"] = st.age_vocab_size;
    atomic_write_file(dir + "/ehr.json",
                      meta.dump(2, ' ', false, json_io::Json::error_handler_t::replace) + "\n");
  });
  return st;
}

}  // namespace rotor::data
