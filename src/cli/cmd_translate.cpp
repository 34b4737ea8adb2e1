// `rotor translate --checkpoint CKPT [--input FILE] [--output FILE] [--beam 4]
//  [--lenpen 0.6] [--max-len-a 1 --max-len-b 50] [--batch-size 64]`
// Raw text in, detokenized text out, one line out per line in.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "core/device.h"
#include "core/io.h"
#include "data/sentencepiece.h"
#include "decode/beam_search.h"
#include "nn/parameters.h"
#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "train/trainer.h"
#include "models/model_config.h"

namespace {

struct TranslateArgs {
  std::string checkpoint, input, output, device = "auto";
  int beam = -1;
  double lenpen = -1, max_len_a = -1;
  int max_len_b = -1;
  int batch_size = 64;
};

int run_translate(const TranslateArgs& a) {
  using namespace rotor;
  const std::string dir = checkpoint::resolve_checkpoint(a.checkpoint);
  Config cfg = load_config(dir + "/config.yaml");
  data::Tokenizer tok = data::Tokenizer::load(dir + "/spm.model");
  const Device device = resolve_device(a.device);
  nn::ParameterStore store;
  models::EncoderDecoder model(models::transformer_config(cfg, tok.vocab_size()), store);
  store.allocate(device);
  checkpoint::load_weights(dir, store);

  decode::SearchOptions so;
  so.beam = a.beam > 0 ? a.beam : cfg.decode.beam;
  so.lenpen = a.lenpen >= 0 ? a.lenpen : cfg.decode.lenpen;
  so.max_len_a = a.max_len_a >= 0 ? a.max_len_a : cfg.decode.max_len_a;
  so.max_len_b = a.max_len_b >= 0 ? a.max_len_b : cfg.decode.max_len_b;
  so.bos_id = tok.bos_id();
  so.eos_id = tok.eos_id();
  so.pad_id = tok.pad_id();

  std::ifstream in_file;
  if (!a.input.empty()) {
    in_file.open(a.input);
    if (!in_file) ROTOR_FAIL("--input {}: cannot open", a.input);
  }
  std::istream& in = a.input.empty() ? std::cin : in_file;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);

  nn::Context ctx;
  ctx.training = false;
  ctx.device = device;
  const int64_t max_src = cfg.model.max_positions - 1;
  std::vector<std::string> out(lines.size());
  for (size_t begin = 0; begin < lines.size(); begin += static_cast<size_t>(a.batch_size)) {
    const size_t end = std::min(lines.size(), begin + static_cast<size_t>(a.batch_size));
    std::vector<std::vector<int32_t>> ids;
    std::vector<int32_t> lengths;
    int64_t S = 1;
    for (size_t i = begin; i < end; ++i) {
      std::vector<int32_t> x = tok.encode(lines[i]);
      if (static_cast<int64_t>(x.size()) > max_src - 1) x.resize(static_cast<size_t>(max_src - 1));
      x.push_back(tok.eos_id());
      S = std::max<int64_t>(S, static_cast<int64_t>(x.size()));
      lengths.push_back(static_cast<int32_t>(x.size()));
      ids.push_back(std::move(x));
    }
    const int64_t B = static_cast<int64_t>(ids.size());
    std::vector<int32_t> flat(static_cast<size_t>(B * S), tok.pad_id());
    for (int64_t b = 0; b < B; ++b) std::copy(ids[b].begin(), ids[b].end(), flat.begin() + b * S);
    auto hyps = decode::beam_search(model, Tensor::from_ints(flat, {B, S}, device), lengths, so, ctx);
    for (int64_t b = 0; b < B; ++b) out[begin + static_cast<size_t>(b)] = tok.decode(hyps[b].tokens);
  }
  std::string text;
  for (const auto& l : out) text += l + "\n";
  if (a.output.empty())
    std::fwrite(text.data(), 1, text.size(), stdout);
  else
    atomic_write_file(a.output, text);
  return 0;
}

}  // namespace

ROTOR_COMMAND("translate", "Translate text with a trained checkpoint (beam search)", 11,
              [](CLI::App& app) {
                auto a = std::make_shared<TranslateArgs>();
                app.add_option("--checkpoint", a->checkpoint, "Checkpoint or run directory")->required();
                app.add_option("--input", a->input, "Source text (default: stdin)");
                app.add_option("--output", a->output, "Output file (default: stdout)");
                app.add_option("--beam", a->beam, "Beam size (default: the config's decode.beam)");
                app.add_option("--lenpen", a->lenpen, "Length penalty (fairseq)");
                app.add_option("--max-len-a", a->max_len_a, "Max length = a * source length + b");
                app.add_option("--max-len-b", a->max_len_b, "Max length = a * source length + b");
                app.add_option("--batch-size", a->batch_size, "Sentences per batch")->check(CLI::PositiveNumber);
                app.add_option("--device", a->device, "auto | cpu | cuda | cuda:N");
                return [a] { return run_translate(*a); };
              });
