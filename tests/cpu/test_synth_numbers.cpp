// The numbers-en-de synthetic task: spellings, splits, determinism, files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/error.h"
#include "data/synth_numbers.h"
#include "support/run_rotor.h"
#include "support/test_util.h"

namespace rotor::data {
namespace {

struct Known {
  int64_t n;
  const char* en;
  const char* de;
};

const Known kKnown[] = {
    {0, "zero", "null"},
    {1, "one", "eins"},
    {2, "two", "zwei"},
    {6, "six", "sechs"},
    {7, "seven", "sieben"},
    {10, "ten", "zehn"},
    {11, "eleven", "elf"},
    {12, "twelve", "zwölf"},
    {13, "thirteen", "dreizehn"},
    {16, "sixteen", "sechzehn"},
    {17, "seventeen", "siebzehn"},
    {20, "twenty", "zwanzig"},
    {21, "twenty-one", "einundzwanzig"},
    {22, "twenty-two", "zweiundzwanzig"},
    {30, "thirty", "dreißig"},
    {31, "thirty-one", "einunddreißig"},
    {40, "forty", "vierzig"},
    {56, "fifty-six", "sechsundfünfzig"},
    {60, "sixty", "sechzig"},
    {67, "sixty-seven", "siebenundsechzig"},
    {70, "seventy", "siebzig"},
    {77, "seventy-seven", "siebenundsiebzig"},
    {99, "ninety-nine", "neunundneunzig"},
    {100, "one hundred", "einhundert"},
    {101, "one hundred one", "einhunderteins"},
    {111, "one hundred eleven", "einhundertelf"},
    {116, "one hundred sixteen", "einhundertsechzehn"},
    {200, "two hundred", "zweihundert"},
    {321, "three hundred twenty-one", "dreihunderteinundzwanzig"},
    {1000, "one thousand", "eintausend"},
    {1001, "one thousand one", "eintausendeins"},
    {1100, "one thousand one hundred", "eintausendeinhundert"},
    {2021, "two thousand twenty-one", "zweitausendeinundzwanzig"},
    {10000, "ten thousand", "zehntausend"},
    {16017, "sixteen thousand seventeen", "sechzehntausendsiebzehn"},
    {21000, "twenty-one thousand", "einundzwanzigtausend"},
    {100000, "one hundred thousand", "einhunderttausend"},
    {101101, "one hundred one thousand one hundred one", "einhunderteintausendeinhunderteins"},
    {999999, "nine hundred ninety-nine thousand nine hundred ninety-nine",
     "neunhundertneunundneunzigtausendneunhundertneunundneunzig"},
    {1000000, "one million", "eine Million"},
    {1000001, "one million one", "eine Million eins"},
    {2000000, "two million", "zwei Millionen"},
    {21000000, "twenty-one million", "einundzwanzig Millionen"},
    {101000000, "one hundred one million", "einhunderteine Millionen"},
    {123456789,
     "one hundred twenty-three million four hundred fifty-six thousand seven hundred eighty-nine",
     "einhundertdreiundzwanzig Millionen "
     "vierhundertsechsundfünfzigtausendsiebenhundertneunundachtzig"},
};

// UTF-8 characters (code points), not bytes: "ß" and "ü" count once.
static size_t chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

TEST(data_synth_numbers, KnownSpellings) {
  for (const auto& k : kKnown) {
    EXPECT_EQ(number_to_english(k.n), k.en) << k.n;
    EXPECT_EQ(number_to_german(k.n), k.de) << k.n;
  }
  EXPECT_THROW(number_to_german(1'000'000'000), Error);
  EXPECT_THROW(number_to_english(-1), Error);
}

size_t words(const std::string& s) {
  return std::count(s.begin(), s.end(), ' ') + 1;
}

TEST(data_synth_numbers, SplitsDisjointLongAndDeterministic) {
  SynthNumbersOptions o;  // the defaults
  auto splits = synth_numbers_splits(o);
  ASSERT_EQ(splits.size(), 4u);
  EXPECT_EQ(splits[0].name, "train");
  EXPECT_EQ(splits[0].numbers.size(), 20000u);
  EXPECT_EQ(splits[1].numbers.size(), 500u);
  EXPECT_EQ(splits[2].numbers.size(), 1000u);
  EXPECT_EQ(splits[3].name, "test_long");
  EXPECT_EQ(splits[3].numbers.size(), 500u);
  std::set<int64_t> all;
  size_t total = 0;
  for (const auto& s : splits) {
    all.insert(s.numbers.begin(), s.numbers.end());
    total += s.numbers.size();
  }
  EXPECT_EQ(all.size(), total) << "no number in two splits";
  std::set<int64_t> train(splits[0].numbers.begin(), splits[0].numbers.end());
  for (int64_t x = 1; x <= 100; ++x) EXPECT_TRUE(train.count(x)) << x;
  size_t max_words = 0, max_en = 0, max_de = 0;
  for (int64_t x : splits[0].numbers) {
    EXPECT_LT(x, 100'000);
    max_words = std::max(max_words, words(number_to_english(x)));
    max_en = std::max(max_en, chars(number_to_english(x)));
    max_de = std::max(max_de, chars(number_to_german(x)));
  }
  for (int64_t x : splits[3].numbers) {
    EXPECT_GE(x, 100'000);  // same words as training ("thousand"), only more of them
    EXPECT_LT(x, 1'000'000);
    EXPECT_GT(words(number_to_english(x)), max_words);
    EXPECT_GT(chars(number_to_english(x)), max_en);
    EXPECT_GT(chars(number_to_german(x)), max_de);
  }
  auto again = synth_numbers_splits(o);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(again[i].numbers, splits[i].numbers);
  o.seed = 2;
  EXPECT_NE(synth_numbers_splits(o)[0].numbers, splits[0].numbers);
}

// Small splits written into `dir`.
SynthNumbersOptions small_splits(const std::string& dir, int64_t train, int64_t valid, int64_t test,
                                 int64_t test_long) {
  SynthNumbersOptions o;
  o.output_dir = dir;
  o.train = train;
  o.valid = valid;
  o.test = test;
  o.test_long = test_long;
  return o;
}

TEST(data_synth_numbers, WritesFiles) {
  rotor::test::TempDir dir;
  SynthNumbersOptions o = small_splits(dir / "numbers", 300, 20, 30, 10);
  auto splits = write_synth_numbers(o);
  for (const auto& s : splits) {
    std::ifstream en(o.output_dir + "/" + s.name + ".en"), de(o.output_dir + "/" + s.name + ".de");
    ASSERT_TRUE(en && de) << s.name;
    std::string le, ld;
    size_t n = 0;
    while (std::getline(en, le) && std::getline(de, ld)) {
      ASSERT_LT(n, s.numbers.size());
      EXPECT_EQ(le, number_to_english(s.numbers[n]));
      EXPECT_EQ(ld, number_to_german(s.numbers[n]));
      ++n;
    }
    EXPECT_EQ(n, s.numbers.size());
  }
  o.train = 0;
  EXPECT_THROW(write_synth_numbers(o), Error);
}

// synth replaces its own earlier output, never a user's file of one of its
// names, nor its own output edited since (data/synth_outputs.h).
TEST(data_synth_numbers, ReplacesOnlyItsOwnUnchangedFiles) {
  namespace fs = std::filesystem;
  rotor::test::TempDir dir;
  SynthNumbersOptions o = small_splits(dir / "numbers", 50, 5, 5, 5);
  write_synth_numbers(o);
  ASSERT_TRUE(fs::exists(o.output_dir + "/synth.json"));
  const std::string first = rotor::test::slurp(o.output_dir + "/train.en");
  o.seed = 2;
  write_synth_numbers(o);  // its own, unchanged: replaced
  const std::string second = rotor::test::slurp(o.output_dir + "/train.en");
  EXPECT_NE(second, first);

  // Edited since: refused, and nothing written.
  { std::ofstream(o.output_dir + "/valid.de", std::ios::app) << "edit\n"; }
  const std::string edited = rotor::test::slurp(o.output_dir + "/valid.de");
  o.seed = 3;
  try {
    write_synth_numbers(o);
    ADD_FAILURE() << "an edited file was replaced";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("valid.de changed since rotor synth wrote it"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(rotor::test::slurp(o.output_dir + "/valid.de"), edited);
  EXPECT_EQ(rotor::test::slurp(o.output_dir + "/train.en"), second);

  // A user's own file of one of synth's names, in a directory synth never
  // wrote: refused, and kept.
  const std::string mine = dir / "mine";
  fs::create_directories(mine);
  { std::ofstream(mine + "/test.de") << "my own data\n"; }
  o.output_dir = mine;
  EXPECT_THROW(write_synth_numbers(o), Error);
  EXPECT_EQ(rotor::test::slurp(mine + "/test.de"), "my own data\n");
  EXPECT_FALSE(fs::exists(mine + "/train.en"));
  EXPECT_FALSE(fs::exists(mine + "/synth.json"));

  // A synth.json that is not synth's record.
  const std::string other = dir / "other";
  fs::create_directories(other);
  { std::ofstream(other + "/synth.json") << "{\"written_by\": \"someone\"}\n"; }
  o.output_dir = other;
  EXPECT_THROW(write_synth_numbers(o), Error);
  EXPECT_FALSE(fs::exists(other + "/train.en"));
}

}  // namespace
}  // namespace rotor::data
