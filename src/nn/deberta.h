// DeBERTa's relative embeddings (He et al. 2021; model.position deberta),
// shared by every layer of the BERT encoder as DeBERTa-v2 shares them: a
// learned table [2 span, d] (PREFIX.rel_embeddings.weight) normalized by
// its own LayerNorm (PREFIX.LayerNorm), once per forward. Each layer
// projects the normalized rows with its own query and key projections
// (DeBERTa-v2's share_att_key) and adds the content-to-position and
// position-to-content terms to its scores (nn/attention.cpp,
// ops/deberta_bias.h); the rows each (i, j) reads come from
// core/deberta_bias.h. The layers add their gradients of the normalized
// rows into embeddings_grad(); backward() carries the sum through the
// LayerNorm to the table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/context.h"
#include "nn/layers.h"
#include "nn/parameters.h"

namespace rotor::nn {

struct DebertaOptions {
  int64_t position_buckets = 256;        // model.deberta.position_buckets (0: no buckets)
  int64_t max_relative_positions = 512;  // model.deberta.max_relative_positions
};

class DebertaRelative {
 public:
  DebertaRelative(ParameterStore& store, const std::string& prefix, const DebertaOptions& options,
                  int64_t d, float eps, double init_std);
  // The normalized rows and the row of each (i, j) of a [T, T] score matrix;
  // embeddings_grad() zeroed. Once per forward, before the layers.
  void prepare(int64_t T, const Context& ctx);
  const Tensor& embeddings() const { return rows_; }  // f32 [2 span, d]
  Tensor& embeddings_grad() { return rows_grad_; }    // f32 [2 span, d]
  const Tensor& rows() const { return index_; }       // i32 [T, T] on the device
  // After the layers' backward: the LayerNorm's and the table's gradients.
  void backward();

 private:
  DebertaOptions options_;
  int64_t span_;
  Parameter* table_;
  std::unique_ptr<LayerNorm> norm_;
  Tensor rows_, rows_grad_;  // f32 [2 span, d]
  Tensor index_;             // i32 [T, T]
  int64_t T_ = -1;
};

}  // namespace rotor::nn
