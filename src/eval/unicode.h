// The bits of Python's Unicode behaviour that sacreBLEU's scores depend on:
// UTF-8 decoding, str.isspace()/str.split()/str.rstrip(), str.lower(), and the
// Unicode categories P*, S*, N* that its intl tokenizer matches with the
// `regex` module. Tables are generated (unicode_tables.inc), see unicode.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rotor::eval {

// Decodes UTF-8. An invalid byte b becomes the lone surrogate U+DC00+b (as
// Python's "surrogateescape"), so that encode_utf8 gives the bytes back.
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view s);

// 'P' (punctuation), 'S' (symbol), 'N' (number) or 0 for any other category.
char unicode_class(char32_t cp);

// Python's str.isspace().
bool is_unicode_space(char32_t cp);

// Python's str.split() with no argument: split on runs of Unicode whitespace.
std::vector<std::string> split_whitespace(std::string_view s);

// Python's str.rstrip() with no argument.
std::string rstrip_whitespace(std::string_view s);

// Python's str.join of str.split(): collapse whitespace runs to one space, trim.
std::string collapse_whitespace(std::string_view s);

// Python's str.lower() (full mapping: U+0130 gives "i\u0307"; a capital sigma
// at the end of a word gives the final sigma).
std::string unicode_lower(std::string_view s);

}  // namespace rotor::eval
