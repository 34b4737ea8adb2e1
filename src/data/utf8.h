// Validating UTF-8, the encoding every text input must have (data files,
// TSV sets, the lines commands read).
#pragma once

#include <cstddef>
#include <string_view>

namespace rotor::data {

// Byte offset of the first invalid UTF-8 sequence in `s` (overlong forms,
// surrogates and code points above U+10FFFF are invalid), or npos when valid.
size_t find_invalid_utf8(std::string_view s);

}  // namespace rotor::data
