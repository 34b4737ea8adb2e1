// Packed documents for the masked LM (data.packing documents; data/mlm.h,
// data/ehr_mlm.h, nn::DocLayout): the pieces, blocks and masks the data
// layer makes of text lines and of EHR patients; and the encoder on a
// packed batch against each document run alone -- logits, loss and every
// gradient -- under every position encoding the BERT encoder takes with
// packing (TUPE's per-block table is refused) and the CPU cores (the
// materialized reference, the flash twin, linear attention with elu1 and
// FAVOR+); a token of one document never changes another's outputs
// (bitwise); a document's outputs do not depend on where it sits; and
// patients packed into rows score exactly as one patient per row, visit
// positions included.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "data/classification.h"
#include "data/ehr.h"
#include "data/ehr_mlm.h"
#include "data/ehr_prepare.h"
#include "data/mlm.h"
#include "data/synth_ehr.h"
#include "models/bert.h"
#include "models/bert_classifier.h"
#include "nn/attention.h"
#include "nn/position.h"
#include "support/classifier_step.h"
#include "support/model_gradcheck.h"
#include "support/packed_lm.h"
#include "support/test_util.h"
#include "tasks/classifier/outputs.h"
#include "tasks/data.h"

namespace rotor {
namespace {

using test::Core;
using test::kCores;
using test::max_diff;

constexpr int64_t kVocab = 40;
constexpr int32_t kCls = 5, kSep = 6;

// ---- the data ------------------------------------------------------------------

// data.document_separator blank_line: a paragraph's sentences joined by
// [SEP] are one document; a blank-token sentence (9 here) separates; a
// piece that starts inside the paragraph reads on from the right sentence.
TEST(MlmPackingData, ParagraphsAreDocuments) {
  test::TempDir dir;
  auto corpus = test::write_lm_corpus(
      dir, {{10, 11, 12}, {20, 3}, {}, {30, 31}, {9}, {40, 41, 42, 43, 44, 45}});
  data::TextDocuments paragraphs;
  paragraphs.paragraphs = true;
  paragraphs.blank_tokens = {9};
  data::PackedBlocks wide(corpus, 8, kCls, kSep, data::MlmPacking::Documents, "", paragraphs);
  EXPECT_TRUE(wide.paragraphs());
  EXPECT_EQ(wide.documents(), 3);
  EXPECT_EQ(wide.split_documents(), 0);
  ASSERT_EQ(wide.size(), 3);
  EXPECT_EQ(wide.block(0), (std::vector<int32_t>{kCls, 10, 11, 12, kSep, 20, kSep}));
  EXPECT_EQ(wide.block(1), (std::vector<int32_t>{kCls, 30, 31, kSep}));
  EXPECT_EQ(wide.block(2), (std::vector<int32_t>{kCls, 40, 41, 42, 43, 44, 45, kSep}));
  // seq_len 6: the first paragraph (5 content tokens) splits 4 + 1, the
  // second piece starting in its second sentence.
  data::PackedBlocks narrow(corpus, 6, kCls, kSep, data::MlmPacking::Documents, "", paragraphs);
  EXPECT_EQ(narrow.split_documents(), 2);
  EXPECT_EQ(narrow.block(0), (std::vector<int32_t>{kCls, 10, 11, 12, kSep, kSep}));
  ASSERT_EQ(narrow.size(), 5);  // [P1a] [P1b] [P2] [P3a] [P3b]
  EXPECT_EQ(narrow.block(1), (std::vector<int32_t>{kCls, 20, kSep}));
  EXPECT_EQ(narrow.block(4), (std::vector<int32_t>{kCls, 44, 45, kSep}));
  // Lines instead: five documents, the blank-token line among them.
  data::PackedBlocks lines(corpus, 8, kCls, kSep, data::MlmPacking::Documents);
  EXPECT_FALSE(lines.paragraphs());
  EXPECT_EQ(lines.documents(), 5);
}

TEST(MlmPackingData, DocumentsPiecesBlocksAndMasks) {
  test::TempDir dir;
  // seq_len 6: 4 content tokens a piece. Documents: 10 11 12 (5 with [CLS]
  // [SEP]), 20 (3), 30 31 (4), and 40..45 (6 tokens: split 4 + 2); the
  // empty line is none; a trailing </s> (3) is not content.
  auto corpus =
      test::write_lm_corpus(dir, {{10, 11, 12}, {}, {20, 3}, {30, 31}, {40, 41, 42, 43, 44, 45}});
  data::PackedBlocks blocks(corpus, 6, kCls, kSep, data::MlmPacking::Documents);
  EXPECT_EQ(blocks.documents(), 4);
  EXPECT_EQ(blocks.split_documents(), 1);
  EXPECT_EQ(blocks.pieces(), 5);
  // Greedy: A (5) and B (3) do not fit 6 together, nor B and C (4).
  ASSERT_EQ(blocks.size(), 5);
  EXPECT_EQ(blocks.block(0), (std::vector<int32_t>{kCls, 10, 11, 12, kSep}));
  EXPECT_EQ(blocks.block(1), (std::vector<int32_t>{kCls, 20, kSep}));
  EXPECT_EQ(blocks.block(3), (std::vector<int32_t>{kCls, 40, 41, 42, 43, kSep}));
  EXPECT_EQ(blocks.block(4), (std::vector<int32_t>{kCls, 44, 45, kSep}));
  // At seq_len 8, A and B share a block and D is one piece of 8 tokens.
  data::PackedBlocks wide(corpus, 8, kCls, kSep, data::MlmPacking::Documents);
  EXPECT_EQ(wide.split_documents(), 0);
  ASSERT_EQ(wide.size(), 3);
  EXPECT_EQ(wide.block(0), (std::vector<int32_t>{kCls, 10, 11, 12, kSep, kCls, 20, kSep}));
  const auto pieces = wide.block_pieces(0);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].id, 1u);
  EXPECT_EQ(pieces[0].length, 5);
  EXPECT_EQ(pieces[1].length, 3);
  EXPECT_THROW(data::PackedBlocks(corpus, 2, kCls, kSep, data::MlmPacking::Documents), Error);
  auto empty = test::write_lm_corpus(dir, {{}, {3}});
  EXPECT_THROW(data::PackedBlocks(empty, 8, kCls, kSep, data::MlmPacking::Documents), Error);

  // The batch: document indices per token, -1 for padding; each piece is
  // masked as it would be on its own (its global index keys the stream).
  data::MaskingOptions mo;
  mo.mask_prob = 0.5;
  mo.vocab_size = 64;
  mo.special = data::MlmSpecialIds::standard();
  const data::Masker masker(mo);
  data::MlmBatcherOptions bo;
  bo.batch_size = 2;
  bo.shuffle = false;
  data::MlmBatcher batcher(std::make_shared<const data::PackedBlocks>(wide), masker, bo);
  const data::MlmHostBatch b = batcher.make_batch({0, 1}, 7);
  EXPECT_EQ(b.documents,
            (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, -1, -1, -1, -1}));
  EXPECT_EQ(b.lengths.to_ints(), (std::vector<int32_t>{8, 4}));
  EXPECT_FALSE(b.position_ids.defined());  // the encoder counts them from the documents
  std::vector<int32_t> expect_pos, expect_tgt;
  auto mask_piece = [&](std::vector<int32_t> ids, uint64_t piece, int32_t at) {
    std::vector<int32_t> pos;
    masker.mask(ids, 7, piece, 8, pos, expect_tgt);
    for (int32_t t : pos) expect_pos.push_back(at + t);
  };
  mask_piece({kCls, 10, 11, 12, kSep}, 0, 0);
  mask_piece({kCls, 20, kSep}, 1, 5);
  mask_piece({kCls, 30, 31, kSep}, 2, 8);
  EXPECT_EQ(b.masked_positions.to_ints(), expect_pos);
  EXPECT_EQ(b.masked_targets.to_ints(), expect_tgt);
  EXPECT_GT(b.masked_tokens, 0);
}

// ---- the model -----------------------------------------------------------------

models::BertOptions tiny_bert(nn::PositionKind position, const Core& core) {
  models::BertOptions c;
  c.vocab_size = kVocab;
  c.num_layers = 2;
  c.layer = models::bert_base_layer();
  c.layer.d_model = 16;
  c.layer.n_heads = 2;
  c.layer.d_ff = 32;
  c.layer.dropout = 0.0f;
  c.layer.attention_dropout = 0.0f;
  c.layer.impl = core.impl;
  c.layer.attention_kind = core.kind;
  c.layer.linear_attention.feature_map = core.map;
  c.layer.linear_attention.features = 8;
  c.position = position;
  c.max_positions = 16;
  c.init_std = 0.3;
  return c;
}

using Model = test::JitteredModel<models::BertForMaskedLM>;

// The documents of test::PackedDocs (row 0: 4, 1 and 3 tokens; row 1: 5
// and 3 of padding) as a masked-LM batch, with token types and masked
// positions in every document but the one-token one.
struct PackedMlm {
  test::PackedDocs p;
  std::vector<std::vector<int32_t>> masked{{1, 3}, {}, {0, 2}, {1, 2, 4}};

  models::MlmBatch batch() const {
    const models::LmBatch lm = p.batch();
    models::MlmBatch m;
    m.input_ids = lm.input_ids;
    m.documents = lm.segments;
    m.token_type_ids = types(lm.segments, p.B, p.T);
    m.lengths = Tensor::from_ints({8, 5}, {2});
    std::vector<int32_t> pos, tgt;
    for (size_t i = 0; i < p.docs.size(); ++i)
      for (int32_t t : masked[i]) {
        pos.push_back(static_cast<int32_t>(p.row[i] * p.T + p.start[i] + t));
        tgt.push_back(target(i, t));
      }
    m.masked_positions = Tensor::from_ints(pos, {static_cast<int64_t>(pos.size())});
    m.masked_targets = Tensor::from_ints(tgt, {static_cast<int64_t>(tgt.size())});
    m.tokens = 13;
    m.masked_tokens = static_cast<int64_t>(pos.size());
    return m;
  }
  models::MlmBatch alone(size_t i) const {
    const int64_t n = static_cast<int64_t>(p.docs[i].size());
    models::MlmBatch m;
    m.input_ids = Tensor::from_ints(p.docs[i], {1, n});
    m.token_type_ids = types(std::vector<int32_t>(static_cast<size_t>(n), 0), 1, n);
    m.lengths = Tensor::from_ints({static_cast<int32_t>(n)}, {1});
    std::vector<int32_t> pos, tgt;
    for (int32_t t : masked[i]) {
      pos.push_back(t);
      tgt.push_back(target(i, t));
    }
    m.masked_positions = Tensor::from_ints(pos, {static_cast<int64_t>(pos.size())});
    m.masked_targets = Tensor::from_ints(tgt, {static_cast<int64_t>(tgt.size())});
    m.tokens = n;
    m.masked_tokens = static_cast<int64_t>(pos.size());
    return m;
  }
  static int32_t target(size_t doc, int32_t t) {
    return static_cast<int32_t>((doc * 11 + static_cast<size_t>(t) * 7 + 3) % (kVocab - 1) + 1);
  }
  // Token type 1 on the odd positions of each document: types are per token.
  static Tensor types(const std::vector<int32_t>& segments, int64_t B, int64_t T) {
    std::vector<int32_t> t(segments.size(), 0);
    for (size_t i = 1; i < segments.size(); ++i)
      if (static_cast<int64_t>(i) % T > 0 && segments[i] == segments[i - 1] && segments[i] >= 0)
        t[i] = 1 - t[i - 1];
    return Tensor::from_ints(t, {B, T});
  }
  models::EncoderInputs inputs(const models::MlmBatch& b) const {
    return {b.input_ids, b.token_type_ids, b.lengths, Tensor(), Tensor(), b.documents};
  }
};

struct PackCase {
  nn::PositionKind position;
  Core core;
  std::string name;
  friend void PrintTo(const PackCase& c, std::ostream* os) { *os << c.name; }
};

std::vector<PackCase> pack_cases() {
  std::vector<PackCase> cases;
  for (const Core& core : kCores)
    for (const nn::PositionKind& k : nn::position_kinds()) {
      if (k->untied_correlation) continue;  // TUPE: one table per block (refused)
      const bool linear = core.kind != nn::AttentionKind::Softmax;
      const bool dense_bias = k->xl_terms || k->disentangled;
      // Linear attention carries no score bias (the config refuses them).
      if (linear && (k->alibi || dense_bias || k->relative_bias)) continue;
      // The flash twin carries no dense score bias (Transformer-XL's, DeBERTa's).
      if (core.impl == nn::AttentionImpl::Rotor && dense_bias) continue;
      cases.push_back({k, core, std::string(core.name) + "_" + std::string(k->name)});
    }
  return cases;
}

class MlmPacking : public ::testing::TestWithParam<PackCase> {};

// The packed batch against each document alone: logits of every token, the
// loss sums over the masked tokens, and the gradient of the summed loss.
TEST_P(MlmPacking, PackedBatchEqualsDocumentsOneByOne) {
  const PackCase& pc = GetParam();
  Model s(tiny_bert(pc.position, pc.core));
  const PackedMlm p;
  nn::Context infer;
  const std::vector<float> packed = s.model->forward_logits(p.inputs(p.batch()), infer).to_floats();
  for (size_t i = 0; i < p.p.docs.size(); ++i) {
    const std::vector<float> alone =
        s.model->forward_logits(p.inputs(p.alone(i)), infer).to_floats();
    const size_t off = p.p.logit_offset(i);
    const std::vector<float> part(packed.begin() + static_cast<int64_t>(off),
                                  packed.begin() + static_cast<int64_t>(off + alone.size()));
    EXPECT_LT(max_diff(part, alone), 2e-5) << "document " << i;
  }
  nn::Context ctx;
  ctx.training = true;
  ctx.seed = 3;
  s.store.zero_grad();
  const models::MlmSums whole = s.model->forward_loss(p.batch(), ctx);
  s.model->backward(1.0f);
  const std::vector<float> g_packed = s.store.grads().to_floats();
  s.store.zero_grad();
  double loss = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < p.p.docs.size(); ++i) {
    const models::MlmSums one = s.model->forward_loss(p.alone(i), ctx);
    loss += one.loss;
    tokens += one.tokens;
    s.model->backward(1.0f);  // gradients add up over the documents
  }
  const std::vector<float> g_alone = s.store.grads().to_floats();
  EXPECT_EQ(whole.tokens, tokens);
  EXPECT_NEAR(whole.loss, loss, 1e-4 * std::abs(loss));
  EXPECT_LT(test::relative_grad_diff(g_packed, g_alone), 1e-4) << "gradients";
}

// A token of another document leaves a document's outputs bitwise equal --
// before it, after it and in another row -- and the same document elsewhere
// in a block gives the same outputs.
TEST_P(MlmPacking, DocumentsDoNotSeeEachOther) {
  const PackCase& pc = GetParam();
  Model s(tiny_bert(pc.position, pc.core));
  PackedMlm p;
  nn::Context infer;
  const std::vector<float> base = s.model->forward_logits(p.inputs(p.batch()), infer).to_floats();
  PackedMlm q = p;
  q.p.docs[1][0] = 33;  // the one-token document between the first and the third
  const std::vector<float> changed =
      s.model->forward_logits(q.inputs(q.batch()), infer).to_floats();
  const size_t first = 0, third = static_cast<size_t>(5 * kVocab),
               fourth = static_cast<size_t>(8 * kVocab);
  for (size_t j = first; j < first + 4 * kVocab; ++j)
    ASSERT_EQ(changed[j], base[j]) << "the first document saw a later one";
  for (size_t j = third; j < third + 3 * kVocab; ++j)
    ASSERT_EQ(changed[j], base[j]) << "the third document saw an earlier one";
  for (size_t j = fourth; j < fourth + 5 * kVocab; ++j)
    ASSERT_EQ(changed[j], base[j]) << "another row's document saw this one";
  PackedMlm r = p;
  r.p.start = {3, 7, 0, 0};  // the third document moved to the front of row 0
  const std::vector<float> moved = s.model->forward_logits(r.inputs(r.batch()), infer).to_floats();
  const std::vector<float> a(base.begin() + third, base.begin() + third + 3 * kVocab),
      b(moved.begin(), moved.begin() + 3 * kVocab);
  EXPECT_LT(max_diff(a, b), 2e-5) << "the document's outputs depend on where it sits";
}

INSTANTIATE_TEST_SUITE_P(Cores, MlmPacking, ::testing::ValuesIn(pack_cases()),
                         [](const auto& info) { return info.param.name; });

// ---- EHR patients --------------------------------------------------------------

class EhrPacking : public ::testing::TestWithParam<std::tuple<const char*, bool>> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    data::SynthEhrOptions so;
    so.output_dir = *dir_ / "synth";
    so.patients = 40;
    so.seed = 3;
    so.format = "jsonl";
    data::write_synth_ehr(so);
    data::EhrPrepareOptions o;
    o.jsonl = *dir_ / "synth/patients.jsonl";
    o.output_dir = *dir_ / "p";
    o.valid_fraction = o.test_fraction = 0.1;
    data::prepare_ehr(o);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static test::TempDir* dir_;
};
test::TempDir* EhrPacking::dir_ = nullptr;

// Patients packed into rows of 64 tokens against the same patients one per
// row: the same masked tokens, loss and gradients, under visit or token
// positions (RoPE's visit positions rotate q and k in the head split, each
// patient's row following its tokens).
TEST_P(EhrPacking, PackedRowsScoreAsOnePatientPerRow) {
  const auto [position, visits] = GetParam();
  auto split = std::make_shared<const data::EhrSplit>(data::EhrSplit::open(*dir_ / "p/train"));
  const int64_t seq_len = 64;
  data::MaskingOptions mo;
  mo.mask_prob = 0.3;
  mo.vocab_size = static_cast<int32_t>(split->meta().vocab_size);
  mo.special = data::MlmSpecialIds::standard();
  data::MlmBatcherOptions bo;
  bo.batch_size = 2;
  bo.shuffle = false;
  const data::EhrMlmBatcher packed(split, seq_len, data::Masker(mo), bo, true);
  const data::EhrMlmBatcher plain(split, seq_len, data::Masker(mo), bo, false);
  ASSERT_LT(packed.rows(), static_cast<int64_t>(split->size()));  // several patients a row
  // Two rows of two or more patients each.
  std::vector<int64_t> rows, patients;
  for (int64_t r = 0; r < packed.rows() && rows.size() < 2; ++r)
    if (packed.row_patients(r).size() >= 2) rows.push_back(r);
  ASSERT_EQ(rows.size(), 2u);
  for (int64_t r : rows)
    for (int64_t p : packed.row_patients(r)) patients.push_back(p);
  const data::MlmHostBatch hp = packed.make_batch(rows, 4);
  const data::MlmHostBatch h1 = plain.make_batch(patients, 4);
  ASSERT_EQ(hp.masked_tokens, h1.masked_tokens);
  ASSERT_EQ(hp.masked_targets.to_ints(), h1.masked_targets.to_ints());
  ASSERT_EQ(hp.tokens, h1.tokens);

  models::BertOptions o = tiny_bert(*nn::position_kind(position), kCores[0]);
  o.vocab_size = split->meta().vocab_size;
  o.max_positions = seq_len;
  o.age_vocab_size = split->meta().age_vocab_size;
  o.visit_positions = visits;
  Model s(o);
  nn::Context ctx;
  ctx.training = true;
  s.store.zero_grad();
  const models::MlmSums a = s.model->forward_loss(tasks::to_model_batch(hp, Device::cpu()), ctx);
  s.model->backward(1.0f);
  const std::vector<float> ga = s.store.grads().to_floats();
  s.store.zero_grad();
  const models::MlmSums b = s.model->forward_loss(tasks::to_model_batch(h1, Device::cpu()), ctx);
  s.model->backward(1.0f);
  const std::vector<float> gb = s.store.grads().to_floats();
  EXPECT_NEAR(a.loss, b.loss, 1e-4 * std::abs(b.loss));
  EXPECT_EQ(a.correct, b.correct);
  EXPECT_LT(test::relative_grad_diff(ga, gb), 1e-4) << "gradients";
}

INSTANTIATE_TEST_SUITE_P(Positions, EhrPacking,
                         ::testing::Values(std::make_tuple("rope", true),
                                           std::make_tuple("learned", true),
                                           std::make_tuple("rope", false),
                                           std::make_tuple("learned", false),
                                           std::make_tuple("alibi", false)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_visits" : "_tokens");
                         });

// ---- classifier examples -------------------------------------------------------

// Eight examples of 3 to 9 tokens ([CLS] a [SEP] (b [SEP])), labels of 3
// classes, 3 multilabel labels and regression targets.
data::ClassificationSet tiny_set(bool multilabel) {
  data::ClassificationSet set;
  set.has_labels = true;
  set.multilabel = multilabel;
  set.num_labels = 3;
  for (int i = 0; i < 8; ++i) {
    data::ClassificationExample ex;
    const int a = 1 + i % 4, b = (i * 5) % 4;
    ex.ids.push_back(kCls);
    for (int t = 0; t < a; ++t) ex.ids.push_back(7 + (i * 3 + t * 5) % 30);
    ex.ids.push_back(kSep);
    ex.types.assign(ex.ids.size(), 0);
    for (int t = 0; t < b; ++t) {
      ex.ids.push_back(7 + (i * 7 + t * 3) % 30);
      ex.types.push_back(1);
    }
    if (b > 0) {
      ex.ids.push_back(kSep);
      ex.types.push_back(1);
    }
    ex.label = i % 3;
    ex.target = 0.25f * static_cast<float>(i) - 1.0f;
    if (i % 3 != 1) ex.label_set.push_back(i % 3);
    if (i % 2 == 0) ex.label_set.push_back(1);
    std::sort(ex.label_set.begin(), ex.label_set.end());
    ex.label_set.erase(std::unique(ex.label_set.begin(), ex.label_set.end()), ex.label_set.end());
    set.examples.push_back(ex);
  }
  return set;
}

struct ClassifierCase {
  const char* position;  // rope: RoFormer's head; else BERT's pooler
  const char* mode;      // classification, multilabel, regression
};

class ClassifierPacking : public ::testing::TestWithParam<ClassifierCase> {};

// Examples packed into rows of 12 tokens against one example a row: the
// same logits, loss and gradients (the head reads each example's [CLS]).
TEST_P(ClassifierPacking, PackedRowsEqualOneExampleARow) {
  const ClassifierCase& cc = GetParam();
  const std::string mode = cc.mode;
  const bool multilabel = mode == "multilabel", regression = mode == "regression";
  const data::ClassificationSet set = tiny_set(multilabel);
  const std::vector<int64_t> ids{3, 0, 5, 6, 1, 7, 2, 4};
  const data::ClassificationHostBatch packed =
      data::make_classification_batch(set, ids, regression, 12);
  const data::ClassificationHostBatch plain = data::make_classification_batch(set, ids, regression);
  ASSERT_LT(packed.input_ids.size(0), plain.input_ids.size(0));  // fewer rows
  ASSERT_EQ(packed.cls_positions.size(), ids.size());
  EXPECT_EQ(packed.tokens, plain.tokens);

  models::BertClassifierOptions o;
  o.encoder = tiny_bert(*nn::position_kind(cc.position), kCores[0]);
  o.regression = regression;
  o.multilabel = multilabel;
  o.num_labels = regression ? 1 : 3;
  o.dropout = 0.0f;
  nn::ParameterStore store;
  models::BertForSequenceClassification model(o, store);
  store.allocate(Device::cpu());
  store.initialize(4);
  test::jitter(store, 5, 0.1f);
  nn::Context ctx;
  ctx.training = true;
  const test::ClassifierStep a = test::classifier_step(model, store, packed, ctx),
                             b = test::classifier_step(model, store, plain, ctx);
  EXPECT_LT(max_diff(a.scores, b.scores), 2e-5) << "logits";
  EXPECT_EQ(a.sums.examples, b.sums.examples);
  EXPECT_EQ(a.sums.correct, b.sums.correct);
  EXPECT_NEAR(a.sums.loss, b.sums.loss, 1e-5 * std::max(1.0, std::abs(b.sums.loss)));
  EXPECT_LT(test::relative_grad_diff(a.grads, b.grads), 1e-4) << "gradients";
  // Validation and `rotor predict` (tasks::classify) pack the same way.
  const tasks::ClassificationOutputs rows = tasks::classify(model, set, 5, nn::Context{}),
                                     packs = tasks::classify(model, set, 5, nn::Context{}, 12);
  EXPECT_LT(max_diff(packs.logits, rows.logits), 2e-5) << "classify logits";
  EXPECT_EQ(packs.predicted, rows.predicted);
  EXPECT_NEAR(packs.sums.loss, rows.sums.loss, 1e-5 * std::max(1.0, std::abs(rows.sums.loss)));
}

INSTANTIATE_TEST_SUITE_P(Heads, ClassifierPacking,
                         ::testing::Values(ClassifierCase{"rope", "classification"},
                                           ClassifierCase{"learned", "classification"},
                                           ClassifierCase{"alibi", "multilabel"},
                                           ClassifierCase{"rope", "multilabel"},
                                           ClassifierCase{"sinusoidal", "regression"}),
                         [](const auto& info) {
                           return std::string(info.param.position) + "_" + info.param.mode;
                         });

TEST(ClassifierPackingData, RowsAndClsPositions) {
  const data::ClassificationSet set = tiny_set(false);
  std::vector<int64_t> n;
  for (const auto& ex : set.examples) n.push_back(static_cast<int64_t>(ex.ids.size()));
  const data::ClassificationHostBatch b = data::make_classification_batch(set, {0, 1, 2}, false, 9);
  // Greedy: example 0 starts row 0; 1 joins it if both fit 9 tokens.
  const int64_t T = b.input_ids.size(1);
  int64_t row = 0, used = 0;
  std::vector<int32_t> want_cls;
  for (int i = 0; i < 3; ++i) {
    if (i > 0 && used + n[static_cast<size_t>(i)] > 9) {
      ++row;
      used = 0;
    }
    want_cls.push_back(static_cast<int32_t>(row * T + used));
    used += n[static_cast<size_t>(i)];
  }
  EXPECT_EQ(b.input_ids.size(0), row + 1);
  EXPECT_EQ(b.cls_positions, want_cls);
  const std::vector<int32_t> ids = b.input_ids.to_ints();
  for (int32_t at : b.cls_positions) EXPECT_EQ(ids[static_cast<size_t>(at)], kCls);
  EXPECT_EQ(b.labels.to_ints(), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_THROW(data::make_classification_batch(set, {0, 1}, false, 2), Error);  // too long
}

}  // namespace
}  // namespace rotor
