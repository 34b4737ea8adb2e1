// `rotor mlm-logits --checkpoint CKPT --input F --output OUT.npy|OUT.safetensors
//  [--input-format text|ids] [--batch-size 16] [--device auto]`
// The masked-LM logits of a task-mlm checkpoint for every token of every
// input line, so that other implementations (Hugging Face transformers, in
// tests/scripts/test_hf_transformers.sh) can be compared with rotor's.
//
// Input lines: with --input-format text, a sentence or two separated by a
// tab, tokenized with the checkpoint's tokenizer and packed as
// [CLS] a [SEP] (b [SEP]) with token types 0 / 1 (data/classification.h),
// cut to model.max_positions; with ids, token ids separated by spaces,
// optionally a tab and as many token type ids.
//
// Output: logits f32 [N, T, V], T the longest line, zero past each line's
// end. OUT.safetensors also holds input_ids, token_type_ids and
// attention_mask, i32 [N, T]; OUT.npy the logits alone.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/npy.h"
#include "checkpoint/safetensors.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/errors.h"
#include "cli/inference_session.h"
#include "config/config.h"
#include "core/device.h"
#include "core/error.h"
#include "data/classification.h"
#include "data/sentencepiece.h"
#include "eval/text_io.h"
#include "models/model_config.h"
#include "nn/parameters.h"

namespace {

constexpr const char* kCmd = "mlm-logits";

struct MlmLogitsArgs {
  std::string checkpoint, input, output, input_format = "text", device = "auto";
  int64_t batch_size = 16;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<int32_t> parse_ints(std::string_view text, const std::string& where) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    int32_t v = 0;
    const auto r = std::from_chars(text.data() + i, text.data() + text.size(), v);
    if (r.ec != std::errc() || (r.ptr != text.data() + text.size() && *r.ptr != ' '))
      ROTOR_FAIL("{}: {}: expected integers separated by spaces", kCmd, where);
    out.push_back(v);
    i = static_cast<size_t>(r.ptr - text.data());
  }
  return out;
}

struct Sequence {
  std::vector<int32_t> ids, types;
};

// The input lines as token ids and types, checked against the model.
std::vector<Sequence> read_sequences(const MlmLogitsArgs& a, const rotor::models::BertOptions& m,
                                     const rotor::data::Tokenizer& tok) {
  using namespace rotor;
  const std::vector<std::string> lines = eval::read_lines(a.input);
  cli::check_utf8(lines, a.input);
  const int64_t max_len = m.max_positions, V = tok.vocab_size();
  const int64_t types = std::max<int64_t>(m.type_vocab_size, 1);
  std::vector<Sequence> out;
  const auto special = data::PairSpecialIds::from_tokenizer(tok);
  for (size_t n = 0; n < lines.size(); ++n) {
    std::string line = lines[n];
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = fmt::format("{}:{}", a.input, n + 1);
    if (line.empty()) ROTOR_FAIL("{}: {}: an empty line", kCmd, where);
    const size_t tab = line.find('\t');
    const std::string first = line.substr(0, tab);
    const std::string second = tab == std::string::npos ? "" : line.substr(tab + 1);
    Sequence s;
    if (a.input_format == "text") {
      data::pack_example(tok.encode(first), tok.encode(second), tab != std::string::npos, max_len,
                         special, s.ids, s.types);
    } else {
      s.ids = parse_ints(first, where);
      s.types = tab == std::string::npos ? std::vector<int32_t>(s.ids.size(), 0)
                                         : parse_ints(second, where + " (token types)");
      if (s.ids.empty()) ROTOR_FAIL("{}: {}: no token ids", kCmd, where);
      if (s.types.size() != s.ids.size())
        ROTOR_FAIL("{}: {}: {} token ids but {} token types", kCmd, where, s.ids.size(),
                   s.types.size());
      if (static_cast<int64_t>(s.ids.size()) > max_len)
        ROTOR_FAIL("{}: {}: {} tokens, more than model.max_positions = {}", kCmd, where,
                   s.ids.size(), max_len);
      for (int32_t id : s.ids)
        if (id < 0 || id >= V)
          ROTOR_FAIL("{}: {}: token id {} outside the vocabulary [0, {})", kCmd, where, id, V);
      for (int32_t t : s.types)
        if (t < 0 || t >= types)
          ROTOR_FAIL("{}: {}: token type {} outside [0, {})", kCmd, where, t, types);
    }
    out.push_back(std::move(s));
  }
  if (out.empty()) ROTOR_FAIL("{}: {}: no lines", kCmd, a.input);
  return out;
}

int run_mlm_logits(const MlmLogitsArgs& a) {
  using namespace rotor;
  cli::check_nonempty(kCmd, "--checkpoint", a.checkpoint);
  cli::check_input_file(kCmd, "--input", a.input, /*allow_stdin=*/false, /*allow_fifo=*/true);
  cli::check_output_file(kCmd, "--output", a.output, {a.input});
  cli::check_int(kCmd, "--batch-size", a.batch_size, 1, 100'000);
  if (a.input_format != "text" && a.input_format != "ids")
    ROTOR_FAIL("{}: --input-format must be text or ids, got {}", kCmd, a.input_format);
  const bool npy = ends_with(a.output, ".npy");
  if (!npy && !ends_with(a.output, ".safetensors"))
    ROTOR_FAIL("{}: --output {}: name a .npy or .safetensors file", kCmd, a.output);
  cli::InferenceSession session(kCmd, a.checkpoint, {}, a.device);
  const std::string& dir = session.dir();
  const data::Tokenizer& tok = session.tokenizer();
  const models::BertOptions options = models::bert_options(session.config(), tok.vocab_size());
  const std::vector<Sequence> seqs = read_sequences(a, options, tok);

  models::BertForMaskedLM* model = nullptr;
  {
    cli::Activity activity(fmt::format("{}: loading the checkpoint {}", kCmd, dir));
    model = &session.load_model<models::BertForMaskedLM>([&](nn::ParameterStore& store) {
      return std::make_unique<models::BertForMaskedLM>(options, store);
    });
  }
  const int64_t N = static_cast<int64_t>(seqs.size()), V = tok.vocab_size();
  int64_t T = 0;
  for (const auto& s : seqs) T = std::max<int64_t>(T, static_cast<int64_t>(s.ids.size()));
  std::vector<float> logits(static_cast<size_t>(N * T * V), 0.0f);  // [N, T, V]
  std::vector<int32_t> ids(static_cast<size_t>(N * T), tok.pad_id()), types(ids.size(), 0),
      mask(ids.size(), 0);
  const nn::Context ctx = session.context();
  for (int64_t first = 0; first < N; first += a.batch_size) {
    const int64_t B = std::min(a.batch_size, N - first);
    cli::Activity activity(
        fmt::format("{}: lines {}-{} of {}", kCmd, first + 1, first + B, a.input));
    int64_t Tb = 0;
    for (int64_t b = 0; b < B; ++b)
      Tb = std::max<int64_t>(Tb, static_cast<int64_t>(seqs[first + b].ids.size()));
    std::vector<int32_t> bid(static_cast<size_t>(B * Tb), tok.pad_id()), btype(bid.size(), 0);
    std::vector<int32_t> lengths;
    for (int64_t b = 0; b < B; ++b) {
      const Sequence& s = seqs[static_cast<size_t>(first + b)];
      std::copy(s.ids.begin(), s.ids.end(), bid.begin() + b * Tb);
      std::copy(s.types.begin(), s.types.end(), btype.begin() + b * Tb);
      lengths.push_back(static_cast<int32_t>(s.ids.size()));
    }
    const Tensor out =
        model->forward_logits(Tensor::from_ints(bid, {B, Tb}, session.device()),
                              Tensor::from_ints(btype, {B, Tb}, session.device()),
                              Tensor::from_ints(lengths, {B}, session.device()), ctx);
    const std::vector<float> lg = out.to_floats();  // [B, Tb, V]
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = first + b, L = lengths[static_cast<size_t>(b)];
      std::copy(lg.begin() + b * Tb * V, lg.begin() + (b * Tb + L) * V, logits.begin() + n * T * V);
      for (int64_t t = 0; t < L; ++t) {
        ids[static_cast<size_t>(n * T + t)] = bid[static_cast<size_t>(b * Tb + t)];
        types[static_cast<size_t>(n * T + t)] = btype[static_cast<size_t>(b * Tb + t)];
        mask[static_cast<size_t>(n * T + t)] = 1;
      }
    }
  }
  const Tensor lt = Tensor::from_floats(logits, {N, T, V});
  if (npy) {
    checkpoint::save_npy(a.output, lt);
  } else {
    checkpoint::save_safetensors(a.output, {{"logits", lt},
                                            {"input_ids", Tensor::from_ints(ids, {N, T})},
                                            {"token_type_ids", Tensor::from_ints(types, {N, T})},
                                            {"attention_mask", Tensor::from_ints(mask, {N, T})}});
  }
  std::fprintf(stderr, "%s: wrote logits [%lld, %lld, %lld] to %s\n", kCmd,
               static_cast<long long>(N), static_cast<long long>(T), static_cast<long long>(V),
               a.output.c_str());
  return 0;
}

}  // namespace

ROTOR_COMMAND("mlm-logits", "Write the masked-LM logits of a checkpoint for input lines", 16,
              [](CLI::App& app) {
                auto a = std::make_shared<MlmLogitsArgs>();
                app.add_option("--checkpoint", a->checkpoint,
                               "Task-mlm checkpoint or run directory (RUN:best for its best)")
                    ->required();
                app.add_option("--input", a->input,
                               "Lines: text (a sentence, or two separated by a tab) or ids")
                    ->required();
                app.add_option("--output", a->output,
                               "OUT.npy (logits) or OUT.safetensors (logits, input_ids, "
                               "token_type_ids, attention_mask)")
                    ->required();
                app.add_option("--input-format", a->input_format,
                               "text (tokenized, [CLS] a [SEP] (b [SEP])) or ids (\"5 9 6\", "
                               "optionally a tab and token types \"0 0 0\")");
                app.add_option("--batch-size", a->batch_size, "Lines per batch (default 16)");
                app.add_option("--device", a->device, "auto | cpu | cuda | cuda:N");
                return [a] { return run_mlm_logits(*a); };
              });
