// TokenBatcher: the padded token budget, coverage, determinism, sharding,
// exact resume and the prefetch thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/batcher.h"
#include "data/sentencepiece.h"
#include "support/test_util.h"

namespace rotor::data {
namespace {

using rotor::test::TempDir;

struct Corpora {
  TempDir dir;
  std::shared_ptr<const MmapCorpus> src, tgt;
  std::vector<std::vector<int32_t>> s, t;
};

// n pairs with random lengths 1..max_len (target ~ source length), plus
// `too_long` pairs of 1000 tokens; targets optionally stored with </s>.
std::unique_ptr<Corpora> make_corpora(int n, int max_len, int too_long = 0, bool tgt_eos = false) {
  auto c = std::make_unique<Corpora>();
  PhiloxRng rng(11, 2);
  CorpusWriter ws(c->dir / "c.src", 1000), wt(c->dir / "c.tgt", 1000);
  for (int i = 0; i < n + too_long; ++i) {
    int ls = i >= n ? 1000 : 1 + static_cast<int>(rng.below(max_len));
    int lt = std::max(1, ls + static_cast<int>(rng.below(7)) - 3);
    std::vector<int32_t> s(ls), t(lt);
    for (auto& x : s) x = 4 + static_cast<int32_t>(rng.below(990));
    for (auto& x : t) x = 4 + static_cast<int32_t>(rng.below(990));
    if (i == n / 2) std::swap(s, t);  // keep lengths irregular
    ws.add(s);
    c->s.push_back(s);
    c->t.push_back(t);
    if (tgt_eos) t.push_back(kEosId);
    wt.add(t);
  }
  ws.finish();
  wt.finish();
  c->src = std::make_shared<MmapCorpus>(MmapCorpus::open(c->dir / "c.src"));
  c->tgt = std::make_shared<MmapCorpus>(MmapCorpus::open(c->dir / "c.tgt"));
  return c;
}

std::vector<std::vector<int64_t>> take(TokenBatcher& b, int n) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < n; ++i) out.push_back(b.next().indices);
  return out;
}

TEST(data_batcher, TokenBudgetIncludesPaddingAndTensorsAreRight) {
  for (bool tgt_eos : {false, true}) {
    auto c = make_corpora(1500, 60, 3, tgt_eos);
    BatcherOptions o;
    o.max_tokens = 512;
    TokenBatcher b(c->src, c->tgt, o);
    EXPECT_EQ(b.skipped(), 3);
    EXPECT_EQ(b.num_usable(), 1500);
    const int64_t nb = b.batches_in_epoch(0);
    std::multiset<int64_t> seen;
    for (int64_t k = 0; k < nb; ++k) {
      Batch batch = b.next();
      EXPECT_EQ(batch.position, (BatchPosition{0, static_cast<uint64_t>(k)}));
      const int64_t B = batch.size(), S = batch.src.size(1), T = batch.tgt_in.size(1);
      ASSERT_GT(B, 0);
      EXPECT_LE(B * S, o.max_tokens);
      EXPECT_LE(B * T, o.max_tokens);
      EXPECT_EQ(batch.src.shape(), (Shape{B, S}));
      EXPECT_EQ(batch.tgt_out.shape(), (Shape{B, T}));
      auto src = batch.src.to_ints(), in = batch.tgt_in.to_ints(), out = batch.tgt_out.to_ints();
      int64_t src_tok = 0, tgt_tok = 0;
      for (int64_t r = 0; r < B; ++r) {
        const int64_t id = batch.indices[r];
        seen.insert(id);
        const auto& xs = c->s[id];
        const auto& ys = c->t[id];
        const int64_t ls = static_cast<int64_t>(xs.size()) + 1,
                      lt = static_cast<int64_t>(ys.size()) + 1;
        ASSERT_EQ(batch.src_lengths[r], ls);
        ASSERT_EQ(batch.tgt_lengths[r], lt);
        src_tok += ls;
        tgt_tok += lt;
        for (int64_t j = 0; j < S; ++j) {
          int32_t want = j < ls - 1 ? xs[j] : (j == ls - 1 ? kEosId : kPadId);
          ASSERT_EQ(src[r * S + j], want);
        }
        for (int64_t j = 0; j < T; ++j) {
          int32_t want_in = j == 0 ? kBosId : (j < lt ? ys[j - 1] : kPadId);
          int32_t want_out = j < lt - 1 ? ys[j] : (j == lt - 1 ? kEosId : kPadId);
          ASSERT_EQ(in[r * T + j], want_in);
          ASSERT_EQ(out[r * T + j], want_out);
        }
      }
      EXPECT_EQ(batch.src_tokens, src_tok);
      EXPECT_EQ(batch.tgt_tokens, tgt_tok);
    }
    // One epoch covers every sentence that fits exactly once.
    EXPECT_EQ(seen.size(), 1500u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 1500u);
    EXPECT_EQ(*seen.rbegin(), 1499);
    EXPECT_EQ(b.position(), (BatchPosition{1, 0}));
  }
}

TEST(data_batcher, BucketingKeepsPaddingLow) {
  auto c = make_corpora(3000, 80);
  BatcherOptions o;
  o.max_tokens = 1024;
  TokenBatcher b(c->src, c->tgt, o);
  int64_t real = 0, padded = 0;
  for (const auto& ids : b.epoch_plan(0)) {
    int64_t S = 0;
    for (int64_t id : ids) S = std::max<int64_t>(S, c->s[id].size() + 1);
    for (int64_t id : ids) real += c->s[id].size() + 1;
    padded += S * static_cast<int64_t>(ids.size());
  }
  EXPECT_GT(static_cast<double>(real) / padded, 0.95);
  o.bucket_size = 1000;  // local buckets: still far better than random batches
  TokenBatcher local(c->src, c->tgt, o);
  EXPECT_GT(local.batches_in_epoch(0), 0);
}

TEST(data_batcher, DeterministicAndEpochsDiffer) {
  auto c = make_corpora(800, 40);
  BatcherOptions o;
  o.max_tokens = 300;
  o.seed = 5;
  TokenBatcher a(c->src, c->tgt, o), b(c->src, c->tgt, o);
  const int n = static_cast<int>(a.batches_in_epoch(0));
  auto e0 = take(a, n), e1 = take(a, static_cast<int>(a.batches_in_epoch(1)));
  EXPECT_EQ(take(b, n), e0);
  EXPECT_NE(e0, e1);
  o.seed = 6;
  TokenBatcher other(c->src, c->tgt, o);
  EXPECT_NE(other.epoch_plan(0), e0);
  o.prefetch = 0;
  o.seed = 5;
  TokenBatcher sync(c->src, c->tgt, o);
  EXPECT_EQ(take(sync, n), e0);
  // Without shuffling: length order, the same every epoch.
  o.shuffle = false;
  TokenBatcher ordered(c->src, c->tgt, o);
  EXPECT_EQ(ordered.epoch_plan(0), ordered.epoch_plan(3));
}

TEST(data_batcher, ShardingPartitionsExactly) {
  auto c = make_corpora(1000, 50);
  BatcherOptions o;
  o.max_tokens = 256;
  TokenBatcher whole(c->src, c->tgt, o);
  for (uint64_t epoch : {0u, 1u}) {
    const auto all = whole.epoch_plan(epoch);
    for (int w : {2, 3, 4}) {
      for (auto rem : {ShardRemainder::Drop, ShardRemainder::Pad}) {
        std::vector<std::vector<int64_t>> got;
        size_t per = 0;
        for (int r = 0; r < w; ++r) {
          BatcherOptions ro = o;
          ro.rank = r;
          ro.world_size = w;
          ro.remainder = rem;
          TokenBatcher rb(c->src, c->tgt, ro);
          auto plan = rb.epoch_plan(epoch);
          if (r == 0) per = plan.size();
          EXPECT_EQ(plan.size(), per) << "every rank takes the same number of batches";
          for (size_t k = 0; k < plan.size(); ++k)
            EXPECT_EQ(plan[k], all[(r + k * w) % all.size()]);
          got.insert(got.end(), plan.begin(), plan.end());
        }
        if (rem == ShardRemainder::Drop) {
          EXPECT_EQ(per, all.size() / w);
          // Disjoint, and exactly the first per*w batches of the global list.
          std::vector<std::vector<int64_t>> want(all.begin(), all.begin() + per * w);
          std::sort(got.begin(), got.end());
          std::sort(want.begin(), want.end());
          EXPECT_EQ(got, want);
        } else {
          EXPECT_EQ(per, (all.size() + w - 1) / w);
          std::set<std::vector<int64_t>> covered(got.begin(), got.end());
          EXPECT_EQ(covered.size(), all.size()) << "padding wraps around, every batch covered";
        }
      }
    }
  }
  BatcherOptions bad = o;
  bad.rank = 3;
  bad.world_size = 3;
  EXPECT_THROW(TokenBatcher(c->src, c->tgt, bad), Error);
}

TEST(data_batcher, ExactResumeFromPosition) {
  auto c = make_corpora(600, 40);
  BatcherOptions o;
  o.max_tokens = 200;
  o.seed = 42;
  TokenBatcher ref(c->src, c->tgt, o);
  const int total = static_cast<int>(ref.batches_in_epoch(0) * 2 + ref.batches_in_epoch(2) / 2);
  std::vector<Batch> want;
  for (int i = 0; i < total; ++i) want.push_back(ref.next());
  for (int cut : {0, 1, static_cast<int>(ref.batches_in_epoch(0)) - 1,
                  static_cast<int>(ref.batches_in_epoch(0)), total - 3}) {
    BatchPosition saved;
    {
      TokenBatcher first(c->src, c->tgt, o);
      for (int i = 0; i < cut; ++i) first.next();
      saved = first.position();  // what a checkpoint stores
      first.next();              // work after the checkpoint is lost
    }
    TokenBatcher resumed(c->src, c->tgt, o);
    resumed.set_position(saved);
    for (int i = cut; i < total; ++i) {
      Batch b = resumed.next();
      ASSERT_EQ(b.indices, want[i].indices) << "cut " << cut << " batch " << i;
      ASSERT_EQ(b.position, want[i].position);
      ASSERT_EQ(b.src.to_ints(), want[i].src.to_ints());
      ASSERT_EQ(b.tgt_out.to_ints(), want[i].tgt_out.to_ints());
    }
  }
  // Rewinding a live batcher works too.
  TokenBatcher live(c->src, c->tgt, o);
  take(live, 5);
  live.set_position({0, 2});
  EXPECT_EQ(live.next().indices, want[2].indices);
}

TEST(data_batcher, PrefetchShutdownAndErrors) {
  auto c = make_corpora(400, 30);
  BatcherOptions o;
  o.max_tokens = 128;
  o.prefetch = 2;
  { TokenBatcher never_used(c->src, c->tgt, o); }
  {
    TokenBatcher b(c->src, c->tgt, o);
    b.next();  // the thread fills its queue and blocks; the destructor must wake and join it
  }
  {
    TokenBatcher b(c->src, c->tgt, o);
    // A position past the epoch: the prefetch thread fails, next() rethrows it.
    b.set_position({0, 1000000});
    EXPECT_THROW(b.next(), Error);
    EXPECT_THROW(b.next(), Error);
    b.set_position({0, 0});
    EXPECT_EQ(b.next().position, (BatchPosition{0, 0}));
  }
}

TEST(data_batcher, MonolingualAndLimits) {
  auto c = make_corpora(300, 30, 2);
  BatcherOptions o;
  o.max_tokens = 100;
  o.max_sentences = 3;
  o.src_append_eos = false;
  TokenBatcher b(c->src, nullptr, o);
  EXPECT_EQ(b.skipped(), 2);
  for (int i = 0; i < 50; ++i) {
    Batch batch = b.next();
    EXPECT_LE(batch.size(), 3);
    EXPECT_LE(batch.size() * batch.src.size(1), 100);
    EXPECT_FALSE(batch.tgt_in.defined());
    for (int64_t r = 0; r < batch.size(); ++r)
      EXPECT_EQ(batch.src_lengths[r], static_cast<int32_t>(c->s[batch.indices[r]].size()));
  }
  o.max_tokens = 1;  // nothing fits: an error, never an endless loop
  EXPECT_THROW(TokenBatcher(c->src, c->tgt, o), Error);
  auto d = make_corpora(10, 5);
  EXPECT_THROW(TokenBatcher(c->src, d->tgt, BatcherOptions{}), Error);  // sizes differ
}

}  // namespace
}  // namespace rotor::data
