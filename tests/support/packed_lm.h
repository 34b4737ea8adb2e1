// Shared by the packing tests: a corpus file of token sentences; one packed
// batch of documents (data.packing documents, models::LmBatch with segments
// and positions) with each document's own batch, and three translation pairs
// as a padded batch, for the CPU (tests/cpu/test_lm_packing.cpp,
// test_mlm_packing.cpp, test_translation_packing.cpp) and GPU
// (tests/gpu/test_cudnn_attention_cuda.cpp) checks that a packed or
// variable-length batch equals its documents run alone; and the CPU cores
// those checks run on.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "data/batcher.h"
#include "data/corpus.h"
#include "models/decoder_lm.h"
#include "nn/attention.h"
#include "support/model_gradcheck.h"  // jitter
#include "support/test_util.h"

namespace rotor::test {

// An attention core of the CPU, as a layer's options pick it.
struct Core {
  const char* name;
  nn::AttentionImpl impl;
  nn::AttentionKind kind;
  ops::LinearFeatureMap map;
};

inline const std::vector<Core> kCores = {
    {"reference", nn::AttentionImpl::Reference, nn::AttentionKind::Softmax,
     ops::LinearFeatureMap::Elu1},
    {"flash_twin", nn::AttentionImpl::Rotor, nn::AttentionKind::Softmax,
     ops::LinearFeatureMap::Elu1},
    {"linear_elu1", nn::AttentionImpl::Auto, *nn::attention_kind("linear"),
     ops::LinearFeatureMap::Elu1},
    {"linear_favor", nn::AttentionImpl::Auto, *nn::attention_kind("linear"),
     ops::LinearFeatureMap::Favor},
};

// The largest absolute difference of two vectors (infinite when their
// lengths differ).
inline double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::abs(double(a[i]) - b[i]));
  return a.size() == b.size() ? m : INFINITY;
}

// The largest difference of gradients `a` and `b`, relative to the larger of
// 1 and b's largest magnitude (the packing checks' gradient tolerance).
inline double relative_grad_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 1.0;
  for (float g : b) scale = std::max(scale, std::abs(double(g)));
  return max_diff(a, b) / scale;
}

// A model of type M on the CPU with the packing checks' weights: the store's
// init (seed 4) jittered (test::jitter, seed 5), so that no weight is at its
// symmetric start.
template <class M>
struct JitteredModel {
  nn::ParameterStore store;
  std::unique_ptr<M> model;
  template <class Options>
  explicit JitteredModel(const Options& o) {
    model = std::make_unique<M>(o, store);
    store.allocate(Device::cpu());
    store.initialize(4);
    jitter(store, 5, 0.1f);
  }
};

inline std::shared_ptr<const data::MmapCorpus> write_lm_corpus(
    const TempDir& dir, const std::vector<std::vector<int32_t>>& sentences) {
  data::CorpusWriter w(dir / "c", 100);
  for (const auto& x : sentences) w.add(x);
  w.finish();
  return std::make_shared<const data::MmapCorpus>(data::MmapCorpus::open(dir / "c"));
}

// Row 0 holds documents of 4, 1 and 3 tokens; row 1 one of 5 tokens and 3
// of padding. Targets are any non-pad ids below `vocab`.
struct PackedDocs {
  std::vector<std::vector<int32_t>> docs{{5, 12, 3, 30}, {17}, {4, 6, 8}, {22, 9, 13, 25, 31}};
  std::vector<int64_t> row{0, 0, 0, 1}, start{0, 4, 5, 0};
  int64_t vocab = 40;
  static constexpr int64_t B = 2, T = 8;

  models::LmBatch batch(Device device = Device::cpu()) const {
    std::vector<int32_t> ids(B * T, 0), tg(B * T, 0), pos(B * T, 0), seg(B * T, -1);
    std::vector<int32_t> next(B, 0);  // each document of a row its own id
    for (size_t i = 0; i < docs.size(); ++i) {
      for (size_t t = 0; t < docs[i].size(); ++t) {
        const int64_t at = row[i] * T + start[i] + static_cast<int64_t>(t);
        ids[at] = docs[i][t];
        tg[at] = (docs[i][t] * 7 + 3) % static_cast<int32_t>(vocab - 1) + 1;
        pos[at] = static_cast<int32_t>(t);
        seg[at] = next[row[i]];
      }
      ++next[row[i]];
    }
    models::LmBatch m;
    m.input_ids = Tensor::from_ints(ids, {B, T});
    m.targets = Tensor::from_ints(tg, {B, T});
    m.tokens = 13;
    m.segments = seg;
    m.positions = Tensor::from_ints(pos, {B, T});
    return m.to(device);
  }
  // Document i alone: [1, its length], the packed batch's targets.
  models::LmBatch alone(size_t i, Device device = Device::cpu()) const {
    const std::vector<int32_t> tg = batch().targets.to_ints();
    const int64_t n = static_cast<int64_t>(docs[i].size());
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) t[k] = tg[row[i] * T + start[i] + k];
    models::LmBatch m;
    m.input_ids = Tensor::from_ints(docs[i], {1, n});
    m.targets = Tensor::from_ints(t, {1, n});
    m.tokens = n;
    return m.to(device);
  }
  // Where document i's first logit sits in the packed [B, T, vocab] logits.
  size_t logit_offset(size_t i) const {
    return static_cast<size_t>((row[i] * T + start[i]) * vocab);
  }
};

// Three sentence pairs of different lengths on both sides (a one-token
// source and a one-token target among them) as the batcher pads them
// (data::Batch), for the variable-length translation checks
// (tests/cpu/test_translation_packing.cpp, the GPU's TranslationVarlenCuda).
struct TranslationPairs {
  std::vector<std::vector<int32_t>> src{{5, 12, 3, 30, 2}, {2}, {7, 9, 11, 13, 15, 17, 2}};
  std::vector<std::vector<int32_t>> tgt{{8, 9, 21}, {4, 6, 8, 10, 33, 35}, {19}};
  int64_t vocab = 40;  // every id above is below it

  // Pairs `which` as one padded batch: src x, tgt_in <s> y, tgt_out y </s>.
  data::Batch batch(const std::vector<size_t>& which) const {
    int64_t S = 0, T = 0;
    for (size_t i : which) {
      S = std::max<int64_t>(S, static_cast<int64_t>(src[i].size()));
      T = std::max<int64_t>(T, static_cast<int64_t>(tgt[i].size()) + 1);
    }
    const int64_t B = static_cast<int64_t>(which.size());
    std::vector<int32_t> s(B * S, 0), ti(B * T, 0), to(B * T, 0);
    data::Batch b;
    for (int64_t r = 0; r < B; ++r) {
      const auto& x = src[which[r]];
      const auto& y = tgt[which[r]];
      std::copy(x.begin(), x.end(), s.begin() + r * S);
      ti[r * T] = 1;
      for (size_t t = 0; t < y.size(); ++t) {
        ti[r * T + 1 + static_cast<int64_t>(t)] = y[t];
        to[r * T + static_cast<int64_t>(t)] = y[t];
      }
      to[r * T + static_cast<int64_t>(y.size())] = 2;
      b.indices.push_back(static_cast<int64_t>(which[r]));
      b.src_lengths.push_back(static_cast<int32_t>(x.size()));
      b.tgt_lengths.push_back(static_cast<int32_t>(y.size() + 1));
      b.src_tokens += static_cast<int64_t>(x.size());
      b.tgt_tokens += static_cast<int64_t>(y.size() + 1);
    }
    b.src = Tensor::from_ints(s, {B, S});
    b.tgt_in = Tensor::from_ints(ti, {B, T});
    b.tgt_out = Tensor::from_ints(to, {B, T});
    return b;
  }
  data::Batch all() const { return batch({0, 1, 2}); }
  // Where pair i's first target logit sits in the variable-length logits.
  size_t offset(size_t i) const {
    size_t t = 0;
    for (size_t k = 0; k < i; ++k) t += tgt[k].size() + 1;
    return t * static_cast<size_t>(vocab);
  }
};

}  // namespace rotor::test
