// The raw input of `rotor prepare-ehr`: electronic health records as patients
// with dated visits of diagnosis codes, in either of two formats.
//
// CSV tables (comma-separated, the first line a header naming the columns;
// a field may be double-quoted, "" inside quotes is a quote; blank lines are
// skipped; "\r\n" line ends are accepted):
//   events    patient_id,time,visit_id,code    time an ISO date YYYY-MM-DD
//   patients  patient_id,birth_date             birth_date an ISO date
// Other column names are mapped by EhrCsvColumns (prepare-ehr's --*-column
// flags); other columns are ignored. A visit is the events of one patient with
// one visit_id; its age is the whole months from the birth date to its
// earliest event. Visits are ordered by age (ties by first appearance), the
// codes of a visit by first appearance, a repeated code within a visit kept once.
//
// JSON lines, one patient per line (blank lines skipped):
//   {"patient_id": "P1" or 17, "visits": [{"age": MONTHS, "codes": ["A", ...]}, ...]}
// age a number of months >= 0 (a fraction is rounded down); visits are
// ordered by age as above.
//
// Ages are plausible human ones: from 0 to kMaxEhrAgeMonths (150 years) in
// either format. Codes and patient ids are names that prepare-ehr writes one
// a line (vocab.txt as CODE<TAB>COUNT, SPLIT.patients): they may not hold a
// control character (a tab, a line end, any of U+0000-U+001F and U+007F),
// and a code may not be spelled as one of vocab.txt's special tokens (<pad>
// <unk> <s> </s> [MASK] [CLS] [SEP]).
//
// Errors are one rotor::Error line naming FILE:LINE (the row) and what is
// wrong: a missing column, a row with too few fields, an unknown patient, a
// date before birth, an age past the bound, an empty code, a code or id
// holding a control character, a malformed date, a repeated patient, invalid
// JSON or UTF-8, a visit without codes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rotor::data {

// The oldest age a visit may have, in months (150 years).
inline constexpr int64_t kMaxEhrAgeMonths = 150 * 12;

struct EhrVisit {
  int64_t age_months = 0;
  std::vector<std::string> codes;  // non-empty, each non-empty, no repeats
};

struct EhrPatient {
  std::string id;
  std::vector<EhrVisit> visits;  // ordered by age
};

struct EhrCsvColumns {
  std::string patient_id = "patient_id";  // in both tables
  std::string time = "time";
  std::string visit_id = "visit_id";
  std::string code = "code";
  std::string birth_date = "birth_date";
};

// The patients of the tables, in the order of the patients table (patients
// without events have no visits).
std::vector<EhrPatient> read_ehr_csv(const std::string& events, const std::string& patients,
                                     const EhrCsvColumns& columns = {});

// The patients of a JSON-lines file, in file order.
std::vector<EhrPatient> read_ehr_jsonl(const std::string& path);

// The fields of one CSV line (quotes as above); a rotor::Error naming
// WHERE ("FILE:LINE") for an unterminated quote or text after a closing quote.
std::vector<std::string> split_csv_line(const std::string& line, const std::string& where);

// The year, month and day of an ISO date "YYYY-MM-DD" (a real calendar
// date, years 1 to 9999); false when `text` is not one.
bool parse_iso_date(const std::string& text, int64_t& year, int64_t& month, int64_t& day);

// Why `name` cannot be a code (what = "code") or a patient id (what =
// "patient id"), as a phrase naming it with its control characters escaped
// ("code \"A\\tB\" holds a tab ..."); "" when it can. Empty names are the
// readers' own error.
std::string ehr_name_problem(const std::string& name, const char* what);

// Whole months from the date (y0, m0, d0) to (y1, m1, d1); negative exactly
// when the second is earlier.
int64_t months_between(int64_t y0, int64_t m0, int64_t d0, int64_t y1, int64_t m1, int64_t d1);

}  // namespace rotor::data
