// Corpus BLEU and the tokenizers against figures printed by sacreBLEU 2.6.0
// (pip install sacrebleu; Python 3.11), plus hand-computed edge cases.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "eval/bleu.h"
#include "eval/text_io.h"
#include "eval/tokenizers.h"
#include "eval/unicode.h"
#include "support/test_util.h"

namespace rotor::eval {
namespace {

const std::vector<std::string> kReadmeHyps = {"The dog bit the man.", "It wasn't surprising.",
                                              "The man had just bitten him."};
const std::vector<std::vector<std::string>> kReadmeRefs = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};

TEST(Bleu, SacrebleuReadmeExample) {
  const BleuResult r = corpus_bleu(kReadmeHyps, kReadmeRefs);
  EXPECT_NEAR(r.score, 48.530827009929865, 1e-9);
  EXPECT_EQ(
      format_bleu(r),
      "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
  EXPECT_EQ(
      bleu_signature({}, 2),
      std::string("nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:rotor-") + ROTOR_VERSION);
  BleuOptions none;
  none.tokenize = BleuTokenizer::kNone;
  const BleuResult n = corpus_bleu(kReadmeHyps, kReadmeRefs, none);
  EXPECT_NEAR(n.score, 49.19195660047277, 1e-9);
  EXPECT_EQ(
      format_bleu(n),
      "BLEU = 49.19 71.4/54.5/50.0/40.0 (BP = 0.931 ratio = 0.933 hyp_len = 14 ref_len = 15)");
  BleuOptions intl;
  intl.tokenize = BleuTokenizer::kIntl;
  EXPECT_NEAR(corpus_bleu(kReadmeHyps, kReadmeRefs, intl).score, 43.91623493336995, 1e-9);
}

TEST(Bleu, IdenticalIs100) {
  const std::vector<std::string> lines = {"Ein kleiner Test, mit Satzzeichen.", "Noch eine Zeile"};
  const BleuResult r = corpus_bleu(lines, {lines});
  EXPECT_DOUBLE_EQ(r.score, 100.0);
  EXPECT_DOUBLE_EQ(r.bp, 1.0);
  EXPECT_DOUBLE_EQ(r.ratio, 1.0);
}

TEST(Bleu, NoMatchesIsZero) {
  const BleuResult r = corpus_bleu({"x y"}, {{"a b"}});
  EXPECT_EQ(r.score, 0.0);
  for (double p : r.precisions) EXPECT_EQ(p, 0.0);  // sacreBLEU reports 0.0/0.0/0.0/0.0
  EXPECT_EQ(r.totals[0], 2);
  EXPECT_EQ(r.totals[1], 1);
  EXPECT_DOUBLE_EQ(r.bp, 1.0);
}

TEST(Bleu, EmptyHypothesisLines) {
  const BleuResult r = corpus_bleu({"", ""}, {{"a b", "c"}});
  EXPECT_EQ(r.score, 0.0);
  EXPECT_EQ(r.bp, 0.0);
  EXPECT_EQ(r.hyp_len, 0);
  EXPECT_EQ(r.ref_len, 3);
  EXPECT_EQ(format_bleu(r),
            "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 3)");
}

TEST(Bleu, ZeroLengthLineOnlyShortensTheCorpus) {
  // All n-grams match; BP = exp(1 - 8/6).
  const BleuResult r =
      corpus_bleu({"the cat sat on the mat", ""}, {{"the cat sat on the mat", "a dog"}});
  EXPECT_EQ(r.counts, (std::array<int64_t, 4>{6, 5, 4, 3}));
  EXPECT_EQ(r.totals, (std::array<int64_t, 4>{6, 5, 4, 3}));
  EXPECT_NEAR(r.bp, std::exp(1.0 - 8.0 / 6.0), 1e-15);
  EXPECT_NEAR(r.score, 100.0 * std::exp(1.0 - 8.0 / 6.0), 1e-12);
  EXPECT_NEAR(r.score, 71.65313105737896, 1e-9);  // sacreBLEU 2.6.0
}

TEST(Bleu, ExpSmoothing) {
  // counts 4/5, 2/4, 0/3, 0/2: the first zero order gets 100/(2*3), the second 100/(4*2).
  const BleuResult r = corpus_bleu({"a b c d e"}, {{"a b x d e"}});
  EXPECT_NEAR(r.precisions[2], 100.0 / 6.0, 1e-12);
  EXPECT_NEAR(r.precisions[3], 12.5, 1e-12);
  EXPECT_NEAR(r.score, std::pow(80.0 * 50.0 * (100.0 / 6.0) * 12.5, 0.25), 1e-9);
  EXPECT_NEAR(r.score, 30.213753973567677, 1e-9);  // sacreBLEU 2.6.0
  // A hypothesis too short to have 4-grams scores 0 without effective order...
  EXPECT_EQ(corpus_bleu({"a b c"}, {{"a b d"}}).score, 0.0);
  // ...and the geometric mean of the orders it has with it.
  BleuOptions eff;
  eff.effective_order = true;
  EXPECT_NEAR(corpus_bleu({"a b c"}, {{"a b d"}}, eff).score,
              std::cbrt(100.0 * 2 / 3 * 50.0 * 50.0), 1e-9);
}

TEST(Bleu, ClosestReferenceLengthPrefersShorterOnTies) {
  // Hypothesis of 3 words, references of 2 and 4: both 1 away, 2 is taken.
  const BleuResult r = corpus_bleu({"a b c"}, {{"a b"}, {"a b c d"}});
  EXPECT_EQ(r.ref_len, 2);
  EXPECT_DOUBLE_EQ(r.bp, 1.0);
  // Clipping uses the largest count in any single reference.
  const BleuResult c = corpus_bleu({"a a a"}, {{"a b c"}, {"a a d"}});
  EXPECT_EQ(c.counts[0], 2);
}

TEST(Bleu, LineCountMismatchIsAUserError) {
  EXPECT_THROW(corpus_bleu({"a", "b"}, {{"a"}}), Error);
}

TEST(Tokenizer13a, MatchesSacrebleu) {
  // Expected strings printed by sacreBLEU 2.6.0's Tokenizer13a.
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(tokenize_13a("3.14 and 1,000"), "3.14 and 1,000");
  EXPECT_EQ(tokenize_13a("end."), "end .");
  EXPECT_EQ(tokenize_13a("&quot;quoted&quot; &amp; more &amp;quot;"),
            "\" quoted \" & more & quot ;");
  EXPECT_EQ(tokenize_13a("<skipped>x y"), "x y");
  EXPECT_EQ(tokenize_13a("1990-2000 well-known it's"), "1990 - 2000 well-known it's");
  EXPECT_EQ(tokenize_13a("a/b x.y U.S.A. {x}|~[y]^_`z"),
            "a / b x . y U . S . A . { x } | ~ [ y ] ^ _ ` z");
  EXPECT_EQ(tokenize_13a("a..b,,c"), "a . . b , , c");
  EXPECT_EQ(tokenize_13a("$5 @home #tag 50% a+b=c <a>"), "$ 5 @ home # tag 50 % a + b = c < a >");
  EXPECT_EQ(tokenize_13a("\"Wow\" - ok -- (yes) ; :"), "\" Wow \" - ok -- ( yes ) ; :");
  EXPECT_EQ(tokenize_13a("  Straße,\u00a0groß.\t"), "Straße , groß .");  // NBSP is whitespace
}

TEST(TokenizerIntl, MatchesSacrebleu) {
  // Expected strings printed by sacreBLEU 2.6.0's TokenizerV14International.
  EXPECT_EQ(tokenize_intl("„Hallo“, sagte er."), "„ Hallo “ , sagte er .");
  EXPECT_EQ(tokenize_intl("3.14 und 1,5 €5"), "3.14 und 1,5 € 5");
  EXPECT_EQ(tokenize_intl("½ Ⅻ ²"), "½ Ⅻ ²");
  EXPECT_EQ(tokenize_intl("a–b — c…"), "a – b — c …");
  EXPECT_EQ(tokenize_intl("l'homme «ici»"), "l ' homme « ici »");
  EXPECT_EQ(tokenize_intl("x.y a.1 1.a"), "x . y a . 1 1 . a");
  EXPECT_EQ(tokenize_intl("50% $5 a+b=c ©"), "50 % $ 5 a + b = c ©");
  EXPECT_EQ(tokenize(" keep  as is ", BleuTokenizer::kNone), " keep  as is ");
  EXPECT_THROW(parse_tokenizer("mosess"), Error);
}

TEST(TokenizerMoses, MatchesTokenizerPerl) {
  // Expected strings printed by Moses' tokenizer.perl -no-escape (default
  // mode, no -a) given rotor's abbreviation lists as its nonbreaking-prefix
  // files; rotor's tokenizer also agreed with it token for token on all of
  // newstest2014 (en, de) and the Multi30k training text.
  EXPECT_EQ(parse_tokenizer("moses"), BleuTokenizer::kMoses);
  EXPECT_EQ(
      tokenize_moses("\u201eDas ist's\u201c, sagte Dr. M\u00fcller am 3. Oktober in Berlin-Mitte "
                     "(ca. 5 Mio. Euro)... Ende.",
                     "de"),
      "\u201e Das ist ' s \u201c , sagte Dr. M\u00fcller am 3. Oktober in Berlin-Mitte ( ca. 5 "
      "Mio. Euro ) ... Ende .");
  EXPECT_EQ(
      tokenize_moses("Die Kosten: 5,300 Euro, d.h. 10% mehr als 2013,nicht 1,5 Mio. Nr. 5 ist "
                     "gut. Jan. Hallo",
                     "de"),
      "Die Kosten : 5,300 Euro , d.h. 10 % mehr als 2013 , nicht 1,5 Mio. Nr. 5 ist gut . Jan . "
      "Hallo");
  EXPECT_EQ(tokenize_moses("Sie zahlten 5,000.50 Dollar f\u00fcr U.S.-Anleihen...", "de"),
            "Sie zahlten 5,000.50 Dollar f\u00fcr U.S.-Anleihen ...");
  EXPECT_EQ(
      tokenize_moses("It's the 1990's, isn't it? Mr. Smith paid $5,000.50 for U.S. bonds... "
                     "'Really.'",
                     "en"),
      "It 's the 1990 's , isn 't it ? Mr. Smith paid $ 5,000.50 for U.S. bonds ... ' Really . '");
  EXPECT_EQ(
      tokenize_moses("The dogs' owner said: \"No. 5 is fine\" - they're here, A,B,C and 5,300."),
      "The dogs ' owner said : \" No. 5 is fine \" - they 're here , A , B , C and 5,300 .");
  EXPECT_EQ(tokenize_moses("Gen. Motors rose 3%. Then it fell."),
            "Gen. Motors rose 3 % . Then it fell .");
  // Whitespace and control characters; a soft hyphen and ² are not letters.
  EXPECT_EQ(tokenize_moses(" a\t\u00a0b\x01"
                           "c  \u00adx\u00b2 ",
                           "de"),
            "a bc \u00ad x \u00b2");
  EXPECT_EQ(tokenize_moses("   ", "de"), "");
  EXPECT_EQ(tokenize(" x.", BleuTokenizer::kMoses, "de"), "x .");
}

TEST(Bleu, SplitCompoundsAfterAnyTokenizer) {
  // The paper protocol: Moses-tokenize, then split compounds, in hypothesis
  // and reference alike.
  BleuOptions opts;
  opts.tokenize = BleuTokenizer::kMoses;
  opts.lang = "de";
  opts.compound_split = true;
  EXPECT_EQ(bleu_words("Die Rich-Text-Datei (\u201eRTF\u201c) ist's, 5-mal.", opts),
            (std::vector<std::string>{"Die", "Rich", "##AT##-##AT##", "Text", "##AT##-##AT##",
                                      "Datei", "(", "\u201e", "RTF", "\u201c", ")", "ist", "'", "s",
                                      ",", "5", "##AT##-##AT##", "mal", "."}));
  // A dash between spaces stays; 13a has already split "1990-2000".
  opts.tokenize = BleuTokenizer::k13a;
  EXPECT_EQ(
      bleu_words("x - y 1990-2000 a-b", opts),
      (std::vector<std::string>{"x", "-", "y", "1990", "-", "2000", "a", "##AT##-##AT##", "b"}));
  EXPECT_EQ(bleu_signature(opts, 1).find("tok:13a+atat|"), bleu_signature(opts, 1).find("tok:"));
  opts.tokenize = BleuTokenizer::kMoses;
  EXPECT_NE(bleu_signature(opts, 1).find("|tok:moses-de+atat|"), std::string::npos);
  opts.compound_split = false;
  EXPECT_NE(bleu_signature(opts, 1).find("|tok:moses-de|"), std::string::npos);
}

TEST(Bleu, SplitCompoundsScoreByHand) {
  // hyp: Die Rich ##AT##-##AT## Text ##AT##-##AT## Datei ist gross .    (9 words)
  // ref: Die Rich ##AT##-##AT## Text ##AT##-##AT## Datei ist sehr gross . (10)
  // Matches: 9/9 unigrams, 7/8 bigrams, 5/7 trigrams, 4/6 4-grams (those with
  // "ist gross" miss); BP = exp(1 - 10/9).
  const std::vector<std::string> hyp = {"Die Rich-Text-Datei ist gross."};
  const std::vector<std::vector<std::string>> ref = {{"Die Rich-Text-Datei ist sehr gross."}};
  const double expected =
      100.0 * std::exp(1.0 - 10.0 / 9.0) * std::pow(1.0 * 7 / 8 * 5 / 7 * 4 / 6, 0.25);
  for (BleuTokenizer t : {BleuTokenizer::kMoses, BleuTokenizer::k13a}) {
    BleuOptions opts;
    opts.tokenize = t;
    opts.lang = "de";
    opts.compound_split = true;
    const BleuResult r = corpus_bleu(hyp, ref, opts);
    EXPECT_EQ(r.counts, (std::array<int64_t, 4>{9, 7, 5, 4})) << tokenizer_name(t);
    EXPECT_EQ(r.totals, (std::array<int64_t, 4>{9, 8, 7, 6})) << tokenizer_name(t);
    EXPECT_NEAR(r.score, expected, 1e-9) << tokenizer_name(t);
    EXPECT_NEAR(r.score, 71.89393375176815, 1e-9);
  }
  // Unsplit, the compound is one word: 5/5, 3/4, 1/3, 0/2 (exp smoothing: 100 / (2 * 2)).
  BleuOptions plain;
  plain.tokenize = BleuTokenizer::kMoses;
  plain.lang = "de";
  EXPECT_NEAR(corpus_bleu(hyp, ref, plain).score,
              std::exp(1.0 - 6.0 / 5.0) * std::pow(100.0 * 75.0 * (100.0 / 3) * 25.0, 0.25), 1e-9);
}

TEST(EvalUnicode, LowercaseMatchesPython) {
  // Python 3.11: "ÄÖÜ İ ΟΔΟΣ Σ ΑΣ'Β ὈΔΥΣΣΕΎΣ.".lower()
  EXPECT_EQ(unicode_lower("ÄÖÜ İ ΟΔΟΣ Σ ΑΣ'Β ὈΔΥΣΣΕΎΣ."),
            "\u00e4\u00f6\u00fc i\u0307 \u03bf\u03b4\u03bf\u03c2 \u03c3 \u03b1\u03c3'\u03b2 "
            "\u1f40\u03b4\u03c5\u03c3\u03c3\u03b5\u03cd\u03c2.");
  EXPECT_EQ(split_whitespace("a\u2009b\u3000 c\x1c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(rstrip_whitespace("x y \u00a0\r"), "x y");
  // Invalid UTF-8 survives a round trip.
  EXPECT_EQ(encode_utf8(decode_utf8("a\xff\xc3(b")), "a\xff\xc3(b");
}

TEST(Bleu, CompoundSplit) {
  EXPECT_EQ(compound_split("rich-text format"), "rich ##AT##-##AT## text format");
  EXPECT_EQ(compound_split("a-b-c - d"), "a ##AT##-##AT## b-c - d");  // perl s///g: no overlaps
  BleuOptions opts;
  opts.compound_split = true;
  EXPECT_EQ(bleu_words("Das Rich-Text-Format, ok.", opts),
            (std::vector<std::string>{"Das", "Rich", "##AT##-##AT##", "Text", "##AT##-##AT##",
                                      "Format", ",", "ok", "."}));
  EXPECT_DOUBLE_EQ(corpus_bleu({"Ein Rich-Text-Format."}, {{"Ein Rich-Text-Format."}}, opts).score,
                   100.0);
  EXPECT_NE(bleu_signature(opts, 1).find("tok:13a+atat"), std::string::npos);
}

// newstest2014.de with every word j of line i dropped when (i + 2j) % 7 == 3
// and neighbours k, k+1 swapped when (i + k) % 5 == 0.
std::vector<std::string> perturbed(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::string> kept;
    std::istringstream words(lines[i]);
    std::string w;
    for (size_t j = 0; std::getline(words, w, ' ');) {
      if (w.empty()) continue;
      if ((i + 2 * j) % 7 != 3) kept.push_back(w);
      ++j;
    }
    for (size_t k = 0; k + 1 < kept.size(); ++k)
      if ((i + k) % 5 == 0) std::swap(kept[k], kept[k + 1]);
    std::string line;
    for (const auto& k : kept) line += (line.empty() ? "" : " ") + k;
    out.push_back(line);
  }
  return out;
}

TEST(Bleu, RealDataMatchesSacrebleu) {
  ROTOR_REQUIRE_SHARED_DATA("newstest2014/newstest2014.de");
  const std::string dir = test::shared_data_dir() + "/newstest2014/";
  const auto de = read_lines(dir + "newstest2014.de");
  const auto hyp = perturbed(de);
  // Figures printed by sacreBLEU 2.6.0 for the same perturbation (Python).
  const BleuResult r = corpus_bleu(hyp, {de});
  EXPECT_NEAR(r.score, 24.390877645645165, 1e-9);
  EXPECT_EQ(format_bleu(r),
            "BLEU = 24.39 100.0/44.9/21.5/7.1 (BP = 0.846 ratio = 0.856 hyp_len = 53691 ref_len = "
            "62688)");
  EXPECT_EQ(r.counts, (std::array<int64_t, 4>{53691, 22764, 10276, 3195}));
  EXPECT_EQ(r.totals, (std::array<int64_t, 4>{53691, 50688, 47687, 44692}));
  BleuOptions o;
  o.tokenize = BleuTokenizer::kIntl;
  EXPECT_NEAR(corpus_bleu(hyp, {de}, o).score, 26.59102196968871, 1e-9);
  o.tokenize = BleuTokenizer::kNone;
  EXPECT_NEAR(corpus_bleu(hyp, {de}, o).score, 15.454508934187178, 1e-9);
  o = {};
  o.lowercase = true;
  EXPECT_NEAR(corpus_bleu(hyp, {de}, o).score, 24.39700051145799, 1e-9);
  // The English source scored against the German reference.
  const auto en = read_lines(dir + "newstest2014.en");
  EXPECT_NEAR(corpus_bleu(en, {de}).score, 2.754502903088081, 1e-9);
}

// ---- the `rotor bleu` command ------------------------------------------------

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr
};

CommandResult run_command(const std::string& args) {
  const std::string cmd = std::string(ROTOR_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(BleuCommand, ScoresFilesAndStdin) {
  test::TempDir dir;
  write_file(dir / "hyp",
             "The dog bit the man.\nIt wasn't surprising.\nThe man had just bitten him.\n");
  write_file(dir / "ref1",
             "The dog bit the man.\nIt was not unexpected.\nThe man bit him first.\n");
  write_file(dir / "ref2",
             "The dog had bit the man.\nNo one was surprised.\nThe man had bitten the dog.\n");
  auto r = run_command("bleu --ref " + (dir / "ref1") + " --ref " + (dir / "ref2") + " " +
                       (dir / "hyp"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(
      r.output.find(
          "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\n"
          "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:rotor-"),
      std::string::npos)
      << r.output;
  r = run_command("bleu -r " + (dir / "ref1") + " -r " + (dir / "ref2") +
                  " --tokenize none --score-only < " + (dir / "hyp"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "49.19\n");
  r = run_command("bleu -r " + (dir / "ref1") + " -r " + (dir / "ref2") + " --json " +
                  (dir / "hyp"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"score\": 48.53082700992"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"hyp_len\": 17"), std::string::npos) << r.output;
}

TEST(BleuCommand, SplitCompoundsAndMoses) {
  test::TempDir dir;
  write_file(dir / "hyp", "Die Rich-Text-Datei ist gross.\n");
  write_file(dir / "ref", "Die Rich-Text-Datei ist sehr gross.\n");
  auto r = run_command("bleu -r " + (dir / "ref") +
                       " --tokenize moses --lang de --split-compounds -w 4 " + (dir / "hyp"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(
      r.output.rfind("BLEU = 71.8939 100.0/87.5/71.4/66.7 (BP = 0.895 ratio = 0.900 hyp_len = 9 "
                     "ref_len = 10)\nnrefs:1|case:mixed|eff:no|tok:moses-de+atat|smooth:exp|",
                     0),
      0u)
      << r.output;
  // The old spelling, with 13a (the default tokenizer).
  r = run_command("bleu -r " + (dir / "ref") + " --compound-split -b -w 4 " + (dir / "hyp"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "71.8939\n");
  r = run_command("bleu -r " + (dir / "ref") + " --lang de " + (dir / "hyp"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--lang de only applies to --tokenize moses"), std::string::npos)
      << r.output;
}

TEST(BleuCommand, LineCountMismatchAndMissingFileFail) {
  test::TempDir dir;
  write_file(dir / "hyp", "a b c\nd e f\n");
  write_file(dir / "ref", "a b c\n");
  auto r = run_command("bleu --ref " + (dir / "ref") + " " + (dir / "hyp"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("hypothesis " + (dir / "hyp") + " has 2 lines but reference " +
                          (dir / "ref") + " has 1 lines"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;  // one line
  r = run_command("bleu --ref " + (dir / "nope") + " " + (dir / "hyp"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(dir / "nope"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no such file"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rotor::eval
