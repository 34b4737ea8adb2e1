// sacreBLEU's tokenizers, reimplemented from their documented behaviour.
//   13a  : mteval-v13a.pl (sacreBLEU's default): unescape a few XML entities,
//          drop "<skipped>", separate ASCII punctuation and symbols, split
//          '.'/',' unless next to a digit, split '-' after a digit.
//   intl : mteval-v14.pl --international-tokenization: separate Unicode
//          punctuation (P*) unless between digits, and every symbol (S*).
//   none : the text as it is.
// Every tokenizer returns words joined by single spaces, trimmed (13a, intl),
// as sacreBLEU's do.
#pragma once

#include <string>
#include <string_view>

namespace rotor::eval {

enum class Tokenizer { k13a, kIntl, kChar, kNone };

// "13a", "intl", "none"; anything else is a user error that lists the choices.
Tokenizer parse_tokenizer(std::string_view name);
const char* tokenizer_name(Tokenizer t);

std::string tokenize_13a(std::string_view line);
std::string tokenize_intl(std::string_view line);
// sacreBLEU's "char": every character (code point) a token, whitespace dropped.
// BLEU over characters is the meaningful score where a sentence is one word
// (German number compounds in the quickstart task).
std::string tokenize_char(std::string_view line);
std::string tokenize(std::string_view line, Tokenizer t);

// The compound splitting of Vaswani et al.'s tokenized BLEU (tensor2tensor's
// get_ende_bleu.sh): `s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g`, applied, like that
// perl one-liner, to bytes, left to right and without overlaps.
std::string compound_split(std::string_view line);

}  // namespace rotor::eval
