#include "train/translation_data.h"

#include <filesystem>

#include "core/logging.h"
#include "data/prepare.h"

namespace fs = std::filesystem;

namespace rotor::train {

std::string tokenizer_path(const Config& c) {
  return c.data.spm_model.empty() ? (fs::path(c.output_dir) / "spm.model").string() : c.data.spm_model;
}

namespace {

bool is_prepared(const std::string& prefix) {
  return fs::exists(prefix + ".src.idx") && fs::exists(prefix + ".tgt.idx");
}

// Returns the prepared prefix for `prefix` (binarizing raw text when needed).
std::string ensure_prepared(const Config& c, const std::string& key, const std::string& prefix,
                            const std::string& spm, bool clean) {
  if (is_prepared(prefix)) return prefix;
  const std::string src = prefix + "." + c.data.src_lang, tgt = prefix + "." + c.data.tgt_lang;
  if (!fs::exists(src) || !fs::exists(tgt))
    ROTOR_FAIL("data.{}: found neither prepared data ({}.src.idx) nor raw text ({} and {})", key,
               prefix, src, tgt);
  const std::string out = (fs::path(c.output_dir) / "data" / key).string();
  // Binarizing is deterministic: reuse what an earlier (interrupted) run made.
  if (is_prepared(out) && fs::last_write_time(out + ".tgt.idx") >= fs::last_write_time(src) &&
      fs::last_write_time(out + ".tgt.idx") >= fs::last_write_time(spm))
    return out;
  fs::create_directories(fs::path(out).parent_path());
  data::PrepareOptions o;
  o.spm_model = spm;
  o.src = src;
  o.tgt = tgt;
  o.output_prefix = out;
  o.max_len = clean ? c.data.max_len : 0;
  o.max_len_ratio = clean ? c.data.max_len_ratio : 0;
  o.min_len = 1;
  data::PrepareStats stats = data::prepare_corpus(o);
  log().info("binarized {} -> {}: {}", prefix, out, stats.summary());
  return out;
}

ParallelCorpus open_pair(const std::string& prefix) {
  ParallelCorpus p;
  p.src = std::make_shared<const data::MmapCorpus>(data::MmapCorpus::open(prefix + ".src"));
  p.tgt = std::make_shared<const data::MmapCorpus>(data::MmapCorpus::open(prefix + ".tgt"));
  return p;
}

}  // namespace

void check_translation_data(const Config& c) {
  auto check = [&](const char* key, const std::string& prefix) {
    if (prefix.empty() || is_prepared(prefix)) return;
    const std::string src = prefix + "." + c.data.src_lang, tgt = prefix + "." + c.data.tgt_lang;
    if (!fs::exists(src) || !fs::exists(tgt))
      ROTOR_FAIL("data.{}: found neither prepared data ({}.src.idx) nor raw text ({} and {})", key,
                 prefix, src, tgt);
  };
  check("train", c.data.train);
  check("valid", c.data.valid);
  if (!c.data.spm_model.empty() && !fs::exists(c.data.spm_model) && is_prepared(c.data.train))
    ROTOR_FAIL("data.spm_model: {} not found (it can only be trained from raw text)",
               c.data.spm_model);
}

TranslationData load_translation_data(const Config& c, bool need_train) {
  TranslationData d;
  d.spm_path = tokenizer_path(c);
  if (!fs::exists(d.spm_path)) {
    if (c.data.train.empty() || is_prepared(c.data.train))
      ROTOR_FAIL("tokenizer {} not found (data.spm_model); it can only be trained from raw text",
                 d.spm_path);
    const std::string src = c.data.train + "." + c.data.src_lang, tgt = c.data.train + "." + c.data.tgt_lang;
    for (const auto& f : {src, tgt})
      if (!fs::exists(f)) ROTOR_FAIL("data.train: raw text {} not found", f);
    fs::create_directories(fs::path(d.spm_path).parent_path());
    data::SpmTrainOptions o;
    o.inputs = {src, tgt};
    std::string prefix = d.spm_path;
    if (prefix.size() > 6 && prefix.substr(prefix.size() - 6) == ".model")
      prefix = prefix.substr(0, prefix.size() - 6);
    o.model_prefix = prefix;
    o.vocab_size = c.data.vocab_size;
    o.model_type = std::string(to_string(c.data.spm_model_type));
    o.character_coverage = c.data.character_coverage;
    o.input_sentence_size = 2000000;
    log().info("training a {} SentencePiece model ({} pieces) on {} and {}", o.model_type,
               o.vocab_size, src, tgt);
    data::train_sentencepiece(o);
  }
  d.tokenizer = data::Tokenizer::load(d.spm_path);
  if (need_train) {
    if (c.data.train.empty()) ROTOR_FAIL("data.train is required for training");
    d.train = open_pair(ensure_prepared(c, "train", c.data.train, d.spm_path, true));
  }
  if (!c.data.valid.empty())
    d.valid = open_pair(ensure_prepared(c, "valid", c.data.valid, d.spm_path, false));
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

}  // namespace rotor::train
