// Task lm end to end through the rotor binary: the tiny causal LM trains,
// validates (loss, ppl, accuracy and bits per byte over non-overlapping
// blocks), saves, and a resumed run continues exactly (the same losses as an
// uninterrupted one, bitwise the same weights); with update_freq, an
// untied post-LN model, two data-parallel ranks and 16-bit precision too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "checkpoint/safetensors.h"
#include "support/dp_training.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

namespace fs = std::filesystem;
using rotor::test::run_rotor;
using rotor::test::RunResult;
using rotor::test::slurp;
using rotor::test::TempDir;

class LmTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = run_rotor(dir_, rotor::test::synth_args(dir_ / "data", {300, 10, 10, 5}));
    ASSERT_EQ(r.code, 0) << r.err;
    rotor::test::write_mlm_text(dir_ / "data", dir_ / "lm.txt", dir_ / "lm_valid.txt", 10);
    rotor::test::tiny_lm(dir_ / "lm.txt", dir_ / "lm_valid.txt", "unused").write(dir_ / "lm.yaml");
  }
  RunResult train(const std::string& run, const std::string& extra = "") {
    return run_rotor(
        dir_, "train " + (dir_ / "lm.yaml") + " --set output_dir=" + (dir_ / run) + " " + extra,
        "OMP_NUM_THREADS=1");
  }
  TempDir dir_;
};

// The JSON text of `key` in the records of metrics.jsonl whose split is
// `split`, by step.
std::map<int64_t, std::string> field_by_step(const std::string& path, const std::string& split,
                                             const std::string& key) {
  auto field = [](const std::string& line, const std::string& k) {
    size_t p = line.find("\"" + k + "\":");
    if (p == std::string::npos) return std::string();
    p = line.find_first_not_of(' ', p + k.size() + 3);
    return line.substr(p, line.find_first_of(",}", p) - p);
  };
  std::map<int64_t, std::string> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);)
    if (field(line, "split") == "\"" + split + "\"" && !field(line, key).empty())
      out[std::stoll(field(line, "step"))] = field(line, key);
  return out;
}

void expect_same_weights(const std::string& a, const std::string& b) {
  rotor::checkpoint::SafetensorsFile fa(a), fb(b);
  ASSERT_EQ(fa.names(), fb.names());
  for (const auto& name : fa.names()) {
    rotor::Tensor ta = fa.load(name), tb = fb.load(name);
    ASSERT_EQ(ta.nbytes(), tb.nbytes()) << name;
    EXPECT_EQ(std::memcmp(ta.raw(), tb.raw(), ta.nbytes()), 0) << name << " differs";
  }
}

TEST_F(LmTrain, TrainsValidatesAndResumesExactly) {
  const std::string opts = " --set train.update_freq=2";
  RunResult r = train("full", opts);
  ASSERT_EQ(r.code, 0) << r.err;
  // The validation line: loss, perplexity, accuracy, bits per byte, and how.
  const std::string log = r.out + r.err;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(log, m,
                        std::regex("valid at update 4 \\| loss ([0-9.]+) \\| ppl ([0-9.]+) "
                                   "\\| acc [0-9.]+ \\| bpb ([0-9.]+) \\| "
                                   "non-overlapping blocks of 16 tokens \\| ([0-9]+) tokens")))
      << log;
  const double loss = std::stod(m[1]), ppl = std::stod(m[2]), bpb = std::stod(m[3]);
  EXPECT_NEAR(ppl, std::exp(loss), 0.01 * ppl);
  // Total nats over the UTF-8 bytes of the validation text, in bits.
  const double tokens = std::stod(m[4]);
  const double bytes = static_cast<double>(fs::file_size(dir_ / "lm_valid.txt"));
  EXPECT_NEAR(bpb, loss * tokens / (std::log(2.0) * bytes), 1e-3 * bpb);
  const auto bpbs = field_by_step(dir_ / "full/metrics.jsonl", "valid", "bpb");
  const auto valid = field_by_step(dir_ / "full/metrics.jsonl", "valid", "loss");
  ASSERT_EQ(bpbs.size(), 2u);  // updates 2 and 4
  ASSERT_EQ(valid.size(), 2u);
  EXPECT_LT(std::stod(valid.at(4)), std::stod(valid.at(2)));  // it learns
  // bits per byte = nats per token * tokens / (ln 2 * bytes): the same ratio
  // at both validations (the same tokens and bytes).
  EXPECT_NEAR(std::stod(bpbs.at(4)) / std::stod(bpbs.at(2)),
              std::stod(valid.at(4)) / std::stod(valid.at(2)), 1e-3);
  for (const char* f : {"model.safetensors", "trainer_state.json", "config.yaml", "spm.model"})
    EXPECT_TRUE(fs::exists(dir_ / ("full/checkpoints/step_4/" + std::string(f)))) << f;
  EXPECT_TRUE(fs::exists(dir_ / "full/checkpoints/best/model.safetensors"));

  // 2 updates, then --resume to 4: the same losses and weights.
  r = train("split", opts + " --set train.max_updates=2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = train("split", opts + " --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto full = field_by_step(dir_ / "full/metrics.jsonl", "train", "loss");
  const auto split = field_by_step(dir_ / "split/metrics.jsonl", "train", "loss");
  ASSERT_EQ(full.size(), 4u);
  EXPECT_EQ(full, split);
  EXPECT_EQ(field_by_step(dir_ / "split/metrics.jsonl", "valid", "bpb"), bpbs);
  expect_same_weights(dir_ / "full/checkpoints/step_4/model.safetensors",
                      dir_ / "split/checkpoints/step_4/model.safetensors");
}

// Post-LN, an untied output projection and learned positions train too, and
// the checkpoint holds lm_head.weight and the position table.
TEST_F(LmTrain, PostLnUntiedLearned) {
  RunResult r = train("untied",
                      "--set model.norm=post --set model.share_embeddings=false --set "
                      "model.position=learned --set train.max_updates=2");
  ASSERT_EQ(r.code, 0) << r.err;
  rotor::checkpoint::SafetensorsFile f(dir_ / "untied/checkpoints/step_2/model.safetensors");
  const auto names = f.names();
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  EXPECT_TRUE(has("lm_head.weight"));
  EXPECT_TRUE(has("model.embed_positions.weight"));
  EXPECT_FALSE(has("model.layer_norm.weight"));
}

// ALiBi positions (model.position alibi) train: the validation loss falls,
// the log says the core adds the bias, and no Hugging Face causal LM has it:
// the export refuses in one line.
TEST_F(LmTrain, AlibiTrainsAndIsNotExported) {
  RunResult r = train("alibi", "--set model.position=alibi");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string log = r.out + r.err;
  EXPECT_NE(log.find("ALiBi's bias computed inside the core"), std::string::npos) << log;
  const auto valid = field_by_step(dir_ / "alibi/metrics.jsonl", "valid", "loss");
  ASSERT_EQ(valid.size(), 2u);
  EXPECT_LT(std::stod(valid.at(4)), std::stod(valid.at(2)));  // it learns
  r = run_rotor(
      dir_, "export --checkpoint " + (dir_ / "alibi") + " --format hf --output " + (dir_ / "hf"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("export --format hf: model.position is alibi: Hugging Face BERT, "
                       "RoFormer, GPT-NeoX and GPT-2 have no ALiBi attention"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "hf/config.json"));
}

// T5's relative bias (model.position t5) trains and
// generates (the cached decoding step reads the same table); no Hugging Face
// causal LM has it: the export refuses in one line.
TEST_F(LmTrain, T5TrainsGeneratesAndIsNotExported) {
  RunResult r = train("t5",
                      "--set model.position=t5 --set model.t5.buckets=16 "
                      "--set model.t5.max_distance=24");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string log = r.out + r.err;
  EXPECT_NE(log.find("T5's bias added inside the core"), std::string::npos) << log;
  const auto valid = field_by_step(dir_ / "t5/metrics.jsonl", "valid", "loss");
  ASSERT_EQ(valid.size(), 2u);
  EXPECT_LT(std::stod(valid.at(4)), std::stod(valid.at(2)));  // it learns
  r = run_rotor(dir_, "generate --checkpoint " + (dir_ / "t5") +
                          " --prompt 'the ' --max-new-tokens 8 --greedy");
  EXPECT_EQ(r.code, 0) << r.err;
  r = run_rotor(dir_,
                "export --checkpoint " + (dir_ / "t5") + " --format hf --output " + (dir_ / "hf5"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("export --format hf: model.position is t5: Hugging Face BERT, "
                       "RoFormer, GPT-NeoX and GPT-2 have no T5 relative bias"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "hf5/config.json"));
}

// Transformer-XL's relative terms (model.position transformer_xl) train on
// the materialized core and generate (the cached step computes its own
// terms at its position); the export refuses them in one line.
TEST_F(LmTrain, TransformerXlTrainsGeneratesAndIsNotExported) {
  RunResult r = train("xl", "--set model.position=transformer_xl");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string log = r.out + r.err;
  EXPECT_NE(log.find("adds the dense score bias of Transformer-XL's terms"), std::string::npos)
      << log;
  const auto valid = field_by_step(dir_ / "xl/metrics.jsonl", "valid", "loss");
  ASSERT_EQ(valid.size(), 2u);
  EXPECT_LT(std::stod(valid.at(4)), std::stod(valid.at(2)));  // it learns
  r = run_rotor(dir_, "generate --checkpoint " + (dir_ / "xl") +
                          " --prompt 'the ' --max-new-tokens 8 --greedy");
  EXPECT_EQ(r.code, 0) << r.err;
  r = run_rotor(
      dir_, "export --checkpoint " + (dir_ / "xl") + " --format hf --output " + (dir_ / "hfxl"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("model.position is transformer_xl: Hugging Face BERT, RoFormer, GPT-NeoX "
                       "and GPT-2 have no Transformer-XL relative attention"),
            std::string::npos)
      << r.err;
}

// Data-parallel through the trainer's generic path: two ranks of one block
// each per update hold the weights of one process accumulating two (no
// dropout: its masks are keyed by the rank). And 16-bit precision trains.
TEST_F(LmTrain, DataParallelAndPrecision) {
  const std::string common = " --set model.dropout=0 --set train.max_updates=2";
  RunResult r = train("one", common + " --set train.update_freq=2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_rotor(dir_,
                "launch -q -n 2 -- train " + (dir_ / "lm.yaml") +
                    " --set output_dir=" + (dir_ / "two") + common,
                "OMP_NUM_THREADS=1");
  ASSERT_EQ(r.code, 0) << r.err;
  const double diff =
      rotor::test::max_weight_diff(dir_ / "one/checkpoints/step_2/model.safetensors",
                                   dir_ / "two/checkpoints/step_2/model.safetensors");
  EXPECT_LT(diff, 1e-5);
  EXPECT_EQ(field_by_step(dir_ / "one/metrics.jsonl", "valid", "loss").size(), 1u);
  for (const char* precision : {"bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    const std::string run = std::string("p_") + precision;
    r = train(run, common + " --set precision=" + precision);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto losses = field_by_step(dir_ / (run + "/metrics.jsonl"), "train", "loss");
    ASSERT_EQ(losses.size(), 2u);
    for (const auto& [step, loss] : losses) EXPECT_TRUE(std::isfinite(std::stod(loss))) << step;
  }
}

// data.packing documents end to end: the log counts the documents, a
// resumed run continues exactly, two ranks equal one process accumulating
// two, activation checkpointing changes nothing, and other tasks refuse it.
TEST_F(LmTrain, PackedDocumentsResumeRanksAndCheckpointing) {
  const std::string docs = " --set data.packing=documents --set model.dropout=0";
  RunResult r = train("docs", docs + " --set train.update_freq=2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out + r.err,
      std::regex("data.train [^\n]*: [0-9]+ documents \\(lines\\), [0-9]+ split \\(longer "
                 "than a block\\), [0-9]+ pieces in [0-9]+ blocks")))
      << r.out + r.err;
  const auto valid = field_by_step(dir_ / "docs/metrics.jsonl", "valid", "loss");
  ASSERT_EQ(valid.size(), 2u);
  EXPECT_LT(std::stod(valid.at(4)), std::stod(valid.at(2)));  // it learns
  // Packed documents are not the stream: another first loss.
  r = train("stream", " --set model.dropout=0 --set train.update_freq=2 --set train.max_updates=1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(field_by_step(dir_ / "docs/metrics.jsonl", "train", "loss").at(1),
            field_by_step(dir_ / "stream/metrics.jsonl", "train", "loss").at(1));
  r = train("docs_split", docs + " --set train.update_freq=2 --set train.max_updates=2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = train("docs_split", docs + " --set train.update_freq=2 --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(field_by_step(dir_ / "docs/metrics.jsonl", "train", "loss"),
            field_by_step(dir_ / "docs_split/metrics.jsonl", "train", "loss"));
  expect_same_weights(dir_ / "docs/checkpoints/step_4/model.safetensors",
                      dir_ / "docs_split/checkpoints/step_4/model.safetensors");
  r = train("docs_ckpt",
            docs + " --set train.update_freq=2 --set train.checkpoint_activations=true");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_weights(dir_ / "docs/checkpoints/step_4/model.safetensors",
                      dir_ / "docs_ckpt/checkpoints/step_4/model.safetensors");
  const std::string two = docs + " --set train.max_updates=2";
  r = train("docs_one", two + " --set train.update_freq=2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_rotor(dir_,
                "launch -q -n 2 -- train " + (dir_ / "lm.yaml") +
                    " --set output_dir=" + (dir_ / "docs_two") + two,
                "OMP_NUM_THREADS=1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(rotor::test::max_weight_diff(dir_ / "docs_one/checkpoints/step_2/model.safetensors",
                                         dir_ / "docs_two/checkpoints/step_2/model.safetensors"),
            1e-5);
}

// Task mlm packs its lines (and EHR patients) too: a resumed run continues
// exactly, activation checkpointing changes no weight, two ranks equal one
// process with update_freq 2, and `rotor eval` scores packed documents.
TEST_F(LmTrain, PackedDocumentsMaskedLm) {
  rotor::test::tiny_mlm(dir_ / "lm.txt", dir_ / "lm_valid.txt", "unused")
      .set("model.dropout", "0")
      .set("train.max_updates", "4")
      .set("train.save_interval", "2")
      .set("train.valid_interval", "2")
      .set("train.update_freq", "2")
      .set("data.packing", "documents")
      .write(dir_ / "mlm.yaml");
  auto mlm = [&](const std::string& run, const std::string& extra = "") {
    return run_rotor(dir_,
                     "train " + (dir_ / "mlm.yaml") + " --set output_dir=" + (dir_ / run) + extra,
                     "OMP_NUM_THREADS=1");
  };
  RunResult r = mlm("m_full");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out + r.err,
      std::regex("data.train: [0-9]+ documents \\(lines\\), [0-9]+ split \\(longer than a "
                 "block\\), [0-9]+ pieces in [0-9]+ blocks")))
      << r.out + r.err;
  r = mlm("m_split", " --set train.max_updates=2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = mlm("m_split", " --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(field_by_step(dir_ / "m_full/metrics.jsonl", "train", "loss"),
            field_by_step(dir_ / "m_split/metrics.jsonl", "train", "loss"));
  expect_same_weights(dir_ / "m_full/checkpoints/step_4/model.safetensors",
                      dir_ / "m_split/checkpoints/step_4/model.safetensors");
  r = mlm("m_ckpt", " --set train.checkpoint_activations=true");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_weights(dir_ / "m_full/checkpoints/step_4/model.safetensors",
                      dir_ / "m_ckpt/checkpoints/step_4/model.safetensors");
  r = run_rotor(dir_,
                "launch -q -n 2 -- train " + (dir_ / "mlm.yaml") + " --set output_dir=" +
                    (dir_ / "m_two") + " --set train.update_freq=1 --set train.max_updates=2",
                "OMP_NUM_THREADS=1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(rotor::test::max_weight_diff(dir_ / "m_full/checkpoints/step_2/model.safetensors",
                                         dir_ / "m_two/checkpoints/step_2/model.safetensors"),
            1e-5);
  r = run_rotor(dir_, "eval --checkpoint " + (dir_ / "m_full") + " --input " +
                          (dir_ / "lm_valid.txt") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("packed documents (lines), fixed validation masks"), std::string::npos)
      << r.out;
  // Packed documents are not the stream blocks: another first loss.
  r = mlm("m_stream", " --set data.packing=stream --set train.max_updates=1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(field_by_step(dir_ / "m_full/metrics.jsonl", "train", "loss").at(1),
            field_by_step(dir_ / "m_stream/metrics.jsonl", "train", "loss").at(1));

  // EHR patients packed into rows; the resume is exact there too.
  ASSERT_EQ(
      run_rotor(dir_, "synth ehr --patients 120 --seed 3 --output " + (dir_ / "ehr_synth")).code,
      0);
  ASSERT_EQ(
      run_rotor(dir_, "prepare-ehr --events " + (dir_ / "ehr_synth/events.csv") + " --patients " +
                          (dir_ / "ehr_synth/patients.csv") + " --output " + (dir_ / "ehr"))
          .code,
      0);
  const std::string ehr = " --set data.format=ehr --set data.train=" + (dir_ / "ehr/train") +
                          " --set data.valid=" + (dir_ / "ehr/valid") +
                          " --set data.seq_len=64 --set model.max_positions=64 --set "
                          "model.position_source=visit --set model.age_vocab_size=128";
  r = mlm("e_full", ehr);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out + r.err, std::regex("data.train: [0-9]+ patients packed into [0-9]+ rows of up to 64 "
                                "tokens")))
      << r.out + r.err;
  r = mlm("e_split", ehr + " --set train.max_updates=2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = mlm("e_split", ehr + " --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_weights(dir_ / "e_full/checkpoints/step_4/model.safetensors",
                      dir_ / "e_split/checkpoints/step_4/model.safetensors");
}

// Translation with data.packing documents trains on variable-length batches
// (each batch's pairs end to end, no padding): without dropout, the same
// losses as padded batches, update by update, and validation's; exact
// resume; and no padding in the bench.
TEST_F(LmTrain, VariableLengthTranslationTrainsAsPadded) {
  rotor::test::tiny_translation(dir_ / "data")
      .set("model.dropout", "0")
      .set("train.valid_interval", "4")
      .write(dir_ / "mt.yaml");
  auto mt = [&](const std::string& run, const std::string& extra) {
    return run_rotor(dir_,
                     "train " + (dir_ / "mt.yaml") + " --set output_dir=" + (dir_ / run) + extra,
                     "OMP_NUM_THREADS=1");
  };
  RunResult r = mt("padded", "");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string varlen = " --set data.packing=documents";
  r = mt("varlen", varlen);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("trained variable-length (pairs end to end, no padding)"),
            std::string::npos)
      << r.out + r.err;
  for (const char* split : {"train", "valid"}) {
    const auto a = field_by_step(dir_ / "padded/metrics.jsonl", split, "loss");
    const auto b = field_by_step(dir_ / "varlen/metrics.jsonl", split, "loss");
    ASSERT_EQ(a.size(), split == std::string("train") ? 4u : 1u) << split;
    ASSERT_EQ(b.size(), a.size()) << split;
    for (const auto& [step, loss] : a)
      EXPECT_NEAR(std::stod(b.at(step)), std::stod(loss), 1e-4 * std::abs(std::stod(loss)))
          << split << " step " << step;
  }
  r = mt("varlen_split", varlen + " --set train.max_updates=2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = mt("varlen_split", varlen + " --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_weights(dir_ / "varlen/checkpoints/step_4/model.safetensors",
                      dir_ / "varlen_split/checkpoints/step_4/model.safetensors");
  r = run_rotor(dir_, "bench train " + (dir_ / "mt.yaml") +
                          " --steps 2 --warmup 1 --set output_dir=" + (dir_ / "bench") + varlen);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("padding: 0.0% "), std::string::npos) << r.out + r.err;
}

TEST_F(LmTrain, PackedDocumentsAreRefusedElsewhere) {
  rotor::test::tiny_mlm(dir_ / "lm.txt", dir_ / "lm_valid.txt").write(dir_ / "mlm.yaml");
  RunResult r =
      run_rotor(dir_, "train " + (dir_ / "mlm.yaml") + " --set output_dir=" + (dir_ / "t") +
                          " --set data.packing=documents --set model.position=tupe");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("data.packing: documents cannot carry TUPE's positional correlation"),
            std::string::npos)
      << r.err;
  // Paragraphs are task lm's packed documents only.
  r = train("para", "--set data.document_separator=blank_line");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("data.document_separator: blank_line makes paragraphs the documents of "
                       "tasks lm and mlm on text with data.packing documents; here task lm, "
                       "data.format text, data.packing stream"),
            std::string::npos)
      << r.err;
  r = train("para", "--set data.document_separator=blank_line --set data.packing=documents");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("documents (paragraphs)"), std::string::npos) << r.out + r.err;
  r = run_rotor(dir_, "train " + (dir_ / "mlm.yaml") + " --set output_dir=" + (dir_ / "mlm_para") +
                          " --set data.packing=documents --set data.document_separator=blank_line");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("documents (paragraphs)"), std::string::npos) << r.out + r.err;
}

}  // namespace
