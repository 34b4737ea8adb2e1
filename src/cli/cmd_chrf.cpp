// `rotor chrf`: corpus chrF2 (chrF++ with --word-order 2) of a hypothesis file,
// compatible with sacreBLEU 2.x (see src/eval/chrf.h).
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "eval/chrf.h"
#include "eval/text_io.h"

namespace {

struct ChrfArgs {
  std::vector<std::string> refs;
  std::string hyp = "-";
  rotor::eval::ChrfOptions opts;
  bool json = false;
  bool score_only = false;
  int width = 2;
};

int run_chrf(const ChrfArgs& a) {
  using namespace rotor::eval;
  using namespace rotor::cli;
  for (const auto& r : a.refs)
    check_input_file("chrf", "--ref", r, /*allow_stdin=*/false, /*allow_fifo=*/true);
  check_input_file("chrf", "hypothesis", a.hyp, /*allow_stdin=*/true);
  check_int("chrf", "--char-order", a.opts.char_order, 0, 32);
  check_int("chrf", "--word-order", a.opts.word_order, 0, 8);
  check_int("chrf", "--beta", a.opts.beta, 1, 100);
  check_int("chrf", "--width", a.width, 0, 10);
  std::vector<std::vector<std::string>> refs;
  for (const auto& r : a.refs) {
    refs.push_back(read_lines(r));
    check_utf8(refs.back(), r);
  }
  const std::vector<std::string> hyps = read_lines(a.hyp);
  const std::string hyp_name = a.hyp == "-" ? "<stdin>" : a.hyp;
  check_utf8(hyps, hyp_name);
  for (size_t k = 0; k < refs.size(); ++k)
    if (refs[k].size() != hyps.size())
      ROTOR_FAIL("hypothesis {} has {} lines but reference {} has {} lines", hyp_name, hyps.size(),
                 a.refs[k], refs[k].size());
  const ChrfResult r = corpus_chrf(hyps, refs, a.opts);
  const std::string sig = chrf_signature(a.opts, static_cast<int>(refs.size()));
  if (a.json) {
    fmt::print("{{\"name\": \"{}\", \"score\": {}, \"stats\": [{}], \"signature\": \"{}\"}}\n",
               chrf_name(a.opts), r.score, fmt::join(r.stats, ", "), sig);
  } else if (a.score_only) {
    fmt::print("{:.{}f}\n", r.score, a.width);
  } else {
    fmt::print("{}\n{}\n", format_chrf(r, a.opts, a.width), sig);
  }
  return 0;
}

}  // namespace

ROTOR_COMMAND(
    "chrf", "Corpus chrF of a hypothesis file, compatible with sacreBLEU", 61, [](CLI::App& sub) {
      auto a = std::make_shared<ChrfArgs>();
      sub.add_option("--ref,-r", a->refs, "Reference file (repeat for several references)")
          ->required()
          ->allow_extra_args(false);
      sub.add_option("hyp", a->hyp, "Hypothesis file, one segment a line (default: stdin)");
      sub.add_option("--char-order", a->opts.char_order,
                     "Character n-gram order, 0 to 32 (default 6)");
      sub.add_option("--word-order", a->opts.word_order,
                     "Word n-gram order, 0 to 8 (default 0; 2 gives chrF++)");
      sub.add_option("--beta", a->opts.beta, "Recall weight beta, 1 to 100 (default 2)");
      sub.add_flag("--lowercase", a->opts.lowercase, "Case-insensitive chrF");
      sub.add_flag("--whitespace", a->opts.whitespace, "Keep whitespace in character n-grams");
      sub.add_flag("--eps-smoothing", a->opts.eps_smoothing,
                   "Average per-order F-scores with eps for empty orders (chrF++.py style)");
      sub.add_option("--width,-w", a->width, "Decimals of the score, 0 to 10 (default 2)");
      sub.add_flag("--json", a->json, "Print the figures as JSON");
      sub.add_flag("--score-only,-b", a->score_only, "Print only the score");
      return [a] { return run_chrf(*a); };
    });
