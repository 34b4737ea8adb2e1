#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/allocator.h"
#include "core/cuda_context.h"
#include "core/io.h"
#include "core/logging.h"
#include "data/batcher.h"
#include "nn/parameters.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/translation_data.h"

namespace fs = std::filesystem;

namespace rotor::train {

models::TransformerConfig transformer_config(const Config& c, int64_t vocab_size) {
  models::TransformerConfig t;
  t.vocab_size = vocab_size;
  t.pad_id = data::kPadId;
  t.encoder_layers = c.model.encoder_layers;
  t.decoder_layers = c.model.decoder_layers;
  t.layer.d_model = c.model.d_model;
  t.layer.n_heads = c.model.n_heads;
  t.layer.d_ff = c.model.d_ff;
  t.layer.activation = c.model.activation == Activation::Gelu ? ops::Activation::GELU : ops::Activation::ReLU;
  t.layer.dropout = static_cast<float>(c.model.dropout);
  t.layer.attention_dropout = static_cast<float>(c.model.attention_dropout);
  t.layer.activation_dropout = static_cast<float>(c.model.activation_dropout);
  t.layer.post_norm = c.model.norm == NormPlacement::Post;
  t.layer.layer_norm_eps = static_cast<float>(c.model.layer_norm_eps);
  t.layer.rope_base = static_cast<float>(c.model.rope_base);
  t.position = nn::parse_position_kind(std::string(to_string(c.model.position)));
  t.max_positions = c.model.max_positions;
  t.scale_embeddings = c.model.scale_embeddings;
  return t;
}

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

struct ValidResult {
  double loss = 0, nll = 0;
  int64_t tokens = 0;
};

ValidResult validate(models::EncoderDecoder& model, const ParallelCorpus& valid,
                     const Config& c, Device device) {
  data::BatcherOptions bo;
  bo.max_tokens = c.data.max_tokens;
  bo.shuffle = false;
  bo.prefetch = 0;
  data::TokenBatcher batcher(valid.src, valid.tgt, bo);
  nn::Context ctx;
  ctx.training = false;
  ctx.device = device;
  ValidResult r;
  const int64_t n = batcher.batches_in_epoch(0);
  for (int64_t i = 0; i < n; ++i) {
    data::Batch b = batcher.next();
    models::LossSums s = model.forward_loss(to_model_batch(b, device),
                                            static_cast<float>(c.train.label_smoothing), ctx);
    r.loss += s.loss;
    r.nll += s.nll;
    r.tokens += s.tokens;
  }
  return r;
}

}  // namespace

int run_training(const Config& c, const std::string& config_yaml, const TrainOptions& opts) {
  validate_for_training(c);
  ensure_directory(c.output_dir);
  LogOptions lo;
  lo.level = std::string(to_string(c.log_level));
  lo.file = (fs::path(c.output_dir) / "train.log").string();
  setup_logging(lo);
  if (c.task != Task::Translation)
    ROTOR_FAIL("task '{}' is not available yet: this rotor trains task: translation",
               to_string(c.task));
  const Device device = resolve_device(c.device);
  if (device.is_cuda()) cuda::set_device(device.index);
  if (c.precision != Precision::FP32 && device.is_cpu())
    ROTOR_FAIL("precision {} needs a GPU; on the CPU rotor computes in fp32", to_string(c.precision));
  atomic_write_file((fs::path(c.output_dir) / "config.yaml").string(), config_yaml);
  log().info("rotor {} on {}; output in {}", ROTOR_VERSION, device.str(), c.output_dir);

  TranslationData data = load_translation_data(c, true);
  const int64_t vocab = data.tokenizer.vocab_size();
  nn::ParameterStore store;
  models::EncoderDecoder model(transformer_config(c, vocab), store);
  store.allocate(device);
  store.initialize(static_cast<uint64_t>(c.seed));
  log().info("model: {} parameters, {} positions, vocabulary {}", store.numel(),
             to_string(c.model.position), vocab);

  optim::OptimizerOptions oo;
  oo.beta1 = c.optim.betas[0];
  oo.beta2 = c.optim.betas[1];
  oo.eps = c.optim.eps;
  oo.weight_decay = c.optim.weight_decay;
  oo.clip_norm = c.train.clip_norm;
  optim::Optimizer optimizer(store, oo);
  optim::ScheduleOptions so;
  so.kind = c.optim.schedule == LrSchedule::InverseSqrt ? optim::ScheduleKind::InverseSqrt
            : c.optim.schedule == LrSchedule::Linear    ? optim::ScheduleKind::Linear
                                                        : optim::ScheduleKind::Constant;
  so.lr = c.optim.lr;
  so.warmup_updates = c.optim.warmup_updates;
  so.warmup_init_lr = c.optim.warmup_init_lr;
  so.end_lr = c.optim.end_lr;
  so.max_updates = c.train.max_updates;

  data::BatcherOptions bo;
  bo.max_tokens = c.data.max_tokens;
  bo.seed = static_cast<uint64_t>(c.seed);
  bo.prefetch = static_cast<size_t>(c.data.prefetch);
  data::TokenBatcher batcher(data.train.src, data.train.tgt, bo);
  if (batcher.skipped() > 0)
    log().warn("{} training pairs are longer than data.max_tokens alone and are skipped", batcher.skipped());

  TrainerState state;
  if (opts.resume) {
    if (!fs::exists(fs::path(c.output_dir) / "checkpoint_last")) {
      log().warn("--resume: no checkpoint in {} yet; starting from scratch", c.output_dir);
    } else {
      const std::string dir = resolve_checkpoint(c.output_dir);
      load_weights(dir, store);
      load_optimizer(dir, optimizer);
      state = load_trainer_state(dir);
      batcher.set_position(state.position);
      log().info("resumed from {} at update {}", dir, state.step);
    }
  }

  MetricsWriter metrics((fs::path(c.output_dir) / "metrics.jsonl").string());
  auto save = [&] {
    state.position = batcher.position();
    CheckpointContents cc;
    cc.params = &store;
    cc.optimizer = &optimizer;
    cc.state = state;
    cc.config_yaml = config_yaml;
    cc.spm_model = data.spm_path;
    std::string dir = save_checkpoint(c.output_dir, cc, c.train.keep_last);
    log().info("saved {}", dir);
  };

  nn::Context ctx;
  ctx.training = true;
  ctx.device = device;
  ctx.seed = static_cast<uint64_t>(c.seed);
  const float smoothing = static_cast<float>(c.train.label_smoothing);
  double win_loss = 0, win_nll = 0;
  int64_t win_tokens = 0, win_src_tokens = 0, win_updates = 0;
  auto win_start = Clock::now();
  const auto run_start = Clock::now();
  const double seconds_before = state.train_seconds;
  const int64_t first_step = state.step;
  bool stop = false;

  while (state.step < c.train.max_updates && !stop) {
    store.zero_grad();
    models::LossSums total;
    int64_t src_tokens = 0;
    for (int micro = 0; micro < c.train.update_freq; ++micro) {
      data::Batch b = batcher.next();
      if (c.train.max_epochs > 0 && b.position.epoch >= static_cast<uint64_t>(c.train.max_epochs)) {
        stop = true;
        break;
      }
      ctx.step = static_cast<uint64_t>(state.micro_step++);
      models::LossSums s = model.forward_loss(to_model_batch(b, device), smoothing, ctx);
      model.backward(1.0f);
      total.loss += s.loss;
      total.nll += s.nll;
      total.tokens += s.tokens;
      src_tokens += b.src_tokens;
    }
    if (stop || total.tokens == 0) break;
    const double lr = optim::learning_rate(so, state.step + 1);
    // Loss and gradients are normalized by the target tokens of the update.
    optim::StepInfo info = optimizer.step(lr, 1.0 / static_cast<double>(total.tokens));
    if (info.skipped) {
      ++state.skipped_steps;
      log().warn("update {}: non-finite gradient norm, update skipped", state.step + 1);
    }
    ++state.step;
    win_loss += total.loss;
    win_nll += total.nll;
    win_tokens += total.tokens;
    win_src_tokens += src_tokens;
    ++win_updates;

    const bool last = state.step >= c.train.max_updates;
    if (state.step % c.train.log_interval == 0 || last) {
      const double secs = seconds_since(win_start);
      const double loss = win_loss / static_cast<double>(win_tokens);
      const double tps = static_cast<double>(win_tokens + win_src_tokens) / std::max(secs, 1e-9);
      const double done = static_cast<double>(state.step - first_step);
      const double eta = seconds_since(run_start) / std::max(done, 1.0) *
                         static_cast<double>(c.train.max_updates - state.step);
      log().info("update {:>6} | loss {:.4f} | ppl {:.2f} | lr {:.3e} | gnorm {:.3f} | {:.0f} tok/s | "
                 "epoch {} | ETA {} | mem {:.0f} MiB",
                 state.step, loss, std::exp(win_nll / static_cast<double>(win_tokens)), lr,
                 info.grad_norm, tps, batcher.position().epoch + 1, format_eta(eta),
                 peak_bytes(device) / 1048576.0);
      metrics.write(MetricsRecord()
                        .add("step", state.step)
                        .add("split", "train")
                        .add("loss", loss)
                        .add("nll_loss", win_nll / static_cast<double>(win_tokens))
                        .add("ppl", std::exp(win_nll / static_cast<double>(win_tokens)))
                        .add("lr", lr)
                        .add("grad_norm", info.grad_norm)
                        .add("tokens_per_s", tps)
                        .add("updates", win_updates)
                        .add("epoch", static_cast<int64_t>(batcher.position().epoch + 1)));
      win_loss = win_nll = 0;
      win_tokens = win_src_tokens = win_updates = 0;
      win_start = Clock::now();
    }
    if (data.valid.defined() && c.train.valid_interval > 0 &&
        (state.step % c.train.valid_interval == 0 || last)) {
      const auto t0 = Clock::now();
      ValidResult v = validate(model, data.valid, c, device);
      const double vloss = v.loss / std::max<double>(v.tokens, 1);
      const double vppl = std::exp(v.nll / std::max<double>(v.tokens, 1));
      log().info("valid at update {} | loss {:.4f} | ppl {:.2f} | {} tokens | {:.1f}s", state.step,
                 vloss, vppl, v.tokens, seconds_since(t0));
      metrics.write(MetricsRecord()
                        .add("step", state.step)
                        .add("split", "valid")
                        .add("loss", vloss)
                        .add("nll_loss", v.nll / std::max<double>(v.tokens, 1))
                        .add("ppl", vppl)
                        .add("lr", lr)
                        .add("tokens_per_s", static_cast<double>(v.tokens) / std::max(seconds_since(t0), 1e-9)));
      if (state.best_valid_loss == 0 || vloss < state.best_valid_loss) {
        state.best_valid_loss = vloss;
        state.bad_validations = 0;
      } else if (c.train.patience > 0 && ++state.bad_validations >= c.train.patience) {
        log().info("early stopping: no valid improvement in {} validations", state.bad_validations);
        stop = true;
      }
    }
    state.train_seconds = seconds_before + seconds_since(run_start);
    if ((c.train.save_interval > 0 && state.step % c.train.save_interval == 0) || last || stop) save();
  }
  log().info("done: {} updates in {:.1f}s", state.step, state.train_seconds);
  flush_log();
  return 0;
}

}  // namespace rotor::train
