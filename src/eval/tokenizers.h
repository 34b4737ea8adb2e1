// sacreBLEU's tokenizers, reimplemented from their documented behaviour.
//   13a  : mteval-v13a.pl (sacreBLEU's default): unescape a few XML entities,
//          drop "<skipped>", separate ASCII punctuation and symbols, split
//          '.'/',' unless next to a digit, split '-' after a digit.
//   intl : mteval-v14.pl --international-tokenization: separate Unicode
//          punctuation (P*) unless between digits, and every symbol (S*).
//   moses: an approximation of Moses' tokenizer.perl (the default mode: no
//          aggressive hyphen splitting, and no escaping), for the tokenized BLEU
//          of the papers; see tokenize_moses. Not a sacreBLEU tokenizer.
//   none : the text as it is.
// Every tokenizer returns words joined by single spaces, trimmed (13a, intl,
// moses), as sacreBLEU's do.
#pragma once

#include <string>
#include <string_view>

namespace rotor::eval {

enum class BleuTokenizer { k13a, kIntl, kChar, kNone, kMoses };

// "13a", "intl", "char", "none", "moses"; anything else is a user error that
// lists the choices.
BleuTokenizer parse_tokenizer(std::string_view name);
const char* tokenizer_name(BleuTokenizer t);

std::string tokenize_13a(std::string_view line);
std::string tokenize_intl(std::string_view line);
// sacreBLEU's "char": every character (code point) a token, whitespace dropped.
// BLEU over characters is the meaningful score where a sentence is one word
// (German number compounds in the quickstart task).
std::string tokenize_char(std::string_view line);

// Moses tokenizer.perl -l LANG -no-escape, reimplemented from its documented
// rules: whitespace collapsed and control characters dropped; every character
// that is not a letter, digit, space or one of . ' ` , - set off by spaces; runs
// of two or more dots kept together as one token; commas split unless between
// numbers; apostrophes split as English contractions for "en" ("it's" -> "it
// 's", "dogs'" -> "dogs '") and on both sides for any other language; the
// final '.' of a word split off (always for the last word; elsewhere unless
// the word holds another dot and a letter, as "U.S.", is a known abbreviation,
// or the next word starts with a lowercase letter). Hyphens
// are not split (no -a); compound_split does that for the BLEU protocol.
// Differences from the Perl original: the abbreviation lists are rotor's own,
// short ones (titles, initials, months, German ordinals and a few German
// abbreviations; see tokenizers.cpp), not Moses' nonbreaking_prefix files; and
// Perl's Unicode classes (Alphabetic, Alnum, Lowercase, Number) are derived
// from the P/S/N categories rotor has tables for plus a few ranges, exact for
// Latin, Greek and Cyrillic text and approximate for rare marks and symbols of
// other scripts.
std::string tokenize_moses(std::string_view line, std::string_view lang = "en");

// `lang` only matters for kMoses.
std::string tokenize(std::string_view line, BleuTokenizer t, std::string_view lang = "en");

// The compound splitting of Vaswani et al.'s tokenized BLEU (tensor2tensor's
// get_ende_bleu.sh, fairseq's compound_split_bleu.sh): after tokenization, a
// hyphen between two non-space characters becomes the token "##AT##-##AT##"
// with a space on each side (`s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g`), applied,
// like that perl one-liner, to bytes, left to right and without overlaps: in
// "a-b-c" only the first hyphen is split, since its match consumed the "b".
std::string compound_split(std::string_view line);

}  // namespace rotor::eval
