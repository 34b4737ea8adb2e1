// What a forward pass needs to know beyond its inputs: training or not, the
// device and dtype of activations, and the keys of its random streams; and,
// for the backward, whom to tell that gradients are final (grad_ready).
#pragma once

#include <cstdint>
#include <functional>

#include "core/philox.h"
#include "core/tensor.h"
#include "nn/parameters.h"

namespace rotor::nn {

// Gradient readiness (data-parallel bucketing, parallel::GradientBuckets).
//
// A model's backward calls the hook with a range [begin, end) of flat elements
// of its ParameterStore once the gradients there are final for this backward:
// nothing later in the same backward writes them again. The models report
// whole layers (an encoder/decoder/BERT layer, the final norm, the MLM head,
// the position table, the embeddings) right after that layer's backward, so
// everything a layer does to its own gradients (the fused QKV projection's
// one GEMM, zeroing the key bias without RoPE) is done by then. A parameter
// used more than once is reported after its last use: the tied embedding
// matrix (input embeddings and output projection) only after the last
// embedding backward. Every parameter is reported exactly once per backward
// (tests/cpu/test_grad_ready.cpp), in descending order of offset, since
// parameters are laid out in construction order and backward runs the layers
// backwards; the buckets, cut from the end of the buffer, then fill one after
// the other.
//
// The hook rides on the Context the model saves in forward_loss (the task
// passes the trainer's Context through unchanged), so neither the tasks nor
// the layers know about it; an empty hook (the default, and every micro-batch
// but the last of an update) costs nothing.
using GradReadyHook = std::function<void(int64_t begin, int64_t end)>;

// The parameters a part of a model registered: indices [first, last) of
// ParameterStore::parameters(). Take mark() before and after constructing it.
struct ParamRange {
  size_t first = 0, last = 0;
  static size_t mark(const ParameterStore& store) { return store.parameters().size(); }
  bool empty() const { return first >= last; }
};

// Phase marks for benchmarks (`rotor bench train`, train/bench.cpp): a
// task's train_micro_batch calls forward_begins once its batch is on the
// device and backward_begins once the loss is computed. Training leaves
// Context::phase_hook null, and the marks cost a null check.
struct PhaseHook {
  virtual ~PhaseHook() = default;
  // The model's input: [sequences, src_len] (encoder) and [sequences,
  // tgt_len] (decoder; 0 for an encoder-only model), padded.
  virtual void forward_begins(int64_t sequences, int64_t src_len, int64_t tgt_len) = 0;
  virtual void backward_begins() = 0;
};

struct Context {
  bool training = false;
  Device device = Device::cpu();
  DType dtype = DType::F32;  // activations
  uint64_t seed = 0;
  // The micro-batch counter (across updates and ranks): a new dropout mask
  // every micro-batch. Not an update count: that is `update` below.
  uint64_t micro_step = 0;
  // The training update this forward belongs to (0-based: the updates done
  // before it), set by the training step (train/step.cpp). Layers with
  // random features redraw them by it (nn/attention_kind.h, feature_draw),
  // so every rank and a resumed run agree; 0 outside training.
  uint64_t update = 0;
  uint32_t rank = 0;
  // The factor a task's backward multiplies the loss gradient by: the fp16
  // loss scale (train/loss_scaler.h); 1 otherwise.
  float loss_scale = 1.0f;
  GradReadyHook grad_ready;         // see above; empty: nobody listens
  PhaseHook* phase_hook = nullptr;  // see PhaseHook; null outside benchmarks

  uint64_t stream(uint32_t layer_id, RngPurpose purpose) const {
    return rng_stream(micro_step, layer_id, purpose, rank);
  }
  Tensor empty(const Shape& shape) const { return Tensor::empty(shape, dtype, device); }
  Tensor zeros(const Shape& shape) const { return Tensor::zeros(shape, dtype, device); }

  // Tells grad_ready that the gradients of `range` of `store` are final: one
  // call over the flat elements when the parameters lie back to back (add()
  // lays them out so), else one call per parameter.
  void report_grads_ready(const ParameterStore& store, ParamRange range) const {
    if (!grad_ready || range.empty()) return;
    const auto& params = store.parameters();
    const auto end_of = [&](size_t i) { return params[i]->offset + shape_numel(params[i]->shape); };
    bool contiguous = true;
    for (size_t i = range.first + 1; i < range.last; ++i)
      contiguous = contiguous && params[i]->offset == end_of(i - 1);
    if (contiguous) {
      grad_ready(params[range.first]->offset, end_of(range.last - 1));
      return;
    }
    for (size_t i = range.last; i-- > range.first;) grad_ready(params[i]->offset, end_of(i));
  }
};

// A forward outside training on `device`: no dropout, update 0 (layers with
// random features keep the draw they trained with, else draw 0).
inline Context inference_context(Device device) {
  Context ctx;
  ctx.training = false;
  ctx.device = device;
  return ctx;
}

}  // namespace rotor::nn
