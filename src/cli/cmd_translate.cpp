// `rotor translate --checkpoint CKPT [--input FILE] [--output FILE] [--beam 4]
//  [--lenpen 0.6] [--max-len-a 1 --max-len-b 50] [--nbest N] [--batch-size 64]`
// Raw text in, detokenized text out, one line out per line in; with --nbest N,
// N lines "sentence_index<TAB>rank<TAB>score<TAB>hypothesis" per line in.
// Without --input it reads standard input as it arrives and writes each
// batch's translations at once, so that it answers line by line in a pipe.
#include <algorithm>
#include <memory>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/errors.h"
#include "cli/inference_config.h"
#include "cli/inference_session.h"
#include "cli/text_lines.h"
#include "config/config.h"
#include "core/device.h"
#include "data/sentencepiece.h"
#include "decode/beam_search.h"
#include "models/model_config.h"
#include "nn/parameters.h"
#include "nn/position.h"

namespace {

constexpr const char* kCmd = "translate";

struct TranslateArgs {
  std::string checkpoint, device = "auto";
  // Unset: standard input / output.
  std::optional<std::string> input, output;
  // Unset: the checkpoint config's decode.* value.
  std::optional<int64_t> beam, max_len_b, nbest;
  std::optional<double> lenpen, max_len_a;
  int64_t batch_size = 64;
  std::vector<std::string> sets;  // --set model.rope.*=...
};

// The ranges of the options (no work done yet). --max-len-a beyond 1000 can
// change nothing (the length is capped by the model's positions) and would
// only risk overflow; --lenpen beyond 10 makes length dominate any score.
void check_ranges(const TranslateArgs& a) {
  using namespace rotor::cli;
  check_nonempty(kCmd, "--checkpoint", a.checkpoint);
  if (a.beam) check_int(kCmd, "--beam", *a.beam, 1, 1024);
  if (a.nbest) check_int(kCmd, "--nbest", *a.nbest, 1, 1024);
  if (a.lenpen) check_real(kCmd, "--lenpen", *a.lenpen, -10, 10);
  if (a.max_len_a) check_real(kCmd, "--max-len-a", *a.max_len_a, 0, 1000);
  if (a.max_len_b) check_int(kCmd, "--max-len-b", *a.max_len_b, 0, 1'000'000);
  check_int(kCmd, "--batch-size", a.batch_size, 1, 100'000);
  if (a.input) check_input_file(kCmd, "--input", *a.input, /*allow_stdin=*/true);
  if (a.output && *a.output != "-")
    check_output_file(kCmd, "--output", *a.output, {a.input.value_or("-")});
}

int run_translate(const TranslateArgs& a) {
  using namespace rotor;
  check_ranges(a);
  cli::InferenceSession session(kCmd, a.checkpoint, a.sets, a.device);
  const std::string& dir = session.dir();
  const Config& cfg = session.config();
  decode::SearchOptions so;
  so.beam = a.beam ? static_cast<int>(*a.beam) : cfg.decode.beam;
  so.lenpen = a.lenpen.value_or(cfg.decode.lenpen);
  so.max_len_a = a.max_len_a.value_or(cfg.decode.max_len_a);
  so.max_len_b = a.max_len_b.value_or(cfg.decode.max_len_b);
  const int nbest = a.nbest ? static_cast<int>(*a.nbest) : 1;
  if (nbest > so.beam)
    ROTOR_FAIL("{}: --nbest {} exceeds the beam size {}{}; give --beam {} or more", kCmd, nbest,
               so.beam, a.beam ? "" : " (decode.beam of the checkpoint)", nbest);
  cli::LineSource source(a.input, kCmd);  // a whole file is read and checked before the model loads

  models::EncoderDecoder* model = nullptr;
  {
    cli::Activity activity(fmt::format("{}: loading the checkpoint {}", kCmd, dir));
    const int64_t vocab = session.tokenizer().vocab_size();
    model = &session.load_model<models::EncoderDecoder>([&](nn::ParameterStore& store) {
      return std::make_unique<models::EncoderDecoder>(models::transformer_options(cfg, vocab),
                                                      store);
    });
  }
  const data::Tokenizer& tok = session.tokenizer();
  so.bos_id = tok.bos_id();
  so.eos_id = tok.eos_id();
  so.pad_id = tok.pad_id();

  nn::Context ctx = session.context();
  // A position table bounds the source (tokens + eos); RoPE has none, so its
  // sources are never cut.
  const models::TransformerOptions& mo = model->options();
  const bool table = nn::has_position_table(mo.position);
  const std::string& input_name = source.name();
  cli::TextSink sink(a.output);
  int64_t first = 0;  // index of the batch's first sentence in the input
  for (;;) {
    const std::vector<std::string> lines = source.next(static_cast<size_t>(a.batch_size));
    if (lines.empty()) break;
    const int64_t B = static_cast<int64_t>(lines.size());
    cli::Activity activity(
        fmt::format("{}: translating lines {}-{} of {}", kCmd, first + 1, first + B, input_name));
    std::vector<std::vector<int32_t>> ids;
    std::vector<int32_t> lengths;
    int64_t S = 1;
    for (size_t i = 0; i < lines.size(); ++i) {
      std::vector<int32_t> x = tok.encode(lines[i]);
      x.push_back(tok.eos_id());
      if (table && static_cast<int64_t>(x.size()) > mo.max_positions)
        ROTOR_FAIL(
            "{}: {}:{}: {} tokens + eos, more than model.max_positions = {} of the checkpoint "
            "({} positions); split the line",
            kCmd, input_name, first + static_cast<int64_t>(i) + 1, x.size() - 1, mo.max_positions,
            mo.position.name());
      S = std::max<int64_t>(S, static_cast<int64_t>(x.size()));
      lengths.push_back(static_cast<int32_t>(x.size()));
      ids.push_back(std::move(x));
    }
    std::vector<int32_t> flat(static_cast<size_t>(B * S), tok.pad_id());  // [B, S]
    for (int64_t b = 0; b < B; ++b) std::copy(ids[b].begin(), ids[b].end(), flat.begin() + b * S);
    const auto hyps = decode::beam_search_nbest(
        *model, Tensor::from_ints(flat, {B, S}, session.device()), lengths, so, nbest, ctx);
    std::string text;
    for (int64_t b = 0; b < B; ++b) {
      if (!a.nbest) {
        text += (hyps[b].empty() ? std::string() : tok.decode(hyps[b].front().tokens)) + "\n";
        continue;
      }
      for (size_t r = 0; r < hyps[b].size(); ++r)
        text += fmt::format("{}\t{}\t{:.4f}\t{}\n", first + b, r + 1, hyps[b][r].score,
                            tok.decode(hyps[b][r].tokens));
    }
    sink.write(text);
    first += B;
  }
  sink.finish();
  return 0;
}

}  // namespace

ROTOR_COMMAND(
    "translate", "Translate text with a trained checkpoint (beam search)", 11, [](CLI::App& app) {
      auto a = std::make_shared<TranslateArgs>();
      app.add_option("--checkpoint", a->checkpoint,
                     "Checkpoint or run directory (RUN:best for its best checkpoint)")
          ->required();
      app.add_option_function<std::string>(
          "--input", [a](const std::string& v) { a->input = v; },
          "Source text (default or -: standard input, read as it comes)");
      app.add_option_function<std::string>(
          "--output", [a](const std::string& v) { a->output = v; },
          "Output file, written whole at the end (default or -: standard output)");
      app.add_option_function<int64_t>(
          "--beam", [a](const int64_t& v) { a->beam = v; },
          "Beam size, 1 to 1024 (default: the config's decode.beam)");
      app.add_option_function<double>(
          "--lenpen", [a](const double& v) { a->lenpen = v; },
          "Length penalty (fairseq), -10 to 10 (default: decode.lenpen)");
      app.add_option_function<double>(
          "--max-len-a", [a](const double& v) { a->max_len_a = v; },
          "Max length = a * source length + b, a from 0 to 1000 (default: decode.max_len_a)");
      app.add_option_function<int64_t>(
          "--max-len-b", [a](const int64_t& v) { a->max_len_b = v; },
          "Max length = a * source length + b, b from 0 (default: decode.max_len_b)");
      app.add_option_function<int64_t>(
          "--nbest", [a](const int64_t& v) { a->nbest = v; },
          "Write the N best hypotheses (N <= beam) as TSV lines: "
          "sentence_index, rank, score, hypothesis");
      app.add_option("--batch-size", a->batch_size, "Sentences per batch (default 64)");
      app.add_option("--device", a->device, "auto | cpu | cuda | cuda:N");
      app.add_option("--set", a->sets, rotor::cli::kInferenceSetHelp);
      return [a] { return run_translate(*a); };
    });
