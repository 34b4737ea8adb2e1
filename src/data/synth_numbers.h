// A synthetic translation task: English number words -> German number words.
//   321        "three hundred twenty-one" -> "dreihunderteinundzwanzig"
//   1          "one"                      -> "eins"      (but "einundzwanzig", "eintausend")
//   2000001    "two million one"          -> "zwei Millionen eins"
// English: hyphenated tens ("twenty-one"), no "and", "one hundred", "one thousand".
// German: everything below a million is one word, "ein" inside compounds,
// "einhundert"/"eintausend" with the explicit "ein"; millions are separate
// words, "eine Million" / "zwei Millionen", followed by the rest as one word.
//
// Splits (defaults; all deterministic from the seed, no number in two splits):
//   train 20000, valid 500, test 1000: numbers in 1..99,999; train holds every
//     number 1..100, the rest are drawn with a uniform digit count (2..5), then
//     uniform within it, so short numbers are not drowned by five-digit ones;
//   test_long 500: numbers in 100,000..999,999 whose English has more words,
//     and whose English and German have more characters, than any training
//     example: the same vocabulary, only longer (length generalization).
// A 1-2 layer Transformer with an 1-2k vocabulary learns train/valid/test to
// near-exact match in a few minutes on a laptop CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rotor::data {

std::string number_to_english(int64_t n);  // 0 <= n < 10^9
std::string number_to_german(int64_t n);   // 0 <= n < 10^9

struct SynthNumbersOptions {
  std::string output_dir;
  uint64_t seed = 1;
  int64_t train = 20000;
  int64_t valid = 500;
  int64_t test = 1000;
  int64_t test_long = 500;
};

struct SynthSplit {
  std::string name;
  std::vector<int64_t> numbers;
};

// The numbers of every split (train, valid, test, test_long), deterministic.
std::vector<SynthSplit> synth_numbers_splits(const SynthNumbersOptions& options);

// Writes DIR/{train,valid,test,test_long}.{en,de}; creates DIR. Returns the splits.
std::vector<SynthSplit> write_synth_numbers(const SynthNumbersOptions& options);

}  // namespace rotor::data
