#include "data/ehr_input.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"
#include "data/utf8.h"

namespace rotor::data {

// Input tables larger than this are refused (they are read whole).
inline constexpr uint64_t kMaxEhrBytes = uint64_t{4} << 30;

std::vector<std::string> split_csv_line(const std::string& line, const std::string& where) {
  std::vector<std::string> fields(1);
  size_t i = 0;
  bool field_start = true;
  while (i < line.size()) {
    const char c = line[i];
    if (field_start && c == '"') {
      ++i;
      for (;;) {
        if (i >= line.size()) ROTOR_FAIL("{}: unterminated quoted field", where);
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            fields.back() += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        fields.back() += line[i++];
      }
      if (i < line.size() && line[i] != ',')
        ROTOR_FAIL("{}: text after the closing quote of field {}", where, fields.size());
      field_start = false;
      continue;
    }
    if (c == ',') {
      fields.emplace_back();
      field_start = true;
    } else {
      fields.back() += c;
      field_start = false;
    }
    ++i;
  }
  return fields;
}

bool parse_iso_date(const std::string& s, int64_t& y, int64_t& m, int64_t& d) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (s[i] < '0' || s[i] > '9') return false;
  y = std::stoll(s.substr(0, 4));
  m = std::stoll(s.substr(5, 2));
  d = std::stoll(s.substr(8, 2));
  if (y < 1 || m < 1 || m > 12 || d < 1) return false;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  const int64_t days = kDays[m - 1] + (m == 2 && leap ? 1 : 0);
  return d <= days;
}

namespace {

// `name` with its control characters escaped (\t, \n, \r, \xNN), quoted,
// so that a message naming it stays one line.
std::string quoted(const std::string& name) {
  std::string out = "\"";
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\t')
      out += "\\t";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += ch;
  }
  return out + "\"";
}

const char* control_name(unsigned char c) {
  switch (c) {
    case '\t':
      return "a tab";
    case '\n':
      return "a line feed";
    case '\r':
      return "a carriage return";
    default:
      return "a control character";
  }
}

}  // namespace

std::string ehr_name_problem(const std::string& name, const char* what) {
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f)
      return fmt::format(
          "{} {} holds {} (byte {}): vocab.txt and the patient lists hold one name a line, so "
          "codes and patient ids may not hold control characters",
          what, quoted(name), control_name(c), i + 1);
  }
  if (std::string_view(what) == "code")
    for (const char* special : {"<pad>", "<unk>", "<s>", "</s>", "[MASK]", "[CLS]", "[SEP]"})
      if (name == special)
        return fmt::format("code {} is spelled as a special token of vocab.txt", quoted(name));
  return "";
}

int64_t months_between(int64_t y0, int64_t m0, int64_t d0, int64_t y1, int64_t m1, int64_t d1) {
  // A month is complete on the day of the month of the start: negative
  // exactly when the second date is earlier.
  return (y1 - y0) * 12 + (m1 - m0) - (d1 < d0 ? 1 : 0);
}

namespace {

// A CSV table read line by line: its header's columns and the rows.
class CsvTable {
 public:
  explicit CsvTable(const std::string& path) : path_(path), text_(read_file(path, kMaxEhrBytes)) {
    if (text_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos_ = 3;
    std::vector<std::string> header;
    if (!next(header)) ROTOR_FAIL("{}: empty file: expected a header line", path_);
    header_ = header;
  }
  // The index of column `name`; `flag` is the option that names it.
  size_t column(const std::string& name, const char* flag) const {
    auto it = std::find(header_.begin(), header_.end(), name);
    if (it == header_.end())
      ROTOR_FAIL("{}:1: no column '{}' ({}); the header has: {}", path_, name, flag,
                 fmt::join(header_, ", "));
    return static_cast<size_t>(it - header_.begin());
  }
  // The next non-blank row; false at the end.
  bool next(std::vector<std::string>& fields) {
    while (pos_ < text_.size()) {
      size_t end = text_.find('\n', pos_);
      if (end == std::string::npos) end = text_.size();
      std::string line = text_.substr(pos_, end - pos_);
      pos_ = end + 1;
      ++line_no_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      const size_t bad = find_invalid_utf8(line);
      if (bad != std::string_view::npos)
        ROTOR_FAIL("{}: invalid UTF-8 at byte {} of the line", where(), bad + 1);
      fields = split_csv_line(line, where());
      if (!header_.empty() && fields.size() < header_.size())
        ROTOR_FAIL("{}: {} fields, the header has {}", where(), fields.size(), header_.size());
      return true;
    }
    return false;
  }
  std::string where() const { return fmt::format("{}:{}", path_, line_no_); }

 private:
  std::string path_, text_;
  size_t pos_ = 0;
  int64_t line_no_ = 0;
  std::vector<std::string> header_;
};

struct Date {
  int64_t y = 0, m = 0, d = 0;
};

Date date_field(const std::string& text, const std::string& column, const std::string& where) {
  Date t;
  if (!parse_iso_date(text, t.y, t.m, t.d))
    ROTOR_FAIL("{}: malformed date '{}' in column {} (expected YYYY-MM-DD)", where, text, column);
  return t;
}

// Visits in order of age, ties by first appearance.
void order_visits(std::vector<EhrVisit>& visits) {
  std::stable_sort(visits.begin(), visits.end(), [](const EhrVisit& a, const EhrVisit& b) {
    return a.age_months < b.age_months;
  });
}

void add_code(EhrVisit& v, const std::string& code) {
  if (std::find(v.codes.begin(), v.codes.end(), code) == v.codes.end()) v.codes.push_back(code);
}

}  // namespace

std::vector<EhrPatient> read_ehr_csv(const std::string& events_path,
                                     const std::string& patients_path, const EhrCsvColumns& c) {
  std::vector<EhrPatient> patients;
  std::vector<Date> births;
  std::unordered_map<std::string, size_t> index;
  {
    CsvTable t(patients_path);
    const size_t id_col = t.column(c.patient_id, "--patient-column");
    const size_t birth_col = t.column(c.birth_date, "--birth-column");
    std::vector<std::string> f;
    while (t.next(f)) {
      if (f[id_col].empty()) ROTOR_FAIL("{}: empty patient id", t.where());
      if (const std::string why = ehr_name_problem(f[id_col], "patient id"); !why.empty())
        ROTOR_FAIL("{}: {}", t.where(), why);
      if (!index.emplace(f[id_col], patients.size()).second)
        ROTOR_FAIL("{}: patient '{}' is listed twice", t.where(), f[id_col]);
      births.push_back(date_field(f[birth_col], c.birth_date, t.where()));
      patients.push_back({f[id_col], {}});
    }
  }
  // Per patient: its visits in order of first appearance, by visit id.
  std::vector<std::map<std::string, size_t>> visit_index(patients.size());
  CsvTable t(events_path);
  const size_t id_col = t.column(c.patient_id, "--patient-column");
  const size_t time_col = t.column(c.time, "--time-column");
  const size_t visit_col = t.column(c.visit_id, "--visit-column");
  const size_t code_col = t.column(c.code, "--code-column");
  std::vector<std::string> f;
  while (t.next(f)) {
    auto it = index.find(f[id_col]);
    if (it == index.end())
      ROTOR_FAIL("{}: unknown patient '{}' (not in {})", t.where(), f[id_col], patients_path);
    const size_t p = it->second;
    const Date when = date_field(f[time_col], c.time, t.where());
    const Date& born = births[p];
    const int64_t age = months_between(born.y, born.m, born.d, when.y, when.m, when.d);
    if (age < 0)
      ROTOR_FAIL("{}: date {} is before the birth date of patient '{}' ({:04}-{:02}-{:02})",
                 t.where(), f[time_col], f[id_col], born.y, born.m, born.d);
    if (age > kMaxEhrAgeMonths)
      ROTOR_FAIL(
          "{}: date {} is {} years after the birth date of patient '{}' ({:04}-{:02}-{:02}); "
          "ages above {} years are refused as implausible",
          t.where(), f[time_col], age / 12, f[id_col], born.y, born.m, born.d,
          kMaxEhrAgeMonths / 12);
    if (f[code_col].empty()) ROTOR_FAIL("{}: empty code", t.where());
    if (const std::string why = ehr_name_problem(f[code_col], "code"); !why.empty())
      ROTOR_FAIL("{}: {}", t.where(), why);
    auto [v, fresh] = visit_index[p].emplace(f[visit_col], patients[p].visits.size());
    if (fresh) patients[p].visits.push_back({age, {}});
    EhrVisit& visit = patients[p].visits[v->second];
    visit.age_months = std::min(visit.age_months, age);
    add_code(visit, f[code_col]);
  }
  for (auto& p : patients) order_visits(p.visits);
  return patients;
}

std::vector<EhrPatient> read_ehr_jsonl(const std::string& path) {
  const std::string text = read_file(path, kMaxEhrBytes);
  std::vector<EhrPatient> patients;
  std::unordered_map<std::string, int64_t> seen;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", path, line_no);
    const size_t bad = find_invalid_utf8(line);
    if (bad != std::string_view::npos)
      ROTOR_FAIL("{}: invalid UTF-8 at byte {} of the line", where, bad + 1);
    json_io::Json j;
    try {
      j = json_io::parse(line, where);
    } catch (const Error& e) {
      // parse names ORIGIN:LINE:COLUMN of its one-line document; say the row.
      ROTOR_FAIL("{}: not a valid JSON line ({})", where, e.what());
    }
    if (!j.is_object()) ROTOR_FAIL("{}: expected a JSON object per line", where);
    EhrPatient p;
    const json_io::Json& id = json_io::at(j, "patient_id", where);
    if (id.is_string())
      p.id = id.get<std::string>();
    else if (id.is_number_integer())
      p.id = std::to_string(id.get<int64_t>());
    else
      ROTOR_FAIL("{}: patient_id is {}, expected a string or an integer", where,
                 json_io::type_name(id));
    if (p.id.empty()) ROTOR_FAIL("{}: empty patient id", where);
    if (const std::string why = ehr_name_problem(p.id, "patient id"); !why.empty())
      ROTOR_FAIL("{}: {}", where, why);
    if (auto [it, fresh] = seen.emplace(p.id, line_no); !fresh)
      ROTOR_FAIL("{}: patient '{}' repeats line {}", where, p.id, it->second);
    const json_io::Json& visits = json_io::at(j, "visits", where);
    if (!visits.is_array())
      ROTOR_FAIL("{}: visits is {}, expected an array", where, json_io::type_name(visits));
    for (size_t v = 0; v < visits.size(); ++v) {
      const std::string what = fmt::format("{}: visit {}", where, v + 1);
      if (!visits[v].is_object()) ROTOR_FAIL("{} is not an object", what);
      const double age = json_io::as_double(json_io::at(visits[v], "age", what), what + " age");
      if (!std::isfinite(age) || age < 0 || age > static_cast<double>(kMaxEhrAgeMonths))
        ROTOR_FAIL("{}: age {} is not a number of months from 0 to {} ({} years)", what, age,
                   kMaxEhrAgeMonths, kMaxEhrAgeMonths / 12);
      EhrVisit visit{static_cast<int64_t>(std::floor(age)), {}};
      const json_io::Json& codes = json_io::at(visits[v], "codes", what);
      if (!codes.is_array())
        ROTOR_FAIL("{}: codes is {}, expected an array", what, json_io::type_name(codes));
      for (const auto& code : codes) {
        const std::string& s = json_io::as_string(code, what + " code");
        if (s.empty()) ROTOR_FAIL("{}: empty code", what);
        if (const std::string why = ehr_name_problem(s, "code"); !why.empty())
          ROTOR_FAIL("{}: {}", what, why);
        add_code(visit, s);
      }
      if (visit.codes.empty()) ROTOR_FAIL("{}: no codes", what);
      p.visits.push_back(std::move(visit));
    }
    order_visits(p.visits);
    patients.push_back(std::move(p));
  }
  return patients;
}

}  // namespace rotor::data
