// T5's relative position bias of one stack of layers (model.position t5;
// Raffel et al. 2020): a learned scalar per bucket and head, the buckets of
// core/t5_bias.h, shared by every self-attention of the stack (T5 computes it
// in the first layer and hands it on). Cross-attention carries none.
//
// The table is a parameter [buckets, H], as Hugging Face's T5 keeps it. At the
// start of each forward (or decoding pass) the model gathers it into the rows
// the attention cores read, one per relative position r = key - query in
// [-max_distance, max_distance] (f32 [2 max_distance + 1, H],
// ops::AttentionOptions::rel_bias); the layers' backward passes add their
// gradients into the rows' gradient, and the model's backward, once every
// layer is done, scatters it back into the table's (ops::embedding_backward:
// the same sums in the same order on every run).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "nn/context.h"
#include "nn/parameters.h"

namespace rotor::nn {

struct RelativeBiasOptions {
  int64_t heads = 8;
  int64_t buckets = 32;        // model.t5.buckets
  int64_t max_distance = 128;  // model.t5.max_distance
  bool bidirectional = true;   // an encoder; a causal stack (decoder, LM) is not
};

class RelativeBias {
 public:
  // Registers `name` [buckets, heads], drawn from N(0, init_std).
  RelativeBias(ParameterStore& store, const std::string& name, const RelativeBiasOptions& options,
               double init_std);
  // Gathers the table as it stands into rows() on ctx.device, and zeroes
  // rows_grad(): once per forward or decoding pass, before its layers run.
  void prepare(const Context& ctx);
  const Tensor& rows() const { return rows_; }  // f32 [2 max_distance + 1, H]
  Tensor& rows_grad() { return rows_grad_; }    // f32 [2 max_distance + 1, H]
  int64_t max_distance() const { return options_.max_distance; }
  const RelativeBiasOptions& options() const { return options_; }
  // Adds rows_grad() into the table's gradient: after the stack's backward.
  void backward();
  Parameter* table() const { return table_; }

 private:
  RelativeBiasOptions options_;
  Parameter* table_;
  Tensor ids_;               // i32 [2 max_distance + 1]: the bucket of each row (t5::relative_ids)
  Tensor rows_, rows_grad_;  // f32 [2 max_distance + 1, H]
};

}  // namespace rotor::nn
