// `rotor generate --checkpoint RUN[:best] [--prompt TEXT | --input FILE]
//  [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
//  [--greedy] [--batch-size N]`
// Continues prompts with a task-lm checkpoint (decode/generate.h): one line
// out per prompt, in input order, holding the continuation only (from its
// leading space, so that prompt + continuation reads as one text). Each
// prompt is the context of a new document: the end-of-text token, then the
// prompt's tokens. Lines are decoded in batches; standard input is read as
// it comes and each batch is written when it is done.
#include <algorithm>
#include <cstdio>
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
#include "decode/generate.h"
#include "models/model_config.h"
#include "nn/attention_kind.h"
#include "nn/parameters.h"
#include "nn/position.h"

namespace {

constexpr const char* kCmd = "generate";

struct GenerateArgs {
  std::string checkpoint, device = "auto";
  std::optional<std::string> prompt, input;
  int64_t max_new_tokens = 100, batch_size = 16;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
  int64_t seed = 1;
  bool greedy = false;
  std::vector<std::string> sets;  // --set model.rope.*=...
};

void check_args(const GenerateArgs& a) {
  using namespace rotor::cli;
  check_nonempty(kCmd, "--checkpoint", a.checkpoint);
  if (a.prompt && a.input)
    ROTOR_FAIL("{}: --prompt and --input both given; give one (a prompt, or a file of prompts)",
               kCmd);
  if (a.greedy && (a.temperature || a.top_k || a.top_p))
    ROTOR_FAIL("{}: --greedy takes the most likely token; it cannot be combined with {}", kCmd,
               a.temperature ? "--temperature"
               : a.top_k     ? "--top-k"
                             : "--top-p");
  check_int(kCmd, "--max-new-tokens", a.max_new_tokens, 1, 1'000'000);
  check_int(kCmd, "--batch-size", a.batch_size, 1, 100'000);
  check_int(kCmd, "--seed", a.seed, 0, INT64_MAX);
  if (a.temperature && !(*a.temperature > 0))  // NaN too
    ROTOR_FAIL(
        "{}: --temperature must be a number above 0 (--greedy for the most likely token), "
        "got {}",
        kCmd, *a.temperature);
  if (a.temperature) check_real(kCmd, "--temperature", *a.temperature, 1e-6, 1e6);
  if (a.top_k) check_int(kCmd, "--top-k", *a.top_k, 0, INT32_MAX);
  if (a.top_p && !(*a.top_p > 0 && *a.top_p <= 1))
    ROTOR_FAIL("{}: --top-p must be a number above 0 and at most 1, got {}", kCmd, *a.top_p);
  if (a.input) check_input_file(kCmd, "--input", *a.input, /*allow_stdin=*/true);
}

// The continuation's text: the whole sequence decoded less the prompt's
// text, so that a piece's leading space survives; newlines (a byte model may
// emit one) become spaces, to keep one line out per line in.
std::string continuation_text(const rotor::data::Tokenizer& tok, std::vector<int32_t> prompt,
                              const std::vector<int32_t>& tokens) {
  const std::string head = tok.decode(prompt);
  prompt.insert(prompt.end(), tokens.begin(), tokens.end());
  std::string full = tok.decode(prompt);
  std::string text =
      full.compare(0, head.size(), head) == 0 ? full.substr(head.size()) : tok.decode(tokens);
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

int run_generate(const GenerateArgs& a) {
  using namespace rotor;
  check_args(a);
  cli::InferenceSession session(kCmd, a.checkpoint, a.sets, a.device);
  const std::string& dir = session.dir();
  // A whole file is read and checked before the model loads.
  std::unique_ptr<cli::LineSource> source;
  if (!a.prompt) source = std::make_unique<cli::LineSource>(a.input, kCmd);
  const std::string input_name = a.prompt ? "--prompt" : source->name();

  models::DecoderLM* model = nullptr;
  {
    cli::Activity activity(fmt::format("{}: loading the checkpoint {}", kCmd, dir));
    const data::Tokenizer& tok = session.tokenizer();
    const models::DecoderLmOptions options = models::lm_options(session.config(), tok.vocab_size());
    if (!options.layer.attention_kind->cached_decode)
      ROTOR_FAIL(
          "{}: {} has attention.kind {}, which has no incremental decoding (key/value cache); "
          "generate runs softmax-attention models",
          kCmd, dir, options.layer.attention_kind.name());
    model = &session.load_model<models::DecoderLM>([&](nn::ParameterStore& store) {
      return std::make_unique<models::DecoderLM>(options, store);
    });
  }
  const data::Tokenizer& tok = session.tokenizer();
  decode::GenerateOptions go;
  go.max_new_tokens = a.max_new_tokens;
  // Where a document starts and a continuation ends: </s> in a SentencePiece
  // LM's stream; a byte LM's stream has no </s> but its line breaks, so its
  // prompts start after one and its continuations end at the next.
  const int32_t boundary = tok.is_bytes() ? tok.encode("\n").at(0) : tok.eos_id();
  go.eos_id = boundary;
  go.pad_id = tok.pad_id();
  go.bos_id = tok.bos_id();
  go.sampling.greedy = a.greedy;
  go.sampling.temperature = a.temperature.value_or(1.0);
  go.sampling.top_k = a.top_k.value_or(0);
  go.sampling.top_p = a.top_p.value_or(1.0);
  go.sampling.seed = static_cast<uint64_t>(a.seed);

  nn::Context ctx = session.context();
  const models::DecoderLmOptions& mo = model->options();
  const bool table = nn::has_position_table(mo.position);
  cli::TextSink sink(std::nullopt);
  bool prompt_done = false;
  int64_t first = 0;  // index of the batch's first line in the input
  for (;;) {
    std::vector<std::string> lines;
    if (a.prompt) {
      if (!prompt_done) lines.push_back(*a.prompt);
      prompt_done = true;
      cli::check_utf8(lines, input_name);
    } else {
      lines = source->next(static_cast<size_t>(a.batch_size));
    }
    if (lines.empty()) break;
    const int64_t B = static_cast<int64_t>(lines.size());
    cli::Activity activity(
        fmt::format("{}: continuing lines {}-{} of {}", kCmd, first + 1, first + B, input_name));
    // Where a prompt came from, in messages: "--prompt" or FILE:LINE.
    auto where = [&](int64_t i) {
      return a.prompt ? std::string("--prompt") : fmt::format("{}:{}", input_name, first + i + 1);
    };
    std::vector<std::vector<int32_t>> prompts;
    std::vector<uint64_t> rows;
    for (int64_t i = 0; i < B; ++i) {
      std::vector<int32_t> x{boundary};
      const std::vector<int32_t> ids = tok.encode(lines[static_cast<size_t>(i)]);
      x.insert(x.end(), ids.begin(), ids.end());
      if (table && static_cast<int64_t>(x.size()) > mo.max_positions)
        ROTOR_FAIL(
            "{}: {}: the prompt has {} tokens with the leading end-of-text, more than "
            "model.max_positions = {} of the checkpoint ({} positions); shorten it",
            kCmd, where(i), x.size(), mo.max_positions, mo.position.name());
      prompts.push_back(std::move(x));
      rows.push_back(static_cast<uint64_t>(first + i));
    }
    const std::vector<decode::Continuation> out = decode::generate(*model, prompts, rows, go, ctx);
    std::string text;
    for (int64_t i = 0; i < B; ++i) {
      const std::vector<int32_t> prompt(prompts[i].begin() + 1, prompts[i].end());
      text += continuation_text(tok, prompt, out[i].tokens) + "\n";
      if (out[i].end == decode::GenerationEnd::Positions)
        std::fprintf(stderr,
                     "rotor: %s: %s: stopped at model.max_positions = %lld (%s positions) after "
                     "%zu new tokens\n",
                     kCmd, where(i).c_str(), static_cast<long long>(mo.max_positions),
                     std::string(mo.position.name()).c_str(), out[i].tokens.size());
    }
    sink.write(text);
    first += B;
  }
  sink.finish();
  return 0;
}

}  // namespace

ROTOR_COMMAND("generate", "Continue text with a trained language model (task lm)", 17,
              [](CLI::App& app) {
                auto a = std::make_shared<GenerateArgs>();
                app.add_option("--checkpoint", a->checkpoint,
                               "Checkpoint or run directory (RUN:best for its best checkpoint)")
                    ->required();
                app.add_option_function<std::string>(
                    "--prompt", [a](const std::string& v) { a->prompt = v; },
                    "One prompt to continue");
                app.add_option_function<std::string>(
                    "--input", [a](const std::string& v) { a->input = v; },
                    "Prompts, one a line (default or -: standard input, read as it comes)");
                app.add_option("--max-new-tokens", a->max_new_tokens,
                               "Most tokens generated per prompt (default 100)");
                app.add_option_function<double>(
                    "--temperature", [a](const double& v) { a->temperature = v; },
                    "Sampling temperature, above 0 (default 1)");
                app.add_option_function<int64_t>(
                    "--top-k", [a](const int64_t& v) { a->top_k = v; },
                    "Sample from the K most likely tokens (default 0: all)");
                app.add_option_function<double>(
                    "--top-p", [a](const double& v) { a->top_p = v; },
                    "Nucleus sampling: the most likely tokens of probability P, 0 < P <= 1 "
                    "(default 1: all)");
                app.add_option("--seed", a->seed,
                               "Seed of the sampling (default 1): the same seed, the same output");
                app.add_flag("--greedy", a->greedy, "Take the most likely token at every step");
                app.add_option("--batch-size", a->batch_size, "Prompts per batch (default 16)");
                app.add_option("--device", a->device, "auto | cpu | cuda | cuda:N");
                app.add_option("--set", a->sets, rotor::cli::kInferenceSetHelp);
                return [a] { return run_generate(*a); };
              });
