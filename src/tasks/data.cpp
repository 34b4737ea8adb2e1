#include "tasks/data.h"

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
#include "tasks/task.h"

namespace fs = std::filesystem;

namespace rotor::tasks {

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
  if (c.task->parallel_text) {
    s.src_lang = c.data.src_lang;
    s.tgt_lang = c.data.tgt_lang;
  }
  return s;
}

// The splits of data.train, data.valid and data.test as the task reads
// them: train first (named or not), then those named.
std::vector<data::CorpusSource> corpus_splits(const Config& c) {
  std::vector<data::CorpusSource> splits{corpus_source(c, "train")};
  for (const char* key : {"valid", "test"})
    if (data::CorpusSource s = corpus_source(c, key); !s.path.empty())
      splits.push_back(std::move(s));
  return splits;
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
  // What the checks read of the config, before they go down to the data
  // layer: the splits it names (train first) and the tokenizer.
  const std::vector<data::CorpusSource> splits = corpus_splits(c);
  const data::CorpusSource& train = splits.front();
  const std::string spm = tokenizer_path(c);
  const bool bytes = c.data.tokenizer == TokenizerType::Bytes;  // written by the run, never missing
  const bool line_ends = c.task->byte_line_ends && bytes;
  if (train.path.empty()) ROTOR_FAIL("data.train is required for training");
  for (const data::CorpusSource& s : splits) s.check_exists();
  std::error_code ec;
  if (!c.model.init_from.empty() && fs::exists(c.model.init_from, ec) &&
      !fs::is_directory(c.model.init_from, ec))
    ROTOR_FAIL(
        "model.init_from: {} is a file; name the Hugging Face model directory that holds "
        "config.json, model.safetensors and spiece.model",
        c.model.init_from);
  if (!bytes && !fs::exists(spm) && c.data.spm_model.empty() && !c.model.init_from.empty())
    ROTOR_FAIL(
        "model.init_from: {} not found (the tokenizer of the pretrained model; set "
        "data.spm_model)",
        spm);
  if (!bytes && !fs::exists(spm) && !c.task->trains_tokenizer)
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
  // Before the run touches anything: a byte LM's prefix that lost its line
  // breaks, a prefix prepared with another tokenizer.
  for (const data::CorpusSource& s : splits) {
    if (!s.is_prepared()) continue;
    if (line_ends) data::check_prepared_line_ends(s);
    if (fs::exists(spm)) data::check_prepared_tokenizer(s, spm);
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
  if (c.task->mlm_symbols) o.user_defined_symbols = {"[MASK]", "[CLS]", "[SEP]"};  // ids 4, 5, 6
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
  clean.keep_line_ends = c.task->byte_line_ends && c.data.tokenizer == TokenizerType::Bytes;
  // Masked-LM blocks are packed from the stream: every non-empty line counts.
  if (c.task->parallel_text && key == "train") {
    clean.max_len = c.data.max_len;
    clean.max_len_ratio = c.data.max_len_ratio;
    clean.max_len_key = "data.max_len";
  } else if (c.task->parallel_text && nn::has_position_table(c.model.position)) {
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
  // A pretrained model's tokenizer is an input: never trained into its
  // directory (check_data found it; it can be gone only since).
  if (!c.model.init_from.empty() && c.data.spm_model.empty() && !fs::exists(spm))
    ROTOR_FAIL("model.init_from: {} not found (the tokenizer of the pretrained model)", spm);
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
  // A task's own check (the label vocabulary of multilabel) replaces the
  // tokenizer and corpus checks below: a task that never trains its
  // tokenizer reads its data files as they are.
  if (const TaskSlice& slice = task_slice(c.task); slice.check_resumable)
    return slice.check_resumable(c, checkpoint_dir);
  if (!c.task->trains_tokenizer) return;
  // What the checks read of the config, before they go down to the data
  // layer: the tokenizer, and each split named with where the run
  // binarizes it and how.
  const std::string spm = tokenizer_path(c);
  const bool bytes = c.data.tokenizer == TokenizerType::Bytes;
  const std::vector<std::string> symbols = byte_symbols(c);
  const bool own_spm = !bytes && owns_tokenizer(c);
  const data::SpmTrainOptions spm_train = spm_options(c);
  struct Split {
    data::CorpusSource source;
    std::string out;  // the prefix the run binarizes it to
    data::CleanOptions clean;
  };
  std::vector<Split> splits;
  for (data::CorpusSource& s : corpus_splits(c)) {
    if (s.path.empty()) continue;
    const std::string key = s.key.substr(std::string("data.").size());
    splits.push_back({std::move(s), data_prefix(c, key), clean_options(c, key)});
  }
  const std::string saved = checkpoint_dir + "/spm.model";
  std::error_code ec;
  if (fs::exists(saved, ec)) {
    // The kind first: a byte run's tokenizer file is the run's to write.
    const bool saved_bytes = data::Tokenizer::load(saved).is_bytes();
    if (saved_bytes != bytes)
      ROTOR_FAIL("--resume: {} was trained with data.tokenizer {}, the config says {}",
                 checkpoint_dir, saved_bytes ? "bytes" : "sentencepiece",
                 to_string(c.data.tokenizer));
    if (bytes && read_file(saved) != data::byte_tokenizer_text(symbols))
      ROTOR_FAIL("--resume: the byte tokenizer {} has other symbols than task {} uses", saved,
                 to_string(c.task));
  }
  if (fs::exists(saved, ec) && !bytes) {
    if (!fs::exists(spm, ec))
      ROTOR_FAIL("--resume: the tokenizer {} is missing; {} was trained with {} (copy it back)",
                 spm, checkpoint_dir, saved);
    if (hash_file(spm) != hash_file(saved))
      ROTOR_FAIL("--resume: the tokenizer {} differs from {}, the one {} was trained with", spm,
                 saved, checkpoint_dir);
  }
  if (own_spm && fs::exists(spm, ec) && !splits.empty() &&
      splits.front().source.key == "data.train" && !splits.front().source.is_prepared()) {
    const std::string why = data::stale_reason(
        data::fingerprint_path(spm), data::tokenizer_fingerprint(splits.front().source, spm_train));
    if (!why.empty()) refuse_resume(spm, why);
  }
  for (const Split& split : splits) {
    const data::CorpusSource& s = split.source;
    if (s.is_prepared()) {
      if (fs::exists(spm, ec)) data::check_prepared_tokenizer(s, spm);
      continue;
    }
    bool made = true;
    for (const auto& f : data::prepared_files(s, split.out)) made = made && fs::exists(f, ec);
    if (!made || !fs::exists(spm, ec)) continue;  // binarized when the run starts
    const std::string why = data::stale_reason(data::fingerprint_path(split.out),
                                               data::data_fingerprint(s, spm, split.clean));
    if (!why.empty()) refuse_resume(split.out, why);
  }
}

std::shared_ptr<const data::MmapCorpus> open_corpus(const std::string& prefix,
                                                    const data::Tokenizer& tokenizer) {
  auto corpus = std::make_shared<const data::MmapCorpus>(data::MmapCorpus::open(prefix));
  corpus->check_ids(static_cast<uint64_t>(tokenizer.vocab_size()),
                    "of the tokenizer " + tokenizer.path());
  return corpus;
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
  m.documents = b.documents;
  return m;
}

models::LmBatch to_model_batch(const data::LmHostBatch& b, Device device) {
  models::LmBatch m;
  m.input_ids = b.input_ids;
  m.targets = b.targets;
  m.tokens = b.tokens;
  m.segments = b.segments;
  m.positions = b.positions;
  return m.to(device);
}

}  // namespace rotor::tasks
