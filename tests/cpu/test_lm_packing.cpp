// Packed documents for the causal LM (data.packing documents; data/lm.h,
// nn::DocLayout): the blocks, pieces and batches the data layer makes; and
// the model on a packed batch against each document run alone -- logits,
// loss and every gradient -- under every position encoding of the LM and
// the CPU cores (the materialized reference, the flash twin, linear
// attention with elu1 and FAVOR+); a token of one document never changes
// another's logits (bitwise); and a document's logits do not depend on
// where it sits in its block.
#include <cmath>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/lm.h"
#include "models/decoder_lm.h"
#include "nn/attention.h"
#include "nn/position.h"
#include "support/model_gradcheck.h"
#include "support/packed_lm.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using test::Core;
using test::kCores;
using test::max_diff;

constexpr int64_t kVocab = 40;

TEST(LmPackingData, DocumentsPiecesAndBatches) {
  test::TempDir dir;
  // eos 3. Documents: 10 11 12 3 (3 pairs), 20 21 3 (2), 30 3 (1), and
  // 40..46 3 (7 pairs: split into 4 + 3); the empty line is none.
  auto corpus = test::write_lm_corpus(
      dir, {{10, 11, 12}, {}, {20, 21, 3}, {30}, {40, 41, 42, 43, 44, 45, 46}});
  data::LmBlocks blocks(corpus, 4, 3, false, "", data::LmPacking::Documents);
  EXPECT_EQ(blocks.documents(), 4);
  EXPECT_EQ(blocks.split_documents(), 1);
  EXPECT_EQ(blocks.pieces(), 5);
  EXPECT_EQ(blocks.target_tokens(), 13);
  // Greedy: [A] [B C] [D1] [D2], a piece that does not fit opens a block.
  ASSERT_EQ(blocks.size(), 4);
  std::vector<int32_t> in, tgt, pos, seg;
  blocks.pairs_into(1, in, tgt, pos, seg);
  EXPECT_EQ(in, (std::vector<int32_t>{20, 21, 30}));
  EXPECT_EQ(tgt, (std::vector<int32_t>{21, 3, 3}));
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(seg, (std::vector<int32_t>{0, 0, 1}));
  blocks.pairs_into(2, in, tgt, pos, seg);
  EXPECT_EQ(in, (std::vector<int32_t>{40, 41, 42, 43}));
  EXPECT_EQ(tgt, (std::vector<int32_t>{41, 42, 43, 44}));
  blocks.pairs_into(3, in, tgt, pos, seg);  // the piece restarts at position 0
  EXPECT_EQ(in, (std::vector<int32_t>{44, 45, 46}));
  EXPECT_EQ(tgt, (std::vector<int32_t>{45, 46, 3}));
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_THROW(blocks.block(0), Error);  // stream tokens only
  data::LmBatcherOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  data::LmBatcher batcher(std::make_shared<const data::LmBlocks>(blocks), o);
  const data::LmHostBatch b = batcher.make_batch({0, 1});
  EXPECT_EQ(b.input_ids.to_ints(), (std::vector<int32_t>{10, 11, 12, 20, 21, 30}));
  EXPECT_EQ(b.targets.to_ints(), (std::vector<int32_t>{11, 12, 3, 21, 3, 3}));
  EXPECT_EQ(b.segments, (std::vector<int32_t>{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(b.positions.to_ints(), (std::vector<int32_t>{0, 1, 2, 0, 1, 0}));
  EXPECT_EQ(b.tokens, 6);
  const data::LmHostBatch padded = batcher.make_batch({1, 3});  // 3 inputs each
  EXPECT_EQ(padded.segments, (std::vector<int32_t>{0, 0, 1, 0, 0, 0}));
  // Without an end-of-text token (bytes) a one-token line has no pair.
  data::LmBlocks bytes(corpus, 4, -1, false, "", data::LmPacking::Documents);
  EXPECT_EQ(bytes.documents(), 3);  // 10 11 12; 20 21 3; 40..46
  EXPECT_EQ(bytes.target_tokens(), 2 + 2 + 6);
  auto lonely = test::write_lm_corpus(dir, {{7}, {8}});
  EXPECT_THROW(data::LmBlocks(lonely, 4, -1, false, "", data::LmPacking::Documents), Error);
}

// data.document_separator blank_line: a document is a paragraph, the
// sentences between blank ones end to end with their end-of-text tokens,
// split into pieces that read on across its sentences; a sentence of only
// blank tokens (the byte tokenizer's whitespace and line break) separates.
TEST(LmPackingData, ParagraphsAreDocuments) {
  test::TempDir dir;
  // eos 3, blank token 9. Paragraphs: [10 11 3 12 3] (4 pairs), then after
  // the empty sentence [20 3 21 22 3 23 3] (6 pairs: split 4 + 2), then
  // after a blank-token sentence [30 3] (1 pair).
  auto corpus =
      test::write_lm_corpus(dir, {{10, 11}, {12}, {}, {20}, {21, 22}, {23}, {9, 9}, {30}, {9}});
  data::TextDocuments paragraphs;
  paragraphs.paragraphs = true;
  paragraphs.blank_tokens = {9};
  data::LmBlocks blocks(corpus, 4, 3, false, "", data::LmPacking::Documents, paragraphs);
  EXPECT_TRUE(blocks.paragraphs());
  EXPECT_EQ(blocks.documents(), 3);
  EXPECT_EQ(blocks.split_documents(), 1);
  EXPECT_EQ(blocks.pieces(), 4);
  EXPECT_EQ(blocks.target_tokens(), 4 + 6 + 1);
  ASSERT_EQ(blocks.size(), 3);  // [P1] [P2a] [P2b P3]
  std::vector<int32_t> in, tgt, pos, seg;
  blocks.pairs_into(0, in, tgt, pos, seg);
  EXPECT_EQ(in, (std::vector<int32_t>{10, 11, 3, 12}));
  EXPECT_EQ(tgt, (std::vector<int32_t>{11, 3, 12, 3}));
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(seg, (std::vector<int32_t>{0, 0, 0, 0}));
  blocks.pairs_into(1, in, tgt, pos, seg);
  EXPECT_EQ(in, (std::vector<int32_t>{20, 3, 21, 22}));
  EXPECT_EQ(tgt, (std::vector<int32_t>{3, 21, 22, 3}));
  blocks.pairs_into(2, in, tgt, pos, seg);  // the second piece starts inside sentence 4
  EXPECT_EQ(in, (std::vector<int32_t>{3, 23, 30}));
  EXPECT_EQ(tgt, (std::vector<int32_t>{23, 3, 3}));
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(seg, (std::vector<int32_t>{0, 0, 1}));
  // Lines instead: the blank-token sentences are documents of their own.
  data::LmBlocks lines(corpus, 4, 3, false, "", data::LmPacking::Documents);
  EXPECT_FALSE(lines.paragraphs());
  EXPECT_EQ(lines.documents(), 8);
  // Bytes (no end-of-text token; each line holds its own break, 9 here): a
  // paragraph is its lines' tokens end to end.
  auto bytes_corpus =
      test::write_lm_corpus(dir, {{10, 9}, {11, 12, 9}, {9}, {20, 21, 9}, {9}, {9}});
  data::LmBlocks bytes(bytes_corpus, 8, -1, false, "", data::LmPacking::Documents, paragraphs);
  EXPECT_EQ(bytes.documents(), 2);
  bytes.pairs_into(0, in, tgt, pos, seg);
  EXPECT_EQ(in, (std::vector<int32_t>{10, 9, 11, 12, 20, 21}));
  EXPECT_EQ(tgt, (std::vector<int32_t>{9, 11, 12, 9, 21, 9}));
  EXPECT_EQ(seg, (std::vector<int32_t>{0, 0, 0, 0, 1, 1}));
  auto blank_only = test::write_lm_corpus(dir, {{9}, {}, {9, 9}});
  EXPECT_THROW(data::LmBlocks(blank_only, 4, 3, false, "", data::LmPacking::Documents, paragraphs),
               Error);
}

TEST(LmPackingData, LayoutMapsEveryTokenOnce) {
  // Row 0: documents of 3 and 1 tokens; row 1: 2 tokens, then 2 of padding.
  const nn::DocLayout l =
      nn::DocLayout::from_segments({0, 0, 0, 1, 0, 0, -1, -1}, 2, 4, Device::cpu());
  // Padding is no document: its tokens read the zero row N*L = 9.
  EXPECT_EQ(l.N, 3);
  EXPECT_EQ(l.L, 3);
  EXPECT_EQ(l.key_lengths.to_ints(), (std::vector<int32_t>{3, 1, 2}));
  EXPECT_EQ(l.gather.to_ints(), (std::vector<int32_t>{0, 1, 2, 3, 3, 3, 4, 5, 4}));
  EXPECT_EQ(l.gather_grad.to_ints(), (std::vector<int32_t>{0, 1, 2, 3, 8, 8, 4, 5, 8}));
  EXPECT_EQ(l.scatter.to_ints(), (std::vector<int32_t>{0, 1, 2, 3, 6, 7, 9, 9}));
  EXPECT_THROW(nn::DocLayout::from_segments({-1, -1}, 1, 2, Device::cpu()), Error);
}

// ---- the model ---------------------------------------------------------------

models::DecoderLmOptions tiny_lm(nn::PositionKind position, const Core& core) {
  models::DecoderLmOptions o;
  o.vocab_size = kVocab;
  o.num_layers = 2;
  o.layer.d_model = 16;
  o.layer.n_heads = 2;
  o.layer.d_ff = 32;
  o.layer.activation = ops::Activation::GELU;
  o.layer.dropout = 0.0f;
  o.layer.attention_dropout = 0.0f;
  o.layer.impl = core.impl;
  o.layer.attention_kind = core.kind;
  o.layer.linear_attention.feature_map = core.map;
  o.layer.linear_attention.features = 8;
  o.position = position;
  o.max_positions = 16;
  return o;
}

struct Model {
  nn::ParameterStore store;
  std::unique_ptr<models::DecoderLM> model;
  Model(nn::PositionKind position, const Core& core) {
    model = std::make_unique<models::DecoderLM>(tiny_lm(position, core), store);
    store.allocate(Device::cpu());
    store.initialize(4);
    test::jitter(store, 5, 0.1f);
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
      if (k->bert_encoder_only) continue;  // TUPE, DeBERTa: the BERT encoder's alone
      const bool linear = core.kind != nn::AttentionKind::Softmax;
      // Linear attention carries no score bias (the config refuses them).
      if (linear && (k->alibi || k->xl_terms || k->relative_bias)) continue;
      // The flash twin carries no dense score bias (Transformer-XL's).
      if (core.impl == nn::AttentionImpl::Rotor && k->xl_terms) continue;
      cases.push_back({k, core, std::string(core.name) + "_" + std::string(k->name)});
    }
  return cases;
}

class LmPacking : public ::testing::TestWithParam<PackCase> {};

// The packed batch against each document alone: logits (the forward), the
// loss sums, and the gradient of the summed loss.
TEST_P(LmPacking, PackedBatchEqualsDocumentsOneByOne) {
  const PackCase& pc = GetParam();
  Model s(pc.position, pc.core);
  const test::PackedDocs p;
  nn::Context infer;
  const std::vector<float> packed = s.model->forward_logits(p.batch(), infer).to_floats();
  for (size_t i = 0; i < p.docs.size(); ++i) {
    const std::vector<float> alone = s.model->forward_logits(p.alone(i), infer).to_floats();
    const size_t off = p.logit_offset(i);
    const std::vector<float> part(packed.begin() + static_cast<int64_t>(off),
                                  packed.begin() + static_cast<int64_t>(off + alone.size()));
    EXPECT_LT(max_diff(part, alone), 2e-5) << "document " << i;
  }
  nn::Context ctx;
  ctx.training = true;
  ctx.seed = 3;
  s.store.zero_grad();
  const models::LmSums whole = s.model->forward_loss(p.batch(), ctx);
  s.model->backward(1.0f);
  const std::vector<float> g_packed = s.store.grads().to_floats();
  s.store.zero_grad();
  double loss = 0;
  for (size_t i = 0; i < p.docs.size(); ++i) {
    loss += s.model->forward_loss(p.alone(i), ctx).loss;
    s.model->backward(1.0f);  // gradients add up over the documents
  }
  const std::vector<float> g_alone = s.store.grads().to_floats();
  EXPECT_NEAR(whole.loss, loss, 1e-4 * std::abs(loss));
  double scale = 0;
  for (float g : g_alone) scale = std::max(scale, std::abs(double(g)));
  EXPECT_LT(max_diff(g_packed, g_alone), 1e-4 * std::max(scale, 1.0)) << "gradients";
}

// A token of another document leaves a document's logits bitwise equal,
// and the same document elsewhere in a block gives the same logits.
TEST_P(LmPacking, DocumentsDoNotSeeEachOther) {
  const PackCase& pc = GetParam();
  Model s(pc.position, pc.core);
  test::PackedDocs p;
  nn::Context infer;
  const std::vector<float> base = s.model->forward_logits(p.batch(), infer).to_floats();
  test::PackedDocs q = p;
  q.docs[1][0] = 33;  // the one-token document between the first and the third
  q.docs[0][3] = 35;
  const std::vector<float> changed = s.model->forward_logits(q.batch(), infer).to_floats();
  const size_t third = static_cast<size_t>(5 * kVocab), fourth = static_cast<size_t>(8 * kVocab);
  for (size_t j = third; j < third + 3 * kVocab; ++j)
    ASSERT_EQ(changed[j], base[j]) << "the third document saw another";
  for (size_t j = fourth; j < fourth + 5 * kVocab; ++j)
    ASSERT_EQ(changed[j], base[j]) << "another row's document saw this one";
  // The third document moved to the front of row 0.
  test::PackedDocs r = p;
  r.start = {3, 7, 0, 0};
  const std::vector<float> moved = s.model->forward_logits(r.batch(), infer).to_floats();
  const std::vector<float> a(base.begin() + third, base.begin() + third + 3 * kVocab),
      b(moved.begin(), moved.begin() + 3 * kVocab);
  EXPECT_LT(max_diff(a, b), 2e-5) << "the document's logits depend on where it sits";
}

INSTANTIATE_TEST_SUITE_P(Cores, LmPacking, ::testing::ValuesIn(pack_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rotor
