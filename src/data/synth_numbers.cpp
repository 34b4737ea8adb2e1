#include "data/synth_numbers.h"

#include <algorithm>
#include <unordered_set>

#include "core/error.h"
#include "core/io.h"
#include "core/philox.h"
#include "data/synth_outputs.h"

namespace rotor::data {

namespace {

constexpr int64_t kMillion = 1'000'000;
constexpr int64_t kLimit = 1'000'000'000;

const char* const kEnOnes[20] = {"",        "one",     "two",       "three",    "four",
                                 "five",    "six",     "seven",     "eight",    "nine",
                                 "ten",     "eleven",  "twelve",    "thirteen", "fourteen",
                                 "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
const char* const kEnTens[10] = {"",      "",      "twenty",  "thirty", "forty",
                                 "fifty", "sixty", "seventy", "eighty", "ninety"};

// German 1..19 as the last word of a number ("eins"); "ein" is used in compounds.
const char* const kDeOnes[20] = {"",         "eins",     "zwei",     "drei",     "vier",
                                 "fünf",     "sechs",    "sieben",   "acht",     "neun",
                                 "zehn",     "elf",      "zwölf",    "dreizehn", "vierzehn",
                                 "fünfzehn", "sechzehn", "siebzehn", "achtzehn", "neunzehn"};
const char* const kDeTens[10] = {"",        "",        "zwanzig", "dreißig", "vierzig",
                                 "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig"};

std::string en_below_100(int64_t n) {
  if (n < 20) return kEnOnes[n];
  std::string s = kEnTens[n / 10];
  if (n % 10) s += std::string("-") + kEnOnes[n % 10];
  return s;
}

std::string en_below_1000(int64_t n) {
  std::string s;
  if (n >= 100) s = std::string(kEnOnes[n / 100]) + " hundred";
  if (n % 100) {
    if (!s.empty()) s += ' ';
    s += en_below_100(n % 100);
  }
  return s;
}

// `last`: the number ends here ("eins"); otherwise a compound or a count
// follows ("ein" + "tausend", "ein" + "und").
std::string de_below_100(int64_t n, bool last) {
  if (n == 1) return last ? "eins" : "ein";
  if (n < 20) return kDeOnes[n];
  std::string s;
  if (n % 10) s = std::string(n % 10 == 1 ? "ein" : kDeOnes[n % 10]) + "und";
  return s + kDeTens[n / 10];
}

std::string de_below_1000(int64_t n, bool last) {
  std::string s;
  if (n >= 100) s = de_below_100(n / 100, false) + "hundert";
  if (n % 100) s += de_below_100(n % 100, last);
  return s;
}

std::string de_below_million(int64_t n) {
  std::string s;
  if (n >= 1000) s = de_below_1000(n / 1000, false) + "tausend";
  if (n % 1000) s += de_below_1000(n % 1000, true);
  return s;
}

size_t utf8_chars(const std::string& s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

size_t word_count(const std::string& s) {
  return std::count(s.begin(), s.end(), ' ') + 1;
}

}  // namespace

std::string number_to_english(int64_t n) {
  if (n < 0 || n >= kLimit) ROTOR_FAIL("number {} outside [0, 10^9)", n);
  if (n == 0) return "zero";
  std::string s;
  auto append = [&s](const std::string& w) {
    if (!s.empty()) s += ' ';
    s += w;
  };
  if (n >= kMillion) append(en_below_1000(n / kMillion) + " million");
  if ((n / 1000) % 1000) append(en_below_1000((n / 1000) % 1000) + " thousand");
  if (n % 1000) append(en_below_1000(n % 1000));
  return s;
}

std::string number_to_german(int64_t n) {
  if (n < 0 || n >= kLimit) ROTOR_FAIL("number {} outside [0, 10^9)", n);
  if (n == 0) return "null";
  std::string s;
  const int64_t m = n / kMillion, rest = n % kMillion;
  if (m == 1) {
    s = "eine Million";
  } else if (m > 1) {
    // Million is feminine: 101 Millionen = "einhunderteine Millionen".
    s = (m % 100 == 1 ? de_below_1000(m, false) + "e" : de_below_1000(m, true)) + " Millionen";
  }
  if (rest) {
    if (!s.empty()) s += ' ';
    s += de_below_million(rest);
  }
  return s;
}

std::vector<SynthSplit> synth_numbers_splits(const SynthNumbersOptions& o) {
  if (o.train < 1 || o.valid < 0 || o.test < 0 || o.test_long < 0)
    ROTOR_FAIL("synth: split sizes must be positive (train {}, valid {}, test {}, test_long {})",
               o.train, o.valid, o.test, o.test_long);
  if (o.train + o.valid + o.test > 90'000)
    ROTOR_FAIL("synth: train + valid + test = {} exceeds 90000 distinct numbers below 100000",
               o.train + o.valid + o.test);
  if (o.test_long > 1'000'000) ROTOR_FAIL("synth: test_long {} exceeds 1000000", o.test_long);
  PhiloxRng rng(o.seed, rng_stream(0, 0, RngPurpose::Sampling, 0));
  std::unordered_set<int64_t> used;
  // A digit count uniform in 2..5, then a number uniform among those digits:
  // train, valid and test stay below 100000.
  auto draw = [&](std::vector<int64_t>& out, int64_t count) {
    int64_t attempts = 0;
    while (static_cast<int64_t>(out.size()) < count) {
      ROTOR_CHECK(++attempts < 1000 * count + 100000, "synth: cannot draw {} distinct numbers",
                  count);
      int64_t digits = 2 + static_cast<int64_t>(rng.below(4));
      int64_t lo = 1;
      for (int64_t d = 1; d < digits; ++d) lo *= 10;
      int64_t x = lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(9 * lo)));
      if (used.insert(x).second) out.push_back(x);
    }
  };
  std::vector<SynthSplit> splits = {{"train", {}}, {"valid", {}}, {"test", {}}, {"test_long", {}}};
  auto& train = splits[0].numbers;
  for (int64_t x = 1; x <= std::min<int64_t>(100, o.train); ++x) {
    train.push_back(x);
    used.insert(x);
  }
  draw(train, o.train);
  for (size_t i = train.size(); i > 1; --i) std::swap(train[i - 1], train[rng.below(i)]);
  draw(splits[1].numbers, o.valid);
  draw(splits[2].numbers, o.test);

  size_t max_words = 0, max_en = 0, max_de = 0;
  for (int64_t x : train) {
    std::string en = number_to_english(x), de = number_to_german(x);
    max_words = std::max(max_words, word_count(en));
    max_en = std::max(max_en, utf8_chars(en));
    max_de = std::max(max_de, utf8_chars(de));
  }
  auto& tl = splits[3].numbers;
  int64_t attempts = 0;
  while (static_cast<int64_t>(tl.size()) < o.test_long) {
    ROTOR_CHECK(++attempts < 1000 * o.test_long + 100000, "synth: cannot draw long numbers");
    // 100000..999999: the same words as training ("hundred", "thousand"),
    // only more of them, so test_long measures length generalization rather
    // than unseen vocabulary.
    int64_t x = 100'000 + static_cast<int64_t>(rng.below(900'000));
    std::string en = number_to_english(x), de = number_to_german(x);
    if (word_count(en) <= max_words || utf8_chars(en) <= max_en || utf8_chars(de) <= max_de)
      continue;
    if (used.insert(x).second) tl.push_back(x);
  }
  return splits;
}

std::vector<SynthSplit> write_synth_numbers(const SynthNumbersOptions& o) {
  if (o.output_dir.empty()) ROTOR_FAIL("synth: --output is empty");
  auto splits = synth_numbers_splits(o);
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& split : splits)
    for (const char* lang : {"en", "de"}) {
      std::string text;
      for (int64_t x : split.numbers)
        text += (lang[0] == 'e' ? number_to_english(x) : number_to_german(x)) + '\n';
      files.emplace_back(split.name + "." + lang, std::move(text));
    }
  // Each file atomic (core/io.h), and a user's own file of the same name is
  // never replaced (data/synth_outputs.h).
  write_synth_files(o.output_dir, "numbers-en-de", files);
  return splits;
}

}  // namespace rotor::data
