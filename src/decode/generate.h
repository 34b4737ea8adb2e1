// Text generation with a decoder-only language model (task lm, `rotor
// generate`): the prompts are prefilled in one forward that fills the
// key/value cache, then every row takes one token per step through it
// (models::DecoderLM::prefill, decode_step), each key rotated once, at its
// position. Rows of one batch have their own lengths and positions (each
// from 0); a finished row leaves the batch.
//
// The next token is the argmax (greedy), or drawn from the softmax of the
// logits divided by the temperature, kept to the top_k most likely tokens
// and then to the smallest most-likely set whose probability reaches top_p
// (nucleus sampling). Row r's draw at step s is Philox's number s of stream r
// under the seed: a row's continuation depends on the seed and its row id
// (the CLI's input line), not on the batch it shares. pad and bos are never
// emitted. A row ends at the end-of-text token (not part of its
// continuation), after max_new_tokens, or -- with a position table (learned,
// sinusoidal) -- when its sequence fills the table: the last token is the one
// predicted at position max_positions - 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/decoder_lm.h"

namespace rotor::decode {

struct SamplingOptions {
  bool greedy = false;       // argmax; the settings below are unused
  double temperature = 1.0;  // > 0
  int64_t top_k = 0;         // 0: every token
  double top_p = 1.0;        // in (0, 1]; 1: every token
  uint64_t seed = 1;
};

struct GenerateOptions {
  SamplingOptions sampling;
  int64_t max_new_tokens = 100;  // >= 1
  int32_t eos_id = 3, pad_id = 0, bos_id = 2;
};

enum class GenerationEnd {
  Eos,        // the model emitted the end-of-text token
  MaxTokens,  // max_new_tokens were generated
  Positions,  // the sequence filled the position table
};

struct Continuation {
  std::vector<int32_t> tokens;  // without the end-of-text token
  GenerationEnd end = GenerationEnd::MaxTokens;
};

// The next token of one row of logits [V] under `options`; `u` is the
// uniform draw in [0, 1) (unused by greedy); ids in `never` are not chosen.
// Throws rotor::Error when a logit is not finite or every id is excluded.
int32_t choose_token(std::span<const float> logits, const SamplingOptions& options, float u,
                     std::span<const int32_t> never);

// The uniform draw of row `row_id` at step `step` under `seed`.
float sampling_draw(uint64_t seed, uint64_t row_id, uint64_t step);

// The continuations of `prompts` (token ids, each non-empty and, with a
// position table, at most max_positions long), `row_ids` naming their random
// streams. Options out of range are a rotor::Error.
std::vector<Continuation> generate(models::DecoderLM& model,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const std::vector<uint64_t>& row_ids,
                                   const GenerateOptions& options, const nn::Context& ctx);

}  // namespace rotor::decode
