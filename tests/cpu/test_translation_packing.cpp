// Variable-length translation batches (data.packing documents;
// tasks::to_model_batch, models::TranslationBatch, nn::DocLayout with
// cross-attention's two layouts): a batch's sentence pairs laid end to end,
// one row per side without padding, against each pair run alone and against
// the padded batch -- logits of every target token, the label-smoothed loss
// and every gradient -- under every position encoding the encoder-decoder
// takes and the CPU cores (the materialized reference, the flash twin,
// linear attention with elu1 and FAVOR+ in self-attention); a token of one
// pair never changes another pair's outputs (bitwise), on either side; and
// the batch layout itself (cumulative lengths as segment ids).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/transformer.h"
#include "nn/position.h"
#include "support/model_gradcheck.h"
#include "support/packed_lm.h"
#include "support/test_util.h"
#include "tasks/translation/data.h"

namespace rotor {
namespace {

using test::Core;
using test::kCores;
using test::max_diff;

constexpr int64_t kVocab = 40;

models::TransformerOptions tiny_translator(nn::PositionKind position, const Core& core) {
  models::TransformerOptions o;
  o.vocab_size = kVocab;
  o.pad_id = 0;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.layer.d_model = 16;
  o.layer.n_heads = 2;
  o.layer.d_ff = 32;
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

using Model = test::JitteredModel<models::EncoderDecoder>;

using Pairs = test::TranslationPairs;

TEST(TranslationVarlen, BatchLaysPairsEndToEnd) {
  const Pairs p;
  const data::Batch b = p.all();
  const models::TranslationBatch padded = tasks::to_model_batch(b, Device::cpu());
  EXPECT_FALSE(padded.variable_length());
  EXPECT_EQ(padded.src.shape(), (Shape{3, 7}));
  const models::TranslationBatch v = tasks::to_model_batch(b, Device::cpu(), true);
  ASSERT_TRUE(v.variable_length());
  EXPECT_FALSE(v.src_lengths.defined());
  EXPECT_EQ(v.src.shape(), (Shape{1, 13}));
  EXPECT_EQ(v.tgt_in.shape(), (Shape{1, 13}));
  EXPECT_EQ(v.src.to_ints(), (std::vector<int32_t>{5, 12, 3, 30, 2, 2, 7, 9, 11, 13, 15, 17, 2}));
  EXPECT_EQ(v.src_documents, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(v.tgt_in.to_ints(), (std::vector<int32_t>{1, 8, 9, 21, 1, 4, 6, 8, 10, 33, 35, 1, 19}));
  EXPECT_EQ(v.tgt_out.to_ints(),
            (std::vector<int32_t>{8, 9, 21, 2, 4, 6, 8, 10, 33, 35, 2, 19, 2}));
  EXPECT_EQ(v.tgt_documents, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2}));
  EXPECT_EQ(v.tgt_tokens, 13);
  EXPECT_EQ(v.src_tokens, 13);
  // The layouts the model builds: cumulative lengths 0 5 6 13 on the source side.
  const nn::DocLayout l = nn::DocLayout::from_segments(v.src_documents, 1, 13, Device::cpu());
  EXPECT_EQ(l.N, 3);
  EXPECT_EQ(l.L, 7);
  EXPECT_EQ(l.key_lengths.to_ints(), (std::vector<int32_t>{5, 1, 7}));
  EXPECT_EQ(l.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 0, 1, 2, 3, 4, 5, 6}));
}

struct VarlenCase {
  nn::PositionKind position;
  Core core;
  std::string name;
  friend void PrintTo(const VarlenCase& c, std::ostream* os) { *os << c.name; }
};

std::vector<VarlenCase> varlen_cases() {
  std::vector<VarlenCase> cases;
  for (const Core& core : kCores)
    for (const nn::PositionKind& k : nn::position_kinds()) {
      if (k->bert_encoder_only) continue;  // TUPE, DeBERTa: BERT encoders only
      const bool linear = core.kind != nn::AttentionKind::Softmax;
      // Linear attention carries no score bias (the config refuses them).
      if (linear && (k->alibi || k->xl_terms || k->relative_bias)) continue;
      // The flash twin carries no dense score bias (Transformer-XL's).
      if (core.impl == nn::AttentionImpl::Rotor && k->xl_terms) continue;
      cases.push_back({k, core, std::string(core.name) + "_" + std::string(k->name)});
    }
  return cases;
}

class TranslationPacking : public ::testing::TestWithParam<VarlenCase> {};

// The variable-length batch against each pair alone and against the padded
// batch: every target token's logits, the loss sums and the gradient of the
// summed, label-smoothed loss.
TEST_P(TranslationPacking, VariableLengthEqualsPairsOneByOne) {
  const VarlenCase& vc = GetParam();
  Model s(tiny_translator(vc.position, vc.core));
  const Pairs p;
  const models::TranslationBatch varlen = tasks::to_model_batch(p.all(), Device::cpu(), true);
  nn::Context infer;
  const std::vector<float> all = s.model->forward_logits(varlen, infer).to_floats();
  ASSERT_EQ(all.size(), static_cast<size_t>(13 * kVocab));
  for (size_t i = 0; i < p.src.size(); ++i) {
    const std::vector<float> alone =
        s.model->forward_logits(tasks::to_model_batch(p.batch({i}), Device::cpu()), infer)
            .to_floats();
    const size_t off = p.offset(i);
    const std::vector<float> part(all.begin() + static_cast<int64_t>(off),
                                  all.begin() + static_cast<int64_t>(off + alone.size()));
    EXPECT_LT(max_diff(part, alone), 2e-5) << "pair " << i;
  }
  nn::Context ctx;
  ctx.training = true;
  ctx.seed = 3;
  const float smoothing = 0.1f;
  const auto trained = [&](const models::TranslationBatch& b) {
    s.store.zero_grad();
    const models::LossSums sums = s.model->forward_loss(b, smoothing, ctx);
    s.model->backward(1.0f);
    return std::make_pair(sums, s.store.grads().to_floats());
  };
  const auto [whole, g_varlen] = trained(varlen);
  const auto [padded, g_padded] = trained(tasks::to_model_batch(p.all(), Device::cpu()));
  s.store.zero_grad();
  double loss = 0, nll = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < p.src.size(); ++i) {
    const models::LossSums one =
        s.model->forward_loss(tasks::to_model_batch(p.batch({i}), Device::cpu()), smoothing, ctx);
    loss += one.loss;
    nll += one.nll;
    tokens += one.tokens;
    s.model->backward(1.0f);  // gradients add up over the pairs
  }
  const std::vector<float> g_alone = s.store.grads().to_floats();
  EXPECT_EQ(whole.tokens, tokens);
  EXPECT_NEAR(whole.loss, loss, 1e-4 * std::abs(loss));
  EXPECT_NEAR(whole.nll, nll, 1e-4 * std::abs(nll));
  EXPECT_NEAR(padded.loss, loss, 1e-4 * std::abs(loss));
  EXPECT_LT(test::relative_grad_diff(g_varlen, g_alone), 1e-4) << "gradients";
  EXPECT_LT(test::relative_grad_diff(g_varlen, g_padded), 1e-4) << "against padded";
}

// A token of another pair, source or target, leaves a pair's logits bitwise
// equal, before it and after it.
TEST_P(TranslationPacking, PairsDoNotSeeEachOther) {
  const VarlenCase& vc = GetParam();
  Model s(tiny_translator(vc.position, vc.core));
  const Pairs p;
  nn::Context infer;
  const auto logits = [&](const Pairs& q) {
    return s.model->forward_logits(tasks::to_model_batch(q.all(), Device::cpu(), true), infer)
        .to_floats();
  };
  const std::vector<float> base = logits(p);
  for (int side = 0; side < 2; ++side) {
    Pairs q = p;
    if (side == 0)
      q.src[1][0] = 33;  // the one-token source between the first and the third
    else
      q.tgt[1][2] = 11;  // a target token of the middle pair
    const std::vector<float> changed = logits(q);
    ASSERT_EQ(changed.size(), base.size());
    for (size_t i : {size_t{0}, size_t{2}})
      for (size_t j = p.offset(i); j < p.offset(i) + (p.tgt[i].size() + 1) * kVocab; ++j)
        ASSERT_EQ(changed[j], base[j])
            << "pair " << i << " saw pair 1's " << (side ? "target" : "source");
    bool moved = false;  // and the changed pair's own logits do change
    for (size_t j = p.offset(1); j < p.offset(2); ++j) moved |= changed[j] != base[j];
    EXPECT_TRUE(moved) << "the changed pair's logits did not change";
  }
}

// Activation checkpointing recomputes each layer from its input with the
// same layouts (kept by the layers until the backward): the gradients of a
// variable-length batch are bitwise unchanged.
TEST(TranslationVarlen, CheckpointingKeepsTheGradients) {
  const Pairs p;
  std::vector<float> grads[2];
  for (int checkpoint = 0; checkpoint < 2; ++checkpoint) {
    models::TransformerOptions o = tiny_translator(*nn::position_kind("rope"), kCores[0]);
    o.layer.checkpoint = checkpoint == 1;
    o.layer.dropout = 0.1f;  // the recompute redraws the same masks
    Model s(o);
    nn::Context ctx;
    ctx.training = true;
    ctx.seed = 3;
    s.store.zero_grad();
    s.model->forward_loss(tasks::to_model_batch(p.all(), Device::cpu(), true), 0.1f, ctx);
    s.model->backward(1.0f);
    grads[checkpoint] = s.store.grads().to_floats();
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  EXPECT_EQ(grads[0], grads[1]);
}

INSTANTIATE_TEST_SUITE_P(Cores, TranslationPacking, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rotor
