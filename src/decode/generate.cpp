#include "decode/generate.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/philox.h"
#include "nn/position.h"

namespace rotor::decode {

float sampling_draw(uint64_t seed, uint64_t row_id, uint64_t step) {
  return philox_uniform(seed, rng_stream(row_id, 0, RngPurpose::Sampling, 0), step);
}

int32_t choose_token(std::span<const float> logits, const SamplingOptions& o, float u,
                     std::span<const int32_t> never) {
  const int32_t V = static_cast<int32_t>(logits.size());
  std::vector<int32_t> ids;
  ids.reserve(logits.size());
  for (int32_t t = 0; t < V; ++t) {
    if (!std::isfinite(logits[static_cast<size_t>(t)]))
      ROTOR_FAIL("generate: the logit of token {} is {}", t, logits[static_cast<size_t>(t)]);
    if (std::find(never.begin(), never.end(), t) == never.end()) ids.push_back(t);
  }
  if (ids.empty()) ROTOR_FAIL("generate: no token of the {} may be emitted", V);
  // Most likely first; ties by id, so that the order is the same everywhere.
  auto more_likely = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  if (o.greedy) return *std::min_element(ids.begin(), ids.end(), more_likely);
  size_t keep = ids.size();
  if (o.top_k > 0) keep = std::min(keep, static_cast<size_t>(o.top_k));
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(),
                    more_likely);
  // Probabilities of the kept tokens under the temperature (max-shifted).
  const double top = logits[static_cast<size_t>(ids[0])];
  std::vector<double> p(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    p[i] = std::exp((logits[static_cast<size_t>(ids[i])] - top) / o.temperature);
    total += p[i];
  }
  if (o.top_p < 1.0) {  // the smallest prefix whose probability reaches top_p
    double acc = 0;
    size_t n = 0;
    while (n < keep) {
      acc += p[n++];
      if (acc >= o.top_p * total) break;
    }
    keep = n;
    total = acc;
  }
  const double target = static_cast<double>(u) * total;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (target < acc) return ids[i];
  }
  return ids[keep - 1];  // u * total rounded up to the sum
}

std::vector<Continuation> generate(models::DecoderLM& model,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const std::vector<uint64_t>& row_ids, const GenerateOptions& o,
                                   const nn::Context& ctx) {
  const SamplingOptions& so = o.sampling;
  if (!so.greedy && !(std::isfinite(so.temperature) && so.temperature > 0))
    ROTOR_FAIL("generate: temperature {} must be above 0", so.temperature);
  if (!so.greedy && (so.top_k < 0 || !(so.top_p > 0 && so.top_p <= 1)))
    ROTOR_FAIL("generate: top_k {} must not be negative, top_p {} must be in (0, 1]", so.top_k,
               so.top_p);
  if (o.max_new_tokens < 1) ROTOR_FAIL("generate: max_new_tokens {} below 1", o.max_new_tokens);
  ROTOR_CHECK(prompts.size() == row_ids.size(), "generate: {} prompts and {} row ids",
              prompts.size(), row_ids.size());
  const int64_t B = static_cast<int64_t>(prompts.size());
  std::vector<Continuation> out(static_cast<size_t>(B));
  if (B == 0) return out;
  const models::DecoderLmOptions& mo = model.options();
  const bool table = nn::has_position_table(mo.position);
  const int64_t V = mo.vocab_size;
  // Row b may generate budget[b] tokens; all but the last are fed back.
  std::vector<int64_t> lengths(static_cast<size_t>(B)), budget(static_cast<size_t>(B));
  int64_t T = 1, slots = 1;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = static_cast<int64_t>(prompts[b].size());
    if (L < 1) ROTOR_FAIL("generate: prompt {} is empty", b);
    if (table && L > mo.max_positions)
      ROTOR_FAIL("generate: prompt {} has {} tokens, more than model.max_positions = {}", b, L,
                 mo.max_positions);
    lengths[b] = L;
    budget[b] = table ? std::min(o.max_new_tokens, mo.max_positions - L + 1) : o.max_new_tokens;
    T = std::max(T, L);
    slots = std::max(slots, L + budget[b] - 1);
  }
  std::vector<int32_t> flat(static_cast<size_t>(B * T), o.pad_id);  // [B, T]
  for (int64_t b = 0; b < B; ++b)
    std::copy(prompts[b].begin(), prompts[b].end(), flat.begin() + b * T);
  models::LmDecodeState state;
  Tensor logits = model.prefill(state, Tensor::from_ints(flat, {B, T}, ctx.device), lengths,
                                std::max(slots, T), ctx);  // [B, V]
  const int32_t never[] = {o.pad_id, o.bos_id};
  std::vector<int32_t> live(static_cast<size_t>(B));  // the input row of each state row
  for (int64_t b = 0; b < B; ++b) live[b] = static_cast<int32_t>(b);
  for (uint64_t step = 0; !live.empty(); ++step) {
    const std::vector<float> lg = logits.to_floats();  // [live, V]
    std::vector<int32_t> keep, next;                   // state rows kept, their tokens
    for (size_t i = 0; i < live.size(); ++i) {
      const size_t b = static_cast<size_t>(live[i]);
      const float u = so.greedy ? 0.0f : sampling_draw(so.seed, row_ids[b], step);
      const int32_t tok = choose_token(
          std::span<const float>(lg.data() + static_cast<int64_t>(i) * V, static_cast<size_t>(V)),
          so, u, never);
      Continuation& c = out[b];
      if (tok == o.eos_id) {
        c.end = GenerationEnd::Eos;
        continue;
      }
      c.tokens.push_back(tok);
      if (static_cast<int64_t>(c.tokens.size()) >= budget[b]) {
        c.end = budget[b] < o.max_new_tokens ? GenerationEnd::Positions : GenerationEnd::MaxTokens;
        continue;
      }
      keep.push_back(static_cast<int32_t>(i));
      next.push_back(tok);
    }
    if (keep.empty()) break;
    if (keep.size() < live.size()) {
      model.keep_rows(state, keep, ctx);
      std::vector<int32_t> rows;
      for (int32_t i : keep) rows.push_back(live[static_cast<size_t>(i)]);
      live = std::move(rows);
    }
    const int64_t n = static_cast<int64_t>(next.size());
    logits = model.decode_step(state, Tensor::from_ints(next, {n}, ctx.device), ctx);
  }
  return out;
}

}  // namespace rotor::decode
