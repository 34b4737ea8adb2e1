#include "nn/linear.h"

#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/reduce.h"

namespace rotor::nn {

void Linear::share_rows(const std::vector<int32_t>& rows) {
  for (int32_t r : rows)
    ROTOR_CHECK(r >= 0 && r < out_, "linear: shared row {} outside [0, {})", r, out_);
  rows_ = rows;
  rows_index_ = Tensor();
}

namespace {

// share_rows' map as i32 [out] on `device`, made once per device.
const Tensor& rows_on(const std::vector<int32_t>& rows, Tensor& cached, Device device) {
  if (!cached.defined() || cached.device() != device)
    cached = Tensor::from_ints(rows, {static_cast<int64_t>(rows.size())}).to(device);
  return cached;
}

}  // namespace

Tensor Linear::used_weight(DType dtype) const {
  const Tensor w = weight(dtype);  // [stored, in]
  if (rows_.empty()) return w;
  rows_on(rows_, rows_index_, w.device());
  Tensor g = Tensor::empty({out_features(), in_}, w.dtype(), w.device());  // [out, in]
  ops::embedding_forward(rows_index_, w, 1.0f, g);
  return g;
}

Tensor Linear::used_bias(DType dtype) const {
  const Tensor b = bias(dtype);  // [stored]
  if (rows_.empty() || !b.defined()) return b;
  rows_on(rows_, rows_index_, b.device());
  Tensor g = Tensor::empty({out_features(), 1}, b.dtype(), b.device());  // [out, 1]
  ops::embedding_forward(rows_index_, b.view({out_, 1}), 1.0f, g);
  return g.view({out_features()});
}

Linear::Linear(ParameterStore& store, const std::string& prefix, int64_t in, int64_t out, bool bias,
               Init weight_init, ops::Activation activation)
    : Linear(store, std::vector<std::string>{prefix}, in, std::vector<int64_t>{out}, bias,
             weight_init) {
  activation_ = activation;
}

Linear::Linear(ParameterStore& store, const std::vector<std::string>& prefixes, int64_t in,
               const std::vector<int64_t>& outs, bool bias, Init weight_init)
    : store_(&store), in_(in), out_(0), activation_(ops::Activation::None) {
  for (size_t i = 0; i < prefixes.size(); ++i) {
    weights_.push_back(store.add(prefixes[i] + ".weight", {outs[i], in}, weight_init));
    out_ += outs[i];
  }
  if (bias)
    for (size_t i = 0; i < prefixes.size(); ++i)
      biases_.push_back(store.add(prefixes[i] + ".bias", {outs[i]}, Init::zeros(), true));
}

Tensor Linear::apply(const Tensor& x, const Context& ctx) const {
  ROTOR_CHECK(x.dim() == 2 && x.size(1) == in_, "linear: input {} for {} inputs", x.str(), in_);
  Tensor y = ctx.empty({x.size(0), out_features()});  // [N, out]
  ops::GemmOptions o;
  o.trans_b = true;
  o.bias = used_bias(ctx.dtype);
  o.activation = activation_;
  ops::gemm(x, used_weight(ctx.dtype), y, o);
  return y;
}

Tensor Linear::forward(const Tensor& x, const Context& ctx) {
  ROTOR_CHECK(x.dim() == 2 && x.size(1) == in_, "linear: input {} for {} inputs", x.str(), in_);
  x_ = x;
  const int64_t out = out_features();
  Tensor y = ctx.empty({x.size(0), out});  // [N, out]
  ops::GemmOptions o;
  o.trans_b = true;
  o.bias = used_bias(ctx.dtype);
  o.activation = activation_;
  if (activation_ != ops::Activation::None) {
    pre_ = ctx.empty({x.size(0), out});
    o.pre_activation = pre_;
  }
  const Tensor w = used_weight(ctx.dtype);  // [out, in]
  if (!rows_.empty()) shared_w_ = w;        // gathered once per step
  ops::gemm(x, w, y, o);
  return y;
}

Tensor Linear::backward(const Tensor& dy, bool need_dx) {
  ROTOR_CHECK(x_.defined(), "linear backward without forward");
  Tensor dz = dy;  // [N, out]
  if (activation_ != ops::Activation::None) {
    dz = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    ops::activation_backward(dy, pre_, dz, activation_);
  }
  // dW += dz^T x: [out, N] x [N, in]
  Tensor dw = weight_grad();  // f32 [stored, in]
  ops::GemmOptions gw;
  gw.trans_a = true;
  if (rows_.empty()) {
    gw.beta = 1.0f;
    ops::gemm(dz, x_, dw, gw);
  } else {  // each output's gradient, then added into its stored row
    Tensor dwo = Tensor::empty({out_features(), in_}, DType::F32, dz.device());  // [out, in]
    ops::gemm(dz, x_, dwo, gw);
    ops::embedding_backward(rows_index_, dwo, 1.0f, dw);
  }
  if (!biases_.empty()) {
    Tensor db = bias_grad();  // f32 [stored]
    if (rows_.empty()) {
      ops::sum_rows(dz, db, true);
    } else {
      Tensor dbo = Tensor::empty({out_features()}, DType::F32, dz.device());  // [out]
      ops::sum_rows(dz, dbo, false);
      Tensor db2 = db.view({out_, 1});  // [stored, 1]
      ops::embedding_backward(rows_index_, dbo.view({out_features(), 1}), 1.0f, db2);
    }
  }
  Tensor dx;  // [N, in], undefined when !need_dx
  if (need_dx) {
    dx = Tensor::empty({dz.size(0), in_}, dz.dtype(), dz.device());
    const bool kept = shared_w_.defined() && shared_w_.dtype() == dz.dtype();
    ops::gemm(dz, kept ? shared_w_ : used_weight(dz.dtype()), dx, {});
  }
  x_ = pre_ = shared_w_ = Tensor();
  return dx;
}

}  // namespace rotor::nn
