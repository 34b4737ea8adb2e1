#include "decode/beam_search.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "nn/position.h"
#include "ops/decode.h"

namespace rotor::decode {

namespace {

struct Beam {
  std::vector<int32_t> tokens;
  double log_prob = 0;
};

double normalized(double log_prob, size_t length, double lenpen) {
  return log_prob / std::pow(static_cast<double>(length), lenpen);
}

}  // namespace

std::vector<Hypothesis> beam_search(models::EncoderDecoder& model, const Tensor& src,
                                    const std::vector<int32_t>& src_lengths, const SearchOptions& o,
                                    const nn::Context& ctx) {
  std::vector<std::vector<Hypothesis>> best = beam_search_nbest(model, src, src_lengths, o, 1, ctx);
  std::vector<Hypothesis> out(best.size());
  for (size_t b = 0; b < best.size(); ++b)
    if (!best[b].empty()) out[b] = std::move(best[b].front());
  return out;
}

std::vector<std::vector<Hypothesis>> beam_search_nbest(models::EncoderDecoder& model,
                                                       const Tensor& src,
                                                       const std::vector<int32_t>& src_lengths,
                                                       const SearchOptions& o, int nbest,
                                                       const nn::Context& ctx) {
  const int64_t B = src.size(0);
  if (o.beam < 1) ROTOR_FAIL("beam search: beam size {} must be at least 1", o.beam);
  if (nbest < 1 || nbest > o.beam)
    ROTOR_FAIL("beam search: nbest {} must be from 1 to the beam size {}", nbest, o.beam);
  if (!std::isfinite(o.lenpen) || !std::isfinite(o.max_len_a) || o.max_len_b < 0)
    ROTOR_FAIL("beam search: lenpen {} and max_len_a {} must be finite, max_len_b {} not negative",
               o.lenpen, o.max_len_a, o.max_len_b);
  const int K = o.beam;
  const int64_t V = model.options().vocab_size;
  ROTOR_CHECK(static_cast<int64_t>(src_lengths.size()) == B, "beam_search: {} lengths for {} rows",
              src_lengths.size(), B);
  std::vector<int64_t> limit(static_cast<size_t>(B));
  int64_t max_len = 1;
  // The limit is computed in double and clamped before it becomes an integer:
  // a large max_len_a must not overflow into a negative (or tiny) limit.
  const double table_cap =
      static_cast<double>(std::max<int64_t>(1, model.options().max_positions - 1));
  const bool table = nn::has_position_table(model.options().position);
  for (int64_t b = 0; b < B; ++b) {
    const double want = std::floor(o.max_len_a * src_lengths[b]) + static_cast<double>(o.max_len_b);
    const double cap = table ? table_cap
                             : std::max(table_cap, static_cast<double>(src_lengths[b]) +
                                                       static_cast<double>(o.max_len_b));
    limit[b] = static_cast<int64_t>(std::clamp(want, 1.0, cap));
    max_len = std::max(max_len, limit[b]);
  }
  Tensor lengths = Tensor::from_ints(src_lengths, {B}, ctx.device);  // i32 [B]
  Tensor memory = model.encode(src, lengths, ctx);                   // [B, S, d]
  // Expand every sentence to K rows: row b*K + k.
  std::vector<int32_t> expand(static_cast<size_t>(B * K));
  for (int64_t r = 0; r < B * K; ++r) expand[r] = static_cast<int32_t>(r / K);
  auto state = model.start_decoding(memory, lengths, max_len + 1);
  model.reorder(state, Tensor::from_ints(expand, {B * K}, ctx.device));

  std::vector<std::vector<Beam>> beams(static_cast<size_t>(B),
                                       std::vector<Beam>(static_cast<size_t>(K)));
  std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(B));
  std::vector<bool> done(static_cast<size_t>(B), false);
  std::vector<int32_t> last(static_cast<size_t>(B * K), o.bos_id);

  for (int64_t t = 0; t < max_len; ++t) {
    // f32 [B*K, V]
    Tensor lp = model.decode_step(state, Tensor::from_ints(last, {B * K}, ctx.device), ctx);
    std::vector<float> logp = lp.to_floats();  // [B*K, V]
    std::vector<int32_t> reorder(static_cast<size_t>(B * K));
    for (int64_t b = 0; b < B; ++b) {
      auto& bb = beams[b];
      if (done[b]) {
        for (int k = 0; k < K; ++k) reorder[b * K + k] = static_cast<int32_t>(b * K + k);
        continue;
      }
      // At t = 0 all K rows are identical: expand only the first.
      const int live = t == 0 ? 1 : K;
      struct Cand {
        double score;
        int k;
        int32_t token;
      };
      std::vector<Cand> cands;
      cands.reserve(static_cast<size_t>(live) * 2 * K);
      for (int k = 0; k < live; ++k) {
        const float* row = logp.data() + (b * K + k) * V;
        // The 2K best tokens of this beam suffice for the K best continuations
        // (at most K of them end in eos). pad and bos are never emitted: they
        // are left out before choosing, or they could take up the 2K places.
        std::vector<int32_t> idx;
        idx.reserve(static_cast<size_t>(V));
        for (int32_t tok = 0; tok < static_cast<int32_t>(V); ++tok)
          if (tok != o.pad_id && tok != o.bos_id) idx.push_back(tok);
        const int64_t take = std::min<int64_t>(2 * K, static_cast<int64_t>(idx.size()));
        std::partial_sort(idx.begin(), idx.begin() + take, idx.end(),
                          [&](int32_t a, int32_t c) { return row[a] > row[c]; });
        for (int64_t j = 0; j < take; ++j)
          cands.push_back({bb[k].log_prob + row[idx[j]], k, idx[j]});
      }
      std::sort(cands.begin(), cands.end(),
                [](const Cand& a, const Cand& c) { return a.score > c.score; });
      std::vector<Beam> next;
      std::vector<int32_t> from;
      const bool at_limit = t + 1 >= limit[b];
      for (const Cand& cd : cands) {
        // Candidates are sorted: past the first -inf (a padding beam's) all are.
        if (static_cast<int>(next.size()) >= K || !std::isfinite(cd.score)) break;
        std::vector<int32_t> toks = bb[cd.k].tokens;
        if (cd.token == o.eos_id || at_limit) {
          if (cd.token != o.eos_id) toks.push_back(cd.token);
          if (static_cast<int>(finished[b].size()) < K)
            finished[b].push_back(
                {toks, normalized(cd.score, toks.size() + 1, o.lenpen), cd.score});
          continue;
        }
        toks.push_back(cd.token);
        next.push_back({toks, cd.score});
        from.push_back(cd.k);
      }
      // Stop when K hypotheses are finished, or no live beam can beat the
      // best finished one (scores only fall as log-probabilities add up).
      if (static_cast<int>(finished[b].size()) >= K || next.empty() || at_limit) done[b] = true;
      while (static_cast<int>(next.size()) < K) {  // keep K rows for the tensors
        next.push_back({next.empty() ? std::vector<int32_t>{} : next.back().tokens, -INFINITY});
        from.push_back(from.empty() ? 0 : from.back());
      }
      for (int k = 0; k < K; ++k) {
        reorder[b * K + k] = static_cast<int32_t>(b * K + from[k]);
        last[b * K + k] = next[k].tokens.empty() ? o.eos_id : next[k].tokens.back();
      }
      bb = std::move(next);
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    model.reorder(state, Tensor::from_ints(reorder, {B * K}, ctx.device));
  }
  std::vector<std::vector<Hypothesis>> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    auto& f = finished[b];
    auto by_score = [](const Hypothesis& a, const Hypothesis& c) { return a.score > c.score; };
    std::stable_sort(f.begin(), f.end(), by_score);
    if (static_cast<int>(f.size()) < nbest) {  // too few ended: add the best live ones
      std::vector<Hypothesis> live;
      for (const Beam& bm : beams[b])
        if (std::isfinite(bm.log_prob))
          live.push_back(
              {bm.tokens, normalized(bm.log_prob, bm.tokens.size() + 1, o.lenpen), bm.log_prob});
      std::stable_sort(live.begin(), live.end(), by_score);
      for (auto& h : live)
        if (static_cast<int>(f.size()) < nbest) f.push_back(std::move(h));
    }
    if (static_cast<int>(f.size()) > nbest) f.resize(static_cast<size_t>(nbest));
    out[b] = std::move(f);
  }
  return out;
}

}  // namespace rotor::decode
