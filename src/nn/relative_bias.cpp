#include "nn/relative_bias.h"

#include "core/error.h"
#include "core/t5_bias.h"
#include "ops/embedding.h"

namespace rotor::nn {

RelativeBias::RelativeBias(ParameterStore& store, const std::string& name,
                           const RelativeBiasOptions& options, double init_std)
    : options_(options) {
  ROTOR_CHECK(options.heads > 0 && options.buckets >= 2 && options.max_distance >= 1,
              "T5 relative bias: {} heads, {} buckets, max distance {}", options.heads,
              options.buckets, options.max_distance);
  table_ = store.add(name, {options.buckets, options.heads}, Init::normal(init_std), true);
}

void RelativeBias::prepare(const Context& ctx) {
  const int64_t rows = 2 * options_.max_distance + 1;
  if (!ids_.defined() || ids_.device() != ctx.device)
    ids_ = Tensor::from_ints(
        t5::relative_ids(options_.buckets, options_.max_distance, options_.bidirectional), {rows},
        ctx.device);
  if (!rows_.defined() || rows_.device() != ctx.device) {
    rows_ = Tensor::empty({rows, options_.heads}, DType::F32, ctx.device);
    rows_grad_ = Tensor::empty({rows, options_.heads}, DType::F32, ctx.device);
  }
  ops::embedding_forward(ids_, table_->value, 1.0f, rows_);
  rows_grad_.zero_();
}

void RelativeBias::backward() {
  ROTOR_CHECK(rows_grad_.defined(), "T5 relative bias: backward before any forward");
  ops::embedding_backward(ids_, rows_grad_, 1.0f, table_->grad, -1);
}

}  // namespace rotor::nn
