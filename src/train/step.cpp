#include "train/step.h"

#include <vector>

#include "core/error.h"

namespace rotor::train {

optim::OptimizerOptions optimizer_options(const Config& c) {
  optim::OptimizerOptions o;
  o.beta1 = c.optim.betas[0];
  o.beta2 = c.optim.betas[1];
  o.eps = c.optim.eps;
  o.weight_decay = c.optim.weight_decay;
  o.decoupled = c.optim.name == OptimizerName::AdamW;
  o.clip_norm = c.train.clip_norm;
  return o;
}

optim::ScheduleOptions schedule_options(const Config& c) {
  optim::ScheduleOptions s;
  s.kind = c.optim.schedule;
  s.lr = c.optim.lr;
  s.warmup_updates = c.optim.warmup_updates;
  s.warmup_init_lr = c.optim.warmup_init_lr;
  s.end_lr = c.optim.end_lr;
  s.max_updates = c.train.max_updates;
  return s;
}

UpdateStep::UpdateStep(const Config& c, tasks::TrainingTask& task, PrecisionPolicy& precision,
                       parallel::Communicator& comm, const Scheduler& scheduler)
    : config_(c),
      task_(task),
      precision_(precision),
      comm_(comm),
      scheduler_(scheduler),
      optimizer_(task.params(), optimizer_options(c)),
      schedule_(schedule_options(c)) {
  // A launched world of one (rotor launch -n 1, NCCL or Gloo) runs the
  // data-parallel path too: communicates() is false only for the local backend.
  const bool data_parallel = comm.communicates();
  if (c.dist.shard_optimizer && data_parallel)
    sharded_ = std::make_unique<parallel::ShardedAdamW>(task.params(), optimizer_options(c), comm);
  // Replicated moments: the gradients are all-reduced in buckets during the
  // backward of each update's last micro-batch, as the model reports its
  // layers final (nn::Context::grad_ready). Sharded: ShardedAdamW::step
  // reduce-scatters instead.
  if (data_parallel && !sharded_)
    buckets_ = std::make_unique<parallel::GradientBuckets>(
        task.params().grads(), parallel::backward_order_offsets(task.params()), c.dist.bucket_mb,
        comm);
  ctx_.training = true;
  ctx_.seed = static_cast<uint64_t>(c.seed);
  ctx_.dtype = precision.compute_dtype();
}

UpdateStep::~UpdateStep() = default;

void UpdateStep::optimizer_loaded() {
  if (sharded_) sharded_->import_from(optimizer_);
}

const optim::Optimizer& UpdateStep::gather_optimizer() {
  if (sharded_) sharded_->export_to(optimizer_, 0);
  return optimizer_;
}

UpdateResult UpdateStep::run(checkpoint::TrainerState& state, StepPhases* phases) {
  const Config& c = config_;
  const int world = comm_.world_size(), rank = comm_.rank();
  nn::ParameterStore& store = task_.params();
  UpdateResult r;
  const auto epochs_done = [&] { return scheduler_.epochs_done(task_.position().epoch); };
  ROTOR_CHECK(!epochs_done(), "update {} asked for after train.max_epochs", state.step + 1);
  ctx_.device = store.device();
  ctx_.phase_hook = phases;
  if (phases) phases->update_begins();
  store.zero_grad();
  ctx_.loss_scale = precision_.loss_scale();
  ctx_.update = static_cast<uint64_t>(state.step);  // this update, 0-based
  for (int micro = 0; micro < c.train.update_freq; ++micro) {
    // The last update of the last epoch may have fewer micro-batches (as
    // fairseq's); the all-reduce below launches whatever buckets are left.
    if (micro > 0 && epochs_done()) break;
    if (phases) phases->micro_batch_begins();
    // Dropout streams are keyed by the global index of the micro-batch, so
    // that N ranks draw the masks one process with update_freq x N draws.
    ctx_.micro_step = static_cast<uint64_t>((state.micro_step++) * world + rank);
    ctx_.rank = 0;
    // Earlier micro-batches accumulate locally; the last one launches buckets.
    const bool last_micro = micro + 1 == c.train.update_freq;
    ctx_.grad_ready = buckets_ && last_micro ? buckets_->hook() : nn::GradReadyHook();
    const tasks::TaskSums s = task_.train_micro_batch(ctx_);
    ctx_.grad_ready = nullptr;
    if (phases) phases->micro_batch_ends(s);
    r.sums.add(s);
  }
  if (buckets_) buckets_->finish();  // every bucket summed over the ranks
  if (comm_.communicates()) {
    std::vector<double> counts{r.sums.loss, r.sums.nll, static_cast<double>(r.sums.tokens),
                               static_cast<double>(r.sums.all_tokens),
                               static_cast<double>(r.sums.correct)};
    parallel::all_reduce_counts(comm_, counts);
    r.sums.loss = counts[0];
    r.sums.nll = counts[1];
    r.sums.tokens = static_cast<int64_t>(counts[2]);
    r.sums.all_tokens = static_cast<int64_t>(counts[3]);
    r.sums.correct = static_cast<int64_t>(counts[4]);
  }
  ctx_.phase_hook = nullptr;
  if (r.sums.tokens == 0) {  // the scheduler stops the run (Scheduler::after_update)
    if (phases) phases->optimizer_ends();
    return r;
  }
  const int64_t update = state.step + 1;
  r.lr = optim::learning_rate(schedule_, update);
  // Loss and gradients are normalized by the tokens of the whole update on
  // all ranks (target tokens for translation, masked tokens for masked-LM),
  // and the fp16 loss scale is divided out again.
  const double grad_multiplier = 1.0 / (static_cast<double>(r.sums.tokens) * ctx_.loss_scale);
  precision_.before_step(update);
  r.info =
      sharded_ ? sharded_->step(r.lr, grad_multiplier) : optimizer_.step(r.lr, grad_multiplier);
  // A non-finite gradient norm skipped the step (weights and moments
  // untouched): counted and logged, and the fp16 loss scale halves.
  precision_.after_step(r.info, update, state);
  state.step = update;
  if (phases) phases->optimizer_ends();
  return r;
}

}  // namespace rotor::train
