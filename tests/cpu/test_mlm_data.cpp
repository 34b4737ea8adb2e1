// Masked-LM data: packing round trip, masking statistics and determinism,
// special tokens never masked, the batcher's sharding and exact resume, and
// the special ids of a real SentencePiece model.
#include <fstream>
#include <map>
#include <set>

#include "data/corpus.h"
#include "data/mlm.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using data::MlmSpecialIds;

constexpr int32_t kVocab = 200;

// A corpus with sentences of 0..40 tokens (ids 1..V-1, so <unk>, <s>, </s>
// and the user symbols occur inside the text too); some end with </s>.
std::shared_ptr<data::MmapCorpus> make_corpus(const std::string& prefix, int sentences,
                                              std::vector<std::vector<int32_t>>* content) {
  data::CorpusWriter w(prefix, kVocab);
  PhiloxRng rng(5, 1);
  for (int i = 0; i < sentences; ++i) {
    std::vector<int32_t> s(rng.below(41));
    for (auto& t : s) t = 1 + static_cast<int32_t>(rng.below(kVocab - 1));
    std::vector<int32_t> stored = s;
    if (i % 3 == 0) stored.push_back(data::kEosId);
    // Packing drops one trailing </s> (stored by --append-eos, or by chance).
    if (!s.empty() && stored.back() == data::kEosId) s = {stored.begin(), stored.end() - 1};
    if (content) content->push_back(s);
    w.add(stored);
  }
  w.finish();
  return std::make_shared<data::MmapCorpus>(data::MmapCorpus::open(prefix));
}

TEST(MlmPacking, RoundTrip) {
  test::TempDir dir;
  std::vector<std::vector<int32_t>> content;
  auto corpus = make_corpus(dir / "c", 500, &content);
  const MlmSpecialIds sp = MlmSpecialIds::standard();
  for (int64_t seq_len : {2, 3, 16, 128}) {
    data::PackedBlocks blocks(corpus, seq_len, sp.cls, sp.sep);
    std::vector<int32_t> expected;
    for (const auto& s : content) {
      if (s.empty()) continue;
      expected.insert(expected.end(), s.begin(), s.end());
      expected.push_back(sp.sep);
    }
    EXPECT_EQ(blocks.stream_tokens(), static_cast<int64_t>(expected.size()));
    std::vector<int32_t> got;
    for (int64_t i = 0; i < blocks.size(); ++i) {
      std::vector<int32_t> b = blocks.block(i);
      ASSERT_GE(b.size(), 2u);
      EXPECT_EQ(b[0], sp.cls);
      if (i + 1 < blocks.size()) {
        EXPECT_EQ(static_cast<int64_t>(b.size()), seq_len) << i;
      }
      EXPECT_LE(static_cast<int64_t>(b.size()), seq_len);
      got.insert(got.end(), b.begin() + 1, b.end());
    }
    EXPECT_EQ(got, expected) << "seq_len " << seq_len;
  }
}

TEST(MlmPacking, Errors) {
  test::TempDir dir;
  auto corpus = make_corpus(dir / "c", 10, nullptr);
  EXPECT_THROW(data::PackedBlocks(corpus, 1, 5, 6), Error);
  data::CorpusWriter w(dir / "empty", kVocab);
  w.add(std::vector<int32_t>{});
  w.finish();
  auto empty = std::make_shared<data::MmapCorpus>(data::MmapCorpus::open(dir / "empty"));
  EXPECT_THROW(data::PackedBlocks(empty, 16, 5, 6), Error);
}

data::MaskingOptions masking(uint64_t seed = 1) {
  data::MaskingOptions o;
  o.seed = seed;
  o.vocab_size = kVocab;
  o.special = MlmSpecialIds::standard();
  return o;
}

TEST(MlmMasking, StatisticsAndSpecialTokens) {
  const data::Masker masker(masking());
  const MlmSpecialIds sp = MlmSpecialIds::standard();
  const std::set<int32_t> special(sp.never_mask.begin(), sp.never_mask.end());
  const int64_t T = 128;
  int64_t maskable = 0, selected = 0, as_mask = 0, as_random = 0, unchanged = 0;
  PhiloxRng rng(3, 3);
  for (uint64_t block = 0; block < 2000; ++block) {
    std::vector<int32_t> ids(T);
    for (auto& t : ids) t = static_cast<int32_t>(rng.below(kVocab));  // specials included
    const std::vector<int32_t> orig = ids;
    std::vector<int32_t> pos, tgt;
    masker.mask(ids, 7, block, T, pos, tgt);
    ASSERT_EQ(pos.size(), tgt.size());
    std::set<int32_t> chosen(pos.begin(), pos.end());
    for (int64_t t = 0; t < T; ++t) {
      const int32_t o = orig[static_cast<size_t>(t)], n = ids[static_cast<size_t>(t)];
      if (special.count(o)) {
        EXPECT_EQ(n, o) << "special token changed";
        EXPECT_EQ(chosen.count(static_cast<int32_t>(t)), 0u) << "special token selected";
        continue;
      }
      ++maskable;
      if (!chosen.count(static_cast<int32_t>(t))) {
        EXPECT_EQ(n, o);
        continue;
      }
      ++selected;
      if (n == sp.mask)
        ++as_mask;
      else if (n != o) {
        ++as_random;
        EXPECT_EQ(special.count(n), 0u) << "a special token drawn as a replacement";
      } else
        ++unchanged;
    }
    for (size_t i = 0; i < pos.size(); ++i) EXPECT_EQ(tgt[i], orig[static_cast<size_t>(pos[i])]);
  }
  const double sel = static_cast<double>(selected) / maskable;
  EXPECT_NEAR(sel, 0.15, 0.005);
  EXPECT_NEAR(static_cast<double>(as_mask) / selected, 0.8, 0.01);
  EXPECT_NEAR(static_cast<double>(as_random) / selected, 0.1, 0.01);
  EXPECT_NEAR(static_cast<double>(unchanged) / selected, 0.1, 0.01);
}

// data.random_token_special: the random replacements, by default never a
// special, are drawn from the whole vocabulary with the switch on (each id
// about as often); selection still skips the specials, and only the random
// branch changes.
TEST(MlmMasking, RandomTokenSpecialSwitch) {
  const MlmSpecialIds sp = MlmSpecialIds::standard();
  const std::set<int32_t> special(sp.never_mask.begin(), sp.never_mask.end());
  auto draws = [&](bool random_special) {
    data::MaskingOptions o = masking();
    o.mask_prob = 1.0;
    o.mask_token_prob = 0.0;
    o.random_token_prob = 1.0;  // every selected token is replaced by a random id
    o.random_special = random_special;
    const data::Masker masker(o);
    std::vector<int64_t> count(static_cast<size_t>(kVocab), 0);
    for (uint64_t block = 0; block < 200; ++block) {
      std::vector<int32_t> ids(64, 5);  // [CLS] first, never selected
      for (size_t t = 1; t < ids.size(); ++t) ids[t] = 10 + static_cast<int32_t>(t % 20);
      std::vector<int32_t> pos, tgt;
      masker.mask(ids, 1, block, 64, pos, tgt);
      EXPECT_EQ(pos.size(), 63u);
      EXPECT_EQ(ids[0], 5);
      for (int32_t p : pos) ++count[static_cast<size_t>(ids[static_cast<size_t>(p)])];
    }
    return count;
  };
  const std::vector<int64_t> off = draws(false), on = draws(true);
  const double per_id = 200.0 * 63 / kVocab;
  for (int32_t id = 0; id < kVocab; ++id) {
    if (special.count(id)) {
      EXPECT_EQ(off[static_cast<size_t>(id)], 0) << "special " << id << " drawn";
      EXPECT_GT(on[static_cast<size_t>(id)], per_id / 2) << "special " << id << " never drawn";
    } else {
      EXPECT_GT(off[static_cast<size_t>(id)], 0) << id;
    }
  }
}

TEST(MlmMasking, Deterministic) {
  const data::Masker masker(masking());
  std::vector<int32_t> base(64);
  for (size_t i = 0; i < base.size(); ++i) base[i] = 10 + static_cast<int32_t>(i);
  auto run = [&](const data::Masker& m, uint64_t round, uint64_t block) {
    std::vector<int32_t> ids = base, pos, tgt;
    m.mask(ids, round, block, 64, pos, tgt);
    return std::make_pair(ids, pos);
  };
  EXPECT_EQ(run(masker, 3, 9), run(masker, 3, 9));
  EXPECT_EQ(run(masker, 3, 9), run(data::Masker(masking()), 3, 9));
  EXPECT_NE(run(masker, 3, 9).second, run(masker, 4, 9).second);                    // another epoch
  EXPECT_NE(run(masker, 3, 9).second, run(masker, 3, 10).second);                   // another block
  EXPECT_NE(run(masker, 3, 9).second, run(data::Masker(masking(2)), 3, 9).second);  // another seed
}

TEST(MlmMasking, RejectsBadOptions) {
  data::MaskingOptions o = masking();
  o.mask_token_prob = 0.95;
  EXPECT_THROW(data::Masker{o}, Error);
  o = masking();
  o.vocab_size = 5;  // [CLS] 5 / [SEP] 6 out of range
  EXPECT_THROW(data::Masker{o}, Error);
}

TEST(MlmBatcher, BatchesShardingAndResume) {
  test::TempDir dir;
  auto corpus = make_corpus(dir / "c", 800, nullptr);
  const MlmSpecialIds sp = MlmSpecialIds::standard();
  auto blocks = std::make_shared<data::PackedBlocks>(corpus, 32, sp.cls, sp.sep);
  const data::Masker masker(masking());
  data::MlmBatcherOptions o;
  o.batch_size = 8;
  o.seed = 4;
  data::MlmBatcher one(blocks, masker, o);
  const int64_t n = blocks->size();
  ASSERT_GT(n, 40);
  EXPECT_EQ(one.batches_in_epoch(), n / 8);
  EXPECT_EQ(static_cast<int64_t>(one.epoch_plan(0).size()), n / 8);
  EXPECT_NE(one.epoch_plan(0), one.epoch_plan(1));  // reshuffled every epoch

  // Two ranks take alternating global batches.
  o.world_size = 2;
  o.rank = 0;
  data::MlmBatcher r0(blocks, masker, o);
  o.rank = 1;
  data::MlmBatcher r1(blocks, masker, o);
  const auto g = one.epoch_plan(0), p0 = r0.epoch_plan(0), p1 = r1.epoch_plan(0);
  for (size_t k = 0; k < p0.size(); ++k) {
    EXPECT_EQ(p0[k], g[(2 * k) % g.size()]);
    EXPECT_EQ(p1[k], g[(2 * k + 1) % g.size()]);
  }

  // A batch: shapes, masked positions inside the rows, targets = the block's ids.
  data::MlmBatcher a(blocks, masker, o);
  data::MlmHostBatch b = a.next();
  ASSERT_EQ(b.input_ids.size(0), 8);
  EXPECT_EQ(b.input_ids.size(1), 32);
  const auto ids = b.input_ids.to_ints(), pos = b.masked_positions.to_ints(),
             tgt = b.masked_targets.to_ints(), len = b.lengths.to_ints();
  EXPECT_EQ(b.masked_tokens, static_cast<int64_t>(pos.size()));
  EXPECT_GT(b.masked_tokens, 0);
  const auto plan = a.epoch_plan(0);
  for (size_t i = 0; i < pos.size(); ++i) {
    const int64_t row = pos[i] / 32, t = pos[i] % 32;
    ASSERT_LT(t, len[static_cast<size_t>(row)]);
    EXPECT_EQ(tgt[i], blocks->block(plan[0][static_cast<size_t>(row)])[static_cast<size_t>(t)]);
    EXPECT_TRUE(ids[static_cast<size_t>(pos[i])] == sp.mask ||
                ids[static_cast<size_t>(pos[i])] != sp.cls);
  }

  // Resume: a fresh batcher set to a saved position continues identically,
  // across the epoch boundary.
  data::MlmBatcher run(blocks, masker, o);
  for (int i = 0; i < 7; ++i) run.next();
  const data::BatchPosition saved = run.position();
  std::vector<std::vector<int32_t>> cont;
  for (int i = 0; i < 40; ++i) cont.push_back(run.next().input_ids.to_ints());
  data::MlmBatcher resumed(blocks, masker, o);
  resumed.set_position(saved);
  for (int i = 0; i < 40; ++i)
    EXPECT_EQ(resumed.next().input_ids.to_ints(), cont[static_cast<size_t>(i)]) << i;
  EXPECT_GT(resumed.position().epoch, 0u);
}

TEST(MlmBatcher, ValidationIsFixedAndComplete) {
  test::TempDir dir;
  auto corpus = make_corpus(dir / "c", 300, nullptr);
  const MlmSpecialIds sp = MlmSpecialIds::standard();
  auto blocks = std::make_shared<data::PackedBlocks>(corpus, 32, sp.cls, sp.sep);
  data::MlmBatcherOptions o;
  o.batch_size = 7;
  o.shuffle = false;
  o.fixed_masking = true;
  o.drop_last = false;
  data::MlmBatcher v(blocks, data::Masker(masking()), o);
  const int64_t nb = v.batches_in_epoch();
  EXPECT_EQ(nb, (blocks->size() + 6) / 7);
  int64_t seen = 0;
  std::vector<std::vector<int32_t>> first;
  for (int64_t i = 0; i < nb; ++i) {
    data::MlmHostBatch b = v.next();
    seen += b.input_ids.size(0);
    first.push_back(b.input_ids.to_ints());
  }
  EXPECT_EQ(seen, blocks->size());  // every block once, the last batch partial
  for (int64_t i = 0; i < nb; ++i)  // the next epoch (validation) masks identically
    EXPECT_EQ(v.next().input_ids.to_ints(), first[static_cast<size_t>(i)]);
}

TEST(MlmSpecialIds, FromSentencePiece) {
  test::TempDir dir;
  {
    std::ofstream f(dir / "text.txt");
    for (int i = 0; i < 300; ++i)
      f << "the quick brown fox " << i % 17 << " jumps over the lazy dog number " << i << "\n";
  }
  data::SpmTrainOptions o;
  o.inputs = {dir / "text.txt"};
  o.model_prefix = dir / "spm";
  o.vocab_size = 60;
  o.user_defined_symbols = {"[MASK]", "[CLS]", "[SEP]"};
  o.num_threads = 1;
  data::train_sentencepiece(o);
  const data::Tokenizer tok = data::Tokenizer::load(dir / "spm.model");
  const MlmSpecialIds s = MlmSpecialIds::from_tokenizer(tok);
  EXPECT_EQ(s.mask, 4);
  EXPECT_EQ(s.cls, 5);
  EXPECT_EQ(s.sep, 6);
  const MlmSpecialIds st = MlmSpecialIds::standard();
  EXPECT_EQ(s.never_mask, st.never_mask);

  data::SpmTrainOptions plain = o;
  plain.model_prefix = dir / "plain";
  plain.user_defined_symbols = {};
  data::train_sentencepiece(plain);
  EXPECT_THROW(MlmSpecialIds::from_tokenizer(data::Tokenizer::load(dir / "plain.model")), Error);
}

}  // namespace
}  // namespace rotor
