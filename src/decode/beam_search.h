// Batched beam search (greedy is beam 1) over the encoder-decoder with cached
// keys and values, fairseq's length penalty: a finished hypothesis scores
// sum(log p) / length^lenpen, length counting the </s>. The output length is
// at most max_len_a * source_length + max_len_b, capped at max_positions - 1
// (the decoder's bos takes a position); a model without a position table
// (RoPE, none) is capped only at the larger of that and source_length +
// max_len_b, so a long source is never cut to the positions it was trained on.
#pragma once

#include <cstdint>
#include <vector>

#include "models/transformer.h"

namespace rotor::decode {

struct SearchOptions {
  int beam = 4;
  double lenpen = 0.6;
  double max_len_a = 1.0;
  int64_t max_len_b = 50;
  int bos_id = 2, eos_id = 3, pad_id = 0;
};

struct Hypothesis {
  std::vector<int32_t> tokens;  // without </s>
  double score = 0;             // normalized
  double log_prob = 0;
};

// src i32 [B, S] (right padded), src_lengths i32 [B] -> the best hypothesis
// of each sentence. Options out of range (beam < 1, a non-finite lenpen or
// max_len_a, a negative max_len_b) are a rotor::Error.
std::vector<Hypothesis> beam_search(models::EncoderDecoder& model, const Tensor& src,
                                    const std::vector<int32_t>& src_lengths,
                                    const SearchOptions& options, const nn::Context& ctx);

// The `nbest` best hypotheses of each sentence (1 <= nbest <= options.beam),
// best first by score: the finished ones, then, when fewer than `nbest`
// finished, the best unfinished ones. A sentence may get fewer than `nbest`
// when its vocabulary offers fewer continuations.
std::vector<std::vector<Hypothesis>> beam_search_nbest(models::EncoderDecoder& model,
                                                       const Tensor& src,
                                                       const std::vector<int32_t>& src_lengths,
                                                       const SearchOptions& options, int nbest,
                                                       const nn::Context& ctx);

}  // namespace rotor::decode
