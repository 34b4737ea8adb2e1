// Decoding consistency on tiny randomly initialized encoder-decoders:
//   (a) cached incremental decoding == teacher-forced full recomputation, for
//       every position encoding (RoPE: the query rotated at its own position,
//       cached keys keep theirs) and both norm placements;
//   (b) beam 1 == an independent greedy loop;
//   (c) beam search results do not depend on the batch composition;
//   (d) reorder() keeps the right rows of every cache;
//   (e) the output length limit max_len_a * src_len + max_len_b (and
//       max_positions - 1) is respected, and special tokens are never emitted;
//   (f) n-best lists are ranked and led by the best hypothesis; options out
//       of range are refused, and a huge max_len_a cannot overflow the limit.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "config/config.h"
#include "decode/beam_search.h"
#include "models/transformer.h"
#include "nn/position.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using models::EncoderDecoder;
using models::TransformerOptions;
using models::TranslationBatch;
using nn::PositionKind;

// Tiny tensors: OpenMP threads only cost time on the shared CI cores.
const int kOneThread = [] {
  omp_set_num_threads(1);
  return 1;
}();

constexpr int kPad = 0, kBos = 2, kEos = 3;
constexpr int64_t kVocab = 24;

using Seq = std::vector<int32_t>;

TransformerOptions tiny_config(PositionKind position, bool post, int64_t max_positions = 64) {
  TransformerOptions c;
  c.vocab_size = kVocab;
  c.pad_id = kPad;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.layer.d_model = 16;
  c.layer.n_heads = 2;
  c.layer.d_ff = 32;
  c.layer.dropout = 0.1f;  // off at inference
  c.layer.post_norm = post;
  c.position = position;
  c.max_positions = max_positions;
  return c;
}

struct Model {
  nn::ParameterStore store;
  std::unique_ptr<EncoderDecoder> model;
  Model(const TransformerOptions& c, uint64_t seed) {
    model = std::make_unique<EncoderDecoder>(c, store);
    store.allocate(Device::cpu());
    store.initialize(seed);
    // Move biases and norms off 0 and 1 so that every term matters.
    auto noise = test::random_floats(static_cast<size_t>(store.numel()), seed + 1, -0.2f, 0.2f);
    float* v = store.values().data<float>();
    for (int64_t i = 0; i < store.numel(); ++i) v[i] += noise[static_cast<size_t>(i)];
    nn::Parameter* emb = store.find("model.shared.weight");
    float* pad_row = emb->value.data<float>() + kPad * emb->shape[1];
    for (int64_t i = 0; i < emb->shape[1]; ++i) pad_row[i] = 0.0f;
  }
  EncoderDecoder& operator*() { return *model; }
  EncoderDecoder* operator->() { return model.get(); }
};

nn::Context eval_ctx() {
  nn::Context c;
  c.training = false;
  return c;
}

// Right-padded i32 [B, width] and the lengths.
Tensor pad_rows(const std::vector<Seq>& rows, int64_t width,
                std::vector<int32_t>* lengths = nullptr) {
  std::vector<int32_t> flat(rows.size() * static_cast<size_t>(width), kPad);
  for (size_t b = 0; b < rows.size(); ++b) {
    for (size_t j = 0; j < rows[b].size(); ++j) flat[b * width + j] = rows[b][j];
    if (lengths) lengths->push_back(static_cast<int32_t>(rows[b].size()));
  }
  return Tensor::from_ints(flat, {static_cast<int64_t>(rows.size()), width});
}

int64_t max_size(const std::vector<Seq>& rows) {
  size_t m = 0;
  for (const auto& r : rows) m = std::max(m, r.size());
  return static_cast<int64_t>(m);
}

TranslationBatch make_batch(const std::vector<Seq>& src, const std::vector<Seq>& tgt) {
  TranslationBatch b;
  std::vector<int32_t> lengths;
  b.src = pad_rows(src, max_size(src), &lengths);
  b.src_lengths = Tensor::from_ints(lengths, {static_cast<int64_t>(src.size())});
  std::vector<Seq> in, out;
  for (const auto& t : tgt) {
    Seq i{kBos}, o = t;
    i.insert(i.end(), t.begin(), t.end());
    o.push_back(kEos);
    in.push_back(i);
    out.push_back(o);
    b.tgt_tokens += static_cast<int64_t>(o.size());
  }
  b.tgt_in = pad_rows(in, max_size(in));
  b.tgt_out = pad_rows(out, max_size(out));
  return b;
}

const std::vector<Seq> kSources = {
    {5, 6, 7, 8, 9, 10, 11}, {12, 4}, {13, 14, 15, 16}, {17, 1, 18, 19, 20}, {21, 22, 23}};
const std::vector<Seq> kTargets = {{7, 8, 9, 10, 11}, {4}, {14, 15, 16}, {18, 19, 20, 5}, {22, 23}};

const PositionKind kPositions[] = {PositionKind::Sinusoidal, PositionKind::Learned,
                                   PositionKind::Rope, PositionKind::None};

// ---- (a) incremental decoding == full recomputation ---------------------------

void check_incremental(PositionKind position, bool post, uint64_t seed) {
  SCOPED_TRACE(std::string(to_string(position)) + (post ? " post" : " pre"));
  Model m(tiny_config(position, post), seed);
  const nn::Context ctx = eval_ctx();
  const TranslationBatch batch = make_batch(kSources, kTargets);
  const int64_t B = batch.tgt_in.size(0), T = batch.tgt_in.size(1);
  // log_softmax of the teacher-forced logits, in double.
  const std::vector<float> logits = m->forward_logits(batch, ctx).to_floats();  // [B*T, V]
  ASSERT_EQ(static_cast<int64_t>(logits.size()), B * T * kVocab);
  std::vector<double> full(logits.size());
  for (int64_t r = 0; r < B * T; ++r) {
    const float* row = logits.data() + r * kVocab;
    double mx = *std::max_element(row, row + kVocab), z = 0;
    for (int64_t v = 0; v < kVocab; ++v) z += std::exp(row[v] - mx);
    for (int64_t v = 0; v < kVocab; ++v) full[r * kVocab + v] = row[v] - mx - std::log(z);
  }
  // The cached decoder, one position at a time (pad positions included: they
  // are causal too).
  Tensor memory = m->encode(batch.src, batch.src_lengths, ctx);
  auto state = m->start_decoding(memory, batch.src_lengths, T);
  const std::vector<int32_t> tgt_in = batch.tgt_in.to_ints();
  double worst = 0, spread = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> tokens(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) tokens[b] = tgt_in[b * T + t];
    EXPECT_EQ(state.position, t);
    const std::vector<float> lp =
        m->decode_step(state, Tensor::from_ints(tokens, {B}), ctx).to_floats();
    ASSERT_EQ(static_cast<int64_t>(lp.size()), B * kVocab);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t v = 0; v < kVocab; ++v) {
        const double ref = full[(b * T + t) * kVocab + v];
        worst = std::max(worst, std::abs(lp[b * kVocab + v] - ref));
        spread = std::max(spread, std::abs(ref + std::log(static_cast<double>(kVocab))));
      }
  }
  EXPECT_LT(worst, 1e-4) << "incremental log-probabilities differ from the full forward";
  // Not a uniform distribution: the comparison means something.
  EXPECT_GT(spread, 0.5);
  EXPECT_THROW(m->decode_step(state, Tensor::from_ints(std::vector<int32_t>(B, kBos), {B}), ctx),
               Error);
}

// Every registered encoding (ALiBi too: the step adds the bias at its
// position) but TUPE's, which builds the BERT encoder alone.
TEST(Decode, IncrementalEqualsFullForward) {
  uint64_t seed = 10;
  for (PositionKind p : nn::position_kinds())
    if (!p->bert_encoder_only)
      for (bool post : {true, false}) check_incremental(p, post, seed++);
}

// The full forward itself: the logits of a position do not depend on later
// target tokens (causality) nor on the other rows of the batch.
TEST(Decode, FullForwardIsCausalAndRowIndependent) {
  for (PositionKind p : kPositions) {
    SCOPED_TRACE(std::string(to_string(p)));
    Model m(tiny_config(p, true), 30);
    const nn::Context ctx = eval_ctx();
    const TranslationBatch all = make_batch(kSources, kTargets);
    const int64_t T = all.tgt_in.size(1);
    const auto lg = m->forward_logits(all, ctx).to_floats();
    // Row 0 alone, its target cut after 2 tokens.
    const TranslationBatch one = make_batch({kSources[0]}, {{kTargets[0][0], kTargets[0][1]}});
    const auto lg1 = m->forward_logits(one, ctx).to_floats();  // [3, V]
    double worst = 0;
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t v = 0; v < kVocab; ++v)
        worst = std::max(worst,
                         std::abs(static_cast<double>(lg1[t * kVocab + v] - lg[t * kVocab + v])));
    EXPECT_LT(worst, 1e-4);
    // Row 1 (short source, padded in the batch) alone.
    const TranslationBatch two = make_batch({kSources[1]}, {kTargets[1]});
    const auto lg2 = m->forward_logits(two, ctx).to_floats();
    worst = 0;
    for (int64_t t = 0; t < two.tgt_in.size(1); ++t)
      for (int64_t v = 0; v < kVocab; ++v)
        worst = std::max(worst, std::abs(static_cast<double>(lg2[t * kVocab + v] -
                                                             lg[(1 * T + t) * kVocab + v])));
    EXPECT_LT(worst, 1e-4);
  }
}

// ---- (b) beam 1 == greedy -----------------------------------------------------

struct Greedy {
  Seq tokens;
  double log_prob = 0;
};

int64_t limit_of(const decode::SearchOptions& o, int64_t src_len, int64_t max_positions) {
  int64_t l = std::max<int64_t>(1, static_cast<int64_t>(o.max_len_a * src_len) + o.max_len_b);
  return std::min<int64_t>(l, max_positions - 1);
}

// An independent greedy decoder, one sentence at a time: argmax over every
// token but pad and bos, stop at eos or after `limit` tokens.
Greedy greedy(EncoderDecoder& model, const Seq& src, int64_t limit) {
  const nn::Context ctx = eval_ctx();
  const int64_t S = static_cast<int64_t>(src.size());
  Tensor src_t = Tensor::from_ints(src, {1, S});
  Tensor len = Tensor::from_ints({static_cast<int32_t>(S)}, {1});
  auto state = model.start_decoding(model.encode(src_t, len, ctx), len, limit + 1);
  Greedy g;
  int32_t last = kBos;
  while (static_cast<int64_t>(g.tokens.size()) < limit) {
    const auto lp = model.decode_step(state, Tensor::from_ints({last}, {1}), ctx).to_floats();
    int32_t best = -1;
    for (int32_t v = 0; v < kVocab; ++v) {
      if (v == kPad || v == kBos) continue;
      if (best < 0 || lp[v] > lp[best]) best = v;
    }
    g.log_prob += lp[best];
    if (best == kEos) break;
    g.tokens.push_back(best);
    last = best;
  }
  return g;
}

decode::SearchOptions options(int beam, double a, int64_t b) {
  decode::SearchOptions o;
  o.beam = beam;
  o.lenpen = 0.6;
  o.max_len_a = a;
  o.max_len_b = b;
  o.bos_id = kBos;
  o.eos_id = kEos;
  o.pad_id = kPad;
  return o;
}

std::vector<decode::Hypothesis> search(EncoderDecoder& model, const std::vector<Seq>& src,
                                       const decode::SearchOptions& o) {
  std::vector<int32_t> lengths;
  Tensor s = pad_rows(src, max_size(src), &lengths);
  return decode::beam_search(model, s, lengths, o, eval_ctx());
}

// Makes eos likelier so that some hypotheses end before the limit.
void favour_eos(nn::ParameterStore& store, float amount) {
  nn::Parameter* emb = store.find("model.shared.weight");
  const int64_t d = emb->shape[1];
  float* row = emb->value.data<float>() + kEos * d;
  for (int64_t i = 0; i < d; ++i) row[i] *= amount;
}

TEST(Decode, BeamOneEqualsGreedy) {
  int ended = 0, total = 0;
  uint64_t seed = 40;
  for (PositionKind p : kPositions)
    for (bool post : {true, false}) {
      SCOPED_TRACE(std::string(to_string(p)) + (post ? " post" : " pre"));
      Model m(tiny_config(p, post), seed++);
      favour_eos(m.store, 3.0f);
      const auto o = options(1, 1.0, 2);
      const auto hyps = search(*m, kSources, o);
      ASSERT_EQ(hyps.size(), kSources.size());
      for (size_t i = 0; i < kSources.size(); ++i) {
        const int64_t limit = limit_of(o, static_cast<int64_t>(kSources[i].size()), 64);
        const Greedy g = greedy(*m, kSources[i], limit);
        EXPECT_EQ(hyps[i].tokens, g.tokens) << "sentence " << i;
        EXPECT_NEAR(hyps[i].log_prob, g.log_prob, 1e-4) << "sentence " << i;
        ++total;
        ended += static_cast<int64_t>(g.tokens.size()) < limit;
      }
    }
  // Both ways of stopping occur: eos and the length limit.
  EXPECT_GT(ended, 0);
  EXPECT_LT(ended, total);
}

// ---- (c) independent of the batch ----------------------------------------------

TEST(Decode, BeamSearchIndependentOfBatch) {
  uint64_t seed = 60;
  int nonempty = 0;
  for (PositionKind p : kPositions) {
    SCOPED_TRACE(std::string(to_string(p)));
    Model m(tiny_config(p, p != PositionKind::Rope), seed++);
    favour_eos(m.store, 2.0f);
    for (int beam : {1, 4}) {
      const auto o = options(beam, 1.0, 3);
      const auto batched = search(*m, kSources, o);
      // Another composition: reversed, with a duplicate.
      std::vector<Seq> other(kSources.rbegin(), kSources.rend());
      other.push_back(kSources[1]);
      const auto other_hyps = search(*m, other, o);
      ASSERT_EQ(batched.size(), kSources.size());
      for (size_t i = 0; i < kSources.size(); ++i) {
        const auto alone = search(*m, {kSources[i]}, o);
        ASSERT_EQ(alone.size(), 1u);
        nonempty += !alone[0].tokens.empty();
        EXPECT_EQ(batched[i].tokens, alone[0].tokens) << "beam " << beam << ", sentence " << i;
        EXPECT_NEAR(batched[i].score, alone[0].score, 1e-4);
        EXPECT_NEAR(batched[i].log_prob, alone[0].log_prob, 1e-4);
        const size_t j = kSources.size() - 1 - i;
        EXPECT_EQ(other_hyps[j].tokens, alone[0].tokens) << "beam " << beam << ", sentence " << i;
      }
      EXPECT_EQ(other_hyps.back().tokens, other_hyps[kSources.size() - 2].tokens);
    }
  }
  EXPECT_GT(nonempty, 20);
}

// A wider beam finds a hypothesis at least as good as beam 1's (both scored
// with the same length penalty; the beam keeps the best-scoring finished one).
TEST(Decode, WiderBeamScoresAtLeastGreedy) {
  Model m(tiny_config(PositionKind::Rope, false), 70);
  favour_eos(m.store, 3.0f);
  const auto one = search(*m, kSources, options(1, 1.0, 2));
  const auto five = search(*m, kSources, options(5, 1.0, 2));
  for (size_t i = 0; i < kSources.size(); ++i)
    EXPECT_GE(five[i].score, one[i].score - 1e-6) << "sentence " << i;
}

// ---- (d) reorder ------------------------------------------------------------------

TEST(Decode, ReorderKeepsTheRightRows) {
  for (PositionKind p : kPositions) {
    SCOPED_TRACE(std::string(to_string(p)));
    Model m(tiny_config(p, false), 80);
    const nn::Context ctx = eval_ctx();
    const std::vector<Seq> src = {kSources[0], kSources[1], kSources[2]};
    const std::vector<Seq> prefix = {{kBos, 5, 6}, {kBos, 7, 8}, {kBos, 9, 10}};
    const std::vector<int32_t> index = {2, 0, 0, 1};
    // After the prefix, the reordered rows go on with tokens of their own
    // (rows 1 and 2 both come from row 0 and then diverge).
    const std::vector<Seq> next = {{11, 12}, {13, 14}, {15, 16}, {17, 18}};
    const int64_t max_len = 8;

    // Decode 3 rows, reorder to 4 rows, decode on.
    std::vector<int32_t> lengths;
    Tensor s = pad_rows(src, max_size(src), &lengths);
    Tensor len = Tensor::from_ints(lengths, {3});
    auto state = m->start_decoding(m->encode(s, len, ctx), len, max_len);
    for (size_t t = 0; t < 3; ++t)
      m->decode_step(state, Tensor::from_ints({prefix[0][t], prefix[1][t], prefix[2][t]}, {3}),
                     ctx);
    m->reorder(state, Tensor::from_ints(index, {4}));
    EXPECT_EQ(state.memory.size(0), 4);
    EXPECT_EQ(state.memory_lengths.to_ints(),
              (std::vector<int32_t>{lengths[2], lengths[0], lengths[0], lengths[1]}));
    std::vector<std::vector<float>> got;
    for (size_t t = 0; t < 2; ++t)
      got.push_back(
          m->decode_step(
               state, Tensor::from_ints({next[0][t], next[1][t], next[2][t], next[3][t]}, {4}), ctx)
              .to_floats());

    // The same 4 rows decoded from scratch.
    std::vector<Seq> src4;
    for (int32_t i : index) src4.push_back(src[static_cast<size_t>(i)]);
    std::vector<int32_t> lengths4;
    Tensor s4 = pad_rows(src4, max_size(src4), &lengths4);
    Tensor len4 = Tensor::from_ints(lengths4, {4});
    auto fresh = m->start_decoding(m->encode(s4, len4, ctx), len4, max_len);
    for (size_t t = 0; t < 5; ++t) {
      std::vector<int32_t> tok;
      for (size_t r = 0; r < 4; ++r)
        tok.push_back(t < 3 ? prefix[static_cast<size_t>(index[r])][t] : next[r][t - 3]);
      const auto lp = m->decode_step(fresh, Tensor::from_ints(tok, {4}), ctx).to_floats();
      if (t < 3) continue;
      double worst = 0;
      for (size_t i = 0; i < lp.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(lp[i] - got[t - 3][i])));
      EXPECT_LT(worst, 1e-5) << "step " << t;
    }
    // Rows 1 and 2 share their history but not their last token.
    double diff = 0;
    for (int64_t v = 0; v < kVocab; ++v)
      diff = std::max(diff,
                      std::abs(static_cast<double>(got[1][kVocab + v] - got[1][2 * kVocab + v])));
    EXPECT_GT(diff, 1e-3);
  }
}

// ---- (e) length limits ----------------------------------------------------------

TEST(Decode, MaxLengthRespected) {
  Model m(tiny_config(PositionKind::Learned, true), 90);
  int at_limit = 0;
  for (auto [a, b] : {std::pair<double, int64_t>{0.0, 3}, {1.0, 2}, {1.5, 1}, {0.5, 0}}) {
    for (int beam : {1, 3}) {
      const auto o = options(beam, a, b);
      const auto hyps = search(*m, kSources, o);
      for (size_t i = 0; i < kSources.size(); ++i) {
        const int64_t limit = limit_of(o, static_cast<int64_t>(kSources[i].size()), 64);
        EXPECT_LE(static_cast<int64_t>(hyps[i].tokens.size()), limit)
            << "a " << a << " b " << b << " beam " << beam << " sentence " << i;
        at_limit += static_cast<int64_t>(hyps[i].tokens.size()) == limit;
      }
    }
  }
  EXPECT_GT(at_limit, 10);  // a random model rarely says eos: most hit the limit
}

// A model whose output distribution is the same at every step, with bos the
// likeliest token, pad the second and eos the least likely: the search must
// skip the special tokens and stop exactly at the length limit.
TEST(Decode, SkipsSpecialTokensAndStopsAtLimit) {
  for (int64_t max_positions : {64, 8}) {
    TransformerOptions cfg = tiny_config(PositionKind::Sinusoidal, true, max_positions);
    Model m(cfg, 100);
    const int64_t d = cfg.layer.d_model;
    // The last decoder layer ends with a layer norm: gain 0 makes its output
    // the bias beta = 5 e_0 whatever the input.
    const std::string ln = "model.decoder.layers.1.final_layer_norm";
    float* gamma = m.store.find(ln + ".weight")->value.data<float>();
    float* beta = m.store.find(ln + ".bias")->value.data<float>();
    for (int64_t i = 0; i < d; ++i) gamma[i] = beta[i] = 0.0f;
    beta[0] = 5.0f;
    // Logit of v = 5 E[v, 0]: bos 5, pad 0, token 1 -0.25, then falling; eos -5.
    float* emb = m.store.find("model.shared.weight")->value.data<float>();
    for (int64_t v = 0; v < kVocab; ++v) emb[v * d] = -0.05f * static_cast<float>(v);
    emb[kBos * d] = 1.0f;
    emb[kPad * d] = 0.0f;
    emb[kEos * d] = -1.0f;
    for (int beam : {1, 2, 4}) {
      const auto o = options(beam, 1.0, 2);
      const auto hyps = search(*m, kSources, o);
      for (size_t i = 0; i < kSources.size(); ++i) {
        SCOPED_TRACE("max_positions " + std::to_string(max_positions) + ", beam " +
                     std::to_string(beam) + ", sentence " + std::to_string(i));
        const int64_t limit = limit_of(o, static_cast<int64_t>(kSources[i].size()), max_positions);
        ASSERT_EQ(static_cast<int64_t>(hyps[i].tokens.size()), limit);
        EXPECT_EQ(hyps[i].tokens, Seq(static_cast<size_t>(limit), 1));
        if (beam == 1) {
          EXPECT_EQ(greedy(*m, kSources[i], limit).tokens, hyps[i].tokens);
        }
      }
    }
  }
}

// ---- (f) n-best lists and option checks -------------------------------------------

// The n-best list of each sentence: nbest hypotheses (the vocabulary offers
// enough), distinct, best first; its head is beam_search's answer.
TEST(Decode, NbestIsRankedAndStartsWithTheBest) {
  Model m(tiny_config(PositionKind::Rope, false), 110);
  favour_eos(m.store, 2.0f);
  const auto o = options(4, 1.0, 3);
  std::vector<int32_t> lengths;
  Tensor s = pad_rows(kSources, max_size(kSources), &lengths);
  const auto best = decode::beam_search(*m, s, lengths, o, eval_ctx());
  for (int nbest : {1, 3, 4}) {
    const auto lists = decode::beam_search_nbest(*m, s, lengths, o, nbest, eval_ctx());
    ASSERT_EQ(lists.size(), kSources.size());
    for (size_t i = 0; i < lists.size(); ++i) {
      SCOPED_TRACE("nbest " + std::to_string(nbest) + ", sentence " + std::to_string(i));
      ASSERT_EQ(static_cast<int>(lists[i].size()), nbest);
      EXPECT_EQ(lists[i][0].tokens, best[i].tokens);
      EXPECT_NEAR(lists[i][0].score, best[i].score, 1e-9);
      for (size_t r = 1; r < lists[i].size(); ++r) {
        EXPECT_LE(lists[i][r].score, lists[i][r - 1].score);
        EXPECT_TRUE(std::isfinite(lists[i][r].score));
        for (size_t q = 0; q < r; ++q) EXPECT_NE(lists[i][r].tokens, lists[i][q].tokens);
      }
    }
  }
}

// Options out of range are an error, and a huge max_len_a is capped by the
// model's positions instead of overflowing the length limit.
TEST(Decode, OptionsAreCheckedAndTheLimitCannotOverflow) {
  Model m(tiny_config(PositionKind::Learned, true, 16), 120);
  std::vector<int32_t> lengths;
  Tensor s = pad_rows(kSources, max_size(kSources), &lengths);
  auto bad = options(2, 1.0, 3);
  bad.beam = 0;
  EXPECT_THROW(decode::beam_search(*m, s, lengths, bad, eval_ctx()), Error);
  EXPECT_THROW(decode::beam_search_nbest(*m, s, lengths, options(2, 1.0, 3), 3, eval_ctx()), Error);
  bad = options(2, std::nan(""), 3);
  EXPECT_THROW(decode::beam_search(*m, s, lengths, bad, eval_ctx()), Error);
  bad = options(2, 1.0, -1);
  EXPECT_THROW(decode::beam_search(*m, s, lengths, bad, eval_ctx()), Error);
  // a = 1e30 and a = 1000 both reach the cap, max_positions - 1 = 15 tokens.
  const auto huge = search(*m, kSources, options(2, 1e30, 0));
  const auto capped = search(*m, kSources, options(2, 1000.0, 0));
  size_t longest = 0;
  for (size_t i = 0; i < huge.size(); ++i) {
    EXPECT_EQ(huge[i].tokens, capped[i].tokens) << "sentence " << i;
    EXPECT_LE(huge[i].tokens.size(), 15u);
    longest = std::max(longest, huge[i].tokens.size());
  }
  EXPECT_GT(longest, 1u) << "the limit must not collapse to one token";
}

}  // namespace
}  // namespace rotor
