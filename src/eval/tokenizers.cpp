// Tokenizers of sacreBLEU (see tokenizers.h). Each regular expression of the
// original is a two-character pattern applied with Python's re.sub semantics:
// scan left to right, replace a match and go on after it, no overlaps. The 13a
// rules only look at ASCII bytes, so they run on UTF-8 bytes directly; intl
// runs on decoded code points.
#include "eval/tokenizers.h"

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

bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }

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

Tokenizer parse_tokenizer(std::string_view name) {
  if (name == "13a") return Tokenizer::k13a;
  if (name == "intl") return Tokenizer::kIntl;
  if (name == "char") return Tokenizer::kChar;
  if (name == "none") return Tokenizer::kNone;
  ROTOR_FAIL("unknown tokenizer '{}' (choose 13a, intl, char or none)", name);
}

const char* tokenizer_name(Tokenizer t) {
  switch (t) {
    case Tokenizer::k13a: return "13a";
    case Tokenizer::kIntl: return "intl";
    case Tokenizer::kChar: return "char";
    case Tokenizer::kNone: return "none";
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
  t = sub_pair(t, digit, [](char c) { return c == '-'; }, none, sp, sp);
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
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
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

std::string tokenize(std::string_view line, Tokenizer t) {
  switch (t) {
    case Tokenizer::k13a: return tokenize_13a(line);
    case Tokenizer::kIntl: return tokenize_intl(line);
    case Tokenizer::kChar: return tokenize_char(line);
    case Tokenizer::kNone: return std::string(line);
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
