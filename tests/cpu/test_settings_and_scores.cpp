// Settings that do nothing or fail late, and scores over nothing (issue 40,
// classes 5 and 6). A key that does nothing for the chosen task, attention
// kind or feature map is refused at load, with the reason, when set to
// anything but its default (docs/design.md, "Config"); a float key is checked
// as the 32-bit float it is used as; a size that no device could hold is
// refused at load, naming the key and the memory; a byte tokenizer is no
// SentencePiece model. An evaluation that scores no token reports "no tokens
// scored", never a perfect score, and a too-short file is named as the user
// named it. One table, run like tests/cpu/test_input_checks.cpp: the rotor
// binary in a fresh copy of a small world after the row's set-up, asserting
// the exit status, the one error line (or for a row that succeeds a text in
// its output), that no file that existed before changed (but under the row's
// writable path), and the row's check.
//
// The world:
//   tiny.yaml              a RoFormer translator (not trained)
//   mlm.yaml, mlm.txt, mlmrun/   a masked LM, its text and its run
//   lm.yaml, lm.txt        a causal LM on SentencePiece (not trained)
//   blm.yaml, blmrun/      a byte LM on lm.txt, trained
//   ml.yaml, ml.tsv        task multilabel with data.tokenizer bytes (not trained)
//   specials.txt           a line of [MASK] [CLS] [SEP]: no token masking may select
#include <gtest/gtest.h>

#include <fstream>
#include <ostream>
#include <string>

#include "support/error_table.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

using rotor::test::TempDir;

struct Case {
  const char* name;
  const char* setup;        // sh commands run in the case directory first ("" for none)
  const char* args;         // the rotor command line
  int code;                 // expected exit status
  const char* message;      // in the error line (code != 0) or in the output (code 0; "" for none)
  const char* check = "";   // sh test that must hold afterwards
  const char* writes = "";  // files under this path may change
};

#define FRESH " --set output_dir=fresh"
#define NOT_STARTED "! test -e fresh"
#define LINEAR " --set attention.kind=linear"
#define FAVOR LINEAR " --set attention.feature_map=favor"

// clang-format off
const Case kCases[] = {
  // ---- 6: keys that do nothing for the task ----
  {"lm_encoder_layers", "", "train lm.yaml --set model.encoder_layers=2" FRESH, 1,
   "--set model.encoder_layers=2: model.encoder_layers: 2 counts encoder layers, and task lm "
   "builds a decoder-only model: its layers are model.decoder_layers", NOT_STARTED},
  {"lm_encoder_layers_in_the_file", "sed -i 's/^model:/model:\\n  encoder_layers: 3/' lm.yaml",
   "train lm.yaml" FRESH, 1, "lm.yaml:6: model.encoder_layers: 3 counts encoder layers",
   NOT_STARTED},
  {"lm_encoder_layers_at_default_accepted", "",
   "train lm.yaml --dump-config --set model.encoder_layers=6", 0, "decoder_layers: 1"},
  {"mlm_decoder_layers", "", "train mlm.yaml --set model.decoder_layers=3" FRESH, 1,
   "model.decoder_layers: 3 counts decoder layers, and task mlm builds a BERT/RoFormer encoder: "
   "its layers are model.encoder_layers", NOT_STARTED},
  {"mlm_share_embeddings", "", "train mlm.yaml --set model.share_embeddings=false" FRESH, 1,
   "model.share_embeddings: task mlm builds BERT/RoFormer, whose masked-LM head is always tied",
   NOT_STARTED},
  {"classification_scale_embeddings", "",
   "train mlm.yaml --set task=classification --set model.scale_embeddings=false" FRESH, 1,
   "model.scale_embeddings: task classification builds BERT/RoFormer, which never scales its "
   "token embeddings", NOT_STARTED},
  {"lm_type_vocab_size", "", "train lm.yaml --set model.type_vocab_size=0" FRESH, 1,
   "model.type_vocab_size: token types are read by the BERT/RoFormer encoders of tasks mlm, "
   "classification and multilabel; task lm has none", NOT_STARTED},
  {"translation_init_std", "", "train tiny.yaml --set model.init_std=0.05" FRESH, 1,
   "model.init_std: initializes the BERT/RoFormer encoders of tasks mlm, classification and "
   "multilabel; task translation", NOT_STARTED},
  {"lm_time2vec_dim", "", "train lm.yaml --set model.time2vec_dim=8" FRESH, 1,
   "model.time2vec_dim: 8 sizes Time2Vec ages (model.age_embedding time2vec), and the model has "
   "no age embedding (model.age_vocab_size 0)", NOT_STARTED},

  // ---- 6: keys that do nothing for the attention kind or feature map ----
  {"elu1_features", "", "train mlm.yaml" LINEAR " --set attention.features=64" FRESH, 1,
   "attention.features: a key of FAVOR+'s random features (attention.feature_map favor), and "
   "attention.feature_map is elu1, whose features are the head's dimensions", NOT_STARTED},
  {"relu_feature_redraw", "", "train lm.yaml" LINEAR " --set attention.feature_map=relu "
   "--set attention.feature_redraw=10" FRESH, 1,
   "attention.feature_redraw: a key of FAVOR+'s random features (attention.feature_map favor), "
   "and attention.feature_map is relu", NOT_STARTED},
  {"favor_features_accepted", "",
   "train mlm.yaml --dump-config" FAVOR " --set attention.features=64",
   0, "features: 64"},
  {"linear_rope_without_rope", "", "train mlm.yaml" LINEAR " --set model.position=learned "
   "--set attention.linear_rope=before_feature_map" FRESH, 1,
   "attention.linear_rope: places RoPE in linear attention, and model.position is learned, which "
   "rotates nothing", NOT_STARTED},

  // ---- 6: float keys as the floats they are used as ----
  {"linear_eps_zero_as_float", "", "train mlm.yaml" LINEAR " --set attention.linear_eps=1e-50"
   FRESH, 1, "attention.linear_eps: expected a number > 0, got \"1e-50\", which is 0 as a 32-bit "
   "float", NOT_STARTED},
  {"optim_eps_zero_as_float", "", "train lm.yaml --set optim.eps=1e-46" FRESH, 1,
   "optim.eps: expected a number > 0, got \"1e-46\", which is 0 as a 32-bit float", NOT_STARTED},
  {"dropout_zero_as_float", "", "train lm.yaml --set model.dropout=1e-50" FRESH, 1,
   "model.dropout: expected a number in [0, 1), got \"1e-50\", which is 0 as a 32-bit float",
   NOT_STARTED},
  {"layer_norm_eps_in_the_file", "sed -i 's/^model:/model:\\n  layer_norm_eps: 1.0e-60/' lm.yaml",
   "train lm.yaml" FRESH, 1,
   "lm.yaml:6: model.layer_norm_eps: expected a number > 0, got \"1.0e-60\", which is 0 as a "
   "32-bit float",
   NOT_STARTED},
  {"linear_eps_subnormal_accepted", "", "train mlm.yaml --dump-config" LINEAR
   " --set attention.linear_eps=1e-40", 0, "linear_eps"},
  {"lr_overflows_float", "", "train lm.yaml --set optim.lr=1e39" FRESH, 1,
   "optim.lr: expected a number > 0, got \"1e39\", beyond the range of a 32-bit float",
   NOT_STARTED},

  // ---- 6: sizes that cannot fit, refused at load ----
  {"favor_features_2e9", "", "train mlm.yaml" FAVOR " --set attention.features=2e9" FRESH, 1,
   "attention.features: 2000000000 random features would need about 4.2 TB (1 layers x (a "
   "2000000000 x 16 projection, and 2000000000 features of q and of k for each of 2 heads and "
   "128 tokens of a batch)), more than any device holds", NOT_STARTED},
  {"favor_features_65536_accepted", "", "train mlm.yaml --dump-config" FAVOR
   " --set attention.features=65536", 0, "features: 65536"},

  // ---- 6: a byte tokenizer is no SentencePiece model ----
  {"spm_model_is_a_byte_tokenizer", "", "train mlm.yaml --set data.spm_model=blmrun/tokenizer.bytes"
   FRESH, 1, "data.spm_model: blmrun/tokenizer.bytes is a byte tokenizer, and data.tokenizer is "
   "sentencepiece: set data.tokenizer: bytes", NOT_STARTED},
  {"spm_model_a_byte_tokenizer_for_multilabel", "",
   "train ml.yaml --set data.tokenizer=sentencepiece "
   "--set data.spm_model=blmrun/tokenizer.bytes" FRESH, 1,
   "data.spm_model: blmrun/tokenizer.bytes is a byte tokenizer", NOT_STARTED},

  // ---- 6: task multilabel with data.tokenizer bytes trains ----
  {"multilabel_bytes_trains", "", "train ml.yaml", 0, "",
   "test -f mlrun/checkpoints/step_2/model.safetensors && "
   "head -1 mlrun/tokenizer.bytes | grep -q rotor-byte-tokenizer && "
   "grep -q '\"split\":\"valid\"' mlrun/metrics.jsonl", "mlrun"},
  {"multilabel_bytes_predicts", "$ROTOR train ml.yaml 2>/dev/null",
   "predict --checkpoint mlrun --input ml.tsv --output preds.tsv", 0, "",
   "test $(wc -l < preds.tsv) -ge 5"},

  // ---- 5: scores over nothing ----
  {"eval_mlm_nothing_maskable", "", "eval --checkpoint mlmrun --input specials.txt", 1,
   "eval: --input specials.txt: no tokens scored: the fixed validation masks select none of its "
   "tokens (special tokens and <unk> are never selected"},
  {"eval_mlm_nothing_maskable_json", "", "eval --checkpoint mlmrun --input specials.txt --json", 1,
   "eval: --input specials.txt: no tokens scored"},
  {"eval_mlm_scores_text", "", "eval --checkpoint mlmrun --input mlm.txt --json", 0,
   "\"masked_tokens\":"},
  {"train_mlm_validation_nothing_scored", "",
   "train mlm.yaml --set data.valid=specials.txt --set train.valid_interval=2" FRESH, 0,
   "no tokens scored",
   "grep '\"split\":\"valid\"' fresh/metrics.jsonl | grep -q '\"loss\":null' && "
   "! grep '\"split\":\"valid\"' fresh/metrics.jsonl | grep -q '\"loss\":0'", "fresh"},
  {"eval_byte_lm_one_byte_file", "printf x > one.txt", "eval --checkpoint blmrun --input one.txt",
   1, "eval: --input one.txt has 1 tokens, too few for a token and its next one to score"},
  {"train_byte_lm_one_byte_file", "printf x > one.txt", "train blm.yaml --set data.train=one.txt"
   FRESH, 1, "data.train one.txt (binarized as fresh/data/train) has 1 tokens, too few for one "
   "block of data.seq_len 16 + 1", "", "fresh"},
  {"train_byte_lm_one_byte_valid", "printf x > one.txt", "train blm.yaml --set data.valid=one.txt"
   FRESH, 1, "data.valid one.txt (binarized as fresh/data/valid) has 1 tokens, too few for a "
   "token and its next one to score", "", "fresh"},
};
// clang-format on

// The row's name in test listings (not its bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

rotor::test::RunResult sh(const std::string& dir, const std::string& script) {
  return rotor::test::run_script(dir, script);
}

class SettingsAndScores : public ::testing::TestWithParam<Case> {
 public:
  static void SetUpTestSuite() {
    base_ = new TempDir();
    const std::string b = base_->path();
    using rotor::test::tiny_lm;
    using rotor::test::tiny_mlm;
    rotor::test::tiny_translation().write(b + "/tiny.yaml");
    tiny_mlm("mlm.txt", "", "mlmrun")
        .erase("data.valid")
        .set("train.max_updates", "2")
        .set("train.valid_interval", "0")
        .erase("train.save_interval")
        .write(b + "/mlm.yaml");
    tiny_lm("lm.txt", "", "lmrun").erase("data.valid").write(b + "/lm.yaml");
    tiny_lm("lm.txt", "", "blmrun")
        .erase("data.valid")
        .erase("data.vocab_size")
        .set("data.tokenizer", "bytes")
        .set("train.max_updates", "2")
        .set("train.valid_interval", "0")
        .write(b + "/blm.yaml");
    rotor::test::tiny_encoder("multilabel", "mlrun")
        .set("data.train", "ml.tsv")
        .set("data.valid", "ml.tsv")
        .set("data.tokenizer", "bytes")
        .set("data.label_column", "codes")
        .set("data.seq_len", "32")
        .set("train.max_updates", "2")
        .set("train.batch_size", "2")
        .set("train.valid_interval", "2")
        .set("train.save_interval", "2")
        .set("optim.name", "adamw")
        .set("optim.lr", "1.0e-3")
        .set("optim.warmup_updates", "1")
        .write(b + "/ml.yaml");
    std::ofstream(b + "/ml.tsv") << "sentence\tcodes\nthe ant\tant\nthe cow\tcow\n"
                                    "ant and cow\tant,cow\nnothing here\t\nan ant\tant\n";
    std::ofstream(b + "/specials.txt") << "[MASK] [CLS] [SEP]\n";
    const auto s = sh(b,
                      "set -e; $ROTOR synth numbers-en-de --output data --train 200 --valid 20 "
                      "--test 5 --test-long 2 --seed 4 >/dev/null; "
                      "paste -d' ' data/train.en data/train.de > mlm.txt; cp mlm.txt lm.txt; "
                      "$ROTOR train mlm.yaml 2>/dev/null; $ROTOR train blm.yaml 2>/dev/null");
    ASSERT_EQ(s.code, 0) << s.err;
  }
  static void TearDownTestSuite() {
    delete base_;
    base_ = nullptr;
  }

 protected:
  static TempDir* base_;
};
TempDir* SettingsAndScores::base_ = nullptr;

TEST_P(SettingsAndScores, RefusedOrReportedHonestly) {
  const Case& c = GetParam();
  ASSERT_NE(base_, nullptr);
  TempDir dir;
  rotor::test::copy_world(base_->path(), dir);
  if (*c.setup) {
    const auto s = sh(dir.path(), c.setup);
    ASSERT_EQ(s.code, 0) << "set-up: " << c.setup << "\n" << s.err;
  }
  const auto before = rotor::test::snapshot(dir.path());
  const auto o = sh(dir.path(), "$ROTOR " + std::string(c.args));
  EXPECT_EQ(o.code, c.code) << c.args << "\nstderr: " << o.err;
  if (c.code != 0) {
    rotor::test::expect_error_line(o.err, c.message);
    EXPECT_EQ(o.err.find("/rotor-eval-"), std::string::npos) << "names a temporary: " << o.err;
  } else {
    rotor::test::expect_no_error(o.err);
    EXPECT_NE((o.out + o.err).find(c.message), std::string::npos)
        << "expected \"" << c.message << "\" in: " << o.out << o.err;
  }
  rotor::test::expect_unchanged(before, rotor::test::snapshot(dir.path()), c.writes);
  if (*c.check) {
    EXPECT_EQ(sh(dir.path(), c.check).code, 0) << "check: " << c.check;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, SettingsAndScores, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
