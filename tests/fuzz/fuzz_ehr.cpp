// The EHR readers of `rotor prepare-ehr` (src/data/ehr_input.h) on files made
// from the input:
//   byte 0      options: bit 0 JSON lines (else the two CSV tables)
//   the rest    JSON lines: the file. CSV: the patients table, a NUL byte,
//               the events table (no NUL: the patients table, and an events
//               table of its header alone)
// What a reader accepts must hold what prepare-ehr relies on when it writes
// vocab.txt and the patient lists: every patient id non-empty, unique, valid
// UTF-8 and free of control characters; every visit with at least one code,
// its codes non-empty, distinct, valid UTF-8, free of control characters and
// no special token's name; ages from 0 to kMaxEhrAgeMonths, visits in order
// of age.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>

#include "data/ehr_input.h"
#include "data/utf8.h"
#include "fuzz/fuzz_util.h"

using namespace rotor;

namespace {

void check_name(const std::string& s, const char* what) {
  fuzz::require(!s.empty(), std::string("an empty ") + what);
  fuzz::require(data::find_invalid_utf8(s) == std::string_view::npos,
                std::string("a ") + what + " that is not valid UTF-8");
  fuzz::require(data::ehr_name_problem(s, what).empty(),
                std::string("a ") + what + " with a control character or a special's name");
  for (const char c : s)
    fuzz::require(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f,
                  std::string("a control character in a ") + what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool jsonl = (data[0] & 1) != 0;
  const std::string text(fuzz::as_text(data + 1, size - 1));
  const std::string dir = fuzz::scratch_dir();
  const std::string events = dir + "/events.csv", patients = dir + "/patients.csv",
                    lines = dir + "/patients.jsonl";
  if (jsonl) {
    fuzz::write_file(lines, text);
  } else {
    const size_t nul = text.find('\0');
    fuzz::write_file(patients, text.substr(0, nul));
    fuzz::write_file(events, nul == std::string::npos
                                 ? std::string("patient_id,time,visit_id,code\n")
                                 : text.substr(nul + 1));
  }
  fuzz::accepts([&] {
    const std::vector<data::EhrPatient> ps =
        jsonl ? data::read_ehr_jsonl(lines) : data::read_ehr_csv(events, patients);
    std::set<std::string> ids;
    for (const data::EhrPatient& p : ps) {
      check_name(p.id, "patient id");
      fuzz::require(ids.insert(p.id).second, "a patient id twice");
      for (size_t v = 0; v < p.visits.size(); ++v) {
        const data::EhrVisit& visit = p.visits[v];
        fuzz::require(visit.age_months >= 0 && visit.age_months <= data::kMaxEhrAgeMonths,
                      "an age outside 0 .. kMaxEhrAgeMonths");
        fuzz::require(v == 0 || p.visits[v - 1].age_months <= visit.age_months,
                      "visits out of order of age");
        fuzz::require(!visit.codes.empty(), "a visit without codes");
        std::set<std::string> codes;
        for (const std::string& code : visit.codes) {
          check_name(code, "code");
          fuzz::require(codes.insert(code).second, "a code twice in one visit");
        }
      }
    }
  });
  return 0;
}
