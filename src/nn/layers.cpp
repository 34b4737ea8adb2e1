#include "nn/layers.h"

#include <algorithm>

#include "nn/position.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "ops/reduce.h"

namespace rotor::nn {

// ---- LayerNorm --------------------------------------------------------------
// gamma and beta are read as the f32 masters whatever the activations' dtype:
// the statistics and the affine map are computed in f32 anyway (docs/design.md,
// "Precision"), and their gradients accumulate into the f32 buffer directly.

LayerNorm::LayerNorm(ParameterStore& store, const std::string& prefix, int64_t dim, float eps,
                     bool rms)
    : dim_(dim), eps_(eps), rms_(rms) {
  gamma_ = store.add(prefix + ".weight", {dim}, Init::ones(), true);
  if (!rms) beta_ = store.add(prefix + ".bias", {dim}, Init::zeros(), true);
}

const Tensor& LayerNorm::beta(const Context& ctx) const {
  if (beta_) return beta_->value;
  if (!zero_beta_.defined() || zero_beta_.device() != ctx.device)
    zero_beta_ = Tensor::zeros({dim_}, DType::F32, ctx.device);
  return zero_beta_;
}

Tensor& LayerNorm::dbeta() {
  if (beta_) return beta_->grad;
  if (!dbeta_scratch_.defined() || dbeta_scratch_.device() != x_.device())
    dbeta_scratch_ = Tensor::zeros({dim_}, DType::F32, x_.device());
  return dbeta_scratch_;  // accumulates what no parameter reads
}

Tensor LayerNorm::apply(const Tensor& x, const Context& ctx) const {
  Tensor y = ctx.empty(x.shape());                                   // [N, dim]
  Tensor mean = Tensor::empty({x.size(0)}, DType::F32, ctx.device);  // f32 [N]
  Tensor rstd = Tensor::empty({x.size(0)}, DType::F32, ctx.device);  // f32 [N]
  ops::layer_norm_forward(x, gamma_->value, beta(ctx), eps_, y, mean, rstd, rms_);
  return y;
}

Tensor LayerNorm::forward(const Tensor& x, const Context& ctx) {
  x_ = x;
  Tensor y = ctx.empty(x.shape());  // [N, dim]
  mean_ = Tensor::empty({x.size(0)}, DType::F32, ctx.device);
  rstd_ = Tensor::empty({x.size(0)}, DType::F32, ctx.device);
  ops::layer_norm_forward(x, gamma_->value, beta(ctx), eps_, y, mean_, rstd_, rms_);
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy) {
  Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());  // [N, dim]
  ops::layer_norm_backward(dy, x_, gamma_->value, mean_, rstd_, dx, gamma_->grad, dbeta(), rms_);
  x_ = mean_ = rstd_ = Tensor();
  return dx;
}

Tensor LayerNorm::backward_add(const Tensor& dy, const Tensor& residual) {
  Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());  // [N, dim]
  ops::layer_norm_backward_add(dy, x_, gamma_->value, mean_, rstd_, residual, dx, gamma_->grad,
                               dbeta(), rms_);
  x_ = mean_ = rstd_ = Tensor();
  return dx;
}

// ---- Dropout ----------------------------------------------------------------

Tensor Dropout::forward(const Tensor& x, const Context& ctx) {
  active_ = ctx.training && p_ > 0.0f;
  if (!active_) return x;
  seed_ = ctx.seed;
  stream_ = ctx.stream(layer_id_, RngPurpose::Dropout);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());  // [shape of x]
  ops::dropout_forward(x, y, p_, seed_, stream_);
  return y;
}

Tensor Dropout::forward_add(const Tensor& residual, const Tensor& x, const Context& ctx) {
  active_ = ctx.training && p_ > 0.0f;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());  // [shape of x]
  if (!active_) {
    ops::add(residual, x, y);
    return y;
  }
  seed_ = ctx.seed;
  stream_ = ctx.stream(layer_id_, RngPurpose::Dropout);
  ops::dropout_add_forward(residual, x, p_, seed_, stream_, y);
  return y;
}

Tensor Dropout::backward(const Tensor& dy) {
  if (!active_) return dy;
  Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());  // [shape of dy]
  ops::dropout_backward(dy, dx, p_, seed_, stream_);
  return dx;
}

// ---- Embedding --------------------------------------------------------------

Embedding::Embedding(ParameterStore& store, const std::string& name, int64_t vocab, int64_t dim,
                     int pad_id, Init init)
    : pad_id_(pad_id) {
  init.pad_row = pad_id;
  table_ = store.add(name, {vocab, dim}, init);
}

Tensor Embedding::apply(const Tensor& ids, const Context& ctx) const {
  Tensor out = ctx.empty({ids.numel(), table_->shape[1]});  // [N, dim], N = ids.numel()
  ops::embedding_forward(ids.view({ids.numel()}), table_->value_in(ctx.dtype), scale_, out);
  return out;
}

Tensor Embedding::forward(const Tensor& ids, const Context& ctx) {
  return apply(ids, ctx);
}

void Embedding::backward(const Tensor& ids, const Tensor& dy) {
  ops::embedding_backward(ids.view({ids.numel()}), dy.view({ids.numel(), table_->shape[1]}), scale_,
                          table_->grad, pad_id_);
}

// ---- Position encodings -----------------------------------------------------

PositionEncoding::PositionEncoding(ParameterStore& store, const std::string& name,
                                   PositionKind kind, int64_t max_positions, int64_t dim,
                                   double init_std)
    : kind_(kind), max_positions_(max_positions), dim_(dim) {
  if (kind->learned_table) table_ = store.add(name, {max_positions, dim}, Init::normal(init_std));
  if (kind->fixed_table) fixed_ = kind->fixed_table(max_positions, dim);
}

Tensor PositionEncoding::rows(int64_t T, int64_t offset, const Context& ctx) const {
  if (offset + T > max_positions_)
    ROTOR_FAIL("sequence of {} positions exceeds model.max_positions = {}", offset + T,
               max_positions_);
  if (table_) return table_->value_in(ctx.dtype).narrow(offset, T);
  // f32 [T, d] on the CPU
  Tensor r = fixed_.narrow(offset, T);
  if (ctx.device.is_cuda() || ctx.dtype != DType::F32) {
    // f32 [T, d] on ctx.device
    Tensor dev = r.to(ctx.device);
    if (ctx.dtype == DType::F32) return dev;
    // [T, d]
    Tensor cast = ctx.empty({T, dim_});
    ops::cast(dev, cast);
    return cast;
  }
  return r;
}

void PositionEncoding::add(Tensor& x, int64_t offset, const Context& ctx) const {
  if (!kind_->adds_to_embeddings()) return;
  const int64_t B = x.size(0), T = x.size(1);
  Tensor pos = rows(T, offset, ctx);  // [T, d]
  // [B, T*d]
  Tensor flat = x.view({B, T * dim_});
  ops::add_bias(flat, pos.view({T * dim_}));
}

void PositionEncoding::backward(const Tensor& dx, int64_t offset) {
  if (!table_) return;
  const int64_t B = dx.size(0), T = dx.size(1);
  // f32 [T*d]
  Tensor grad = table_->grad.narrow(offset, T).view({T * dim_});
  ops::sum_rows(dx.view({B, T * dim_}), grad, true);
}

void PositionEncoding::add_at(Tensor& x, const Tensor& positions, const Context& ctx) const {
  if (!kind_->adds_to_embeddings()) return;
  const int64_t N = x.size(0) * x.size(1);
  ROTOR_CHECK(positions.numel() == N, "{} positions for {} tokens", positions.numel(), N);
  Tensor table = rows(max_positions_, 0, ctx);  // [max_positions, d]
  Tensor pos = ctx.empty({N, dim_});            // [N, d]
  try {
    ops::embedding_forward(positions.view({N}), table, 1.0f, pos);
  } catch (const Error&) {
    const std::vector<int32_t> p = positions.to_ints();
    ROTOR_FAIL("position {} is not below model.max_positions = {}",
               *std::max_element(p.begin(), p.end()), max_positions_);
  }
  Tensor flat = x.view({N, dim_});  // [N, d]
  ops::add(flat, pos, flat);
}

void PositionEncoding::backward_at(const Tensor& dx, const Tensor& positions) {
  if (!table_) return;
  const int64_t N = positions.numel();
  ops::embedding_backward(positions.view({N}), dx.view({N, dim_}), 1.0f, table_->grad, -1);
}

}  // namespace rotor::nn
