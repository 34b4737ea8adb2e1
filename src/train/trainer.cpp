#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/allocator.h"
#include "core/cuda_context.h"
#include "core/io.h"
#include "core/logging.h"
#include "data/batcher.h"
#include "parallel/communicator.h"
#include "parallel/data_parallel.h"
#include "parallel/signals.h"
#include "nn/parameters.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "checkpoint/checkpoint.h"
#include "train/metrics.h"
#include "train/precision.h"
#include "train/task.h"
#include "train/translation_data.h"

namespace fs = std::filesystem;

namespace rotor::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int64_t s = static_cast<int64_t>(seconds);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

}  // namespace

optim::OptimizerOptions optimizer_options(const Config& c) {
  optim::OptimizerOptions oo;
  oo.beta1 = c.optim.betas[0];
  oo.beta2 = c.optim.betas[1];
  oo.eps = c.optim.eps;
  oo.weight_decay = c.optim.weight_decay;
  oo.clip_norm = c.train.clip_norm;
  return oo;
}

optim::ScheduleOptions schedule_options(const Config& c) {
  optim::ScheduleOptions so;
  so.kind = c.optim.schedule;
  so.lr = c.optim.lr;
  so.warmup_updates = c.optim.warmup_updates;
  so.warmup_init_lr = c.optim.warmup_init_lr;
  so.end_lr = c.optim.end_lr;
  so.max_updates = c.train.max_updates;
  return so;
}

int run_training(const Config& c, const std::string& config_yaml, const TrainOptions& opts) {
  validate_for_training(c);
  if (c.task == Task::Translation) check_translation_data(c);  // fail before writing anything
  // One process per GPU (DESIGN.md decision 8): rank and world size come from
  // mpirun or srun; a plain `rotor train` is world size 1.
  const parallel::DistEnvironment env = parallel::detect_environment();
  Device device = resolve_device(c.device);
  if (device.is_cuda() && env.distributed())
    device = Device::cuda(env.local_rank % cuda_device_count());
  if (device.is_cuda()) cuda::set_device(device.index);
  parallel::install_stop_handlers();
  std::unique_ptr<parallel::Communicator> comm = parallel::make_communicator(device, c.dist.timeout_s);
  const int rank = comm->rank(), world = comm->world_size();
  const bool rank0 = rank == 0;
  if (rank0) ensure_directory(c.output_dir);
  LogOptions lo;
  lo.level = std::string(to_string(c.log_level));
  lo.file = rank0 ? (fs::path(c.output_dir) / "train.log").string() : "";
  lo.rank = rank;
  lo.world_size = world;
  setup_logging(lo);
  if (rank0) atomic_write_file((fs::path(c.output_dir) / "config.yaml").string(), config_yaml);
  log().info("rotor {} on {}: task {}, {} rank(s) ({} backend); output in {}", ROTOR_VERSION,
             device.str(), to_string(c.task), world, comm->backend(), c.output_dir);

  // Rank 0 prepares the data (tokenizer, binarized corpora) while the others
  // wait; they then find it prepared and only read it.
  auto make_task = [&] {
    return c.task == Task::Translation ? make_translation_task(c, device, rank, world)
                                       : make_mlm_task(c, device, rank, world);
  };
  std::unique_ptr<TrainingTask> task;
  if (!rank0) comm->barrier();
  task = make_task();
  if (rank0 && world > 1) comm->barrier();
  nn::ParameterStore& store = task->params();
  store.initialize(static_cast<uint64_t>(c.seed));
  log().info("model: {} parameters, {} positions, vocabulary {}", store.numel(),
             to_string(c.model.position), task->vocab_size());
  PrecisionPolicy precision(c, device, store);  // 16-bit weight copy, fp16 loss scaler

  const optim::OptimizerOptions oo = optimizer_options(c);
  optim::Optimizer optimizer(store, oo);  // full moments (world 1, or the unsharded case)
  std::unique_ptr<parallel::ShardedAdamW> sharded;
  if (c.dist.shard_optimizer && world > 1)
    sharded = std::make_unique<parallel::ShardedAdamW>(store, oo, *comm);
  const optim::ScheduleOptions so = schedule_options(c);

  checkpoint::TrainerState state;
  if (opts.resume) {
    if (!fs::exists(fs::path(c.output_dir) / "checkpoint_last")) {
      log().warn("--resume: no checkpoint in {} yet; starting from scratch", c.output_dir);
    } else {
      const std::string dir = checkpoint::resolve_checkpoint(c.output_dir);
      checkpoint::load_weights(dir, store);
      checkpoint::load_optimizer(dir, optimizer);
      state = checkpoint::load_trainer_state(dir);
      precision.restore(state);
      if (state.world_size != world) {
        // Checkpoints are independent of the world size: rank r of W reads
        // batches r, r+W, ... and keys dropout by the global micro-batch, so
        // the global counts carry over when the global batch is the same.
        const int64_t global_batches =
            static_cast<int64_t>(state.position.batch_index) * state.world_size;
        const int64_t global_micro = state.micro_step * state.world_size;
        if (global_batches % world != 0 || global_micro % world != 0)
          ROTOR_FAIL(
              "{}: saved by {} ranks at batch {} of epoch {}; {} ranks cannot continue the "
              "same batch stream (keep world_size x train.update_freq the same)",
              dir, state.world_size, global_batches, state.position.epoch + 1, world);
        log().info("resuming a {}-rank checkpoint on {} rank(s)", state.world_size, world);
        state.position.batch_index = static_cast<uint64_t>(global_batches / world);
        state.micro_step = global_micro / world;
      }
      task->set_position(state.position);
      log().info("resumed from {} at update {}", dir, state.step);
    }
  }
  if (sharded) sharded->import_from(optimizer);
  // Every rank starts from rank 0's weights.
  if (world > 1) parallel::broadcast_parameters(*comm, store);
  store.refresh_compute_copy();  // 16-bit weights from the masters as loaded or broadcast
  // World > 1 with replicated moments: the gradients are all-reduced in
  // buckets during the backward of each update's last micro-batch, as the
  // model reports its layers final (nn::Context::grad_ready). World 1: no
  // communication at all. Sharded: ShardedAdamW::step reduce-scatters.
  std::unique_ptr<parallel::GradientBuckets> buckets;
  if (world > 1 && !sharded)
    buckets = std::make_unique<parallel::GradientBuckets>(
        store.grads(), parallel::backward_order_offsets(store), c.dist.bucket_mb, *comm);

  MetricsWriter metrics =
      rank0 ? MetricsWriter((fs::path(c.output_dir) / "metrics.jsonl").string()) : MetricsWriter();
  auto save = [&] {
    if (sharded) sharded->export_to(optimizer, 0);  // collective: full moments on rank 0
    if (!rank0) return;
    state.position = task->position();
    state.world_size = world;
    checkpoint::CheckpointContents cc;
    cc.params = &store;
    cc.optimizer = &optimizer;
    cc.state = state;
    cc.config_yaml = config_yaml;
    cc.spm_model = task->tokenizer_path();
    std::string dir = checkpoint::save_checkpoint(c.output_dir, cc, c.train.keep_last);
    log().info("saved {}", dir);
  };

  nn::Context ctx;
  ctx.training = true;
  ctx.device = device;
  ctx.seed = static_cast<uint64_t>(c.seed);
  ctx.dtype = precision.compute_dtype();
  TaskSums window;
  int64_t win_updates = 0;
  auto win_start = Clock::now();
  const auto run_start = Clock::now();
  const double seconds_before = state.train_seconds;
  const int64_t first_step = state.step;
  bool stop = false;
  const auto per_token = [](double v, int64_t n) {
    return v / static_cast<double>(std::max<int64_t>(n, 1));
  };

  while (state.step < c.train.max_updates && !stop) {
    store.zero_grad();
    ctx.loss_scale = precision.loss_scale();
    TaskSums update;
    for (int micro = 0; micro < c.train.update_freq; ++micro) {
      if (c.train.max_epochs > 0 &&
          task->position().epoch >= static_cast<uint64_t>(c.train.max_epochs)) {
        stop = true;
        break;
      }
      // Dropout streams are keyed by the global index of the micro-batch, so
      // that N ranks draw the masks one process with update_freq x N draws.
      ctx.step = static_cast<uint64_t>((state.micro_step++) * world + rank);
      ctx.rank = 0;
      // Earlier micro-batches accumulate locally; the last one launches buckets.
      const bool last_micro = micro + 1 == c.train.update_freq;
      ctx.grad_ready = buckets && last_micro ? buckets->hook() : nn::GradReadyHook();
      update.add(task->train_micro_batch(ctx));
      ctx.grad_ready = nullptr;
    }
    if (stop) break;
    if (buckets) {
      buckets->finish();  // every bucket summed over the ranks
      if (state.step == first_step)
        log().info(
            "gradient all-reduce: {} bucket(s) of ~{} MiB, {} launched during backward, "
            "{} complete when it ended",
            buckets->bounds().size(), c.dist.bucket_mb, buckets->launched_before_finish(),
            buckets->completed_before_finish());
    }
    if (world > 1) {
      std::vector<double> counts{update.loss, update.nll, static_cast<double>(update.tokens),
                                 static_cast<double>(update.all_tokens),
                                 static_cast<double>(update.correct)};
      parallel::all_reduce_counts(*comm, counts);
      update.loss = counts[0];
      update.nll = counts[1];
      update.tokens = static_cast<int64_t>(counts[2]);
      update.all_tokens = static_cast<int64_t>(counts[3]);
      update.correct = static_cast<int64_t>(counts[4]);
    }
    if (update.tokens == 0) break;
    const double lr = optim::learning_rate(so, state.step + 1);
    // Loss and gradients are normalized by the tokens of the whole update on
    // all ranks (target tokens for translation, masked tokens for masked-LM),
    // and the fp16 loss scale is divided out again.
    const double grad_scale = 1.0 / (static_cast<double>(update.tokens) * ctx.loss_scale);
    precision.before_step(state.step + 1);
    optim::StepInfo info = sharded ? sharded->step(lr, grad_scale) : optimizer.step(lr, grad_scale);
    // A non-finite gradient norm skipped the step (weights and moments
    // untouched): counted and logged, and the fp16 loss scale halves.
    precision.after_step(info, state.step + 1, state);
    ++state.step;
    window.add(update);
    ++win_updates;

    const bool last = state.step >= c.train.max_updates;
    if (state.step % c.train.log_interval == 0 || last) {
      const double secs = seconds_since(win_start);
      const double loss = per_token(window.loss, window.tokens);
      const double ppl = std::exp(per_token(window.nll, window.tokens));
      const double tps = static_cast<double>(window.all_tokens) / std::max(secs, 1e-9);
      const double done = static_cast<double>(state.step - first_step);
      const double eta = seconds_since(run_start) / std::max(done, 1.0) *
                         static_cast<double>(c.train.max_updates - state.step);
      const std::string acc =
          window.has_correct
              ? fmt::format(" | acc {:.3f}", per_token(window.correct, window.tokens))
              : "";
      log().info(
          "update {:>6} | loss {:.4f} | ppl {:.2f}{} | lr {:.3e} | gnorm {:.3f}{} | {:.0f} tok/s | "
          "epoch {} | ETA {} | mem {:.0f} MiB",
          state.step, loss, ppl, acc, lr, info.grad_norm, precision.progress(), tps,
          task->position().epoch + 1, format_eta(eta), peak_bytes(device) / 1048576.0);
      MetricsRecord rec;
      rec.add("step", state.step)
          .add("split", "train")
          .add("loss", loss)
          .add("nll_loss", per_token(window.nll, window.tokens))
          .add("ppl", ppl)
          .add("lr", lr)
          .add("grad_norm", info.grad_norm)
          .add("tokens_per_s", tps)
          .add("updates", win_updates)
          .add("epoch", static_cast<int64_t>(task->position().epoch + 1));
      if (window.has_correct) rec.add("accuracy", per_token(window.correct, window.tokens));
      precision.add_metrics(rec);
      metrics.write(rec);
      window = TaskSums{};
      win_updates = 0;
      win_start = Clock::now();
    }
    if (task->has_valid() && c.train.valid_interval > 0 &&
        (state.step % c.train.valid_interval == 0 || last)) {
      const auto t0 = Clock::now();
      TaskSums v = task->validate(device);
      const double vloss = per_token(v.loss, v.tokens);
      const double vppl = std::exp(per_token(v.nll, v.tokens));
      const std::string acc =
          v.has_correct ? fmt::format(" | acc {:.3f}", per_token(v.correct, v.tokens)) : "";
      log().info("valid at update {} | loss {:.4f} | ppl {:.2f}{} | {} tokens | {:.1f}s",
                 state.step, vloss, vppl, acc, v.tokens, seconds_since(t0));
      MetricsRecord rec;
      rec.add("step", state.step)
          .add("split", "valid")
          .add("loss", vloss)
          .add("nll_loss", per_token(v.nll, v.tokens))
          .add("ppl", vppl)
          .add("lr", lr)
          .add("tokens_per_s",
               static_cast<double>(v.all_tokens) / std::max(seconds_since(t0), 1e-9));
      if (v.has_correct) rec.add("accuracy", per_token(v.correct, v.tokens));
      metrics.write(rec);
      if (state.best_valid_loss == 0 || vloss < state.best_valid_loss) {
        state.best_valid_loss = vloss;
        state.bad_validations = 0;
      } else if (c.train.patience > 0 && ++state.bad_validations >= c.train.patience) {
        log().info("early stopping: no valid improvement in {} validations", state.bad_validations);
        stop = true;
      }
    }
    state.train_seconds = seconds_before + seconds_since(run_start);
    // SIGTERM/SIGINT on any rank (cluster preemption): all ranks stop after
    // the same update and save.
    if (parallel::agree_stop(*comm)) {
      log().warn("signal {} received: saving a checkpoint and stopping at update {}",
                 parallel::stop_signal(), state.step);
      stop = true;
    }
    if ((c.train.save_interval > 0 && state.step % c.train.save_interval == 0) || last || stop)
      save();
  }
  log().info("done: {} updates in {:.1f}s", state.step, state.train_seconds);
  flush_log();
  task.reset();
  comm.reset();
  parallel::finalize(0);
  return 0;
}

}  // namespace rotor::train
