// The classification TSV parser (src/data/tsv.h) on a text made from the
// input:
//   byte 0      options: bit 0 a header (columns s1, s2, label; else 0, 1, 2),
//               bit 1 sentence pairs, bit 2 regression (else labels no, yes),
//               bit 3 labels required
//   the rest    the TSV text
// What it accepts must hold what it promises: at least one example, a
// sentence (and a second one for pairs) per example, each inside the text,
// valid UTF-8 and free of tabs and line ends; labels for every example when
// it has them (required: always), class indices in range, regression values
// finite floats.
#include <cmath>
#include <cstdint>

#include "data/tsv.h"
#include "data/utf8.h"
#include "fuzz/fuzz_util.h"

using namespace rotor;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t options = data[0];
  data::TsvFormat f;
  f.header = (options & 1) != 0;
  const bool pair = (options & 2) != 0;
  f.regression = (options & 4) != 0;
  const bool require_labels = (options & 8) != 0;
  f.sentence1 = f.header ? "s1" : "0";
  f.sentence2 = pair ? (f.header ? "s2" : "1") : "";
  f.label = f.header ? "label" : "2";
  if (!f.regression) f.labels = {"no", "yes"};
  // A copy of its own, so that AddressSanitizer sees reads past the text.
  const std::string text(fuzz::as_text(data + 1, size - 1));

  fuzz::accepts([&] {
    const data::TsvRows rows = data::parse_classification_tsv(text, "fuzz.tsv", f, require_labels);
    fuzz::require(rows.size() > 0, "accepted without examples");
    fuzz::require(rows.s2.size() == (pair ? rows.size() : 0), "second sentences do not match");
    fuzz::require(!require_labels || rows.has_labels, "required labels are missing");
    if (rows.has_labels) {
      fuzz::require((f.regression ? rows.targets.size() : rows.labels.size()) == rows.size(),
                    "an example without its label");
      for (float t : rows.targets) fuzz::require(std::isfinite(t), "a non-finite target");
      for (int32_t l : rows.labels)
        fuzz::require(l >= 0 && l < static_cast<int32_t>(f.labels.size()), "a class out of range");
    }
    const auto inside = [&](std::string_view s) {
      const bool in = s.empty() ||
                      (s.data() >= text.data() && s.data() + s.size() <= text.data() + text.size());
      fuzz::require(in, "a sentence outside the text");
      fuzz::require(s.find_first_of("\t\r\n") == std::string_view::npos,
                    "a sentence holds a tab or a line end");
      fuzz::require(data::find_invalid_utf8(s) == std::string_view::npos,
                    "a sentence is not valid UTF-8");
    };
    for (auto s : rows.s1) inside(s);
    for (auto s : rows.s2) inside(s);
  });
  return 0;
}
