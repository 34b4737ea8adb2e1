// Gradient readiness (nn/context.h): the models' backward reports
// ranges of the flat gradient buffer to nn::Context::grad_ready once they are
// final. What bucketed all-reduce relies on, checked for the translation
// model and BERT/RoFormer with the local backend:
//   - every parameter is reported exactly once per backward (the ranges tile
//     [0, numel), each starting at a parameter), in descending order;
//   - a reported range is final: its gradients when reported equal those at
//     the end of the backward (the tied embedding matrix included);
//   - a backward without a hook reports nothing, and the hook does not outlive
//     its backward;
//   - fed to parallel::GradientBuckets (LocalCommunicator), buckets launch during
//     the backward, not all at finish().
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/bert.h"
#include "models/transformer.h"
#include "nn/context.h"
#include "parallel/communicator.h"
#include "parallel/data_parallel.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using Range = std::pair<int64_t, int64_t>;

// Records every report with the gradients of its range at that moment, and
// (when given buckets) forwards it and counts the buckets launched so far.
struct Recorder {
  nn::ParameterStore* store = nullptr;
  parallel::GradientBuckets* buckets = nullptr;
  std::vector<Range> ranges;
  std::vector<std::vector<float>> snapshots;
  std::vector<int> launched_after;  // buckets launched after each report
  nn::GradReadyHook hook() {
    return [this](int64_t begin, int64_t end) {
      ranges.emplace_back(begin, end);
      snapshots.push_back(store->grads().narrow(begin, end - begin).to_floats());
      if (buckets) {
        buckets->range_ready(begin, end);
        launched_after.push_back(buckets->launched());
      }
    };
  }
};

// Exactly once, whole parameters, descending, final.
void check_reports(const nn::ParameterStore& store, const Recorder& r) {
  const int64_t numel = store.numel();
  ASSERT_FALSE(r.ranges.empty());
  std::vector<int> cover(static_cast<size_t>(numel), 0);
  for (const auto& [b, e] : r.ranges) {
    ASSERT_TRUE(0 <= b && b < e && e <= numel) << b << " " << e;
    for (int64_t i = b; i < e; ++i) ++cover[static_cast<size_t>(i)];
  }
  for (int64_t i = 0; i < numel; ++i)
    ASSERT_EQ(cover[static_cast<size_t>(i)], 1) << "element " << i;
  // Descending: each range ends where the previous one began.
  EXPECT_EQ(r.ranges.front().second, numel);
  for (size_t k = 1; k < r.ranges.size(); ++k) EXPECT_EQ(r.ranges[k].second, r.ranges[k - 1].first);
  // Ranges start at parameters (none is split between two reports).
  std::vector<int64_t> offsets;
  for (const auto& p : store.parameters()) offsets.push_back(p->offset);
  for (const auto& [b, e] : r.ranges)
    EXPECT_NE(std::find(offsets.begin(), offsets.end(), b), offsets.end()) << "range at " << b;
  // Final when reported.
  const std::vector<float> final_grads = store.grads().to_floats();
  for (size_t k = 0; k < r.ranges.size(); ++k) {
    const auto [b, e] = r.ranges[k];
    for (int64_t i = b; i < e; ++i)
      ASSERT_EQ(r.snapshots[k][static_cast<size_t>(i - b)], final_grads[static_cast<size_t>(i)])
          << "element " << i << " changed after its range [" << b << ", " << e << ") was reported";
  }
}

// ---- the translation model ------------------------------------------------------

constexpr int kPad = 0, kBos = 2, kEos = 3;

models::TransformerOptions tiny_transformer(nn::PositionKind position, bool post) {
  models::TransformerOptions c;
  c.vocab_size = 24;
  c.pad_id = kPad;
  c.encoder_layers = 2;
  c.decoder_layers = 3;
  c.layer.d_model = 16;
  c.layer.n_heads = 2;
  c.layer.d_ff = 32;
  c.layer.dropout = 0.1f;
  c.layer.post_norm = post;
  c.position = position;
  c.max_positions = 32;
  return c;
}

Tensor rows(const std::vector<std::vector<int32_t>>& r, int64_t width) {
  std::vector<int32_t> flat(r.size() * static_cast<size_t>(width), kPad);
  for (size_t b = 0; b < r.size(); ++b)
    for (size_t j = 0; j < r[b].size(); ++j) flat[b * static_cast<size_t>(width) + j] = r[b][j];
  return Tensor::from_ints(flat, {static_cast<int64_t>(r.size()), width});
}

models::TranslationBatch translation_batch(int variant) {
  models::TranslationBatch b;
  const int32_t v = static_cast<int32_t>(variant);
  b.src = rows({{5, 6, 7, 8, 9}, {10 + v, 4}, {12, 13, 14}}, 5);
  b.src_lengths = Tensor::from_ints({5, 2, 3}, {3});
  b.tgt_in = rows({{kBos, 7, 8, 9}, {kBos, 4 + v}, {kBos, 14, 15}}, 4);
  b.tgt_out = rows({{7, 8, 9, kEos}, {4 + v, kEos}, {14, 15, kEos}}, 4);
  b.tgt_tokens = 9;
  b.src_tokens = 10;
  return b;
}

struct TransformerCase {
  nn::PositionKind position;
  bool post;
  const char* name;
};

class TransformerGradReady : public ::testing::TestWithParam<TransformerCase> {};

TEST_P(TransformerGradReady, EveryParameterOnceAndFinal) {
  const TransformerCase tc = GetParam();
  nn::ParameterStore store;
  models::EncoderDecoder model(tiny_transformer(tc.position, tc.post), store);
  store.allocate(Device::cpu());
  store.initialize(5);
  nn::Context ctx;
  ctx.training = true;
  ctx.seed = 7;
  // Micro-batch 1 of an update: no hook; gradients accumulate.
  model.forward_loss(translation_batch(0), 0.1f, ctx);
  model.backward(1.0f);
  // Micro-batch 2, the last: reported, on top of the accumulated gradients.
  parallel::LocalCommunicator local;
  parallel::GradientBuckets buckets(store.grads(), parallel::backward_order_offsets(store),
                                    1.0 / 1024,
                                    local);  // ~1 KiB: many buckets
  ASSERT_GT(buckets.bounds().size(), 8u);
  Recorder rec;
  for (int update = 0; update < 2; ++update) {
    rec = Recorder{};
    rec.store = &store;
    rec.buckets = &buckets;
    ctx.micro_step = 1 + static_cast<uint64_t>(update);
    ctx.grad_ready = rec.hook();
    model.forward_loss(translation_batch(1 + update), 0.1f, ctx);
    ctx.grad_ready = nullptr;
    model.backward(1.0f);
    check_reports(store, rec);
    // One report per layer at least: embedding, 2 + 3 layers (+ norms, positions).
    EXPECT_GE(rec.ranges.size(), 6u);
    // Buckets started during backward: several before the last report (the
    // embedding matrix, at offset 0, is final last).
    ASSERT_EQ(rec.launched_after.size(), rec.ranges.size());
    EXPECT_GT(rec.launched_after[rec.launched_after.size() - 2], 1);
    EXPECT_LT(rec.launched_after.front(), static_cast<int>(buckets.bounds().size()));
    buckets.finish();
    EXPECT_EQ(buckets.launched_before_finish(), static_cast<int>(buckets.bounds().size()));
    EXPECT_TRUE(buckets.reported_last_update());
  }
  // A micro-batch without the hook reports nothing (the previous listener is gone).
  const size_t reports = rec.ranges.size();
  model.forward_loss(translation_batch(3), 0.1f, ctx);
  model.backward(1.0f);
  EXPECT_EQ(rec.ranges.size(), reports);
  buckets.finish();
  EXPECT_FALSE(buckets.reported_last_update());
  EXPECT_EQ(buckets.launched_before_finish(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Models, TransformerGradReady,
    ::testing::Values(TransformerCase{nn::PositionKind::Rope, true, "rope_post"},
                      TransformerCase{nn::PositionKind::Rope, false, "rope_pre"},
                      TransformerCase{nn::PositionKind::Learned, true, "learned_post"},
                      TransformerCase{nn::PositionKind::Learned, false, "learned_pre"},
                      TransformerCase{nn::PositionKind::Sinusoidal, true, "sinusoidal_post"}),
    [](const auto& info) { return std::string(info.param.name); });

// ---- BERT / RoFormer ------------------------------------------------------------

models::BertOptions tiny_bert(nn::PositionKind position, int64_t type_vocab) {
  models::BertOptions c;
  c.vocab_size = 40;
  c.num_layers = 3;
  c.layer.d_model = 16;
  c.layer.n_heads = 2;
  c.layer.d_ff = 32;
  c.layer.dropout = 0.1f;
  c.layer.attention_dropout = 0.1f;
  c.position = position;
  c.max_positions = 16;
  c.type_vocab_size = type_vocab;
  return c;
}

models::MlmBatch mlm_batch(bool masked) {
  models::MlmBatch b;
  const int64_t B = 2, T = 7;
  b.input_ids = Tensor::from_ints({5, 12, 4, 30, 17, 4, 6, 5, 22, 4, 9, 6, 0, 0}, {B, T});
  b.token_type_ids = Tensor::from_ints({0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0}, {B, T});
  b.lengths = Tensor::from_ints({7, 5}, {B});
  b.tokens = 12;
  if (masked) {
    b.masked_positions = Tensor::from_ints({2, 3, 5, 9, 10}, {5});
    b.masked_targets = Tensor::from_ints({13, 30, 25, 39, 9}, {5});
    b.masked_tokens = 5;
  }
  return b;
}

struct BertCase {
  nn::PositionKind position;
  int64_t type_vocab;
  const char* name;
};

class BertGradReady : public ::testing::TestWithParam<BertCase> {};

TEST_P(BertGradReady, EveryParameterOnceAndFinal) {
  const BertCase bc = GetParam();
  nn::ParameterStore store;
  models::BertForMaskedLM model(tiny_bert(bc.position, bc.type_vocab), store);
  store.allocate(Device::cpu());
  store.initialize(3);
  nn::Context ctx;
  ctx.training = true;
  ctx.seed = 2;
  model.forward_loss(mlm_batch(true), ctx);  // an earlier micro-batch, no hook
  model.backward(1.0f);
  parallel::LocalCommunicator local;
  parallel::GradientBuckets buckets(store.grads(), parallel::backward_order_offsets(store),
                                    1.0 / 1024, local);
  // A batch with masked tokens, then one without (the head is reported all the same).
  for (bool masked : {true, false}) {
    SCOPED_TRACE(masked ? "masked" : "nothing masked");
    Recorder rec;
    rec.store = &store;
    rec.buckets = &buckets;
    ctx.micro_step += 1;
    ctx.grad_ready = rec.hook();
    model.forward_loss(mlm_batch(masked), ctx);
    ctx.grad_ready = nullptr;
    model.backward(1.0f);
    check_reports(store, rec);
    EXPECT_GE(rec.ranges.size(), 5u);  // head, 3 layers, embeddings
    EXPECT_GT(rec.launched_after[rec.launched_after.size() - 2], 1);
    buckets.finish();
    EXPECT_EQ(buckets.launched_before_finish(), static_cast<int>(buckets.bounds().size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BertGradReady,
                         ::testing::Values(BertCase{nn::PositionKind::Learned, 2, "bert_learned"},
                                           BertCase{nn::PositionKind::Rope, 2, "roformer"},
                                           BertCase{nn::PositionKind::Sinusoidal, 0,
                                                    "sinusoidal_no_types"}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- the fallback ---------------------------------------------------------------

// A range over non-contiguous parameters is reported one parameter at a time.
TEST(GradReady, ReportsPerParameterWhenNotContiguous) {
  nn::ParameterStore store;
  store.add("a", {3}, nn::Init::zeros());
  store.add("b", {5}, nn::Init::zeros());
  store.add("c", {2}, nn::Init::zeros());
  store.allocate(Device::cpu());
  std::vector<Range> got;
  nn::Context ctx;
  ctx.grad_ready = [&](int64_t b, int64_t e) { got.emplace_back(b, e); };
  ctx.report_grads_ready(store, nn::ParamRange{0, 3});
  ASSERT_EQ(got, (std::vector<Range>{{0, 10}}));
  got.clear();
  ctx.report_grads_ready(store, nn::ParamRange{1, 1});  // empty: nothing
  EXPECT_TRUE(got.empty());
  // A layout with a gap (as padding for alignment would make): per parameter, last first.
  store.parameters()[2]->offset = 9;
  store.parameters()[1]->shape = {4};
  ctx.report_grads_ready(store, nn::ParamRange{0, 3});
  EXPECT_EQ(got, (std::vector<Range>{{9, 11}, {3, 7}, {0, 3}}));
}

}  // namespace
}  // namespace rotor
