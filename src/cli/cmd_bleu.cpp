// `rotor bleu`: corpus BLEU of a hypothesis file against one or more
// references, compatible with sacreBLEU 2.x (see src/eval/bleu.h); with
// `--by-length SOURCE`, BLEU and chrF per bucket of source length
// (src/eval/length_buckets.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/json_io.h"
#include "eval/bleu.h"
#include "eval/length_buckets.h"
#include "eval/text_io.h"

namespace {

struct BleuArgs {
  std::vector<std::string> refs;
  std::string hyp = "-";
  std::string tokenize = "13a";
  std::string lang;
  std::string smooth = "exp";
  double smooth_value = -1;  // -1: the method's default
  bool smooth_value_given = false;
  bool lowercase = false;
  bool compound_split = false;
  bool effective_order = false;
  bool json = false;
  bool score_only = false;
  int width = 2;
  std::string by_length;  // the source file of --by-length
  std::string buckets = rotor::eval::kDefaultLengthEdges;
  std::string length_unit = "words";
  bool buckets_given = false, length_unit_given = false;
};

std::string hyp_name(const std::string& path) {
  return path == "-" ? "<stdin>" : path;
}

// Reads the hypothesis and every reference; all must have the same number of lines.
void read_corpus(const std::string& hyp_path, const std::vector<std::string>& ref_paths,
                 std::vector<std::string>& hyps, std::vector<std::vector<std::string>>& refs) {
  refs.clear();
  for (const auto& r : ref_paths) {
    refs.push_back(rotor::eval::read_lines(r));
    rotor::cli::check_utf8(refs.back(), r);
  }
  hyps = rotor::eval::read_lines(hyp_path);
  rotor::cli::check_utf8(hyps, hyp_name(hyp_path));
  for (size_t k = 0; k < refs.size(); ++k)
    if (refs[k].size() != hyps.size())
      ROTOR_FAIL("hypothesis {} has {} lines but reference {} has {} lines", hyp_name(hyp_path),
                 hyps.size(), ref_paths[k], refs[k].size());
}

rotor::json_io::Json bucket_json(const rotor::eval::LengthBucket& b, bool range) {
  rotor::json_io::Json j;
  if (range) {
    j["from"] = b.lo;
    j["to"] = b.hi < 0 ? rotor::json_io::Json() : rotor::json_io::Json(b.hi);  // exclusive
  }
  j["lines"] = b.lines;
  const bool empty = b.lines == 0;
  const auto num = [empty](double v) {
    return empty ? rotor::json_io::Json() : rotor::json_io::Json(v);
  };
  j["mean_length"] = num(static_cast<double>(b.source_length) / std::max<int64_t>(b.lines, 1));
  j["bleu"] = num(b.bleu.score);
  j["chrf"] = num(b.chrf.score);
  j["bp"] = num(b.bleu.bp);
  j["ratio"] = num(b.bleu.ratio);
  j["hyp_len"] = b.bleu.hyp_len;
  j["ref_len"] = b.bleu.ref_len;
  return j;
}

// `--by-length SOURCE`: a table (or one JSON object) of BLEU and chrF per
// bucket of source length, then the whole corpus.
void print_by_length(const BleuArgs& a, const rotor::eval::BleuOptions& opts,
                     const std::vector<std::string>& hyps,
                     const std::vector<std::vector<std::string>>& refs) {
  using namespace rotor::eval;
  const std::vector<int64_t> edges = parse_length_edges(a.buckets);
  const LengthUnit unit = parse_length_unit(a.length_unit);
  const std::vector<std::string> sources = read_lines(a.by_length);
  rotor::cli::check_utf8(sources, a.by_length);
  if (sources.size() != hyps.size())
    ROTOR_FAIL("bleu: --by-length source {} has {} lines but hypothesis {} has {} lines",
               a.by_length, sources.size(), hyp_name(a.hyp), hyps.size());
  ChrfOptions chrf;
  chrf.lowercase = opts.lowercase;
  const LengthScores s = score_by_length(sources, hyps, refs, edges, unit, opts, chrf);
  const int nrefs = static_cast<int>(refs.size());
  if (a.json) {
    rotor::json_io::Json j;
    j["source"] = a.by_length;
    j["unit"] = length_unit_name(unit);
    j["buckets"] = rotor::json_io::Json::array();
    for (const LengthBucket& b : s.buckets) j["buckets"].push_back(bucket_json(b, true));
    j["all"] = bucket_json(s.all, false);
    j["bleu_signature"] = bleu_signature(opts, nrefs);
    j["chrf_signature"] = chrf_signature(chrf, nrefs);
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("BLEU and {} by source length ({} of {}):\n", chrf_name(chrf), length_unit_name(unit),
             a.by_length);
  fmt::print("{:>10} {:>8} {:>9} {:>8} {:>8} {:>7}\n", "length", "lines", "mean len", "BLEU",
             chrf_name(chrf), "ratio");
  const int w = a.width;
  std::vector<std::pair<std::string, const LengthBucket*>> rows;
  for (const LengthBucket& b : s.buckets) rows.emplace_back(bucket_name(b), &b);
  rows.emplace_back("all", &s.all);
  for (const auto& [name, b] : rows) {
    if (b->lines == 0) {
      fmt::print("{:>10} {:>8} {:>9} {:>8} {:>8} {:>7}\n", name, 0, "-", "-", "-", "-");
      continue;
    }
    fmt::print("{:>10} {:>8} {:>9.2f} {:>8.{}f} {:>8.{}f} {:>7.3f}\n", name, b->lines,
               static_cast<double>(b->source_length) / b->lines, b->bleu.score, w, b->chrf.score, w,
               b->bleu.ratio);
  }
  fmt::print("BLEU {}\n{} {}\n", bleu_signature(opts, nrefs), chrf_name(chrf),
             chrf_signature(chrf, nrefs));
}

int run_bleu(const BleuArgs& a) {
  using namespace rotor::eval;
  using namespace rotor::cli;
  for (const auto& r : a.refs)
    check_input_file("bleu", "--ref", r, /*allow_stdin=*/false, /*allow_fifo=*/true);
  check_input_file("bleu", "hypothesis", a.hyp, /*allow_stdin=*/true);
  check_int("bleu", "--width", a.width, 0, 10);
  if (a.by_length.empty() && (a.buckets_given || a.length_unit_given))
    ROTOR_FAIL("bleu: --buckets and --length-unit apply to --by-length SOURCE");
  if (!a.by_length.empty()) {
    check_input_file("bleu", "--by-length", a.by_length, /*allow_stdin=*/false,
                     /*allow_fifo=*/true);
    if (a.score_only)
      ROTOR_FAIL("bleu: --score-only prints one score; --by-length prints one per bucket");
    parse_length_edges(a.buckets);
    parse_length_unit(a.length_unit);
  }
  if (a.smooth_value_given) check_real("bleu", "--smooth-value", a.smooth_value, 0, 1000);
  BleuOptions opts;
  opts.tokenize = parse_tokenizer(a.tokenize);
  opts.smooth = parse_bleu_smooth(a.smooth);
  opts.smooth_value = a.smooth_value;
  opts.lowercase = a.lowercase;
  opts.compound_split = a.compound_split;
  opts.effective_order = a.effective_order;
  if (!a.lang.empty()) {
    if (opts.tokenize != BleuTokenizer::kMoses)
      ROTOR_FAIL("--lang {} only applies to --tokenize moses (got --tokenize {})", a.lang,
                 a.tokenize);
    opts.lang = a.lang;
  }
  std::vector<std::string> hyps;
  std::vector<std::vector<std::string>> refs;
  read_corpus(a.hyp, a.refs, hyps, refs);
  if (!a.by_length.empty()) {
    print_by_length(a, opts, hyps, refs);
    return 0;
  }
  const BleuResult r = corpus_bleu(hyps, refs, opts);
  const std::string sig = bleu_signature(opts, static_cast<int>(refs.size()));
  if (a.json) {
    fmt::print(
        "{{\"name\": \"BLEU\", \"score\": {}, \"precisions\": [{}, {}, {}, {}], \"bp\": {}, "
        "\"ratio\": {}, \"hyp_len\": {}, \"ref_len\": {}, \"counts\": [{}, {}, {}, {}], "
        "\"totals\": [{}, {}, {}, {}], \"signature\": \"{}\", \"verbose_score\": \"{}\"}}\n",
        r.score, r.precisions[0], r.precisions[1], r.precisions[2], r.precisions[3], r.bp, r.ratio,
        r.hyp_len, r.ref_len, r.counts[0], r.counts[1], r.counts[2], r.counts[3], r.totals[0],
        r.totals[1], r.totals[2], r.totals[3], sig, format_bleu(r, a.width));
  } else if (a.score_only) {
    fmt::print("{:.{}f}\n", r.score, a.width);
  } else {
    fmt::print("{}\n{}\n", format_bleu(r, a.width), sig);
  }
  return 0;
}

}  // namespace

ROTOR_COMMAND(
    "bleu", "Corpus BLEU of a hypothesis file, compatible with sacreBLEU", 60, [](CLI::App& sub) {
      auto a = std::make_shared<BleuArgs>();
      sub.add_option("--ref,-r", a->refs, "Reference file (repeat for several references)")
          ->required()
          ->allow_extra_args(false);
      sub.add_option("hyp", a->hyp, "Hypothesis file, one segment a line (default: stdin)");
      sub.add_option("--tokenize,-t", a->tokenize,
                     "Tokenizer: 13a (default), intl, char, none, or moses (an "
                     "approximation of Moses' tokenizer.perl -no-escape; not sacreBLEU)");
      sub.add_option("--lang,-l", a->lang,
                     "Language of --tokenize moses: en (default; English contractions) "
                     "or another code such as de (apostrophes split on both sides)");
      sub.add_flag("--lowercase", a->lowercase, "Case-insensitive BLEU");
      sub.add_flag("--split-compounds,--compound-split", a->compound_split,
                   "After tokenizing, split hyphenated compounds: a-b -> a ##AT##-##AT## "
                   "b (the tokenized BLEU of Vaswani et al.: --tokenize moses --lang de "
                   "--split-compounds)");
      sub.add_option("--smooth-method", a->smooth, "exp (default), floor, add-k or none");
      sub.add_option_function<double>(
          "--smooth-value",
          [a](const double& v) {
            a->smooth_value = v;
            a->smooth_value_given = true;
          },
          "Value for floor (default 0.1) and add-k (default 1), 0 to 1000");
      sub.add_flag("--effective-order", a->effective_order,
                   "Average only over orders that have hypothesis n-grams");
      sub.add_option("--width,-w", a->width, "Decimals of the score, 0 to 10 (default 2)");
      sub.add_flag("--json", a->json, "Print the figures as JSON");
      sub.add_flag("--score-only,-b", a->score_only, "Print only the score");
      sub.add_option("--by-length", a->by_length,
                     "Source file (one line per hypothesis line): BLEU and chrF per bucket of "
                     "source length, then the whole corpus");
      sub.add_option_function<std::string>(
          "--buckets",
          [a](const std::string& v) {
            a->buckets = v;
            a->buckets_given = true;
          },
          "Lower edges of the --by-length buckets, increasing (default 0,10,20,30,40,50,60: "
          "[0,10) ... [60,inf))");
      sub.add_option_function<std::string>(
          "--length-unit",
          [a](const std::string& v) {
            a->length_unit = v;
            a->length_unit_given = true;
          },
          "What --by-length counts in a source line: words (default) or chars");
      return [a] { return run_bleu(*a); };
    });
