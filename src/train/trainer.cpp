#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "core/allocator.h"
#include "core/io.h"
#include "core/logging.h"
#include "ops/reduce.h"
#include "parallel/communicator.h"
#include "parallel/data_parallel.h"
#include "parallel/signals.h"
#include "tasks/data.h"
#include "tasks/task.h"
#include "train/metrics.h"
#include "train/precision.h"
#include "train/run_dir.h"
#include "train/scheduler.h"
#include "train/session.h"
#include "train/step.h"
#include "train/tensorboard.h"

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

// NaN (null in metrics.jsonl) when nothing was scored: never a perfect score.
double per_token(double v, int64_t n) {
  if (n <= 0) return std::numeric_limits<double>::quiet_NaN();
  return v / static_cast<double>(n);
}

// Rank 0 holds the output directory, locked (train/run_dir.h).
std::unique_ptr<RunDirectory> lock_run_dir(const Config& c, const TrainOptions& opts, int rank) {
  if (rank != 0) return nullptr;
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"model.init_from", c.model.init_from},
      {"data.spm_model", c.data.spm_model},
      {"data.train", c.data.train},
      {"data.valid", c.data.valid},
      {"data.test", c.data.test}};
  return std::make_unique<RunDirectory>(c.output_dir,
                                        opts.resume      ? RunStart::Resume
                                        : opts.overwrite ? RunStart::Overwrite
                                                         : RunStart::Fresh,
                                        inputs);
}

// The log: the console, and OUTPUT_DIR/train.log on rank 0.
void start_log(const Config& c, const Session& s, const RunDirectory* run_dir) {
  LogOptions lo;
  lo.level = std::string(to_string(c.log_level));
  lo.file = s.rank() == 0 ? (fs::path(c.output_dir) / "train.log").string() : "";
  lo.rank = s.rank();
  lo.world_size = s.world();
  setup_logging(lo);
  if (run_dir && !run_dir->moved_to().empty())
    log().warn("--overwrite: the earlier run in {} was moved into {}", c.output_dir,
               run_dir->moved_to());
}

// Before a resumed run writes anything (its config, its log): the checkpoint
// it continues reads back whole (trainer state, both safetensors headers) and
// was trained with the model this config describes, so that a corrupt or
// mismatched checkpoint stops the run with the run directory untouched.
void check_resumable(const Config& c) {
  const std::string dir = checkpoint::latest_checkpoint(c.output_dir);
  if (dir.empty()) return;
  const checkpoint::TrainerState state = checkpoint::load_trainer_state(dir);
  const int64_t named = checkpoint::checkpoint_step(fs::path(dir).filename().string());
  if (state.step != named)
    ROTOR_FAIL(
        "--resume: {}/trainer_state.json says step {}, but its directory is {} (step {}); the "
        "checkpoint was moved or edited",
        dir, state.step, fs::path(dir).filename().string(), named);
  // data.test is scored by the best model at the end: a best checkpoint the
  // state records but the disk lacks is found now, not after training.
  const fs::path best = fs::path(c.output_dir) / "checkpoints" / "best";
  std::error_code ec;
  if (state.has_best && state.best_metric == to_string(c.train.best_metric) &&
      !fs::exists(best / "model.safetensors", ec)) {
    if (!c.data.test.empty())
      ROTOR_FAIL(
          "--resume: {}/trainer_state.json records a best checkpoint ({} at update {}), but {} "
          "is missing, and data.test is scored by it at the end",
          dir, state.best_metric, state.best_step, best.string());
    log().warn("--resume: {} is missing; the next improvement saves a new one", best.string());
  }
  (void)checkpoint::SafetensorsFile(dir + "/model.safetensors");
  (void)checkpoint::SafetensorsFile(dir + "/optimizer.safetensors");
  const std::string saved_path = dir + "/config.yaml";
  const Config saved = load_config_from_string(read_file(saved_path, kMaxConfigBytes), saved_path);
  if (saved.task != c.task)
    ROTOR_FAIL("--resume: {} was trained for task {}, the config says {}", dir,
               to_string(saved.task), to_string(c.task));
  if (saved.model != c.model) {
    // The first model key that differs, from the dumps of both.
    Config a = c, b = saved;
    a.data = b.data = {};
    std::istringstream da(dump_config(a)), db(dump_config(b));
    for (std::string la, lb; std::getline(da, la) && std::getline(db, lb);)
      if (la != lb)
        ROTOR_FAIL("--resume: {} was trained with model key \"{}\", the config has \"{}\"", dir,
                   lb.substr(lb.find_first_not_of(' ')), la.substr(la.find_first_not_of(' ')));
  }
  tasks::check_resumable_data(c, dir);
}

// OUTPUT_DIR/config.yaml gets the resolved config. When that file is the very
// config the run was started with, it is replaced only when it is a resolved
// config rotor wrote, unchanged since (what load_config makes of it dumps to
// the same text: `rotor train RUN/config.yaml --resume --set ...`); a config
// written by hand is never replaced. Checked before the run directory
// changes (--overwrite moves the earlier run aside).
void check_config_file(const Config& c, const std::string& yaml, const std::string& input) {
  const fs::path out = fs::path(c.output_dir) / "config.yaml";
  std::error_code ec;
  if (input.empty() || !fs::exists(out, ec) || !fs::equivalent(input, out, ec)) return;
  const std::string text = read_file(out.string(), kMaxConfigBytes);
  if (text == yaml) return;
  try {
    if (dump_config(load_config(out.string())) == text) return;
  } catch (const Error&) {
  }
  ROTOR_FAIL(
      "output_dir {}: the run would replace the config file {} (not a resolved config that "
      "rotor wrote) with its resolved config; start from a copy of it elsewhere, or choose "
      "another output_dir",
      c.output_dir, input);
}

void write_resolved_config(const Config& c, const std::string& yaml) {
  atomic_write_file((fs::path(c.output_dir) / "config.yaml").string(), yaml);
}

// The weights hold only finite values (a collective-free check of rank 0's
// replica, which every rank shares).
bool weights_finite(nn::ParameterStore& store) {
  const Tensor flag = ops::any_nonfinite({store.values()});
  return flag.to(Device::cpu()).data<uint8_t>()[0] == 0;
}

// Continues from OUTPUT_DIR/checkpoint_last: weights, optimizer moments and
// the trainer state, the data position converted to this world size.
void resume(const Config& c, Session& session, checkpoint::TrainerState& state) {
  tasks::TrainingTask& task = session.task();
  const int world = session.world();
  const std::string dir = checkpoint::latest_checkpoint(c.output_dir);
  if (dir.empty()) {
    log().warn("--resume: no checkpoint in {} yet; starting from scratch", c.output_dir);
    return;
  }
  checkpoint::load_weights(dir, task.params());
  checkpoint::load_optimizer(dir, session.step().optimizer());
  state = checkpoint::load_trainer_state(dir);
  session.precision().restore(state);
  if (state.world_size != world) {
    // Checkpoints are independent of the world size: rank r of W reads
    // batches r, r+W, ... and keys dropout by the global micro-batch, so the
    // global counts carry over when the global batch is the same.
    const int64_t global_batches =
        static_cast<int64_t>(state.position.batch_index) * state.world_size;
    const int64_t global_micro = state.micro_step * state.world_size;
    if (global_batches % world != 0 || global_micro % world != 0)
      ROTOR_FAIL(
          "{}: saved by {} ranks at batch {} of epoch {}; {} ranks cannot continue the same "
          "batch stream (keep world_size x train.update_freq the same)",
          dir, state.world_size, global_batches, state.position.epoch + 1, world);
    log().info("resuming a {}-rank checkpoint on {} rank(s)", state.world_size, world);
    state.position.batch_index = static_cast<uint64_t>(global_batches / world);
    state.micro_step = global_micro / world;
  }
  task.set_position(state.position);
  log().info("resumed from {} at update {}", dir, state.step);
}

// Where a run's figures go: metrics.jsonl, and the same numbers as TensorBoard
// scalars "<split>/<field>" in OUTPUT_DIR/tensorboard (rank 0 only; both
// closed elsewhere).
struct Recorder {
  MetricsWriter metrics;
  TensorBoardWriter tensorboard;

  void write(const MetricsRecord& rec) {
    metrics.write(rec);
    if (!tensorboard.is_open()) return;
    const json_io::Json& f = rec.fields();
    const int64_t step = f.at("step").get<int64_t>();
    const std::string split = f.at("split").get<std::string>();
    std::vector<std::pair<std::string, double>> values;
    for (const auto& [key, value] : f.items())
      if (key != "step" && key != "split" && value.is_number())
        values.emplace_back(split + "/" + key, value.get<double>());
      else if (key != "step" && key != "split" && value.is_null())  // a non-finite figure
        values.emplace_back(split + "/" + key, std::numeric_limits<double>::quiet_NaN());
    tensorboard.scalars(step, values);
    tensorboard.flush();
  }
};

// The training figures between two log lines.
struct Window {
  tasks::TaskSums sums;
  int64_t updates = 0;
  Clock::time_point start = Clock::now();
};

void log_progress(const Config& c, const Window& w, const UpdateResult& u,
                  const checkpoint::TrainerState& state, const tasks::TrainingTask& task,
                  const PrecisionPolicy& precision, double eta, Device device, Recorder& metrics) {
  const tasks::TaskSums& s = w.sums;
  const double loss = per_token(s.loss, s.tokens);
  const double ppl = std::exp(per_token(s.nll, s.tokens));
  const double tps = static_cast<double>(s.all_tokens) / std::max(seconds_since(w.start), 1e-9);
  const std::string acc =
      s.has_correct ? fmt::format(" | acc {:.3f}", per_token(s.correct, s.tokens)) : "";
  log().info(
      "update {:>6} | loss {:.4f} | ppl {:.2f}{} | lr {:.3e} | gnorm {:.3f}{} | {:.0f} tok/s | "
      "epoch {} | ETA {} | mem {:.0f} MiB",
      state.step, loss, ppl, acc, u.lr, u.info.grad_norm, precision.progress(), tps,
      task.position().epoch + 1, format_eta(eta), peak_bytes(device) / 1048576.0);
  (void)c;
  MetricsRecord rec;
  rec.add("step", state.step)
      .add("split", "train")
      .add("loss", loss)
      .add("nll_loss", per_token(s.nll, s.tokens))
      .add("ppl", ppl)
      .add("lr", u.lr)
      .add("grad_norm", u.info.grad_norm)
      .add("tokens_per_s", tps)
      .add("updates", w.updates)
      .add("epoch", static_cast<int64_t>(task.position().epoch + 1));
  if (s.has_correct) rec.add("accuracy", per_token(s.correct, s.tokens));
  precision.add_metrics(rec);
  metrics.write(rec);
}

// Evaluates `split`, logs and records the result.
tasks::ValidationResult evaluate(tasks::TrainingTask& task, tasks::EvalSplit split, Device device,
                                 const checkpoint::TrainerState& state, double lr,
                                 Recorder& metrics) {
  const auto t0 = Clock::now();
  const tasks::ValidationResult r = task.evaluate(split, device);
  const double seconds = seconds_since(t0);
  const tasks::TaskSums& v = r.sums;
  const double loss = per_token(v.loss, v.tokens);
  const double ppl = std::exp(per_token(v.nll, v.tokens));
  std::string extra =
      v.has_correct ? fmt::format(" | acc {:.3f}", per_token(v.correct, v.tokens)) : "";
  for (const auto& [metric, value] : r.scores) {
    const bool unit = metric == ValidMetric::Ap || metric == ValidMetric::Auroc;  // in [0, 1]
    extra += unit ? fmt::format(" | {} {:.4f}", to_string(metric), value)
                  : fmt::format(" | {} {:.2f}", to_string(metric), value);
  }
  for (const auto& [measure, value] : r.measures)
    extra += fmt::format(" | {} {:.4f}", measure, value);
  if (!r.how.empty()) extra += " | " + r.how;
  if (r.decoded > 0)
    extra += fmt::format(" | decoded {} sentences in {:.1f}s", r.decoded, r.decode_seconds);
  const char* name = split == tasks::EvalSplit::Valid ? "valid" : "test";
  if (v.tokens == 0)
    log().warn(
        "{} at update {} | no tokens scored (no token of the set counts in the loss: a masked "
        "LM's set where masking selects nothing); its loss and accuracy are recorded as null | "
        "{:.1f}s",
        name, state.step, seconds);
  else
    log().info("{} at update {} | loss {:.4f} | ppl {:.2f}{} | {} tokens | {:.1f}s", name,
               state.step, loss, ppl, extra, v.tokens, seconds);
  MetricsRecord rec;
  rec.add("step", state.step)
      .add("split", name)
      .add("loss", loss)
      .add("nll_loss", per_token(v.nll, v.tokens))
      .add("ppl", ppl)
      .add("lr", lr)
      .add("tokens_per_s", static_cast<double>(v.all_tokens) / std::max(seconds, 1e-9));
  if (v.has_correct) rec.add("accuracy", per_token(v.correct, v.tokens));
  for (const auto& [metric, value] : r.scores) rec.add(to_string(metric), value);
  for (const auto& [measure, value] : r.measures) rec.add(measure, value);
  if (r.decoded > 0) rec.add("decoded", r.decoded).add("decode_seconds", r.decode_seconds);
  metrics.write(rec);
  return r;
}

}  // namespace

int run_training(const Config& c, const std::string& config_yaml, const TrainOptions& opts) {
  validate_for_training(c);
  tasks::check_data(c);  // fail before writing anything
  parallel::install_stop_handlers();
  SessionOptions so;
  so.store_dir = (fs::path(c.output_dir) / ".rendezvous").string();
  Session session(c, so);
  parallel::Communicator& comm = session.comm();
  const int world = session.world();
  const bool rank0 = session.rank() == 0;
  if (rank0) check_config_file(c, config_yaml, opts.config_path);
  const std::unique_ptr<RunDirectory> run_dir = lock_run_dir(c, opts, session.rank());
  if (opts.resume) check_resumable(c);
  if (rank0) write_resolved_config(c, config_yaml);
  start_log(c, session, run_dir.get());
  log().info("rotor {} on {}: task {}, {} rank(s) ({} backend); output in {}", ROTOR_VERSION,
             session.device().str(), to_string(c.task), world, comm.backend(), c.output_dir);

  checkpoint::TrainerState state;
  if (opts.resume)
    session.build([&](Session& s) { resume(c, s, state); });
  else
    session.build();
  tasks::TrainingTask& task = session.task();
  nn::ParameterStore& store = session.params();
  UpdateStep& step = session.step();
  const PrecisionPolicy& precision = session.precision();
  const Scheduler& schedule = session.scheduler();
  const Device device = session.device();

  const std::string metrics_path = (fs::path(c.output_dir) / "metrics.jsonl").string();
  // A resumed run repeats the updates after its checkpoint: their records go.
  if (rank0) truncate_metrics(metrics_path, state.step);
  Recorder metrics;
  if (rank0) {
    metrics.metrics = MetricsWriter(metrics_path);
    metrics.tensorboard = TensorBoardWriter((fs::path(c.output_dir) / "tensorboard").string());
    // TensorBoard drops the events of steps after the checkpoint, as
    // truncate_metrics did for metrics.jsonl.
    if (state.step > 0) metrics.tensorboard.session_start(state.step + 1);
  }
  int64_t saved_step = -1;
  auto contents = [&] {
    state.position = task.position();
    state.world_size = world;
    checkpoint::CheckpointContents cc;
    cc.params = &store;
    cc.state = state;
    cc.config_yaml = config_yaml;
    cc.spm_model = task.tokenizer_path();
    cc.files = task.checkpoint_files();
    return cc;
  };
  auto require_finite = [&] {
    if (!weights_finite(store))
      ROTOR_FAIL(
          "update {}: the weights hold non-finite values (the run diverged); not saving them. "
          "The last checkpoint is kept; lower optim.lr or set train.clip_norm",
          state.step);
  };
  auto save = [&] {
    saved_step = state.step;
    const optim::Optimizer& optimizer = step.gather_optimizer();  // collective
    if (!rank0) return;
    require_finite();
    checkpoint::CheckpointContents cc = contents();
    cc.optimizer = &optimizer;
    log().info("saved {}", checkpoint::save_checkpoint(c.output_dir, cc, c.train.keep_last));
  };
  // The model of the best validation so far, whenever a validation finds it.
  auto save_best = [&] {
    if (!rank0) return;
    require_finite();
    log().info("saved {} (the best validation so far)",
               checkpoint::save_best(c.output_dir, contents()));
  };

  const auto run_start = Clock::now();
  const double seconds_before = state.train_seconds;
  const int64_t first_step = state.step;
  Window window;
  StopReason stop = StopReason::None;
  int nonfinite_in_a_row = 0;
  // The scheduler says when the run stops: before an update (max_updates,
  // max_epochs), after one (no tokens left), on patience and on signals.
  const auto stop_here = [&] {
    // The last update made is what is kept (max_updates saved it already).
    if (saved_step != state.step && state.step > first_step) save();
  };
  while (stop == StopReason::None) {
    stop = schedule.before_update(state.step, task.position().epoch);
    if (stop != StopReason::None) {
      stop_here();
      break;
    }
    const UpdateResult u = step.run(state);
    stop = schedule.after_update(u.sums.tokens);
    if (stop != StopReason::None) {
      stop_here();
      break;
    }
    if (state.step == first_step + 1 && step.buckets()) {
      const parallel::GradientBuckets& b = *step.buckets();
      log().info(
          "gradient all-reduce: {} bucket(s) of ~{} MiB, {} launched during backward, {} "
          "complete when it ended",
          b.bounds().size(), c.dist.bucket_mb, b.launched_before_finish(),
          b.completed_before_finish());
    }
    nonfinite_in_a_row = u.info.skipped ? nonfinite_in_a_row + 1 : 0;
    if (nonfinite_in_a_row >= c.train.max_nonfinite)
      ROTOR_FAIL(
          "update {}: {} updates in a row had non-finite gradients (train.max_nonfinite); "
          "the run diverged and stops without saving (the last checkpoint is kept)",
          state.step, nonfinite_in_a_row);
    window.sums.add(u.sums);
    ++window.updates;
    if (schedule.log_now(state.step)) {
      const double eta = seconds_since(run_start) /
                         std::max<double>(static_cast<double>(state.step - first_step), 1.0) *
                         static_cast<double>(c.train.max_updates - state.step);
      log_progress(c, window, u, state, task, precision, eta, device, metrics);
      window = Window{};
    }
    if (schedule.validate_now(state.step)) {
      const tasks::ValidationResult v =
          evaluate(task, tasks::EvalSplit::Valid, device, state, u.lr, metrics);
      const Scheduler::Verdict verdict =
          schedule.record_validation(v.value(c.train.best_metric), state);
      if (verdict.improved) save_best();
      if (verdict.stop) {
        log().info("early stopping: {} did not improve on {:.4f} (update {}) in {} validations",
                   to_string(c.train.best_metric), state.best_score, state.best_step,
                   state.bad_validations);
        stop = StopReason::Patience;
      }
    }
    state.train_seconds = seconds_before + seconds_since(run_start);
    // SIGTERM/SIGINT on any rank (cluster preemption): all ranks stop after
    // the same update and save.
    if (schedule.signals() == StopReason::Signal) {
      log().warn("signal {} received: saving a checkpoint and stopping at update {}",
                 parallel::stop_signal(), state.step);
      stop = StopReason::Signal;
    }
    if (schedule.save_now(state.step, stop)) save();
  }
  log().info("done: {} updates in {:.1f}s ({})", state.step, state.train_seconds,
             stop_reason_text(stop));
  // data.test: scored once, by the best model when validation kept one.
  if (task.has_split(tasks::EvalSplit::Test) && stop != StopReason::Signal) {
    if (state.has_best) {
      const std::string best = (fs::path(c.output_dir) / "checkpoints" / "best").string();
      if (rank0 || fs::exists(best)) checkpoint::load_weights(best, store);
      if (world > 1) parallel::broadcast_parameters(comm, store);
      log().info("test: the best model ({} {:.4f} at update {})", to_string(c.train.best_metric),
                 state.best_score, state.best_step);
    }
    evaluate(task, tasks::EvalSplit::Test, device, state,
             optim::learning_rate(schedule_options(c), state.step), metrics);
  }
  flush_log();
  session.close();
  parallel::finalize(0);
  return 0;
}

}  // namespace rotor::train
