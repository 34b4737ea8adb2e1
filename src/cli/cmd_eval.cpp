// `rotor eval --checkpoint RUN[:best] --input FILE [--block-size N | --lengths L1,L2,...]
//  [--batch-size N] [--device auto] [--json]`
// Scores a text file with a language-model checkpoint exactly as the run's
// validation scores its validation set (tasks/scoring.h): the file is
// binarized with the run's tokenizer as the trainer binarizes raw text, then
//   task lm:  non-overlapping blocks of N tokens (default data.seq_len), an
//             end-of-text token after every line (with data.packing
//             documents, the run's or --set's: lines packed as documents in
//             blocks of N, data/lm.h); loss (nats per token),
//             perplexity, bits per UTF-8 byte of the file, accuracy;
//   task mlm: packed blocks of N tokens with the fixed validation masks of
//             the run's seed; masked-LM loss, perplexity and accuracy.
// An EHR masked LM (data.format ehr) scores a split of a rotor prepare-ehr
// directory instead (--input DIR/valid) as its validation does: one patient
// per row (the newest data.seq_len tokens, or --block-size), the fixed
// validation masks; the directory must number its codes as the checkpoint's
// vocab.txt does.
// --lengths scores the file once per block length (loss against length);
// where a model has a position table (learned, sinusoidal positions) the
// lengths past it are not scored: the command says so and stops there.
// Output: a table, or with --json one JSON object on standard output.
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/errors.h"
#include "cli/inference_config.h"
#include "cli/inference_session.h"
#include "config/config.h"
#include "config/tasks.h"
#include "core/device.h"
#include "core/error.h"
#include "core/json_io.h"
#include "data/corpus.h"
#include "data/ehr.h"
#include "data/mlm.h"
#include "data/prepare.h"
#include "data/sentencepiece.h"
#include "eval/text_io.h"
#include "models/bert.h"
#include "models/decoder_lm.h"
#include "models/model_config.h"
#include "nn/parameters.h"
#include "nn/position.h"
#include "tasks/scoring.h"

namespace {

namespace fs = std::filesystem;
using rotor::json_io::Json;

constexpr const char* kCmd = "eval";
constexpr int64_t kMaxLength = int64_t{1} << 20;

struct EvalArgs {
  std::string checkpoint, input, lengths, device = "auto";
  std::optional<int64_t> block_size, batch_size;
  bool json = false;
  std::vector<std::string> sets;  // --set model.rope.*=...
};

// "128,256,512": strictly increasing lengths from `lo`.
std::vector<int64_t> parse_lengths(const std::string& text, int64_t lo) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i <= text.size()) {
    const size_t comma = std::min(text.find(',', i), text.size());
    int64_t v = 0;
    const auto r = std::from_chars(text.data() + i, text.data() + comma, v);
    if (r.ec != std::errc() || r.ptr != text.data() + comma)
      ROTOR_FAIL("{}: --lengths must be integers separated by commas (128,256,512), got \"{}\"",
                 kCmd, text);
    rotor::cli::check_int(kCmd, "--lengths", v, lo, kMaxLength);
    if (!out.empty() && v <= out.back())
      ROTOR_FAIL("{}: --lengths must increase, got {} after {}", kCmd, v, out.back());
    out.push_back(v);
    i = comma + 1;
  }
  return out;
}

// A temporary directory removed with everything in it when the object goes.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/rotor-eval-XXXXXX";
    if (!::mkdtemp(tmpl.data()))
      ROTOR_FAIL("{}: cannot create {}: {}", kCmd, tmpl, std::strerror(errno));
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The text of `input` binarized as the trainer binarizes a raw data.valid
// (data/prepared.h: empty lines dropped, nothing cut), in memory: the files
// are gone once mapped.
std::shared_ptr<const rotor::data::MmapCorpus> binarize(const std::string& input,
                                                        const std::string& spm,
                                                        const rotor::data::Tokenizer& tok,
                                                        bool keep_line_ends) {
  using namespace rotor;
  const std::vector<std::string> lines = eval::read_lines(input);
  cli::check_utf8(lines, input);
  bool text = false;
  for (const std::string& l : lines) text = text || !(l.empty() || l == "\r");
  if (!text) ROTOR_FAIL("{}: --input {}: no text (the file is empty)", kCmd, input);
  ScratchDir scratch;
  data::PrepareOptions o;
  o.spm_model = spm;
  o.src = input;
  o.output_prefix = scratch.path() + "/text";
  o.max_len = 0;
  o.max_len_ratio = 0;
  o.min_len = 1;
  // A byte LM's text is one byte stream, line breaks included (as training
  // reads it: tasks/data.cpp).
  o.keep_line_ends = keep_line_ends;
  data::prepare_corpus(o);
  auto corpus = std::make_shared<const data::MmapCorpus>(data::MmapCorpus::open(o.output_prefix));
  corpus->check_ids(static_cast<uint64_t>(tok.vocab_size()), "of the tokenizer " + spm);
  // Messages about the corpus would name the scratch copy: name the file.
  size_t tokens = 0;
  for (size_t i = 0; i < corpus->size(); ++i) tokens += corpus->sentence(i).size();
  if (tokens == 0)
    ROTOR_FAIL("{}: --input {}: its lines encode to no token (only spaces?)", kCmd, input);
  return corpus;
}

struct Row {
  int64_t length = 0;
  rotor::tasks::ValidationResult result;
};

double per_token(double sum, int64_t tokens) {
  return sum / static_cast<double>(std::max<int64_t>(tokens, 1));
}

// What a row that scored nothing says instead of its figures (never a
// perfect score).
constexpr const char* kNothingScored = "no tokens scored";

double measure(const rotor::tasks::ValidationResult& r, const std::string& name) {
  for (const auto& [m, v] : r.measures)
    if (m == name) return v;
  return std::nan("");
}

Json row_json(const Row& row, bool lm) {
  const auto& s = row.result.sums;
  Json j;
  j["length"] = row.length;
  j[lm ? "tokens" : "masked_tokens"] = s.tokens;
  if (s.tokens == 0) {
    j["loss"] = j["ppl"] = nullptr;
    if (lm) j["bpb"] = nullptr;
    if (s.has_correct) j["accuracy"] = nullptr;
    j["note"] = kNothingScored;
    return j;
  }
  j["loss"] = per_token(s.loss, s.tokens);
  j["ppl"] = std::exp(per_token(s.nll, s.tokens));
  if (lm) j["bpb"] = measure(row.result, "bpb");
  if (s.has_correct) j["accuracy"] = per_token(static_cast<double>(s.correct), s.tokens);
  return j;
}

void print_table(const std::vector<Row>& rows, bool lm) {
  std::printf("%8s %12s %10s %12s%s%s\n", "length", lm ? "tokens" : "masked", "loss", "ppl",
              lm ? "        bpb" : "", "   accuracy");
  for (const Row& row : rows) {
    const auto& s = row.result.sums;
    if (s.tokens == 0) {
      std::printf("%8lld %12lld   %s\n", static_cast<long long>(row.length), 0LL, kNothingScored);
      continue;
    }
    std::printf("%8lld %12lld %10.6f %12.4f", static_cast<long long>(row.length),
                static_cast<long long>(s.tokens), per_token(s.loss, s.tokens),
                std::exp(per_token(s.nll, s.tokens)));
    if (lm) std::printf(" %10.6f", measure(row.result, "bpb"));
    if (s.has_correct) std::printf(" %10.6f", per_token(static_cast<double>(s.correct), s.tokens));
    std::printf("\n");
  }
}

// Every row scored nothing: an error, not a table of empty scores.
void require_scored(const std::vector<Row>& rows, const std::string& input, bool lm) {
  for (const Row& row : rows)
    if (row.result.sums.tokens > 0) return;
  ROTOR_FAIL(
      "{}: --input {}: no tokens scored: {}, so there is no loss, perplexity or accuracy to "
      "report",
      kCmd, input,
      lm ? "no block has a target token"
         : "the fixed validation masks select none of its tokens (special tokens and <unk> are "
           "never selected, and a short input may draw no selection)");
}

void print_result(const EvalArgs& a, const std::string& dir, const rotor::Config& cfg,
                  const std::vector<Row>& rows, const std::string& how, const Json& size,
                  const std::string& size_text, const std::string& stopped) {
  const bool lm = cfg.task->model == rotor::ModelFamily::Decoder;
  if (a.json) {
    Json j;
    j["checkpoint"] = dir;
    j["task"] = std::string(to_string(cfg.task));
    j["input"] = a.input;
    for (auto it = size.begin(); it != size.end(); ++it) j[it.key()] = *it;
    j["how"] = how;
    if (a.lengths.empty()) {
      const Json row = row_json(rows.front(), lm);
      for (auto it = row.begin(); it != row.end(); ++it) j[it.key()] = *it;
    } else {
      j["lengths"] = Json::array();
      for (const Row& row : rows) j["lengths"].push_back(row_json(row, lm));
      if (!stopped.empty()) j["stopped"] = stopped;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s: %s (task %s) on %s, %s: %s\n", kCmd, dir.c_str(),
                std::string(to_string(cfg.task)).c_str(), a.input.c_str(), size_text.c_str(),
                how.c_str());
    print_table(rows, lm);
  }
}

// An EHR masked LM on a prepare-ehr split (the file comment).
int run_eval_ehr(const EvalArgs& a, rotor::cli::InferenceSession& session) {
  using namespace rotor;
  const std::string& dir = session.dir();
  const Config& cfg = session.config();
  if (!a.lengths.empty())
    ROTOR_FAIL(
        "{}: --lengths scores text blocks; {} is an EHR masked LM, scored one patient per row "
        "(--block-size: the tokens kept per patient)",
        kCmd, dir);
  if (!data::is_ehr_split(a.input) || !fs::exists(a.input + ".idx"))
    ROTOR_FAIL(
        "{}: --input {} is not a split of a rotor prepare-ehr directory (DIR/valid with "
        "DIR/ehr.json); {} was trained on EHR data",
        kCmd, a.input, dir);
  if (a.block_size) cli::check_int(kCmd, "--block-size", *a.block_size, 2, kMaxLength);
  const int64_t length = a.block_size.value_or(cfg.data.seq_len);
  const int64_t table = nn::has_position_table(cfg.model.position) ? cfg.model.max_positions : 0;
  if (table > 0 && length > table)
    ROTOR_FAIL(
        "{}: --block-size {}: the model's {} position table has model.max_positions = {} rows",
        kCmd, length, cfg.model.position->name, table);
  auto split = std::make_shared<const data::EhrSplit>(data::EhrSplit::open(a.input));
  if (data::read_ehr_vocab(data::ehr_dir_of(a.input)) != data::read_ehr_vocab(dir))
    ROTOR_FAIL("{}: --input {} numbers its codes differently from {}/vocab.txt", kCmd, a.input,
               dir);
  if (cfg.model.age_vocab_size > 0 && split->meta().age_vocab_size > cfg.model.age_vocab_size)
    ROTOR_FAIL("{}: --input {} has age ids up to {}, the model's holds {}", kCmd, a.input,
               split->meta().age_vocab_size - 1, cfg.model.age_vocab_size);
  if (split->size() == 0) ROTOR_FAIL("{}: --input {}: no patient", kCmd, a.input);
  const int64_t vocab = split->meta().vocab_size;
  models::BertForMaskedLM* model = nullptr;
  {
    cli::Activity activity(fmt::format("{}: loading the checkpoint {}", kCmd, dir));
    model = &session.load_model<models::BertForMaskedLM>([&](nn::ParameterStore& store) {
      return std::make_unique<models::BertForMaskedLM>(models::bert_options(cfg, vocab), store);
    });
  }
  const nn::Context ctx = session.context();
  Row row{length, {}};
  {
    cli::Activity activity(fmt::format("{}: scoring the patients of {}", kCmd, a.input));
    row.result = tasks::score_ehr_mlm(*model, split, length, tasks::ehr_mlm_masking(cfg, vocab),
                                      a.batch_size.value_or(cfg.train.batch_size), ctx,
                                      tasks::mlm_packing(cfg) == data::MlmPacking::Documents);
  }
  require_scored({row}, a.input, false);
  const int64_t patients = static_cast<int64_t>(split->size());
  print_result(a, dir, cfg, {row},
               tasks::mlm_packing(cfg) == data::MlmPacking::Documents
                   ? "patients packed into rows, fixed validation masks"
                   : "one patient per row, fixed validation masks",
               Json{{"patients", patients}}, fmt::format("{} patients", patients), "");
  return 0;
}

int run_eval(const EvalArgs& a) {
  using namespace rotor;
  cli::check_nonempty(kCmd, "--checkpoint", a.checkpoint);
  cli::check_nonempty(kCmd, "--input", a.input);
  if (a.json) {
    cli::check_json_name(kCmd, "--checkpoint", a.checkpoint);
    cli::check_json_name(kCmd, "--input", a.input);
  }
  // An EHR checkpoint reads a prepare-ehr split (DIR/valid), the others a text file.
  if (!data::is_ehr_split(a.input)) cli::check_input_file(kCmd, "--input", a.input);
  if (a.block_size && !a.lengths.empty())
    ROTOR_FAIL("{}: give --block-size or --lengths, not both", kCmd);
  if (a.batch_size) cli::check_int(kCmd, "--batch-size", *a.batch_size, 1, 100'000);
  cli::InferenceSession session(kCmd, a.checkpoint, a.sets, a.device);
  const std::string& dir = session.dir();
  const Config& cfg = session.config();
  const bool lm = cfg.task->model == ModelFamily::Decoder;
  if (cfg.data.format == DataFormat::Ehr) return run_eval_ehr(a, session);
  cli::check_input_file(kCmd, "--input", a.input);
  const int64_t shortest = lm ? 1 : 2;  // a masked-LM block is [CLS] and a token
  std::vector<int64_t> lengths;
  if (!a.lengths.empty()) {
    lengths = parse_lengths(a.lengths, shortest);
  } else {
    if (a.block_size) cli::check_int(kCmd, "--block-size", *a.block_size, shortest, kMaxLength);
    lengths.push_back(a.block_size.value_or(cfg.data.seq_len));
  }
  // A position table has no rows past model.max_positions.
  const int64_t table = nn::has_position_table(cfg.model.position) ? cfg.model.max_positions : 0;
  std::string stopped;
  if (table > 0 && lengths.back() > table) {
    const std::string why = fmt::format(
        "the model's {} position table has model.max_positions = {} rows; it cannot score "
        "blocks of more than {} tokens",
        cfg.model.position->name, table, table);
    if (lengths.front() > table)
      ROTOR_FAIL("{}: {} {}: {}", kCmd, a.lengths.empty() ? "--block-size" : "--lengths",
                 lengths.front(), why);
    size_t keep = 0;
    while (lengths[keep] <= table) ++keep;
    stopped = fmt::format("stopped at length {}: {}", lengths[keep], why);
    lengths.resize(keep);
  }
  const std::string spm = dir + "/spm.model";
  const data::Tokenizer& tok = session.tokenizer();
  std::shared_ptr<const data::MmapCorpus> corpus;
  {
    cli::Activity activity(fmt::format("{}: reading {}", kCmd, a.input));
    corpus = binarize(a.input, spm, tok, lm && tok.is_bytes());
  }
  const int64_t bytes = static_cast<int64_t>(fs::file_size(a.input));

  models::DecoderLM* lm_model = nullptr;
  models::BertForMaskedLM* mlm_model = nullptr;
  {
    cli::Activity activity(fmt::format("{}: loading the checkpoint {}", kCmd, dir));
    const int64_t vocab = tok.vocab_size();
    if (lm)
      lm_model = &session.load_model<models::DecoderLM>([&](nn::ParameterStore& store) {
        return std::make_unique<models::DecoderLM>(models::lm_options(cfg, vocab), store);
      });
    else
      mlm_model = &session.load_model<models::BertForMaskedLM>([&](nn::ParameterStore& store) {
        return std::make_unique<models::BertForMaskedLM>(models::bert_options(cfg, vocab), store);
      });
  }
  const nn::Context ctx = session.context();
  const int64_t batch_size = a.batch_size.value_or(cfg.train.batch_size);
  const data::MaskingOptions masking = lm ? data::MaskingOptions{} : tasks::mlm_masking(cfg, tok);
  std::vector<Row> rows;
  for (const int64_t length : lengths) {
    cli::Activity activity(fmt::format("{}: scoring {} in blocks of {}", kCmd, a.input, length));
    Row row{length, {}};
    if (lm) {
      auto blocks =
          tasks::lm_eval_blocks(corpus, length, tok, fmt::format("{}: --input {}", kCmd, a.input),
                                tasks::lm_packing(cfg), tasks::text_documents(cfg, tok));
      const int64_t scored = tasks::lm_scored_bytes(tok, *blocks, [&] { return bytes; });
      row.result = tasks::score_lm(*lm_model, std::move(blocks), scored, batch_size, ctx);
    } else {
      auto blocks = std::make_shared<const data::PackedBlocks>(
          corpus, length, masking.special.cls, masking.special.sep, tasks::mlm_packing(cfg),
          fmt::format("{}: --input {}", kCmd, a.input), tasks::text_documents(cfg, tok));
      row.result = tasks::score_mlm(*mlm_model, blocks, masking, batch_size, ctx);
    }
    rows.push_back(std::move(row));
  }

  require_scored(rows, a.input, lm);
  // What a document is, where they are packed.
  const std::string unit = tasks::text_documents(cfg, tok).paragraphs ? "paragraphs" : "lines";
  const std::string how = !lm ? (tasks::mlm_packing(cfg) == data::MlmPacking::Documents
                                     ? "packed documents (" + unit + "), fixed validation masks"
                                     : "packed blocks, fixed validation masks")
                          : tasks::lm_packing(cfg) == data::LmPacking::Documents
                              ? "packed documents (" + unit + ")"
                              : "non-overlapping blocks";
  print_result(a, dir, cfg, rows, how, Json{{"bytes", bytes}}, fmt::format("{} bytes", bytes),
               stopped);
  if (!stopped.empty()) std::fprintf(stderr, "%s: %s\n", kCmd, stopped.c_str());
  return 0;
}

}  // namespace

ROTOR_COMMAND("eval", "Score a text file with a language-model checkpoint (loss, ppl, bpb)", 18,
              [](CLI::App& app) {
                auto a = std::make_shared<EvalArgs>();
                app.add_option("--checkpoint", a->checkpoint,
                               "Task-lm or task-mlm checkpoint or run directory (RUN:best for "
                               "its best)")
                    ->required();
                app.add_option("--input", a->input,
                               "Text file, one line per document or sentence (EHR masked LM: a "
                               "prepare-ehr split, DIR/valid)")
                    ->required();
                app.add_option_function<int64_t>(
                    "--block-size", [a](const int64_t& v) { a->block_size = v; },
                    "Tokens per block (default: the run's data.seq_len)");
                app.add_option("--lengths", a->lengths,
                               "Score once per block length, increasing: 128,256,512");
                app.add_option_function<int64_t>(
                    "--batch-size", [a](const int64_t& v) { a->batch_size = v; },
                    "Blocks per batch (default: the run's train.batch_size, as validation)");
                app.add_option("--device", a->device, "auto | cpu | cuda | cuda:N");
                app.add_flag("--json", a->json, "One JSON object on standard output");
                app.add_option("--set", a->sets, rotor::cli::kInferenceSetHelp);
                return [a] { return run_eval(*a); };
              });
