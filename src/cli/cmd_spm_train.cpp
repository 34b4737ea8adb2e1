// `rotor spm-train`: train a joint SentencePiece model with rotor's fixed
// reserved ids (pad=0 unk=1 bos=2 eos=3, see src/data/sentencepiece.h).
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "data/sentencepiece.h"

namespace {

struct SpmTrainArgs {
  rotor::data::SpmTrainOptions opts;
  std::string symbols;
};

// The options' ranges and paths; train_sentencepiece checks the rest (the
// vocabulary against the reserved symbols, coverage, UTF-8) before training.
void check_args(const rotor::data::SpmTrainOptions& o) {
  using namespace rotor::cli;
  const char* cmd = "spm-train";
  for (const auto& in : o.inputs) check_input_file(cmd, "--input", in);
  check_nonempty(cmd, "--model-prefix", o.model_prefix);
  for (const char* ext : {".model", ".vocab"})
    check_output_file(cmd, "--model-prefix", o.model_prefix + ext, o.inputs);
  // An earlier rotor tokenizer is replaced; another file of that name (a
  // model with other reserved ids, something else) is not.
  const std::string model = o.model_prefix + ".model";
  std::error_code ec;
  if (std::filesystem::is_regular_file(model, ec)) {
    try {
      rotor::data::Tokenizer::load(model);
    } catch (const rotor::Error&) {
      ROTOR_FAIL(
          "{}: {} exists and is not a tokenizer rotor reads; not replacing it: give another "
          "--model-prefix",
          cmd, model);
    }
  }
  check_int(cmd, "--vocab-size", o.vocab_size, 1, 1'000'000);
  check_int(cmd, "--input-sentence-size", o.input_sentence_size, 0, int64_t{1} << 40);
  check_int(cmd, "--threads", o.num_threads, 0, 1024);
}

int run_spm_train(SpmTrainArgs& a) {
  check_args(a.opts);
  a.opts.user_defined_symbols = rotor::data::split_symbol_list(a.symbols);
  auto t0 = std::chrono::steady_clock::now();
  rotor::data::train_sentencepiece(a.opts);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The model written into a FIFO or a device cannot be read back: the
  // vocabulary size is then the one asked for.
  const std::string model = a.opts.model_prefix + ".model";
  std::error_code ec;
  const int vocab = std::filesystem::is_regular_file(model, ec)
                        ? rotor::data::Tokenizer::load(model).vocab_size()
                        : static_cast<int>(a.opts.vocab_size);
  std::printf("spm-train: wrote %s.model and %s.vocab (%s, vocab %d) in %.1f s\n",
              a.opts.model_prefix.c_str(), a.opts.model_prefix.c_str(), a.opts.model_type.c_str(),
              vocab, s);
  return 0;
}

}  // namespace

ROTOR_COMMAND(
    "spm-train", "Train a SentencePiece model (pad=0 unk=1 bos=2 eos=3)", 20, [](CLI::App& sub) {
      auto a = std::make_shared<SpmTrainArgs>();
      auto& o = a->opts;
      sub.add_option("--input", o.inputs, "Text file(s), one sentence per line")->required();
      sub.add_option("--model-prefix", o.model_prefix, "Writes PREFIX.model and PREFIX.vocab")
          ->required();
      sub.add_option("--vocab-size", o.vocab_size, "Vocabulary size (up to 1000000)")->required();
      sub.add_option("--model-type", o.model_type, "bpe or unigram");
      sub.add_option("--character-coverage", o.character_coverage,
                     "Fraction of characters covered (default 1.0)");
      sub.add_option("--input-sentence-size", o.input_sentence_size,
                     "Sample this many sentences (shuffled); 0 = all");
      sub.add_option("--user-defined-symbols", a->symbols,
                     "Comma-separated symbols kept whole, e.g. \"[MASK],[CLS],[SEP]\"");
      sub.add_option("--threads", o.num_threads, "Threads (0 = all cores)");
      sub.add_flag("--verbose", o.verbose, "Show SentencePiece's own log");
      return [a] { return run_spm_train(*a); };
    });
