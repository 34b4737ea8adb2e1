// Validating UTF-8, the encoding every text input must have (data files,
// TSV sets, the lines commands read).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rotor::data {

// Byte offset of the first invalid UTF-8 sequence in `s` (overlong forms,
// surrogates and code points above U+10FFFF are invalid), or npos when valid.
size_t find_invalid_utf8(std::string_view s);

// `s` with every invalid sequence replaced by U+FFFD: one replacement per
// maximal subpart (a lead byte and the continuation bytes that could still
// have completed it, or a lone byte), as Unicode and the WHATWG decoder do.
// Valid text is returned unchanged.
std::string to_valid_utf8(std::string_view s);

}  // namespace rotor::data
