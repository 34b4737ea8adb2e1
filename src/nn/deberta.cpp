#include "nn/deberta.h"

#include "core/deberta_bias.h"
#include "core/error.h"
#include "ops/elementwise.h"

namespace rotor::nn {

DebertaRelative::DebertaRelative(ParameterStore& store, const std::string& prefix,
                                 const DebertaOptions& options, int64_t d, float eps,
                                 double init_std)
    : options_(options),
      span_(deberta::span(options.position_buckets, options.max_relative_positions)) {
  ROTOR_CHECK(span_ >= 1, "DeBERTa: a relative span of {} rows", span_);
  table_ = store.add(prefix + ".rel_embeddings.weight", {2 * span_, d}, Init::normal(init_std));
  norm_ = std::make_unique<LayerNorm>(store, prefix + ".LayerNorm", d, eps);
}

void DebertaRelative::prepare(int64_t T, const Context& ctx) {
  // The relative rows compute in f32 from the f32 masters whatever the
  // activations' dtype (fp16/bf16 training too), as the terms that read them.
  Context c32 = ctx;
  c32.dtype = DType::F32;
  rows_ = norm_->forward(table_->value, c32);  // f32 [2 span, d]
  if (!rows_grad_.defined() || rows_grad_.shape() != rows_.shape() ||
      rows_grad_.device() != rows_.device())
    rows_grad_ = Tensor::empty(rows_.shape(), DType::F32, rows_.device());
  rows_grad_.zero_();
  if (T != T_ || !index_.defined() || index_.device() != rows_.device()) {
    index_ = Tensor::from_ints(
        deberta::relative_rows(T, T, 0, options_.position_buckets, options_.max_relative_positions),
        {T, T}, rows_.device());  // i32 [T, T]
    T_ = T;
  }
}

void DebertaRelative::backward() {
  ROTOR_CHECK(rows_.defined(), "DeBERTa: backward before a forward");
  const Tensor dtable = norm_->backward(rows_grad_);  // [2 span, d]
  ops::add(table_->grad, dtable, table_->grad);
}

}  // namespace rotor::nn
