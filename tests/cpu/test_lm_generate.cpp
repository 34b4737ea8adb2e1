// Incremental decoding of the decoder-only LM (models/decoder_lm.h: prefill,
// decode_step through the key/value cache) and generation (decode/generate.h):
// at every step the cached logits equal those of a full forward of the
// sequence so far, under every position encoding, pre- and post-LN, for
// batches whose rows have different lengths (and rows leaving the batch);
// greedy generation is the argmax of full forwards; sampling is seeded
// (same seed, same output; another seed, another), independent of the
// batch a prompt shares, and keeps to top-k and top-p; a position table
// ends a continuation at its last row; linear attention has no cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "decode/generate.h"
#include "models/decoder_lm.h"
#include "nn/kinds.h"
#include "nn/position.h"
#include "support/model_gradcheck.h"
#include "support/test_util.h"

namespace rotor {
namespace {

constexpr int64_t kVocab = 40;

models::DecoderLmOptions tiny_lm(nn::PositionKind position, bool pre_ln = true,
                                 int64_t max_positions = 24) {
  models::DecoderLmOptions o;
  o.vocab_size = kVocab;
  o.num_layers = 2;
  o.layer.d_model = 16;
  o.layer.n_heads = 2;
  o.layer.d_ff = 32;
  o.layer.activation = ops::Activation::GELU;
  o.layer.dropout = 0.1f;  // off in inference
  o.layer.post_norm = !pre_ln;
  o.position = position;
  o.max_positions = max_positions;
  return o;
}

// A model with random weights (initialized, then jittered so that biases
// and norms are not trivial).
struct TinyModel {
  explicit TinyModel(const models::DecoderLmOptions& o, uint64_t seed = 1) : model(o, store) {
    store.allocate(Device::cpu());
    store.initialize(seed);
    test::jitter(store, seed + 1, 0.2f);
  }
  nn::ParameterStore store;
  models::DecoderLM model;
};

// The logits of each row's last token under a full forward of `rows`
// (right padded into one batch) -> [rows, V].
std::vector<std::vector<float>> full_last_logits(models::DecoderLM& m,
                                                 const std::vector<std::vector<int32_t>>& rows) {
  const int64_t B = static_cast<int64_t>(rows.size());
  int64_t T = 1;
  for (const auto& r : rows) T = std::max<int64_t>(T, static_cast<int64_t>(r.size()));
  std::vector<int32_t> flat(static_cast<size_t>(B * T), 0);
  for (int64_t b = 0; b < B; ++b) std::copy(rows[b].begin(), rows[b].end(), flat.begin() + b * T);
  nn::Context ctx;
  const std::vector<float> lg = m.forward_logits(Tensor::from_ints(flat, {B, T}), ctx).to_floats();
  std::vector<std::vector<float>> out;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t t = static_cast<int64_t>(rows[b].size()) - 1;
    const float* p = lg.data() + (b * T + t) * kVocab;
    out.emplace_back(p, p + kVocab);
  }
  return out;
}

// Cached logits [B, V] against the full forward's, within 1e-5 of the row's
// largest logit (fp32 round-off of different but equivalent sums).
void expect_close(const std::vector<float>& cached, const std::vector<std::vector<float>>& full,
                  const std::string& where) {
  ASSERT_EQ(cached.size(), full.size() * kVocab) << where;
  for (size_t b = 0; b < full.size(); ++b) {
    float scale = 1.0f;
    for (float v : full[b]) scale = std::max(scale, std::abs(v));
    for (int64_t v = 0; v < kVocab; ++v)
      ASSERT_NEAR(cached[b * kVocab + v], full[b][v], 1e-5f * scale)
          << where << ", row " << b << ", token " << v;
  }
}

struct PosCase {
  nn::PositionKind position;
  bool pre_ln;
  const char* name;
  bool llama = false;  // Llama's layer: RMSNorm, SwiGLU, no biases, 2 key/value heads of 4
  friend void PrintTo(const PosCase& c, std::ostream* os) { *os << c.name; }
};

models::DecoderLmOptions llama_lm() {
  models::DecoderLmOptions o = tiny_lm(nn::PositionKind::Rope);
  o.layer.n_heads = 4;
  o.layer.kv_heads = 2;
  o.layer.activation = ops::Activation::SiLU;
  o.layer.gated_ffn = true;
  o.layer.bias = false;
  o.layer.rms_norm = true;
  return o;
}

std::vector<PosCase> pos_cases() {
  std::vector<PosCase> cases;
  for (const nn::PositionKind& k : nn::position_kinds())
    if (!k->bert_encoder_only)  // TUPE, DeBERTa: the BERT encoder's alone
      cases.push_back({k, true, k->name.data()});
  cases.push_back({nn::PositionKind::Rope, false, "rope_post_ln"});
  cases.push_back({nn::PositionKind::Learned, false, "learned_post_ln"});
  cases.push_back({nn::PositionKind::Rope, true, "rope_llama", true});
  return cases;
}

class CachedDecoding : public ::testing::TestWithParam<PosCase> {};

// Rows of different prompt lengths (the per-row path), then the same rows
// when one has left the batch, and rows of one length (the batched path).
TEST_P(CachedDecoding, EveryStepMatchesTheFullForward) {
  const PosCase pc = GetParam();
  TinyModel tm(pc.llama ? llama_lm() : tiny_lm(pc.position, pc.pre_ln));
  for (const std::vector<std::vector<int32_t>>& prompts :
       {std::vector<std::vector<int32_t>>{
            {3, 17, 9}, {3, 5, 12, 30, 8, 21, 6}, {3}, {3, 4, 4, 39, 11}},
        std::vector<std::vector<int32_t>>{{3, 7, 8, 9}, {3, 10, 11, 12}}}) {
    std::vector<std::vector<int32_t>> seqs = prompts;
    std::vector<int64_t> lengths;
    int64_t T = 0;
    for (const auto& p : prompts) {
      lengths.push_back(static_cast<int64_t>(p.size()));
      T = std::max<int64_t>(T, static_cast<int64_t>(p.size()));
    }
    std::vector<int32_t> flat(static_cast<size_t>(prompts.size() * T), 0);
    for (size_t b = 0; b < prompts.size(); ++b)
      std::copy(prompts[b].begin(), prompts[b].end(), flat.begin() + static_cast<int64_t>(b) * T);
    nn::Context ctx;
    models::LmDecodeState state;
    const int64_t B = static_cast<int64_t>(prompts.size());
    std::vector<float> lg =
        tm.model.prefill(state, Tensor::from_ints(flat, {B, T}), lengths, 16, ctx).to_floats();
    expect_close(lg, full_last_logits(tm.model, seqs), "prefill");
    std::vector<size_t> live(seqs.size());
    for (size_t i = 0; i < live.size(); ++i) live[i] = i;
    for (int step = 0; step < 8; ++step) {
      if (step == 4 && live.size() > 1) {  // the second row leaves the batch
        std::vector<int32_t> keep;
        std::vector<size_t> rows;
        for (size_t i = 0; i < live.size(); ++i)
          if (i != 1) {
            keep.push_back(static_cast<int32_t>(i));
            rows.push_back(live[i]);
          }
        tm.model.keep_rows(state, keep, ctx);
        live = rows;
      }
      std::vector<int32_t> next;
      std::vector<std::vector<int32_t>> now;
      for (size_t i = 0; i < live.size(); ++i) {
        const int32_t tok = static_cast<int32_t>(4 + (7 * step + 11 * live[i]) % (kVocab - 4));
        seqs[live[i]].push_back(tok);
        next.push_back(tok);
        now.push_back(seqs[live[i]]);
      }
      lg =
          tm.model
              .decode_step(state, Tensor::from_ints(next, {static_cast<int64_t>(next.size())}), ctx)
              .to_floats();
      expect_close(lg, full_last_logits(tm.model, now), "step " + std::to_string(step));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Positions, CachedDecoding, ::testing::ValuesIn(pos_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

decode::GenerateOptions options(int64_t max_new, bool greedy, uint64_t seed = 1) {
  decode::GenerateOptions o;
  o.max_new_tokens = max_new;
  o.sampling.greedy = greedy;
  o.sampling.seed = seed;
  return o;
}

// Greedy generation is, token by token, the argmax of a full forward of the
// sequence so far (pad and bos excluded), ending at eos or max_new_tokens.
TEST(Generate, GreedyIsTheArgmaxOfFullForwards) {
  for (const nn::PositionKind& k : nn::position_kinds()) {
    if (k->bert_encoder_only) continue;  // TUPE, DeBERTa: the BERT encoder's alone
    TinyModel tm(tiny_lm(k), 7);
    const std::vector<std::vector<int32_t>> prompts = {{3, 17, 9}, {3}, {3, 5, 12, 30, 8, 21}};
    const decode::GenerateOptions o = options(10, true);
    nn::Context ctx;
    const auto got = decode::generate(tm.model, prompts, {0, 1, 2}, o, ctx);
    ASSERT_EQ(got.size(), prompts.size());
    for (size_t b = 0; b < prompts.size(); ++b) {
      std::vector<int32_t> seq = prompts[b], want;
      decode::GenerationEnd end = decode::GenerationEnd::MaxTokens;
      for (int i = 0; i < 10; ++i) {
        const std::vector<float> row = full_last_logits(tm.model, {seq})[0];
        int32_t best = -1;
        for (int32_t v = 0; v < kVocab; ++v)
          if (v != o.pad_id && v != o.bos_id && (best < 0 || row[v] > row[best])) best = v;
        if (best == o.eos_id) {
          end = decode::GenerationEnd::Eos;
          break;
        }
        want.push_back(best);
        seq.push_back(best);
      }
      EXPECT_EQ(got[b].tokens, want) << k.name() << " row " << b;
      EXPECT_EQ(got[b].end, end) << k.name() << " row " << b;
    }
  }
}

TEST(Generate, SameSeedSameOutputAnotherSeedAnother) {
  TinyModel tm(tiny_lm(nn::PositionKind::Rope), 3);
  const std::vector<std::vector<int32_t>> prompts = {{3, 17, 9}, {3}, {3, 5, 12, 30}};
  nn::Context ctx;
  decode::GenerateOptions o = options(20, false, 11);
  o.eos_id = -1;  // never emitted: every row runs to max_new_tokens
  auto tokens = [&](const std::vector<decode::Continuation>& c) {
    std::vector<std::vector<int32_t>> t;
    for (const auto& x : c) t.push_back(x.tokens);
    return t;
  };
  const auto a = tokens(decode::generate(tm.model, prompts, {0, 1, 2}, o, ctx));
  const auto b = tokens(decode::generate(tm.model, prompts, {0, 1, 2}, o, ctx));
  EXPECT_EQ(a, b);
  for (const auto& row : a) EXPECT_EQ(row.size(), 20u);
  o.sampling.seed = 12;
  const auto c = tokens(decode::generate(tm.model, prompts, {0, 1, 2}, o, ctx));
  for (size_t r = 0; r < a.size(); ++r) EXPECT_NE(a[r], c[r]) << "row " << r;
  // A prompt's continuation depends on its row id, not on its batch.
  o.sampling.seed = 11;
  const auto alone = tokens(decode::generate(tm.model, {prompts[2]}, {2}, o, ctx));
  EXPECT_EQ(alone[0], a[2]);
  const auto other_id = tokens(decode::generate(tm.model, {prompts[2]}, {5}, o, ctx));
  EXPECT_NE(other_id[0], a[2]);
}

TEST(Generate, ChooseTokenKeepsToTopKAndTopP) {
  // Probabilities 0.1, 0.2, 0.3, 0.4 (ids 0-3); id 4 excluded.
  const std::vector<float> lg = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f),
                                 10.0f};
  const std::vector<int32_t> never = {4};
  decode::SamplingOptions s;
  // Sorted most likely first: 3 [0, .4), 2 [.4, .7), 1 [.7, .9), 0 [.9, 1).
  EXPECT_EQ(decode::choose_token(lg, s, 0.35f, never), 3);
  EXPECT_EQ(decode::choose_token(lg, s, 0.45f, never), 2);
  EXPECT_EQ(decode::choose_token(lg, s, 0.85f, never), 1);
  EXPECT_EQ(decode::choose_token(lg, s, 0.95f, never), 0);
  s.top_k = 2;  // 3 [0, 4/7), 2 [4/7, 1)
  EXPECT_EQ(decode::choose_token(lg, s, 0.55f, never), 3);
  EXPECT_EQ(decode::choose_token(lg, s, 0.60f, never), 2);
  EXPECT_EQ(decode::choose_token(lg, s, 0.999f, never), 2);
  s.top_k = 0;
  s.top_p = 0.65;  // 3 and 2 (0.7 >= 0.65): 3 [0, 4/7), 2 [4/7, 1)
  EXPECT_EQ(decode::choose_token(lg, s, 0.60f, never), 2);
  EXPECT_EQ(decode::choose_token(lg, s, 0.999f, never), 2);
  s.top_p = 0.3;  // 3 alone
  EXPECT_EQ(decode::choose_token(lg, s, 0.999f, never), 3);
  s.top_p = 1.0;
  s.temperature = 1e-3;  // all but certainly the argmax
  EXPECT_EQ(decode::choose_token(lg, s, 0.999f, never), 3);
  s.greedy = true;
  EXPECT_EQ(decode::choose_token(lg, s, 0.0f, never), 3);
  EXPECT_EQ(decode::choose_token(lg, s, 0.0f, {}), 4);
  std::vector<float> bad = lg;
  bad[1] = NAN;
  EXPECT_THROW(decode::choose_token(bad, s, 0.0f, never), Error);
  // The draws are uniform in [0, 1) and differ by row and step.
  EXPECT_NE(decode::sampling_draw(1, 0, 0), decode::sampling_draw(1, 1, 0));
  EXPECT_NE(decode::sampling_draw(1, 0, 0), decode::sampling_draw(1, 0, 1));
  EXPECT_EQ(decode::sampling_draw(1, 4, 2), decode::sampling_draw(1, 4, 2));
}

// A learned table of 8 rows: a prompt of 6 tokens gets 3 new ones (the last
// predicted at position 7); a prompt of 8 gets one; one of 9 is refused.
TEST(Generate, PositionTableEndsTheContinuation) {
  for (const nn::PositionKind& k : {nn::PositionKind::Learned, nn::PositionKind::Sinusoidal}) {
    TinyModel tm(tiny_lm(k, true, 8));
    decode::GenerateOptions o = options(10, true);
    o.eos_id = -1;
    nn::Context ctx;
    const auto got = decode::generate(
        tm.model, {{3, 4, 5, 6, 7, 8}, {3, 4, 5, 6, 7, 8, 9, 10}, {3}}, {0, 1, 2}, o, ctx);
    EXPECT_EQ(got[0].tokens.size(), 3u);
    EXPECT_EQ(got[0].end, decode::GenerationEnd::Positions);
    EXPECT_EQ(got[1].tokens.size(), 1u);
    EXPECT_EQ(got[2].tokens.size(), 8u);
    EXPECT_THROW(decode::generate(tm.model, {{3, 4, 5, 6, 7, 8, 9, 10, 11}}, {0}, o, ctx), Error);
  }
  // Without a table (RoPE) nothing but max_new_tokens ends it.
  TinyModel tm(tiny_lm(nn::PositionKind::Rope, true, 8));
  decode::GenerateOptions o = options(10, true);
  o.eos_id = -1;
  nn::Context ctx;
  const auto got = decode::generate(tm.model, {{3, 4, 5, 6, 7, 8}}, {0}, o, ctx);
  EXPECT_EQ(got[0].tokens.size(), 10u);
  EXPECT_EQ(got[0].end, decode::GenerationEnd::MaxTokens);
}

TEST(Generate, LinearAttentionHasNoCache) {
  models::DecoderLmOptions lo = tiny_lm(nn::PositionKind::Rope);
  const auto linear = nn::attention_kind("linear");
  ASSERT_TRUE(linear.has_value());
  lo.layer.attention_kind = *linear;
  TinyModel tm(lo);
  nn::Context ctx;
  try {
    decode::generate(tm.model, {{3, 4}}, {0}, options(3, true), ctx);
    FAIL() << "linear attention generated through a cache";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no incremental decoding"), std::string::npos) << e.what();
  }
}

TEST(Generate, BadOptionsAreErrors) {
  TinyModel tm(tiny_lm(nn::PositionKind::Rope));
  nn::Context ctx;
  decode::GenerateOptions o = options(3, false);
  o.sampling.temperature = 0;
  EXPECT_THROW(decode::generate(tm.model, {{3}}, {0}, o, ctx), Error);
  o = options(3, false);
  o.sampling.top_p = 1.5;
  EXPECT_THROW(decode::generate(tm.model, {{3}}, {0}, o, ctx), Error);
  o = options(0, true);
  EXPECT_THROW(decode::generate(tm.model, {{3}}, {0}, o, ctx), Error);
  EXPECT_THROW(decode::generate(tm.model, {{}}, {0}, options(3, true), ctx), Error);
}

}  // namespace
}  // namespace rotor
