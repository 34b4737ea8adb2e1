// EHR data: the input readers and their one-line errors, the sequence
// builder against hand-written fixtures, prepare-ehr (determinism, split by
// patient, labels), the synthetic cohort and the two commands.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/hash.h"
#include "data/ehr.h"
#include "data/ehr_input.h"
#include "data/ehr_prepare.h"
#include "data/synth_ehr.h"
#include "support/run_rotor.h"
#include "support/test_util.h"

namespace rotor::data {
namespace {

using test::slurp;
using test::TempDir;

// hash64 of events.csv and patients.csv of `synth ehr --patients 300 --seed 2`
// (SynthEhr.DefaultKnobsKeepTheCohortByteForByte).
constexpr uint64_t kDefaultCohortEventsHash = 6876979724994590227ull;
constexpr uint64_t kDefaultCohortPatientsHash = 15285877059612266321ull;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- the sequence builder ----------------------------------------------------

// Three visits: {7, 8} at age 30, {9} at 31, {10, 11, 12} at 35, stored as
// (code, age, visit) with a [SEP] after each visit.
const std::vector<int32_t> kPatient = {7, 30, 0,  8, 30, 0,  6, 30, 0,  9, 31, 1,  6, 31,
                                       1, 10, 35, 2, 11, 35, 2, 12, 35, 2, 6,  35, 2};

TEST(EhrSequence, ClsSharesPositionZeroSepCarriesItsVisit) {
  const EhrSequence s = build_ehr_sequence(kPatient, 64);
  EXPECT_EQ(s.codes, (std::vector<int32_t>{5, 7, 8, 6, 9, 6, 10, 11, 12, 6}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 2, 2, 2, 2}));
  EXPECT_EQ(s.segments, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(s.ages, (std::vector<int32_t>{30, 30, 30, 30, 31, 31, 35, 35, 35, 35}));
}

TEST(EhrSequence, SegmentsAlternateByVisit) {
  std::vector<int32_t> t;
  for (int32_t v = 0; v < 5; ++v) t.insert(t.end(), {7, 40, v, 6, 40, v});
  const EhrSequence s = build_ehr_sequence(t, 64);
  EXPECT_EQ(s.segments, (std::vector<int32_t>{0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4}));
}

TEST(EhrSequence, TruncationKeepsTheNewestVisits) {
  // max_len 5: [CLS] + the last 4 tokens (visit 3, numbered 0 from there).
  EhrSequence s = build_ehr_sequence(kPatient, 5);
  EXPECT_EQ(s.codes, (std::vector<int32_t>{5, 10, 11, 12, 6}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{0, 0, 0, 0, 0}));
  EXPECT_EQ(s.segments, (std::vector<int32_t>{0, 0, 0, 0, 0}));
  EXPECT_EQ(s.ages, (std::vector<int32_t>{35, 35, 35, 35, 35}));
  // max_len 7: the last 6 tokens start at visit 2's code 9.
  s = build_ehr_sequence(kPatient, 7);
  EXPECT_EQ(s.codes, (std::vector<int32_t>{5, 9, 6, 10, 11, 12, 6}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(s.segments, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(s.ages, (std::vector<int32_t>{31, 31, 31, 35, 35, 35, 35}));
}

TEST(EhrSequence, RejectsBadExamples) {
  EXPECT_THROW(build_ehr_sequence(std::vector<int32_t>{7, 30}, 8), Error);
  EXPECT_THROW(build_ehr_sequence(std::vector<int32_t>{}, 8), Error);
}

// ---- readers -------------------------------------------------------------------

struct CsvFiles {
  TempDir dir;
  std::string events = dir / "events.csv", patients = dir / "patients.csv";
  CsvFiles(const std::string& ev, const std::string& pa) {
    write(events, ev);
    write(patients, pa);
  }
};

const char* kPatients = "patient_id,birth_date\nA,1980-05-20\nB,2000-01-01\nC,1990-01-01\n";

TEST(EhrInput, CsvGroupsVisitsAndComputesAges) {
  CsvFiles f(
      "patient_id,time,visit_id,code\n"
      "A,2010-05-20,v2,I10\n"
      "A,2000-05-19,v1,E11\n"
      "A,2000-05-19,v1,\"J,06\"\n"
      "A,2010-05-20,v2,I10\n"
      "\n"
      "B,2000-03-01,x,Z23\r\n",
      kPatients);
  const auto ps = read_ehr_csv(f.events, f.patients);
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(ps[0].id, "A");
  ASSERT_EQ(ps[0].visits.size(), 2u);
  EXPECT_EQ(ps[0].visits[0].age_months, 239);  // a day short of 20 years
  EXPECT_EQ(ps[0].visits[0].codes, (std::vector<std::string>{"E11", "J,06"}));
  EXPECT_EQ(ps[0].visits[1].age_months, 360);
  EXPECT_EQ(ps[0].visits[1].codes, (std::vector<std::string>{"I10"}));  // kept once
  EXPECT_EQ(ps[1].visits.at(0).age_months, 2);
  EXPECT_TRUE(ps[2].visits.empty());
}

TEST(EhrInput, CsvColumnsMapByName) {
  CsvFiles f("pid,date,enc,icd,extra\nA,2001-01-01,1,E11,x\n", "pid,dob\nA,2000-01-01\n");
  EhrCsvColumns c;
  c.patient_id = "pid";
  c.time = "date";
  c.visit_id = "enc";
  c.code = "icd";
  c.birth_date = "dob";
  const auto ps = read_ehr_csv(f.events, f.patients, c);
  ASSERT_EQ(ps.at(0).visits.size(), 1u);
  EXPECT_EQ(ps[0].visits[0].age_months, 12);
  const std::string e = error_of([&] { read_ehr_csv(f.events, f.patients); });
  EXPECT_NE(e.find("patients.csv:1: no column 'patient_id' (--patient-column)"), std::string::npos)
      << e;
}

TEST(EhrInput, CsvBadRowsNameTheFileAndTheRow) {
  const std::string head = "patient_id,time,visit_id,code\nA,2001-01-01,1,E11\n";
  struct Case {
    std::string row, message;
  } cases[] = {
      {"Z,2001-01-01,1,E11", "unknown patient 'Z'"},
      {"A,1980-05-19,1,E11", "date 1980-05-19 is before the birth date of patient 'A'"},
      {"A,2001-01-01,1,", "empty code"},
      {"A,2001-02-30,1,E11", "malformed date '2001-02-30' in column time"},
      {"A,01/02/2001,1,E11", "malformed date '01/02/2001'"},
      {"A,2001-01-01", "2 fields, the header has 4"},
      {"A,2001-01-01,1,\"E11", "unterminated quoted field"},
  };
  for (const Case& c : cases) {
    CsvFiles f(head + c.row + "\n", kPatients);
    const std::string e = error_of([&] { read_ehr_csv(f.events, f.patients); });
    EXPECT_NE(e.find(f.events + ":3: " + c.message), std::string::npos) << c.row << " -> " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  CsvFiles bad_birth(head, "patient_id,birth_date\nA,1980-13-01\n");
  EXPECT_NE(error_of([&] {
              read_ehr_csv(bad_birth.events, bad_birth.patients);
            }).find(bad_birth.patients + ":2: malformed date '1980-13-01' in column birth_date"),
            std::string::npos);
  CsvFiles twice(head, "patient_id,birth_date\nA,1980-01-01\nA,1981-01-01\n");
  EXPECT_NE(error_of([&] {
              read_ehr_csv(twice.events, twice.patients);
            }).find(twice.patients + ":3: patient 'A' is listed twice"),
            std::string::npos);
}

TEST(EhrInput, JsonLines) {
  TempDir d;
  const std::string path = d / "p.jsonl";
  write(path,
        "{\"patient_id\": 17, \"visits\": [{\"age\": 40.5, \"codes\": [\"I10\", \"I10\"]},"
        " {\"age\": 12, \"codes\": [\"J45\"]}]}\n\n"
        "{\"patient_id\": \"B\", \"visits\": []}\n");
  const auto ps = read_ehr_jsonl(path);
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0].id, "17");
  ASSERT_EQ(ps[0].visits.size(), 2u);
  EXPECT_EQ(ps[0].visits[0].age_months, 12);  // ordered by age
  EXPECT_EQ(ps[0].visits[1].age_months, 40);
  EXPECT_EQ(ps[0].visits[1].codes, (std::vector<std::string>{"I10"}));
  struct Case {
    std::string line, message;
  } cases[] = {
      {"{\"patient_id\": \"A\", \"visits\": [{\"age\": 3, \"codes\": [\"\"]}]}",
       ":2: visit 1: empty code"},
      {"{\"patient_id\": \"A\", \"visits\": [{\"age\": -3, \"codes\": [\"X\"]}]}",
       ":2: visit 1: age -3 is not a number of months"},
      {"{\"patient_id\": \"A\", \"visits\": [{\"age\": 3, \"codes\": []}]}",
       ":2: visit 1: no codes"},
      {"{\"patient_id\": \"A\"}", ":2: missing key \"visits\""},
      {"{\"patient_id\": \"A\", \"visits\": [}", ":2: not a valid JSON line"},
      {"{\"patient_id\": \"17\", \"visits\": []}", ":2: patient '17' repeats line 1"},
  };
  for (const Case& c : cases) {
    write(path, "{\"patient_id\": 17, \"visits\": []}\n" + c.line + "\n");
    const std::string e = error_of([&] { read_ehr_jsonl(path); });
    EXPECT_NE(e.find(path + c.message), std::string::npos) << c.line << " -> " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// ---- prepare-ehr ---------------------------------------------------------------

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(slurp(path));
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

EhrPrepareOptions jsonl_options(const std::string& jsonl, const std::string& out) {
  EhrPrepareOptions o;
  o.jsonl = jsonl;
  o.output_dir = out;
  o.valid_fraction = o.test_fraction = 0.2;
  return o;
}

TEST(EhrPrepare, DeterministicAndSplitByPatient) {
  TempDir d;
  SynthEhrOptions so;
  so.output_dir = d / "synth";
  so.patients = 300;
  so.seed = 5;
  so.format = "jsonl";
  write_synth_ehr(so);
  const std::string jsonl = d / "synth/patients.jsonl";
  EhrPrepareOptions o = jsonl_options(jsonl, d / "a");
  o.min_visits = 4;
  const EhrPrepareStats st = prepare_ehr(o);
  o.output_dir = d / "b";
  prepare_ehr(o);
  // The same patients in reverse order: the same split of each patient.
  std::vector<std::string> rev = lines_of(jsonl);
  std::reverse(rev.begin(), rev.end());
  std::string text;
  for (const auto& l : rev) text += l + "\n";
  write(d / "rev.jsonl", text);
  EhrPrepareOptions r = o;
  r.jsonl = d / "rev.jsonl";
  r.output_dir = d / "r";
  prepare_ehr(r);
  std::set<std::string> all;
  int64_t total = 0;
  for (const char* s : {"train", "valid", "test"}) {
    for (const char* ext : {".bin", ".idx", ".patients"})
      EXPECT_EQ(slurp(d / "a/" + s + ext), slurp(d / "b/" + s + ext)) << s << ext;
    const auto ids = lines_of(d / "a/" + std::string(s) + ".patients");
    auto rids = lines_of(d / "r/" + std::string(s) + ".patients");
    EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()),
              std::set<std::string>(rids.begin(), rids.end()))
        << s;
    EXPECT_GT(ids.size(), 10u) << s;
    total += static_cast<int64_t>(ids.size());
    all.insert(ids.begin(), ids.end());
    const EhrSplit split = EhrSplit::open(d / "a/" + s);
    EXPECT_EQ(split.size(), ids.size());
    EXPECT_FALSE(split.has_labels());
  }
  EXPECT_EQ(slurp(d / "a/vocab.txt"), slurp(d / "b/vocab.txt"));
  EXPECT_EQ(total, st.kept);
  EXPECT_EQ(static_cast<int64_t>(all.size()), total);  // no patient in two splits
  EXPECT_GT(st.dropped_few_visits, 0);
  EXPECT_EQ(st.kept + st.dropped_few_visits, 300);
  // Every kept patient has at least min_visits visits: count the [SEP]s.
  const EhrSplit train = EhrSplit::open(d / "a/train");
  for (size_t i = 0; i < train.size(); ++i) {
    auto t = train.tokens(i);
    int seps = 0;
    for (size_t k = 0; k < t.size(); k += 3) seps += t[k] == kEhrSep;
    EXPECT_GE(seps, 4);
  }
  const EhrMeta m = EhrMeta::load(d / "a");
  EXPECT_EQ(m.vocab_size, st.vocab_size);
  EXPECT_GT(m.age_vocab_size, 50);  // years, born 1930..2009
  EXPECT_LE(m.age_vocab_size, 92);
}

TEST(EhrPrepare, NextVisitLabelsAndMinCount) {
  TempDir d;
  write(d / "p.jsonl",
        "{\"patient_id\": \"A\", \"visits\": [{\"age\": 24, \"codes\": [\"X\", \"RARE\"]},"
        " {\"age\": 30, \"codes\": [\"Y\", \"X\"]}]}\n"
        "{\"patient_id\": \"B\", \"visits\": [{\"age\": 5, \"codes\": [\"X\"]}]}\n");
  EhrPrepareOptions o = jsonl_options(d / "p.jsonl", d / "out");
  o.valid_fraction = o.test_fraction = 0;
  o.labels = "next_visit";
  o.min_count = 2;
  o.age_unit = "months";
  o.age_bin = 6;
  const EhrPrepareStats st = prepare_ehr(o);
  EXPECT_EQ(st.kept, 1);
  EXPECT_EQ(st.dropped_no_label, 1);  // B has one visit
  // The vocabulary counts training patients' codes: X 2, RARE 1, Y 1.
  EXPECT_EQ(lines_of(d / "out/vocab.txt").size(), 8u);
  EXPECT_EQ(lines_of(d / "out/vocab.txt")[7], "X\t2");
  const EhrSplit s = EhrSplit::open(d / "out/train");
  ASSERT_EQ(s.size(), 1u);
  ASSERT_TRUE(s.has_labels());
  // History: visit 1 only (X, <unk>, [SEP]) at age id 24 / 6 = 4; label: X (Y is <unk>).
  const auto t = s.tokens(0);
  EXPECT_EQ(std::vector<int32_t>(t.begin(), t.end()),
            (std::vector<int32_t>{7, 4, 0, kEhrUnk, 4, 0, kEhrSep, 4, 0}));
  const auto l = s.labels(0);
  EXPECT_EQ(std::vector<int32_t>(l.begin(), l.end()), (std::vector<int32_t>{7}));
  // window: the cut-off needs a visit within the window after it.
  o.labels = "window:3";
  o.output_dir = d / "w";
  const std::string e = error_of([&] { prepare_ehr(o); });
  EXPECT_NE(e.find("no patient left of 2"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(d / "w/ehr.json"));
  EXPECT_THROW(parse_ehr_labels("window:0"), Error);
  EXPECT_THROW(parse_ehr_labels("next"), Error);
  EXPECT_EQ(parse_ehr_labels("window:12"), 12);
}

// ---- synth ehr -----------------------------------------------------------------

TEST(SynthEhr, DeterministicWithPlantedStructure) {
  const auto a = synth_ehr_cohort(2000, 3), b = synth_ehr_cohort(2000, 3);
  ASSERT_EQ(a.size(), 2000u);
  int64_t chronic_next = 0, chronic_seen = 0, ckd_diab = 0, ckd = 0, diab = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].record.visits.size(), b[i].record.visits.size());
    const auto& vs = a[i].record.visits;
    EXPECT_GE(vs.size(), 1u);
    bool has_e11 = false, has_n18 = false;
    for (size_t v = 0; v < vs.size(); ++v) {
      EXPECT_FALSE(vs[v].codes.empty());
      EXPECT_EQ(vs[v].codes, b[i].record.visits[v].codes);
      if (v > 0) {
        EXPECT_GE(vs[v].age_months, vs[v - 1].age_months + 1);
      }
      auto has = [&](size_t w, const char* c) {
        return std::find(vs[w].codes.begin(), vs[w].codes.end(), c) != vs[w].codes.end();
      };
      if (has(v, "I10") && v + 1 < vs.size()) {
        ++chronic_seen;
        chronic_next += has(v + 1, "I10");
      }
      has_e11 = has_e11 || has(v, "E11");
      has_n18 = has_n18 || has(v, "N18");
    }
    diab += has_e11;
    ckd += has_n18;
    ckd_diab += has_e11 && has_n18;
  }
  // Chronic codes recur (0.8 a visit); CKD comes mostly with diabetes.
  ASSERT_GT(chronic_seen, 100);
  EXPECT_GT(static_cast<double>(chronic_next) / static_cast<double>(chronic_seen), 0.7);
  ASSERT_GT(ckd, 10);
  EXPECT_GT(static_cast<double>(ckd_diab) / static_cast<double>(ckd),
            2.0 * static_cast<double>(diab) / 2000.0);
  // Another seed, another cohort.
  const auto c = synth_ehr_cohort(20, 4);
  int differ = 0;
  for (size_t i = 0; i < c.size(); ++i)
    differ += c[i].record.visits.size() != a[i].record.visits.size() ||
              c[i].birth_year != a[i].birth_year;
  EXPECT_GT(differ, 10);
}

TEST(SynthEhr, CsvAndJsonlReadBackAlike) {
  TempDir d;
  SynthEhrOptions o;
  o.output_dir = d / "c";
  o.patients = 50;
  write_synth_ehr(o);
  o.output_dir = d / "j";
  o.format = "jsonl";
  write_synth_ehr(o);
  const auto c = read_ehr_csv(d / "c/events.csv", d / "c/patients.csv");
  const auto j = read_ehr_jsonl(d / "j/patients.jsonl");
  const auto want = synth_ehr_cohort(50, 1);
  ASSERT_EQ(c.size(), 50u);
  ASSERT_EQ(j.size(), 50u);
  for (size_t i = 0; i < 50; ++i) {
    ASSERT_EQ(c[i].visits.size(), want[i].record.visits.size());
    ASSERT_EQ(j[i].visits.size(), want[i].record.visits.size());
    for (size_t v = 0; v < c[i].visits.size(); ++v) {
      EXPECT_EQ(c[i].visits[v].age_months, want[i].record.visits[v].age_months);
      EXPECT_EQ(j[i].visits[v].age_months, want[i].record.visits[v].age_months);
      EXPECT_EQ(c[i].visits[v].codes, want[i].record.visits[v].codes);
      EXPECT_EQ(j[i].visits[v].codes, want[i].record.visits[v].codes);
    }
  }
}

// The knobs at their defaults keep the cohort of before the knobs, byte for
// byte: the shipped results and the tests above were made with it. The hash
// is that of `rotor synth ehr --patients 300 --seed 2` from the commit before
// the knobs (its events.csv and patients.csv were compared with md5sum).
TEST(SynthEhr, DefaultKnobsKeepTheCohortByteForByte) {
  TempDir d;
  SynthEhrOptions o;
  o.output_dir = d / "a";
  o.patients = 300;
  o.seed = 2;
  write_synth_ehr(o);
  EXPECT_EQ(hash64(slurp(d / "a/events.csv")), kDefaultCohortEventsHash);
  EXPECT_EQ(hash64(slurp(d / "a/patients.csv")), kDefaultCohortPatientsHash);
}

// Codes of one patient's visit v.
bool visit_has(const SynthEhrPatient& p, size_t v, const std::string& code) {
  const auto& c = p.record.visits[v].codes;
  return std::find(c.begin(), c.end(), code) != c.end();
}

bool is_chronic(const std::string& c) {
  for (const char* k : {"E11", "I10", "N18", "D63", "I50", "I48", "J45", "F32", "M81", "G30"})
    if (c == k) return true;
  return false;
}

TEST(SynthEhr, KnobsDoWhatTheySay) {
  // recur 0: a chronic code is acquired once and never seen again; recur 1:
  // at every later visit.
  SynthEhrKnobs k;
  k.recur = 0;
  for (const auto& p : synth_ehr_cohort(300, 5, k)) {
    std::map<std::string, int> seen;
    for (const auto& v : p.record.visits)
      for (const auto& c : v.codes)
        if (is_chronic(c)) {
          EXPECT_EQ(++seen[c], 1) << p.id << " " << c;
        }
  }
  k.recur = 1;
  int64_t acquired = 0;
  for (const auto& p : synth_ehr_cohort(300, 5, k))
    for (size_t v = 0; v + 1 < p.record.visits.size(); ++v)
      for (const auto& c : p.record.visits[v].codes)
        if (is_chronic(c)) {
          ++acquired;
          EXPECT_TRUE(visit_has(p, v + 1, c)) << p.id << " " << c;
        }
  EXPECT_GT(acquired, 100);
  // chains at strength 1: every trigger's target at the next visit, and no
  // target without its trigger before; at strength 0 no target at all.
  k = {};
  k.chains = 5;
  k.chain_strength = 1;
  int64_t triggers = 0;
  for (const auto& p : synth_ehr_cohort(300, 5, k))
    for (size_t v = 0; v < p.record.visits.size(); ++v)
      for (int i = 1; i <= 5; ++i) {
        const std::string x = fmt::format("X{:03}", i), y = fmt::format("Y{:03}", i);
        if (visit_has(p, v, x) && v + 1 < p.record.visits.size()) {
          ++triggers;
          EXPECT_TRUE(visit_has(p, v + 1, y));
        }
        if (visit_has(p, v, y)) {
          EXPECT_TRUE(v > 0 && visit_has(p, v - 1, x));
        }
      }
  EXPECT_GT(triggers, 100);
  k.chain_strength = 0;
  for (const auto& p : synth_ehr_cohort(300, 5, k))
    for (const auto& v : p.record.visits)
      for (const auto& c : v.codes) EXPECT_NE(c[0], 'Y') << c;
  // Noise: 100 codes, Zipf 1.5, one a visit: the first code far above the
  // fiftieth, the extra codes named A001 ..
  k = {};
  k.noise_codes = 100;
  k.noise_per_visit = 1;
  k.noise_zipf = 1.5;
  std::map<std::string, int64_t> count;
  for (const auto& p : synth_ehr_cohort(1000, 5, k))
    for (const auto& v : p.record.visits) {
      int64_t acute = 0;
      for (const auto& c : v.codes) acute += !is_chronic(c);
      EXPECT_EQ(acute, 1);
      for (const auto& c : v.codes) ++count[c];
    }
  EXPECT_GT(count["J06"], 20 * std::max<int64_t>(1, count["A026"]));  // rank 1 vs rank 50
  EXPECT_GT(count["A001"] + count["A002"] + count["A003"], 0);
  // age_effect 0: no age curve, so asthma (falling with age) is as common in
  // visits after 60 as before 20.
  k = {};
  k.age_effect = 0;
  int64_t old_j45 = 0, old_visits = 0, flat_old_j45 = 0, flat_old_visits = 0;
  for (int flat = 0; flat < 2; ++flat)
    for (const auto& p : synth_ehr_cohort(2000, 5, flat ? k : SynthEhrKnobs{}))
      for (size_t v = 0; v < p.record.visits.size(); ++v)
        if (p.record.visits[v].age_months > 60 * 12) {
          (flat ? flat_old_visits : old_visits) += 1;
          (flat ? flat_old_j45 : old_j45) += visit_has(p, v, "J45");
        }
  EXPECT_GT(static_cast<double>(flat_old_j45) / static_cast<double>(flat_old_visits),
            5.0 * static_cast<double>(old_j45) / static_cast<double>(old_visits));
  k = {};
  k.recur = 1.5;
  EXPECT_THROW(synth_ehr_cohort(1, 1, k), Error);
  k = {};
  k.noise_per_visit = 30;
  EXPECT_THROW(synth_ehr_cohort(1, 1, k), Error);
}

// ---- the commands ----------------------------------------------------------------

TEST(EhrCli, SynthThenPrepare) {
  TempDir d;
  auto r = test::run_rotor(d, "synth ehr --patients 200 --seed 2 --output " + (d / "s"));
  ASSERT_EQ(r.code, 0) << r.err;
  r = test::run_rotor(d, "prepare-ehr --events " + (d / "s/events.csv") + " --patients " +
                             (d / "s/patients.csv") + " --output " + (d / "p") +
                             " --labels next_visit --min-visits 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("prepare-ehr: 200 patients"), std::string::npos) << r.out;
  const EhrSplit s = EhrSplit::open(d / "p/valid");
  EXPECT_TRUE(s.has_labels());
  EXPECT_GT(s.size(), 0u);
  // A bad row: one line naming the file and the row, nothing published.
  write(d / "bad.csv", "patient_id,time,visit_id,code\nP000001,1900-01-01,1,E11\n");
  r = test::run_rotor(d, "prepare-ehr --events " + (d / "bad.csv") + " --patients " +
                             (d / "s/patients.csv") + " --output " + (d / "q"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(d / "bad.csv:2: date 1900-01-01 is before the birth date of patient "
                           "'P000001'"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(d / "q/ehr.json"));
  r = test::run_rotor(
      d, "prepare-ehr --jsonl " + (d / "s/events.csv") + " --events x --output " + (d / "q"));
  EXPECT_NE(r.err.find("give either --events and --patients (CSV) or --jsonl"), std::string::npos)
      << r.err;
  r = test::run_rotor(d, "prepare-ehr --jsonl x.jsonl --output " + (d / "q") + " --labels bogus");
  EXPECT_NE(r.code, 0);
  // A knob out of range: one line naming the flag.
  r = test::run_rotor(d, "synth ehr --chain-strength 2 --output " + (d / "k"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--chain-strength must be"), std::string::npos) << r.err;
  r = test::run_rotor(d, "synth ehr --patients 50 --chains 3 --noise-zipf 1 --output " + (d / "k"));
  ASSERT_EQ(r.code, 0) << r.err;
}

}  // namespace
}  // namespace rotor::data
