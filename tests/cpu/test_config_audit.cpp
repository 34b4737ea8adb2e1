// Every config key does what it says. The keys come from `rotor train
// --dump-config` (so a new key without an entry here fails the test); each
// entry sets one key to a non-default value and shows that something a user
// sees changed against the same run without it: the figures of metrics.jsonl
// (timings left out), the files of the run, its log, the best checkpoint's
// state, or the translations `rotor translate` reads from the checkpoint's
// config. A key whose effect this machine cannot show (a GPU device, a
// rank that never arrives) must be rejected with one clear line instead.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

namespace fs = std::filesystem;
using rotor::json_io::Json;
using rotor::test::slurp;
using rotor::test::TempDir;

// What a run shows.
enum class Shows {
  Metrics,      // the figures of metrics.jsonl
  Files,        // the names of the files the run leaves
  Log,          // train.log (timestamps and timings left out)
  Best,         // checkpoints/best/trainer_state.json
  Translation,  // `rotor translate --nbest 1` of a few test lines with the run's checkpoint
  LogHas,       // train.log holds `expect` (a change of kind, no baseline to compare)
  Rejected,     // exit code non-zero, one error line holding `expect`
};

struct Entry {
  const char* key;
  const char* value;
  Shows shows;
  const char* extra = "";   // --set overrides of both runs (and config "mlm" for the mlm config)
  const char* expect = "";  // Rejected: the message
  const char* env = "";     // environment of the run
  const char* config = "translation.yaml";  // or mlm.yaml, classification.yaml, lm.yaml
};

constexpr const char* kMlmConfig = "mlm.yaml";
constexpr const char* kClsConfig = "classification.yaml";
constexpr const char* kEhrConfig = "ehr.yaml";  // task mlm on rotor prepare-ehr splits
constexpr const char* kLmConfig = "lm.yaml";

// clang-format off
const Entry kEntries[] = {
  // The translator's layer counts back at their defaults: an encoder has no
  // decoder layers to count, a decoder-only model no encoder layers (a key
  // set to anything else would do nothing, and is refused).
  {"task", "mlm", Shows::LogHas,
   "--set data.train=mlm.txt --set data.valid=mlm_valid.txt --set model.decoder_layers=6",
   "task mlm"},
  {"task", "lm", Shows::LogHas,
   "--set data.train=mlm.txt --set data.valid=mlm_valid.txt --set data.seq_len=16 "
   "--set model.encoder_layers=6", "task lm"},
  // The pair labels as lists of one label each.
  {"task", "multilabel", Shows::LogHas, "", "task multilabel", "", kClsConfig},
  {"output_dir", "other", Shows::Files},
  {"seed", "9", Shows::Metrics},
  {"device", "cuda:0", Shows::Rejected, "", "cuda"},  // no GPU here; on one, the log says cuda:0
  {"precision", "bf16", Shows::Metrics},
  {"log_level", "warn", Shows::Log},
  {"model.encoder_layers", "2", Shows::Metrics},
  {"model.decoder_layers", "2", Shows::Metrics},
  {"model.d_model", "48", Shows::Metrics},
  {"model.n_heads", "4", Shows::Metrics},
  {"model.d_ff", "96", Shows::Metrics},
  {"model.activation", "gelu", Shows::Metrics},
  {"model.dropout", "0.3", Shows::Metrics},
  {"model.attention_dropout", "0.2", Shows::Metrics},
  {"model.activation_dropout", "0.2", Shows::Metrics},
  {"model.norm", "pre", Shows::Metrics},
  {"model.norm_type", "rms_norm", Shows::Metrics},
  {"model.norm_type", "rms_norm", Shows::Metrics, "", "", "", kLmConfig},
  {"model.activation", "silu", Shows::Metrics, "", "", "", kLmConfig},
  {"model.gated_ffn", "true", Shows::Metrics},
  {"model.gated_ffn", "true", Shows::Metrics, "--set model.activation=silu", "", "", kLmConfig},
  {"model.bias", "false", Shows::Metrics},
  {"model.bias", "false", Shows::Metrics, "", "", "", kLmConfig},
  {"model.kv_heads", "1", Shows::Metrics},
  {"model.kv_heads", "1", Shows::Metrics, "", "", "", kLmConfig},
  {"model.kv_heads", "3", Shows::Rejected, "", "do not divide model.n_heads"},
  {"model.layer_norm_eps", "0.01", Shows::Metrics},
  {"model.position", "sinusoidal", Shows::Metrics},
  {"model.position", "alibi", Shows::Metrics, "", "", "", kLmConfig},
  {"model.position", "alibi", Shows::Rejected, "--set attention.kind=linear",
   "linear attention has no scores to add ALiBi's bias to"},
  {"model.rope_base", "100", Shows::Metrics},  // the deprecated spelling of model.rope.theta
  {"model.rope.theta", "100", Shows::Metrics},
  {"model.rope.fraction", "0.5", Shows::Metrics},
  {"model.rope.layout", "half", Shows::Metrics},
  // A scaling by 1 changes no angle: the log names it.
  {"model.rope.scaling", "yarn", Shows::LogHas, "", "layout interleaved, yarn x1 of 256 positions"},
  {"model.rope.factor", "4", Shows::Metrics, "--set model.rope.scaling=linear"},
  {"model.rope.original_max_positions", "8", Shows::Metrics,
   "--set model.rope.scaling=dynamic_ntk --set model.rope.factor=4"},
  // Llama 3.1's blend: a context of 1024 puts a pair of the 8 rotated
  // dimensions (wavelength 628) between the two bounds.
  {"model.rope.low_freq_factor", "2", Shows::Metrics,
   "--set model.rope.scaling=llama3 --set model.rope.factor=4 "
   "--set model.rope.original_max_positions=1024"},
  {"model.rope.high_freq_factor", "2", Shows::Metrics,
   "--set model.rope.scaling=llama3 --set model.rope.factor=4 "
   "--set model.rope.original_max_positions=1024"},
  {"model.t5.buckets", "16", Shows::Metrics, "--set model.position=t5"},
  {"model.t5.max_distance", "17", Shows::Metrics, "--set model.position=t5"},
  {"model.tupe.relative", "true", Shows::Metrics, "--set model.position=tupe", "", "", "mlm.yaml"},
  {"model.deberta.position_buckets", "0", Shows::Metrics, "--set model.position=deberta", "", "",
   "mlm.yaml"},
  {"model.deberta.max_relative_positions", "300", Shows::Metrics,
   "--set model.position=deberta --set model.deberta.position_buckets=8", "", "", "mlm.yaml"},
  {"model.max_positions", "300", Shows::Log, "--set model.position=learned"},  // the table, not the figures
  {"model.share_embeddings", "false", Shows::Metrics},
  {"model.scale_embeddings", "false", Shows::Metrics},
  // Task lm's layers, norm placement, tied output and embedding scale.
  {"model.decoder_layers", "2", Shows::Metrics, "", "", "", kLmConfig},
  {"model.norm", "post", Shows::Metrics, "", "", "", kLmConfig},
  {"model.share_embeddings", "false", Shows::Metrics, "", "", "", kLmConfig},
  {"model.scale_embeddings", "false", Shows::Metrics, "", "", "", kLmConfig},
  {"model.type_vocab_size", "0", Shows::Metrics, "", "", "", kMlmConfig},
  {"model.init_std", "0.05", Shows::Metrics, "", "", "", kMlmConfig},
  {"model.age_vocab_size", "128", Shows::Metrics, "", "", "", kEhrConfig},
  {"model.age_embedding", "time2vec", Shows::Metrics, "--set model.age_vocab_size=128", "", "",
   kEhrConfig},
  {"model.age_embedding", "time2vec", Shows::Rejected, "", "time2vec reads ages as age id", "",
   kEhrConfig},
  {"model.time2vec_dim", "4", Shows::Metrics,
   "--set model.age_vocab_size=128 --set model.age_embedding=time2vec", "", "", kEhrConfig},
  {"model.classifier_bias", "prior", Shows::Metrics,
   "--set task=multilabel --set data.label_column=tags --set data.labels=[]", "", "", kClsConfig},
  {"model.classifier_bias", "prior", Shows::Rejected, "", "task mlm has no such head", "",
   kMlmConfig},
  {"model.classifier_head", "label_attention", Shows::Metrics, "", "", "", kClsConfig},
  {"model.classifier_head", "label_attention", Shows::Rejected, "", "task mlm has no classifier",
   "", kMlmConfig},
  {"model.position_source", "visit", Shows::Metrics, "", "", "", kEhrConfig},
  {"model.position_source", "visit", Shows::Rejected, "", "visit positions need EHR data"},
  {"model.init_from", "no_such_hf_dir", Shows::Rejected, "", "no_such_hf_dir", "", kMlmConfig},
  {"attention.impl", "rotor", Shows::Metrics},
  {"attention.rope_in_kernel", "true", Shows::LogHas, "--set attention.impl=rotor",
   "RoPE rotated inside the flash attention core"},
  {"attention.kind", "linear", Shows::Metrics, "", "", "", kMlmConfig},
  {"attention.feature_map", "favor", Shows::Metrics, "--set attention.kind=linear", "", "", kMlmConfig},
  {"attention.features", "8", Shows::Metrics,
   "--set attention.kind=linear --set attention.feature_map=favor", "", "", kMlmConfig},
  {"attention.feature_redraw", "1", Shows::Metrics,  // a new draw at each of the 3 updates
   "--set attention.kind=linear --set attention.feature_map=favor", "", "", kMlmConfig},
  {"attention.linear_rope", "before_feature_map", Shows::Metrics, "--set attention.kind=linear", "",
   "", kMlmConfig},
  {"attention.linear_eps", "0.5", Shows::Metrics, "--set attention.kind=linear", "", "", kMlmConfig},
  {"data.src_lang", "de", Shows::Metrics, "--set data.tgt_lang=en"},
  {"data.tgt_lang", "xx", Shows::Rejected, "", "data/train.xx"},
  {"data.train", "data/test", Shows::Metrics},
  {"data.valid", "data/test", Shows::Metrics},
  {"data.test", "data/test", Shows::Metrics},
  // No SentencePiece model: a byte tokenizer (the lm config's vocab_size goes back to its default).
  {"data.tokenizer", "bytes", Shows::LogHas, "--set data.vocab_size=8000",
   "byte tokenizer", "", kLmConfig},
  {"data.spm_model", "spm100.model", Shows::Metrics},
  {"data.format", "ehr", Shows::Rejected, "", "ehr data feeds tasks mlm and multilabel"},
  {"data.format", "text", Shows::Rejected, "", "it can only be trained from raw text", "", kEhrConfig},
  {"data.vocab_size", "100", Shows::Metrics},
  {"data.spm_model_type", "unigram", Shows::Metrics},
  {"data.character_coverage", "0.98", Shows::Metrics},
  {"data.max_len", "5", Shows::Metrics},
  {"data.max_len_ratio", "1.0", Shows::Metrics},
  {"data.max_tokens", "128", Shows::Metrics},
  {"data.seq_len", "16", Shows::Metrics, "", "", "", kMlmConfig},
  {"data.seq_len", "8", Shows::Metrics, "", "", "", kLmConfig},  // task lm's block length
  {"data.packing", "documents", Shows::Metrics, "", "", "", kLmConfig},  // lines as documents
  {"data.document_separator", "blank_line", Shows::Metrics, "--set data.packing=documents", "", "",
   kLmConfig},  // the file's one paragraph, not its lines
  {"data.mask_prob", "0.3", Shows::Metrics, "", "", "", kMlmConfig},
  {"data.mask_token_prob", "0.5", Shows::Metrics, "", "", "", kMlmConfig},
  {"data.random_token_prob", "0.2", Shows::Metrics, "", "", "", kMlmConfig},
  {"data.random_token_special", "true", Shows::Metrics,
   "--set data.mask_token_prob=0.2 --set data.random_token_prob=0.8", "", "",
   kMlmConfig},
  {"data.prefetch", "0", Shows::Log},
  {"data.sentence1_column", "s3", Shows::Metrics, "", "", "", kClsConfig},
  {"data.sentence2_column", "", Shows::Metrics, "", "", "", kClsConfig},
  {"data.label_column", "flipped", Shows::Metrics, "", "", "", kClsConfig},
  {"data.header", "false", Shows::Rejected, "", "data.sentence1_column", "", kClsConfig},
  {"data.labels", "[yes,no]", Shows::Metrics, "", "", "", kClsConfig},
  {"data.regression", "true", Shows::LogHas,
   "--set data.label_column=score --set data.labels=[] --set train.best_metric=loss", "pearson", "",
   kClsConfig},
  // tags holds "yes/three": one label with ",", two with "/".
  {"data.label_separator", "/", Shows::Metrics,
   "--set task=multilabel --set data.label_column=tags --set data.labels=[]", "", "", kClsConfig},
  // Seven columns read as label, context and five choices: "s1"'s text is no choice's index.
  {"data.choices", "5", Shows::Rejected,
   "--set data.sentence1_column=sentence --set data.sentence2_column= --set data.labels=[]",
   "is not the index of a choice, 0 to 4", "", kClsConfig},
  {"train.max_updates", "2", Shows::Metrics},
  {"train.max_epochs", "2", Shows::Metrics, "--set data.max_tokens=4096 --set train.max_updates=5"},
  {"train.batch_size", "2", Shows::Metrics, "", "", "", kMlmConfig},
  {"train.update_freq", "2", Shows::Metrics},
  {"train.clip_norm", "0.05", Shows::Metrics},
  {"train.label_smoothing", "0.0", Shows::Metrics},
  {"train.log_interval", "2", Shows::Metrics},
  {"train.valid_interval", "1", Shows::Metrics},
  {"train.save_interval", "1", Shows::Files},
  {"train.keep_last", "1", Shows::Files, "--set train.save_interval=1"},
  {"train.patience", "1", Shows::Metrics,
   "--set train.valid_interval=1 --set optim.lr=1e-12 --set optim.warmup_updates=0 --set optim.warmup_init_lr=0"},
  {"train.valid_metrics", "[loss,chrf]", Shows::Metrics},
  {"train.valid_max_sentences", "5", Shows::Metrics, "--set train.valid_metrics=[loss,bleu]"},
  {"train.best_metric", "chrf", Shows::Best, "--set train.valid_metrics=[loss,chrf]"},
  {"train.loss_scale", "1024", Shows::Metrics, "--set precision=fp16"},
  {"train.scale_window", "1", Shows::Metrics, "--set precision=fp16"},
  {"train.max_nonfinite", "1", Shows::Rejected, "", "train.max_nonfinite", "ROTOR_TEST_NAN_GRAD_AT=2"},
  // The same figures by design (tests/cpu/test_checkpoint_activations.cpp
  // compares them bit for bit); the log says the layers recompute.
  {"train.checkpoint_activations", "true", Shows::LogHas, "", "activation checkpointing"},
  {"optim.name", "adamw", Shows::Metrics, "--set optim.weight_decay=0.5"},
  {"optim.lr", "0.01", Shows::Metrics},
  {"optim.betas", "[0.8,0.9]", Shows::Metrics},
  {"optim.eps", "0.001", Shows::Metrics},
  {"optim.weight_decay", "0.5", Shows::Metrics},
  {"optim.schedule", "linear", Shows::Metrics},
  {"optim.warmup_updates", "1", Shows::Metrics},
  {"optim.warmup_init_lr", "0.0001", Shows::Metrics},
  {"optim.end_lr", "0.0005", Shows::Metrics, "--set optim.schedule=linear"},
  {"decode.beam", "1", Shows::Translation},
  {"decode.lenpen", "2.0", Shows::Translation},
  {"decode.max_len_a", "0.0", Shows::Translation},
  {"decode.max_len_b", "1", Shows::Translation},
  // A world of one has nothing to bucket, shard or wait for: two ranks
  // through `rotor launch` show the first two, a rank that never arrives
  // the last two.
  {"dist.bucket_mb", "0.01", Shows::Log, "LAUNCH"},
  {"dist.shard_optimizer", "true", Shows::Log, "LAUNCH"},
  {"dist.timeout_s", "1", Shows::Rejected, "--set dist.rendezvous=file:rdv", "within 1 s",
   "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 ROTOR_RUN_ID=audit"},
  {"dist.rendezvous", "file:rdv_elsewhere", Shows::Rejected, "--set dist.timeout_s=1", "rdv_elsewhere",
   "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 ROTOR_RUN_ID=audit"},
};
// clang-format on

struct Result {
  int code = 0;
  std::string err;
  std::string metrics, files, log, best, translation;
};

// The text of a run's metrics.jsonl without its timings.
std::string figures(const std::string& path) {
  std::string out;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line);
    for (const char* noise : {"tokens_per_s", "decode_seconds"}) j.erase(noise);
    out += j.dump() + "\n";
  }
  return out;
}

std::string log_text(const std::string& path) {
  static const std::regex noise(
      R"(^\S+ \S+ |\d+ tok/s|ETA \S+|[\d.]+s\b|mem \d+ MiB|pid \d+|/tmp/\S+)");
  std::string out;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) out += std::regex_replace(line, noise, "") + "\n";
  return out;
}

class ConfigAudit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = new TempDir();
    const std::string b = base_->path();
    ASSERT_EQ(sh(b, std::string(ROTOR_BINARY) +
                        " synth numbers-en-de --output data --train 300 --valid 20 --test 12 "
                        "--test-long 4 --seed 4"),
              0);
    // 3 updates, validated and saved at the end.
    rotor::test::tiny_translation()
        .set("model.dropout", "0.1")
        .set("train.max_updates", "3")
        .set("train.valid_interval", "3")
        .set("train.save_interval", "3")
        .write(b + "/translation.yaml");
    rotor::test::tiny_mlm().write(b + "/mlm.yaml");
    ASSERT_EQ(sh(b, std::string(ROTOR_BINARY) +
                        " synth ehr --patients 120 --seed 3 --output ehr_synth && " + ROTOR_BINARY +
                        " prepare-ehr --events ehr_synth/events.csv --patients "
                        "ehr_synth/patients.csv --output ehr"),
              0);
    rotor::test::tiny_mlm("ehr/train", "ehr/valid")
        .set("data.format", "ehr")
        .write(b + "/ehr.yaml");
    rotor::test::tiny_lm("mlm.txt", "mlm_valid.txt").write(b + "/lm.yaml");
    rotor::test::write_mlm_text(b + "/data", b + "/mlm.txt", b + "/mlm_valid.txt", 10);
    ASSERT_EQ(sh(b, std::string(ROTOR_BINARY) +
                        " spm-train --input data/train.en --input data/train.de --model-prefix "
                        "spm100 --vocab-size 100"),
              0);
    // Sentence pairs: is s2 the translation of s1 (yes) or of another line (no)?
    // s3 is s1 reversed word by word; flipped, score and tags (multilabel)
    // are other labels.
    rotor::test::tiny_classification().write(b + "/classification.yaml");
    ASSERT_EQ(sh(b, std::string(ROTOR_BINARY) +
                        " spm-train --input data/train.en --input data/train.de --model-prefix "
                        "cls_spm --vocab-size 120 --user-defined-symbols '[MASK],[CLS],[SEP]'"),
              0);
    std::vector<std::string> src, tgt;
    {
      std::ifstream en(b + "/data/train.en"), de(b + "/data/train.de");
      for (std::string l1, l2; std::getline(en, l1) && std::getline(de, l2);) {
        src.push_back(l1);
        tgt.push_back(l2);
      }
    }
    for (const char* split : {"train", "valid"}) {
      std::ofstream tsv(b + "/cls_" + split + ".tsv");
      tsv << "s1\ts2\ts3\tlabel\tflipped\tscore\ttags\n";
      const size_t first = std::string(split) == "train" ? 0 : 200,
                   n = std::string(split) == "train" ? 200 : 40;
      for (size_t i = first; i < first + n && i < src.size(); ++i) {
        const bool match = i % 2 == 0;
        std::istringstream words(src[i]);
        std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
        std::string reversed;
        for (auto it = w.rbegin(); it != w.rend(); ++it)
          reversed += (reversed.empty() ? "" : " ") + *it;
        tsv << src[i] << "\t" << tgt[match ? i : (i + 7) % src.size()] << "\t" << reversed << "\t"
            << (match ? "yes" : "no") << "\t" << (match ? "no" : "yes") << "\t"
            << (match ? 4.5 : 0.5) << "\t" << (match ? "yes/" : "no/")
            << (i % 3 == 0 ? "three" : "rest") << "\n";
      }
    }
  }
  static void TearDownTestSuite() { delete base_; }

  static int sh(const std::string& dir, const std::string& command) {
    return rotor::test::run_in(dir, command).code;
  }

  // One run of a config with overrides, in a fresh copy of the base.
  static Result run(const std::string& config, const std::string& overrides, const std::string& env,
                    bool translate) {
    TempDir dir;
    fs::copy(base_->path(), dir.path(), fs::copy_options::recursive);
    std::string command = std::string(ROTOR_BINARY) + " train " + config + " " + overrides;
    std::string extra = overrides;
    const bool launch = extra.find("LAUNCH") != std::string::npos;
    if (launch) {
      command = std::string(ROTOR_BINARY) + " launch -q -n 2 -- train " + config + " " +
                std::regex_replace(overrides, std::regex("LAUNCH"), "");
    }
    Result r;
    const rotor::test::RunResult train = rotor::test::run_in(dir.path(), env + " " + command);
    r.code = train.code;
    r.err = train.err;
    std::string out = "run";
    std::smatch m;
    if (std::regex_search(overrides, m, std::regex(R"(--set output_dir=(\S+))"))) out = m[1];
    const std::string root = dir / out;
    if (fs::exists(root + "/metrics.jsonl")) r.metrics = figures(root + "/metrics.jsonl");
    if (fs::exists(root + "/train.log")) r.log = log_text(root + "/train.log");
    if (fs::exists(root + "/checkpoints/best/trainer_state.json")) {
      Json s = rotor::json_io::load(root + "/checkpoints/best/trainer_state.json");
      s.erase("train_seconds");
      r.best = s.dump();
    }
    std::set<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(dir.path()))
      if (e.path().filename().string()[0] != '.' &&
          e.path().string().find("/tensorboard/") == std::string::npos)
        names.insert(fs::relative(e.path(), dir.path()).string());
    for (const auto& n : names) r.files += n + "\n";
    if (translate && r.code == 0) {
      r.translation =
          rotor::test::run_in(dir.path(), std::string(ROTOR_BINARY) + " translate --checkpoint " +
                                              out + " --input data/test.en --nbest 1")
              .out;
    }
    return r;
  }

  static TempDir* base_;
};
TempDir* ConfigAudit::base_ = nullptr;

// The keys of a dumped config: "section.key" (or "key" at the top).
std::vector<std::string> dumped_keys(const std::string& config) {
  TempDir dir;
  fs::copy(config, dir / "c.yaml");
  const std::string out = dir / "dump.yaml";
  const int rc = std::system((std::string(ROTOR_BINARY) + " train " + (dir / "c.yaml") +
                              " --dump-config >" + out + " 2>/dev/null")
                                 .c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 0);
  std::vector<std::string> keys;
  std::vector<std::string> sections;  // the open sections, outermost first
  std::istringstream in(slurp(out));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t indent = line.find_first_not_of(' ');
    const std::string name = line.substr(indent, line.find(':') - indent);
    sections.resize(std::min(sections.size(), indent / 2));
    std::string path;
    for (const auto& s : sections) path += s + ".";
    if (line.back() == ':') {
      sections.push_back(name);
      continue;
    }
    keys.push_back(path + name);
  }
  return keys;
}

TEST_F(ConfigAudit, EveryKeyHasAnEntry) {
  std::set<std::string> audited;
  for (const auto& e : kEntries) audited.insert(e.key);
  for (const char* config : {"translation.yaml", "mlm.yaml", "classification.yaml", "lm.yaml"})
    for (const auto& key : dumped_keys(base_->path() + "/" + config))
      EXPECT_TRUE(audited.count(key)) << "config key " << key << " has no entry in kEntries";
}

TEST_F(ConfigAudit, EveryKeyDoesWhatItSays) {
  std::map<std::string, Result> baselines;  // by config, overrides and environment
  for (const Entry& e : kEntries) {
    SCOPED_TRACE(std::string(e.key) + "=" + e.value);
    const bool translate = e.shows == Shows::Translation;
    const std::string set = std::string("--set ") + e.key + "=" + e.value + " " + e.extra;
    const Result got = run(e.config, set, e.env, translate);
    if (e.shows == Shows::Rejected) {
      EXPECT_NE(got.code, 0) << "accepted";
      const std::string last = got.err.substr(got.err.rfind('\n', got.err.size() - 2) + 1);
      EXPECT_EQ(last.rfind("rotor: error: ", 0), 0u) << got.err;
      EXPECT_NE(last.find(e.expect), std::string::npos) << got.err;
      continue;
    }
    EXPECT_EQ(got.code, 0) << got.err;
    if (e.shows == Shows::LogHas) {
      EXPECT_NE(got.log.find(e.expect), std::string::npos) << got.log;
      continue;
    }
    const std::string base_key = std::string(e.config) + "|" + e.extra + "|" + e.env;
    auto it = baselines.find(base_key);
    if (it == baselines.end())
      it = baselines.emplace(base_key, run(e.config, e.extra, e.env, translate)).first;
    Result& base = it->second;
    if (translate && base.translation.empty()) base = run(e.config, e.extra, e.env, true);
    ASSERT_EQ(base.code, 0) << base.err;
    switch (e.shows) {
      case Shows::Metrics:
        EXPECT_NE(got.metrics, base.metrics) << "metrics.jsonl unchanged";
        break;
      case Shows::Files:
        EXPECT_NE(got.files, base.files) << "the same files";
        break;
      case Shows::Log:
        EXPECT_NE(got.log, base.log) << "train.log unchanged";
        break;
      case Shows::Best:
        EXPECT_NE(got.best, base.best) << "the same best checkpoint";
        break;
      case Shows::Translation:
        EXPECT_FALSE(got.translation.empty());
        EXPECT_NE(got.translation, base.translation) << "the same translations";
        break;
      case Shows::LogHas:
      case Shows::Rejected:
        break;
    }
  }
}

}  // namespace
