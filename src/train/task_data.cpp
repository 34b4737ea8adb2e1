#include "train/task_data.h"

#include <filesystem>
#include <span>

#include "checkpoint/checkpoint.h"
#include "checkpoint/init_checkpoint.h"
#include "config/tasks.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/io.h"
#include "core/json_io.h"
#include "data/ehr.h"
#include "nn/position.h"

namespace fs = std::filesystem;

namespace rotor::train {

std::string tokenizer_path(const Config& c) {
  if (c.data.tokenizer == TokenizerType::Bytes)
    return (fs::path(c.output_dir) / "tokenizer.bytes").string();
  if (!c.data.spm_model.empty()) return c.data.spm_model;
  if (!c.model.init_from.empty() && checkpoint::is_rotor_checkpoint(c.model.init_from))
    return (fs::path(checkpoint::resolve_checkpoint(c.model.init_from)) / "spm.model").string();
  if (!c.model.init_from.empty()) return (fs::path(c.model.init_from) / "spiece.model").string();
  return (fs::path(c.output_dir) / "spm.model").string();
}

data::CorpusSource corpus_source(const Config& c, const std::string& key) {
  data::CorpusSource s;
  s.key = "data." + key;
  s.path = key == "train" ? c.data.train : key == "valid" ? c.data.valid : c.data.test;
  if (c.task == Task::Translation) {
    s.src_lang = c.data.src_lang;
    s.tgt_lang = c.data.tgt_lang;
  }
  return s;
}

void check_data(const Config& c) {
  if (c.data.format == DataFormat::Ehr) {
    // Splits of `rotor prepare-ehr` (data/ehr.h), read as they are.
    if (c.data.train.empty()) ROTOR_FAIL("data.train is required for training");
    const std::pair<const char*, const std::string*> splits[] = {
        {"train", &c.data.train}, {"valid", &c.data.valid}, {"test", &c.data.test}};
    for (const auto& [key, p] : splits) {
      const std::string& path = *p;
      if (path.empty()) continue;
      if (!data::is_ehr_split(path) || !fs::exists(path + ".idx"))
        ROTOR_FAIL(
            "data.{}: {} is not a split of a rotor prepare-ehr directory (DIR/{} with "
            "DIR/ehr.json and DIR/{}.idx; data.format is ehr)",
            key, path, key, key);
      data::EhrMeta::load(data::ehr_dir_of(path));
    }
    return;
  }
  const data::CorpusSource train = corpus_source(c, "train");
  if (train.path.empty()) ROTOR_FAIL("data.train is required for training");
  train.check_exists();
  for (const char* key : {"valid", "test"}) {
    const data::CorpusSource s = corpus_source(c, key);
    if (!s.path.empty()) s.check_exists();
  }
  std::error_code ec;
  if (!c.model.init_from.empty() && fs::exists(c.model.init_from, ec) &&
      !fs::is_directory(c.model.init_from, ec))
    ROTOR_FAIL(
        "model.init_from: {} is a file; name the Hugging Face model directory that holds "
        "config.json, model.safetensors and spiece.model",
        c.model.init_from);
  const std::string spm = tokenizer_path(c);
  const bool bytes = c.data.tokenizer == TokenizerType::Bytes;  // written by the run, never missing
  if (!bytes && !fs::exists(spm) && c.data.spm_model.empty() && !c.model.init_from.empty())
    ROTOR_FAIL(
        "model.init_from: {} not found (the tokenizer of the pretrained model; set "
        "data.spm_model)",
        spm);
  if (!bytes && !fs::exists(spm) && (c.task == Task::Classification || c.task == Task::Multilabel))
    ROTOR_FAIL(
        "data.spm_model: {} not found; task {} reads the tokenizer of its "
        "encoder (data.spm_model, or the spiece.model of model.init_from)",
        spm, to_string(c.task));
  if (!bytes && !fs::exists(spm) && train.is_prepared())
    ROTOR_FAIL("data.spm_model: {} not found (it can only be trained from raw text)", spm);
  // A byte tokenizer's description named where a SentencePiece model goes
  // would train a model of 256 byte ids under a SentencePiece config.
  if (!bytes && (!c.data.spm_model.empty() || !c.model.init_from.empty()) && fs::exists(spm) &&
      data::Tokenizer::load(spm).is_bytes())
    ROTOR_FAIL(
        "{}: {} is a byte tokenizer, and data.tokenizer is sentencepiece: set data.tokenizer: "
        "bytes (which needs no tokenizer file) or name a SentencePiece model",
        c.data.spm_model.empty() ? "model.init_from" : "data.spm_model", spm);
  // A byte LM's prefix that lost its line breaks, before the run touches anything.
  if (c.task == Task::Lm && bytes)
    for (const char* key : {"train", "valid", "test"})
      if (const data::CorpusSource s = corpus_source(c, key); s.is_prepared())
        data::check_prepared_line_ends(s);
  // A prefix prepared with another tokenizer, before the run touches anything.
  if (fs::exists(spm))
    for (const char* key : {"train", "valid", "test"}) {
      const data::CorpusSource s = corpus_source(c, key);
      if (s.is_prepared()) data::check_prepared_tokenizer(s, spm);
    }
}

namespace {

bool owns_tokenizer(const Config& c) {
  return c.data.spm_model.empty() && c.model.init_from.empty();
}

data::SpmTrainOptions spm_options(const Config& c) {
  data::SpmTrainOptions o;
  o.vocab_size = c.data.vocab_size;
  o.model_type = std::string(to_string(c.data.spm_model_type));
  o.character_coverage = c.data.character_coverage;
  o.input_sentence_size = 2000000;
  if (c.task == Task::Mlm) o.user_defined_symbols = {"[MASK]", "[CLS]", "[SEP]"};  // ids 4, 5, 6
  return o;
}

// The user-defined symbols of a byte tokenizer: those of BERT for the tasks
// that build one.
std::vector<std::string> byte_symbols(const Config& c) {
  if (task_spec(c.task).model == ModelFamily::BertEncoder) return {"[MASK]", "[CLS]", "[SEP]"};
  return {};
}

data::CleanOptions clean_options(const Config& c, const std::string& key) {
  data::CleanOptions clean;
  // A byte LM reads its text as one byte stream: line breaks are tokens.
  clean.keep_line_ends = c.task == Task::Lm && c.data.tokenizer == TokenizerType::Bytes;
  // Masked-LM blocks are packed from the stream: every non-empty line counts.
  if (c.task == Task::Translation && key == "train") {
    clean.max_len = c.data.max_len;
    clean.max_len_ratio = c.data.max_len_ratio;
    clean.max_len_key = "data.max_len";
  } else if (c.task == Task::Translation && nn::has_position_table(c.model.position)) {
    clean.max_len = c.model.max_positions - 1;  // + eos (source) or bos (target)
    clean.max_len_key = "model.max_positions - 1";
  }
  return clean;
}

std::string data_prefix(const Config& c, const std::string& key) {
  return (fs::path(c.output_dir) / "data" / key).string();
}

[[noreturn]] void refuse_resume(const std::string& what, const std::string& why) {
  ROTOR_FAIL(
      "--resume: {} does not match the config and data now ({}); start afresh with "
      "--overwrite, which rebuilds it",
      what, why);
}

}  // namespace

std::string ensure_tokenizer(const Config& c) {
  const std::string spm = tokenizer_path(c);
  if (c.data.tokenizer == TokenizerType::Bytes) {
    data::ensure_byte_tokenizer(spm, byte_symbols(c));
    return spm;
  }
  data::ensure_tokenizer(spm, corpus_source(c, "train"), spm_options(c), owns_tokenizer(c));
  return spm;
}

std::string fixed_tokenizer(const Config& c) {
  return c.data.tokenizer == TokenizerType::Bytes ? ensure_tokenizer(c) : tokenizer_path(c);
}

std::string prepared_prefix(const Config& c, const std::string& key, const std::string& spm) {
  return data::ensure_prepared(corpus_source(c, key), spm, data_prefix(c, key),
                               clean_options(c, key));
}

// The EHR side of check_resumable_data (defined below, beside the EHR files).
void check_resumable_ehr(const Config& c, const std::string& checkpoint_dir);

void check_resumable_data(const Config& c, const std::string& checkpoint_dir) {
  // EHR runs read their prepared splits as they are, which must be the ones
  // the checkpoint was trained on.
  if (c.data.format == DataFormat::Ehr) return check_resumable_ehr(c, checkpoint_dir);
  // Classification reads its TSV files as they are.
  if (c.task == Task::Classification) return;
  if (c.task == Task::Multilabel) {  // the same, with the same label vocabulary
    const std::string saved = checkpoint_dir + "/" + checkpoint::kLabelsFile;
    const std::vector<std::string> was = read_labels_file(saved), now = multilabel_vocabulary(c);
    if (was != now)
      ROTOR_FAIL(
          "--resume: the label vocabulary ({} labels, from {}) differs from {} ({} labels), "
          "the one {} was trained with",
          now.size(), c.data.labels.empty() ? "data.train " + c.data.train : "data.labels", saved,
          was.size(), checkpoint_dir);
    return;
  }
  const std::string spm = tokenizer_path(c);
  const std::string saved = checkpoint_dir + "/spm.model";
  std::error_code ec;
  if (fs::exists(saved, ec)) {
    // The kind first: a byte run's tokenizer file is the run's to write.
    const bool saved_bytes = data::Tokenizer::load(saved).is_bytes();
    const bool bytes = c.data.tokenizer == TokenizerType::Bytes;
    if (saved_bytes != bytes)
      ROTOR_FAIL("--resume: {} was trained with data.tokenizer {}, the config says {}",
                 checkpoint_dir, saved_bytes ? "bytes" : "sentencepiece",
                 to_string(c.data.tokenizer));
    if (bytes && read_file(saved) != data::byte_tokenizer_text(byte_symbols(c)))
      ROTOR_FAIL("--resume: the byte tokenizer {} has other symbols than task {} uses", saved,
                 to_string(c.task));
  }
  if (fs::exists(saved, ec) && c.data.tokenizer != TokenizerType::Bytes) {
    if (!fs::exists(spm, ec))
      ROTOR_FAIL("--resume: the tokenizer {} is missing; {} was trained with {} (copy it back)",
                 spm, checkpoint_dir, saved);
    if (hash_file(spm) != hash_file(saved))
      ROTOR_FAIL("--resume: the tokenizer {} differs from {}, the one {} was trained with", spm,
                 saved, checkpoint_dir);
  }
  const data::CorpusSource train = corpus_source(c, "train");
  if (c.data.tokenizer != TokenizerType::Bytes && owns_tokenizer(c) && fs::exists(spm, ec) &&
      !train.is_prepared()) {
    const std::string why = data::stale_reason(data::fingerprint_path(spm),
                                               data::tokenizer_fingerprint(train, spm_options(c)));
    if (!why.empty()) refuse_resume(spm, why);
  }
  for (const char* key : {"train", "valid", "test"}) {
    const data::CorpusSource s = corpus_source(c, key);
    if (s.path.empty()) continue;
    if (s.is_prepared()) {
      if (fs::exists(spm, ec)) data::check_prepared_tokenizer(s, spm);
      continue;
    }
    const std::string out = data_prefix(c, key);
    bool made = true;
    for (const auto& f : data::prepared_files(s, out)) made = made && fs::exists(f, ec);
    if (!made || !fs::exists(spm, ec)) continue;  // binarized when the run starts
    const std::string why = data::stale_reason(
        data::fingerprint_path(out), data::data_fingerprint(s, spm, clean_options(c, key)));
    if (!why.empty()) refuse_resume(out, why);
  }
}

namespace {

ParallelCorpus open_pair(const std::string& prefix, const data::Tokenizer& tokenizer) {
  ParallelCorpus p;
  p.src = open_corpus(prefix + ".src", tokenizer);
  p.tgt = open_corpus(prefix + ".tgt", tokenizer);
  return p;
}

// Every sentence of `corpus` (data.<key>) fits the model's position table
// with its eos or bos.
void check_fits(const Config& c, const std::string& key, const data::MmapCorpus& corpus) {
  if (!nn::has_position_table(c.model.position)) return;
  const int64_t most = c.model.max_positions - 1;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::span<const int32_t> s = corpus.sentence(i);
    // A stored </s> is the position the batcher would add.
    const int64_t n = static_cast<int64_t>(s.size()) - (!s.empty() && s.back() == data::kEosId);
    if (n > most)
      ROTOR_FAIL(
          "data.{}: {}: sentence {} has {} tokens, more than model.max_positions - 1 = {} ({} "
          "positions); prepare it with --max-len {}",
          key, corpus.prefix(), i + 1, n, most, to_string(c.model.position), most);
  }
}

ParallelCorpus open_checked_pair(const Config& c, const std::string& key, const std::string& spm,
                                 const data::Tokenizer& tokenizer) {
  ParallelCorpus p = open_pair(prepared_prefix(c, key, spm), tokenizer);
  check_fits(c, key, *p.src);
  check_fits(c, key, *p.tgt);
  return p;
}

}  // namespace

std::shared_ptr<const data::MmapCorpus> open_corpus(const std::string& prefix,
                                                    const data::Tokenizer& tokenizer) {
  auto corpus = std::make_shared<const data::MmapCorpus>(data::MmapCorpus::open(prefix));
  corpus->check_ids(static_cast<uint64_t>(tokenizer.vocab_size()),
                    "of the tokenizer " + tokenizer.path());
  return corpus;
}

TranslationData load_translation_data(const Config& c, bool need_train) {
  TranslationData d;
  d.spm_path = ensure_tokenizer(c);
  d.tokenizer = data::Tokenizer::load(d.spm_path);
  if (need_train) {
    if (c.data.train.empty()) ROTOR_FAIL("data.train is required for training");
    d.train = open_checked_pair(c, "train", d.spm_path, d.tokenizer);
  }
  if (!c.data.valid.empty()) d.valid = open_checked_pair(c, "valid", d.spm_path, d.tokenizer);
  if (!c.data.test.empty()) d.test = open_checked_pair(c, "test", d.spm_path, d.tokenizer);
  return d;
}

models::TranslationBatch to_model_batch(const data::Batch& b, Device device) {
  models::TranslationBatch m;
  m.src = b.src.to(device);
  m.src_lengths = Tensor::from_ints(b.src_lengths, {b.size()}, device);
  m.tgt_in = b.tgt_in.to(device);
  m.tgt_out = b.tgt_out.to(device);
  m.tgt_tokens = b.tgt_tokens;
  m.src_tokens = b.src_tokens;
  return m;
}

data::TsvFormat tsv_format(const Config& c) {
  data::TsvFormat f;
  f.sentence1 = c.data.sentence1_column;
  f.sentence2 = c.data.sentence2_column;
  f.label = c.data.label_column;
  f.header = c.data.header;
  f.labels = c.data.labels;
  f.regression = c.data.regression;
  f.multilabel = c.task == Task::Multilabel;
  if (c.data.label_separator.size() == 1) f.label_separator = c.data.label_separator[0];
  f.max_len = c.data.seq_len;
  f.choices = c.data.choices;
  return f;
}

std::vector<std::string> multilabel_vocabulary(const Config& c) {
  if (!c.data.labels.empty()) return c.data.labels;
  const std::string text = read_file(c.data.train, kMaxTsvBytes);
  std::vector<std::string> labels = data::label_vocabulary(text, c.data.train, tsv_format(c));
  if (labels.empty())
    ROTOR_FAIL(
        "data.train {}: no example has a label in column {} (data.label_column); task "
        "multilabel builds its label vocabulary from them (or set data.labels)",
        c.data.train, c.data.label_column);
  return labels;
}

std::string labels_file_text(const std::vector<std::string>& labels) {
  std::string text;
  for (const auto& l : labels) text += l + "\n";
  return text;
}

std::vector<std::string> read_labels_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    ROTOR_FAIL("{}: missing (a task-multilabel checkpoint holds its label vocabulary there)", path);
  const std::string text = read_file(path, kMaxConfigBytes);
  std::vector<std::string> labels;
  size_t line = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line;
    labels.push_back(text.substr(start, end - start));
    if (labels.back().empty()) ROTOR_FAIL("{}:{}: an empty label", path, line);
    start = end + 1;
  }
  if (labels.empty()) ROTOR_FAIL("{}: no labels", path);
  return labels;
}

std::shared_ptr<const data::EhrSplit> open_ehr_split(const Config& c, const std::string& prefix,
                                                     const data::EhrSplit* train) {
  auto s = std::make_shared<const data::EhrSplit>(data::EhrSplit::open(prefix));
  const data::EhrMeta& m = s->meta();
  if (c.model.age_vocab_size > 0 && m.age_vocab_size > c.model.age_vocab_size)
    ROTOR_FAIL("model.age_vocab_size: {} holds fewer age ids than the {} of {}",
               c.model.age_vocab_size, m.age_vocab_size, prefix);
  if (train && (m.vocab_size != train->meta().vocab_size ||
                data::read_ehr_vocab(data::ehr_dir_of(prefix)) !=
                    data::read_ehr_vocab(data::ehr_dir_of(train->prefix()))))
    ROTOR_FAIL("{}: its vocabulary ({} codes) is not data.train's ({}): not one prepare-ehr output",
               prefix, m.vocab_size, train->meta().vocab_size);
  return s;
}

namespace {

// The splits of an EHR config by key ("data.train"), those set.
std::vector<std::pair<std::string, std::string>> ehr_splits(const Config& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, path] :
       {std::pair<const char*, const std::string*>{"data.train", &c.data.train},
        {"data.valid", &c.data.valid},
        {"data.test", &c.data.test}})
    if (!path->empty()) out.emplace_back(key, *path);
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ehr_checkpoint_files(const Config& c) {
  if (c.data.format != DataFormat::Ehr) return {};
  json_io::Json record = json_io::Json::object();
  // A directory whose ehr.json records no fingerprint (older rotor) is
  // checked by its vocab.txt alone.
  for (const auto& [key, prefix] : ehr_splits(c))
    if (const auto f = data::ehr_fingerprint(data::ehr_dir_of(prefix))) record[key] = f->to_json();
  constexpr auto kReplace = json_io::Json::error_handler_t::replace;
  return {{checkpoint::kEhrVocabFile, read_file(data::ehr_dir_of(c.data.train) + "/vocab.txt")},
          {checkpoint::kEhrDataFile, record.dump(2, ' ', false, kReplace) + "\n"}};
}

void check_resumable_ehr(const Config& c, const std::string& checkpoint_dir) {
  const std::string train_dir = data::ehr_dir_of(c.data.train);
  // The code vocabulary first where the checkpoint records no fingerprints
  // (older rotor): its ids are what the weights were trained on.
  const std::string saved_vocab = checkpoint_dir + "/" + checkpoint::kEhrVocabFile;
  const std::string record_path = checkpoint_dir + "/" + checkpoint::kEhrDataFile;
  std::error_code ec;
  if (!fs::exists(saved_vocab, ec))
    ROTOR_FAIL(
        "--resume: {} lacks {}, the code vocabulary of its EHR data, so the ids of {}/vocab.txt "
        "cannot be checked against it",
        checkpoint_dir, checkpoint::kEhrVocabFile, train_dir);
  if (fs::exists(record_path, ec)) {
    const json_io::Json record = json_io::load(record_path);
    if (!record.is_object()) ROTOR_FAIL("{}: not an object of fingerprints", record_path);
    for (const auto& [key, prefix] : ehr_splits(c)) {
      // A split the run did not read before (validation added) has nothing to match.
      if (!record.contains(key)) continue;
      const data::Fingerprint was =
          data::Fingerprint::from_json(record.at(key), record_path + " (" + key + ")");
      const std::string dir = data::ehr_dir_of(prefix);
      const std::optional<data::Fingerprint> now = data::ehr_fingerprint(dir);
      const std::string why =
          now ? was.difference(*now) : fmt::format("{}/ehr.json records no fingerprint now", dir);
      if (!why.empty())
        ROTOR_FAIL(
            "--resume: {} {}: the prepare-ehr directory {} is not the one {} was trained on ({}); "
            "its ids may mean other codes: restore it, or start afresh with --overwrite",
            key, prefix, dir, checkpoint_dir, why);
    }
  }
  const std::vector<std::string> was = data::read_ehr_vocab(checkpoint_dir),
                                 now = data::read_ehr_vocab(train_dir);
  if (was != now) {
    size_t i = 0;
    while (i < was.size() && i < now.size() && was[i] == now[i]) ++i;
    const std::string what = i < was.size() && i < now.size()
                                 ? fmt::format("id {} is {}, was {}", i, now[i], was[i])
                                 : fmt::format("{} ids, were {}", now.size(), was.size());
    ROTOR_FAIL(
        "--resume: {}/vocab.txt numbers the codes differently from {}, the vocabulary {} was "
        "trained with ({}): restore it, or start afresh with --overwrite",
        train_dir, saved_vocab, checkpoint_dir, what);
  }
}

models::ClassificationBatch to_model_batch(const data::ClassificationHostBatch& b, Device device) {
  models::ClassificationBatch m;
  m.input_ids = b.input_ids;
  m.token_type_ids = b.token_type_ids;
  m.lengths = b.lengths;
  m.age_ids = b.age_ids;
  m.position_ids = b.position_ids;
  m.labels = b.labels;
  m.targets = b.targets;
  m.tokens = b.tokens;
  return m.to(device);
}

models::MlmBatch to_model_batch(const data::MlmHostBatch& b, Device device) {
  auto on_device = [&](const Tensor& t) { return t.defined() ? t.to(device) : Tensor(); };
  models::MlmBatch m;
  m.input_ids = on_device(b.input_ids);
  m.token_type_ids = on_device(b.token_type_ids);
  m.lengths = on_device(b.lengths);
  m.age_ids = on_device(b.age_ids);
  m.position_ids = on_device(b.position_ids);
  m.masked_positions = on_device(b.masked_positions);
  m.masked_targets = on_device(b.masked_targets);
  m.tokens = b.tokens;
  m.masked_tokens = b.masked_tokens;
  return m;
}

models::LmBatch to_model_batch(const data::LmHostBatch& b, Device device) {
  models::LmBatch m;
  m.input_ids = b.input_ids;
  m.targets = b.targets;
  m.tokens = b.tokens;
  return m.to(device);
}

}  // namespace rotor::train
