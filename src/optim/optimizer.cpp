#include "optim/optimizer.h"

#include <cmath>

#include "ops/adamw.h"
#include "ops/reduce.h"

namespace rotor::optim {

ops::AdamWOptions adamw_options(const OptimizerOptions& options, double lr, int64_t step,
                                double grad_multiplier, double grad_norm) {
  double scale = grad_multiplier;
  if (options.clip_norm > 0 && grad_norm > options.clip_norm)
    scale *= options.clip_norm / (grad_norm + 1e-6);
  ops::AdamWOptions o;
  o.lr = static_cast<float>(lr);
  o.beta1 = static_cast<float>(options.beta1);
  o.beta2 = static_cast<float>(options.beta2);
  o.eps = static_cast<float>(options.eps);
  o.step = step;
  o.grad_multiplier = static_cast<float>(scale);
  return o;
}

void set_weight_decay(ops::AdamWOptions& o, const OptimizerOptions& options, bool no_decay) {
  const float wd = no_decay ? 0.0f : static_cast<float>(options.weight_decay);
  o.weight_decay = options.decoupled ? wd : 0.0f;
  o.l2 = options.decoupled ? 0.0f : wd;
}

std::vector<DecayRun> decay_runs(const nn::ParameterStore& store) {
  std::vector<DecayRun> runs;
  for (const auto& p : store.parameters()) {
    const int64_t n = shape_numel(p->shape);
    if (!runs.empty() && runs.back().no_decay == p->no_decay &&
        runs.back().begin + runs.back().count == p->offset)
      runs.back().count += n;
    else
      runs.push_back({p->offset, n, p->no_decay});
  }
  return runs;
}

Optimizer::Optimizer(nn::ParameterStore& store, const OptimizerOptions& options)
    : store_(&store), options_(options) {
  ROTOR_CHECK(store.allocated(), "optimizer over unallocated parameters");
  m_ = Tensor::zeros({store.numel()}, DType::F32, store.device());
  v_ = Tensor::zeros({store.numel()}, DType::F32, store.device());
}

StepInfo Optimizer::step(double lr, double grad_multiplier) {
  StepInfo info;
  Tensor& grads = store_->grads();
  // The norm decides clipping and catches inf/NaN; it needs one host read.
  const double norm = ops::global_norm({grads}).item() * grad_multiplier;
  info.grad_norm = norm;
  if (!std::isfinite(norm)) {
    info.skipped = true;
    return info;
  }
  ops::AdamWOptions o = adamw_options(options_, lr, ++step_, grad_multiplier, norm);
  // Runs of consecutive parameters with the same decay flag: one call each.
  if (options_.weight_decay == 0.0) {  // one call over the whole buffer
    ops::adamw_step(store_->values(), grads, m_, v_, o);
    return info;
  }
  for (const DecayRun& r : decay_runs(*store_)) {
    set_weight_decay(o, options_, r.no_decay);
    Tensor p = store_->values().narrow(r.begin, r.count), g = grads.narrow(r.begin, r.count);
    Tensor m = m_.narrow(r.begin, r.count), v = v_.narrow(r.begin, r.count);
    ops::adamw_step(p, g, m, v, o);
  }
  return info;
}

}  // namespace rotor::optim
