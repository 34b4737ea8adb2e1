// Tokenizers of sacreBLEU (see tokenizers.h). Each regular expression of the
// original is a two-character pattern applied with Python's re.sub semantics:
// scan left to right, replace a match and go on after it, no overlaps. The 13a
// rules only look at ASCII bytes, so they run on UTF-8 bytes directly; intl
// and moses run on decoded code points.
#include "eval/tokenizers.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "eval/unicode.h"

namespace rotor::eval {
namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

bool is_digit(char32_t c) {
  return c >= '0' && c <= '9';
}

// mteval-v13a's first rule: the ASCII symbols and punctuation { | } ~ [ \ ] ^
// _ ` space ! " # $ % & ( ) * + : ; < = > ? @ / (not ' , - .) are separated.
bool is_13a_symbol(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= '{' && u <= '~') || (u >= '[' && u <= '`') || (u >= ' ' && u <= '&') ||
         (u >= '(' && u <= '+') || (u >= ':' && u <= '@') || u == '/';
}

// re.sub of a two-character pattern (a)(b) whose replacement is
// pre + a + mid + b + post.
template <class Str, class P1, class P2>
Str sub_pair(const Str& s, P1 first, P2 second, const Str& pre, const Str& mid, const Str& post) {
  Str out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out += pre;
      out.push_back(s[i]);
      out += mid;
      out.push_back(s[i + 1]);
      out += post;
      i += 2;
    } else {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace

BleuTokenizer parse_tokenizer(std::string_view name) {
  if (name == "13a") return BleuTokenizer::k13a;
  if (name == "intl") return BleuTokenizer::kIntl;
  if (name == "char") return BleuTokenizer::kChar;
  if (name == "none") return BleuTokenizer::kNone;
  if (name == "moses") return BleuTokenizer::kMoses;
  ROTOR_FAIL("unknown tokenizer '{}' (choose 13a, intl, char, none or moses)", name);
}

const char* tokenizer_name(BleuTokenizer t) {
  switch (t) {
    case BleuTokenizer::k13a:
      return "13a";
    case BleuTokenizer::kIntl:
      return "intl";
    case BleuTokenizer::kChar:
      return "char";
    case BleuTokenizer::kNone:
      return "none";
    case BleuTokenizer::kMoses:
      return "moses";
  }
  return "?";
}

std::string tokenize_13a(std::string_view in) {
  std::string line(in);
  // Language-independent part of mteval-v13a.
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  // Separate symbols and most punctuation.
  std::string t;
  t.reserve(line.size() * 2 + 2);
  t.push_back(' ');
  for (char c : line) {
    if (is_13a_symbol(c)) {
      t.push_back(' ');
      t.push_back(c);
      t.push_back(' ');
    } else {
      t.push_back(c);
    }
  }
  t.push_back(' ');
  const std::string sp = " ", none;
  auto non_digit = [](char c) { return !is_digit(static_cast<unsigned char>(c)); };
  auto digit = [](char c) { return is_digit(static_cast<unsigned char>(c)); };
  auto period_comma = [](char c) { return c == '.' || c == ','; };
  // Period and comma unless preceded by a digit: ([^0-9])([\.,]) -> \1 \2 .
  t = sub_pair(t, non_digit, period_comma, none, sp, sp);
  // Period and comma unless followed by a digit: ([\.,])([^0-9]) -> " \1 \2".
  t = sub_pair(t, period_comma, non_digit, sp, sp, none);
  // Dash preceded by a digit: ([0-9])(-) -> \1 \2 .
  t = sub_pair(
      t, digit, [](char c) { return c == '-'; }, none, sp, sp);
  return collapse_whitespace(t);
}

std::string tokenize_intl(std::string_view in) {
  std::u32string s = decode_utf8(in);
  const std::u32string sp = U" ", none;
  auto not_number = [](char32_t c) { return unicode_class(c) != 'N'; };
  auto punct = [](char32_t c) { return unicode_class(c) == 'P'; };
  // Punctuation preceded by a non-number: (\P{N})(\p{P}) -> \1 \2 .
  s = sub_pair(s, not_number, punct, none, sp, sp);
  // Punctuation followed by a non-number: (\p{P})(\P{N}) -> " \1 \2".
  s = sub_pair(s, punct, not_number, sp, sp, none);
  // Every symbol: (\p{S}) -> " \1 ".
  std::u32string t;
  t.reserve(s.size() + 8);
  for (char32_t c : s) {
    if (unicode_class(c) == 'S') {
      t.push_back(' ');
      t.push_back(c);
      t.push_back(' ');
    } else {
      t.push_back(c);
    }
  }
  return collapse_whitespace(encode_utf8(t));
}

namespace {
// What Python's str.split() treats as whitespace.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}
}  // namespace

std::string tokenize_char(std::string_view line) {
  std::u32string out;
  for (char32_t c : decode_utf8(line)) {
    if (is_python_space(c)) continue;
    if (!out.empty()) out.push_back(U' ');
    out.push_back(c);
  }
  return encode_utf8(out);
}

// ---- moses -------------------------------------------------------------------
namespace {

struct Range {
  char32_t first, last;
};

template <size_t N>
bool in(const Range (&ranges)[N], char32_t c) {
  const auto* it = std::upper_bound(std::begin(ranges), std::end(ranges), c,
                                    [](char32_t x, const Range& r) { return x < r.first; });
  return it != std::begin(ranges) && c <= (it - 1)->last;
}

// Numbers (category N) that are letters for Perl (Nl: Roman numerals, ...).
constexpr Range kLetterNumbers[] = {{0x16EE, 0x16F0}, {0x2160, 0x2182}, {0x2185, 0x2188},
                                    {0x3007, 0x3007}, {0x3021, 0x3029}, {0x3038, 0x303A},
                                    {0xA6E6, 0xA6EF}};
// Numbers that are neither digits nor letters (No: superscripts, fractions,
// circled numbers, ...): not \p{IsAlnum}. Only the N members of a range matter.
constexpr Range kOtherNumbers[] = {
    {0xB2, 0xB3},     {0xB9, 0xB9},     {0xBC, 0xBE},     {0x9F4, 0x9F9},   {0xBF0, 0xBF2},
    {0xF2A, 0xF33},   {0x1369, 0x137C}, {0x17F0, 0x17F9}, {0x2070, 0x209F}, {0x2150, 0x215F},
    {0x2189, 0x2189}, {0x2460, 0x24FF}, {0x2776, 0x2793}, {0x2CFD, 0x2CFD}, {0x3192, 0x3195},
    {0x3220, 0x3229}, {0x3248, 0x324F}, {0x3251, 0x325F}, {0x3280, 0x3289}, {0x32B1, 0x32BF}};
// Neither punctuation, symbol, number nor letter: C1 controls, the soft hyphen
// and other format characters, combining diacritics (not Alphabetic), lone
// surrogates (rotor's stand-ins for invalid UTF-8 bytes), private use.
constexpr Range kNonLetters[] = {
    {0x80, 0x9F},     {0xAD, 0xAD},     {0x300, 0x344},   {0x346, 0x36F},   {0x483, 0x489},
    {0x600, 0x605},   {0x61C, 0x61C},   {0x6DD, 0x6DD},   {0x180E, 0x180E}, {0x1AB0, 0x1AFF},
    {0x1DC0, 0x1DFF}, {0x200B, 0x200F}, {0x202A, 0x202E}, {0x2060, 0x206F}, {0x20D0, 0x20FF},
    {0xD800, 0xF8FF}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB}};
// Scripts with case, where a letter that lowercasing leaves alone is lowercase.
constexpr Range kCasedScripts[] = {{0xAA, 0x24F}, {0x250, 0x2AF}, {0x370, 0x52F}, {0x1E00, 0x1FFF}};

// Perl's \s on a character string.
bool perl_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}
// \p{IsN}
bool is_number(char32_t c) {
  return c < 0x80 ? (c >= '0' && c <= '9') : unicode_class(c) == 'N';
}
// \p{IsAlpha} (Alphabetic)
bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  switch (unicode_class(c)) {
    case 'P':
    case 'S':
      return false;
    case 'N':
      return in(kLetterNumbers, c);
    default:
      return !perl_space(c) && !in(kNonLetters, c);
  }
}
// \p{IsAlnum} (Alphabetic or decimal digit)
bool is_alnum(char32_t c) {
  if (c < 0x80) return is_alpha(c) || (c >= '0' && c <= '9');
  return unicode_class(c) == 'N' ? !in(kOtherNumbers, c) : is_alpha(c);
}
// \p{IsLower}
bool is_lower(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  if (!in(kCasedScripts, c) || !is_alpha(c)) return false;
  const std::string s = encode_utf8(std::u32string(1, c));
  return unicode_lower(s) == s;
}

// Words before a final '.' that do not end a sentence (1), or only before a
// number (2). rotor's own short lists, not Moses' nonbreaking_prefix files;
// single capital letters (initials) count for every language, and German
// ordinals ("am 3. Oktober") are handled in nonbreaking().
const std::unordered_map<std::string, int>& abbreviations(std::string_view lang) {
  static const std::unordered_map<std::string, int> en = [] {
    std::unordered_map<std::string, int> m;
    for (const char* w :
         {"Adm", "Capt", "Cmdr", "Col", "Corp",   "Cpl",  "Dr",  "Drs", "Gen",  "Gov",
          "Hon", "Jr",   "Lt",   "Maj", "Messrs", "Mlle", "Mme", "Mr",  "Mrs",  "Ms",
          "Mt",  "Prof", "Rep",  "Rev", "Sen",    "Sgt",  "Sr",  "St",  "Supt", "vs"})
      m[w] = 1;
    for (const char* w : {"No", "Nos", "Nr", "Art", "pp", "Vol", "Fig", "Jan", "Feb", "Mar", "Apr",
                          "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec"})
      m[w] = 2;
    return m;
  }();
  static const std::unordered_map<std::string, int> de = [] {
    std::unordered_map<std::string, int> m;
    for (const char* w : {"Abb", "Abt",  "Bd",  "Bsp", "bspw", "bzw", "ca",   "Dr",  "Dipl", "evtl",
                          "Fa",  "Fr",   "ggf", "Hr",  "Hrn",  "Ing", "inkl", "Jh",  "Jhd",  "Mio",
                          "Mrd", "Prof", "St",  "Str", "Tel",  "Tsd", "usw",  "vgl", "zzgl"})
      m[w] = 1;
    for (const char* w : {"Nr", "Art", "Abs", "Kap", "Jan", "Feb", "Okt", "Dez"}) m[w] = 2;
    return m;
  }();
  static const std::unordered_map<std::string, int> none;
  return lang == "en" ? en : lang == "de" ? de : none;
}

int nonbreaking(const std::u32string& word, std::string_view lang) {
  if (word.size() == 1 && word[0] >= 'A' && word[0] <= 'Z') return 1;
  if (lang == "de" &&
      std::all_of(word.begin(), word.end(), [](char32_t c) { return c >= '0' && c <= '9'; }))
    return 1;
  const auto& m = abbreviations(lang);
  const auto it = m.find(encode_utf8(word));
  return it == m.end() ? 0 : it->second;
}

// s/(A)'(B)/$1 REPL $2/g with single-character classes A and B: left to
// right, no overlaps.
template <class First, class Third>
std::u32string sub_apostrophe(const std::u32string& s, First first, Third third,
                              const std::u32string& repl) {
  std::u32string out;
  out.reserve(s.size() + 16);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 2 < s.size() && first(s[i]) && s[i + 1] == U'\'' && third(s[i + 2])) {
      out.push_back(s[i]);
      out += repl;
      out.push_back(s[i + 2]);
      i += 3;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

}  // namespace

std::string tokenize_moses(std::string_view line, std::string_view lang) {
  const std::u32string text = decode_utf8(line);
  // Whitespace runs become one space, control characters go, ends trimmed.
  std::u32string t;
  t.reserve(text.size() + 2);
  for (char32_t c : text) {
    if (perl_space(c)) {
      if (!t.empty() && t.back() != U' ') t.push_back(U' ');
    } else if (c >= 0x20) {
      t.push_back(c);
    }
  }
  if (!t.empty() && t.back() == U' ') t.pop_back();

  // Every character but letters, digits, space and . ' ` , - stands alone.
  std::u32string u;
  u.reserve(t.size() * 2);
  for (char32_t c : t) {
    if (c == U' ' || c == U'.' || c == U'\'' || c == U'`' || c == U',' || c == U'-' ||
        is_alnum(c)) {
      u.push_back(c);
    } else {
      u += U' ';
      u.push_back(c);
      u += U' ';
    }
  }

  // A run of two or more dots is one token: a space before it, and one after
  // it unless it ends the line.
  t.clear();
  for (size_t i = 0; i < u.size();) {
    if (u[i] == U'.' && i + 1 < u.size() && u[i + 1] == U'.') {
      size_t j = i;
      while (j < u.size() && u[j] == U'.') ++j;
      t += U' ';
      t.append(u, i, j - i);
      if (j < u.size()) t += U' ';
      i = j;
    } else {
      t.push_back(u[i++]);
    }
  }

  // Commas, except between two numbers: s/([^N]),/$1 , /g, then s/,([^N])/ , $1/g,
  // then a comma ending the line after a number.
  const std::u32string sp = U" ", none;
  auto not_number = [](char32_t c) { return !is_number(c); };
  auto comma = [](char32_t c) { return c == U','; };
  t = sub_pair(t, not_number, comma, none, sp, sp);
  t = sub_pair(t, comma, not_number, sp, sp, none);
  if (t.size() >= 2 && t.back() == U',' && is_number(t[t.size() - 2]))
    t.insert(t.size() - 1, 1, U' ');

  // Apostrophes.
  if (lang == "en") {
    auto alpha = [](char32_t c) { return is_alpha(c); };
    auto not_alpha = [](char32_t c) { return !is_alpha(c); };
    t = sub_apostrophe(t, not_alpha, not_alpha, U" ' ");
    t = sub_apostrophe(
        t, [](char32_t c) { return !is_alpha(c) && !is_number(c); }, alpha, U" ' ");
    t = sub_apostrophe(t, alpha, not_alpha, U" ' ");
    t = sub_apostrophe(t, alpha, alpha, U" '");  // it's -> it 's
    t = sub_apostrophe(
        t, [](char32_t c) { return is_number(c); }, [](char32_t c) { return c == U's'; },
        U" '");  // 1990's -> 1990 's
  } else {
    u.clear();
    for (char32_t c : t) {
      if (c == U'\'')
        u += U" ' ";
      else
        u.push_back(c);
    }
    t.swap(u);
  }

  // The final '.' of a word. Words are the fields between single spaces, as
  // Perl's split(/\s/) gives them: empty fields between double spaces count
  // (an empty next word does not start with a lowercase letter), trailing
  // empty fields do not.
  std::vector<std::u32string> words;
  for (size_t start = 0;;) {
    const size_t end = t.find(U' ', start);
    words.push_back(
        t.substr(start, end == std::u32string::npos ? std::u32string::npos : end - start));
    if (end == std::u32string::npos) break;
    start = end + 1;
  }
  while (!words.empty() && words.back().empty()) words.pop_back();
  u.clear();
  for (size_t i = 0; i < words.size(); ++i) {
    std::u32string& w = words[i];
    const bool dots_only = std::all_of(w.begin(), w.end(), [](char32_t c) { return c == U'.'; });
    if (w.size() >= 2 && w.back() == U'.' && !dots_only) {
      const std::u32string pre = w.substr(0, w.size() - 1);
      bool keep = false;
      if (i + 1 < words.size()) {
        const std::u32string& next = words[i + 1];
        const int kind = nonbreaking(pre, lang);
        keep = (pre.find(U'.') != std::u32string::npos &&
                std::any_of(pre.begin(), pre.end(), [](char32_t c) { return is_alpha(c); })) ||
               kind == 1 || (!next.empty() && is_lower(next[0])) ||
               (kind == 2 && !next.empty() && next[0] >= U'0' && next[0] <= U'9');
      }
      if (!keep) w = pre + U" .";
    }
    u += w;
    u += U' ';
  }
  std::string out = collapse_whitespace(encode_utf8(u));
  // A line ending in .' (English only: elsewhere the apostrophe is apart).
  if (out.size() >= 2 && out.compare(out.size() - 2, 2, ".'") == 0)
    out = collapse_whitespace(out.substr(0, out.size() - 2) + " . '");
  return out;
}

std::string tokenize(std::string_view line, BleuTokenizer t, std::string_view lang) {
  switch (t) {
    case BleuTokenizer::k13a:
      return tokenize_13a(line);
    case BleuTokenizer::kIntl:
      return tokenize_intl(line);
    case BleuTokenizer::kChar:
      return tokenize_char(line);
    case BleuTokenizer::kNone:
      return std::string(line);
    case BleuTokenizer::kMoses:
      return tokenize_moses(line, lang);
  }
  return std::string(line);
}

std::string compound_split(std::string_view s) {
  // Perl's \S on bytes: anything but space, \t, \n, \r, \f, \v.
  auto non_space = [](char c) {
    return !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v');
  };
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 2 < s.size() && non_space(s[i]) && s[i + 1] == '-' && non_space(s[i + 2])) {
      out.push_back(s[i]);
      out += " ##AT##-##AT## ";
      out.push_back(s[i + 2]);
      i += 3;
    } else {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace rotor::eval
