// Python-compatible Unicode helpers for BLEU/chrF. The tables come from
// `scripts/eval/compare_sacrebleu.py --emit-unicode-tables`: categories as the
// `regex` module (sacreBLEU's intl tokenizer) sees them, lowercase mappings,
// whitespace and the Final_Sigma context as CPython's str methods see them
// (Python 3.11, Unicode 14; another Python may differ on newer characters).
#include "eval/unicode.h"

#include <algorithm>
#include <cstdint>

namespace rotor::eval {
namespace {

struct CategoryRun {
  char32_t first, last;
  char cls;
};
struct CodeRange {
  char32_t first, last;
};
struct LowerRun {
  char32_t first, last;
  int32_t delta;
  int32_t stride;
};

#include "eval/unicode_tables.inc"

char32_t lower_simple(char32_t cp) {
  // Last run whose first <= cp.
  const auto* end = std::end(kLowerRuns);
  const auto* it = std::upper_bound(std::begin(kLowerRuns), end, cp,
                                    [](char32_t c, const LowerRun& r) { return c < r.first; });
  if (it == std::begin(kLowerRuns)) return cp;
  --it;
  if (cp > it->last || (cp - it->first) % static_cast<char32_t>(it->stride) != 0) return cp;
  return static_cast<char32_t>(static_cast<int64_t>(cp) + it->delta);
}

bool in_ranges(const CodeRange* first, const CodeRange* last, char32_t cp) {
  const auto* it =
      std::upper_bound(first, last, cp, [](char32_t c, const CodeRange& r) { return c < r.first; });
  return it != first && cp <= (it - 1)->last;
}
bool is_cased(char32_t cp) {
  return in_ranges(std::begin(kCasedRuns), std::end(kCasedRuns), cp);
}
bool is_case_ignorable(char32_t cp) {
  return in_ranges(std::begin(kCaseIgnorableRuns), std::end(kCaseIgnorableRuns), cp);
}

// CPython's Final_Sigma test for the capital sigma at s[i]: a cased letter
// before it and none after it, skipping case-ignorable characters both ways.
bool final_sigma(const std::u32string& s, size_t i) {
  size_t j = i;
  while (j > 0 && is_case_ignorable(s[j - 1])) --j;
  if (j == 0 || !is_cased(s[j - 1])) return false;
  j = i + 1;
  while (j < s.size() && is_case_ignorable(s[j])) ++j;
  return j == s.size() || !is_cased(s[j]);
}

}  // namespace

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int len = 0;
    char32_t cp = 0, min = 0;
    if ((b0 & 0xE0) == 0xC0)
      len = 2, cp = b0 & 0x1F, min = 0x80;
    else if ((b0 & 0xF0) == 0xE0)
      len = 3, cp = b0 & 0x0F, min = 0x800;
    else if ((b0 & 0xF8) == 0xF0)
      len = 4, cp = b0 & 0x07, min = 0x10000;
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80)
        ok = false;
      else
        cp = (cp << 6) | (b & 0x3F);
    }
    if (ok && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (ok) {
      out.push_back(cp);
      i += len;
    } else {
      out.push_back(0xDC00 + b0);  // surrogateescape
      ++i;
    }
  }
  return out;
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
      out.push_back(static_cast<char>(cp - 0xDC00));  // an escaped invalid byte
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

char unicode_class(char32_t cp) {
  const auto* end = std::end(kCategoryRuns);
  const auto* it = std::upper_bound(std::begin(kCategoryRuns), end, cp,
                                    [](char32_t c, const CategoryRun& r) { return c < r.first; });
  if (it == std::begin(kCategoryRuns)) return 0;
  --it;
  return cp <= it->last ? it->cls : 0;
}

bool is_unicode_space(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  return std::binary_search(std::begin(kSpaces), std::end(kSpaces), cp);
}

namespace {
// Length of the UTF-8 sequence at s[i] when it is a Unicode space, else 0.
size_t space_at(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return is_unicode_space(b) ? 1 : 0;
  if (b != 0xC2 && b != 0xE1 && b != 0xE2 && b != 0xE3) return 0;  // leads of kSpaces
  const size_t len = b == 0xC2 ? 2 : 3;
  if (i + len > s.size()) return 0;
  const std::u32string cp = decode_utf8(s.substr(i, len));
  return cp.size() == 1 && is_unicode_space(cp[0]) ? len : 0;
}
}  // namespace

std::vector<std::string> split_whitespace(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0, start = std::string_view::npos;
  while (i < s.size()) {
    const size_t sp = space_at(s, i);
    if (sp) {
      if (start != std::string_view::npos) out.emplace_back(s.substr(start, i - start));
      start = std::string_view::npos;
      i += sp;
    } else {
      if (start == std::string_view::npos) start = i;
      ++i;
    }
  }
  if (start != std::string_view::npos) out.emplace_back(s.substr(start));
  return out;
}

std::string rstrip_whitespace(std::string_view s) {
  size_t end = 0, i = 0;
  while (i < s.size()) {
    const size_t sp = space_at(s, i);
    if (sp) {
      i += sp;
    } else {
      ++i;
      end = i;
    }
  }
  return std::string(s.substr(0, end));
}

std::string collapse_whitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const auto& w : split_whitespace(s)) {
    if (!out.empty()) out.push_back(' ');
    out += w;
  }
  return out;
}

std::string unicode_lower(std::string_view s) {
  bool ascii = true;
  for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    std::string out(s);
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  const std::u32string in = decode_utf8(s);
  std::u32string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char32_t cp = in[i];
    if (cp == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE
      out.push_back('i');
      out.push_back(0x307);
    } else if (cp == 0x3A3) {  // GREEK CAPITAL SIGMA: final form at a word end
      out.push_back(final_sigma(in, i) ? 0x3C2 : 0x3C3);
    } else {
      out.push_back(lower_simple(cp));
    }
  }
  return encode_utf8(out);
}

}  // namespace rotor::eval
