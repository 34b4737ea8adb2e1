#include "train/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/allocator.h"
#include "core/cuda_context.h"
#include "core/error.h"
#include "core/logging.h"
#include "nn/context.h"
#include "nn/parameters.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/precision.h"
#include "train/task.h"
#include "train/trainer.h"
#include "train/translation_data.h"

namespace rotor::train {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

size_t max_rss_bytes() {
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

// Splits wall-clock time into phases at the marks the task places (and the
// bench's own marks around the micro-batches and the optimizer step). With
// `sync`, every mark first waits for the device, so that a phase's GPU work
// is charged to that phase.
class PhaseClock : public nn::PhaseHook {
 public:
  PhaseClock(Device device, bool sync) : device_(device), sync_(sync) {}

  void start() {
    wait();
    last_ = Clock::now();
  }
  // Ends the current phase: its time since the last mark goes to `into`.
  void lap(double& into) {
    wait();
    const auto now = Clock::now();
    into += ms_between(last_, now);
    last_ = now;
  }

  void forward_begins(int64_t sequences, int64_t src_len, int64_t tgt_len) override {
    lap(phases.data);
    batch = BenchBatch{sequences, src_len, tgt_len, 0, 0};
    ++marks;
  }
  void backward_begins() override {
    lap(phases.forward);
    ++marks;
  }

  BenchPhases phases;  // accumulated ms
  BenchBatch batch;    // the shape of the last micro-batch
  int64_t marks = 0;

 private:
  void wait() const {
    if (sync_ && device_.is_cuda()) cuda::synchronize(device_.index);
  }
  Device device_;
  bool sync_;
  Clock::time_point last_;
};

}  // namespace

BenchResult run_train_bench(const Config& c, const BenchOptions& opts) {
  if (opts.steps < 1) ROTOR_FAIL("--steps must be at least 1, got {}", opts.steps);
  if (opts.warmup < 0) ROTOR_FAIL("--warmup must be 0 or more, got {}", opts.warmup);
  validate_for_training(c);
  if (c.task == Task::Translation) check_translation_data(c);  // fail before preparing anything
  const Device device = resolve_device(c.device);
  if (device.is_cuda()) cuda::set_device(device.index);
  std::unique_ptr<TrainingTask> task =
      c.task == Task::Translation ? make_translation_task(c, device) : make_mlm_task(c, device);
  nn::ParameterStore& store = task->params();
  store.initialize(static_cast<uint64_t>(c.seed));
  // As `rotor train`: 16-bit weight copy and compute dtype, fp16 loss scaling.
  PrecisionPolicy precision(c, device, store);

  // The optimizer and schedule of `rotor train` (world size 1).
  optim::Optimizer optimizer(store, optimizer_options(c));
  const optim::ScheduleOptions so = schedule_options(c);

  BenchResult r;
  r.task = std::string(to_string(c.task));
  r.device = device.str();
  if (device.is_cuda())
    for (const auto& d : cuda::devices())
      if (d.index == device.index) r.device_name = d.name;
  r.precision = std::string(to_string(c.precision));
  r.parameters = store.numel();
  r.vocab_size = task->vocab_size();
  r.steps = opts.steps;
  r.warmup = opts.warmup;
  r.update_freq = c.train.update_freq;
  r.phase_sync = device.is_cuda();

  nn::Context ctx;
  ctx.training = true;
  ctx.device = device;
  ctx.seed = static_cast<uint64_t>(c.seed);
  ctx.dtype = precision.compute_dtype();
  int64_t step = 0, micro_step = 0;
  checkpoint::TrainerState state;  // the loss scaler's bookkeeping

  // One update, its phases accumulated into `clock`; returns its token counts.
  auto update = [&](PhaseClock& clock, std::vector<BenchBatch>* batches) {
    ctx.phase_hook = &clock;
    clock.start();
    store.zero_grad();
    ctx.loss_scale = precision.loss_scale();
    clock.lap(clock.phases.optimizer);
    TaskSums sums;
    for (int micro = 0; micro < c.train.update_freq; ++micro) {
      ctx.step = static_cast<uint64_t>(micro_step++);
      const int64_t marks = clock.marks;
      const TaskSums s = task->train_micro_batch(ctx);
      clock.lap(clock.phases.backward);
      if (clock.marks != marks + 2)
        ROTOR_FAIL("task {} does not mark its phases (nn::PhaseHook)", to_string(c.task));
      if (batches) {
        BenchBatch b = clock.batch;
        b.tokens = s.tokens;
        b.all_tokens = s.all_tokens;
        batches->push_back(b);
      }
      sums.add(s);
    }
    const double lr = optim::learning_rate(so, ++step);
    const double grad_scale =
        1.0 / (static_cast<double>(std::max<int64_t>(sums.tokens, 1)) * ctx.loss_scale);
    // A skipped step is logged, the fp16 scale adapts, the 16-bit copy is refreshed.
    precision.after_step(optimizer.step(lr, grad_scale), step, state);
    clock.lap(clock.phases.optimizer);
    ctx.phase_hook = nullptr;
    return sums;
  };

  reset_peak_bytes(device);
  {
    PhaseClock warm(device, false);
    for (int64_t i = 0; i < opts.warmup; ++i) update(warm, nullptr);
  }

  // Throughput: no synchronization inside an update (on the CPU there is
  // nothing to synchronize, so this pass gives the phases too).
  PhaseClock clock(device, false);
  std::vector<double> step_ms;
  if (device.is_cuda()) cuda::synchronize(device.index);
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < opts.steps; ++i) {
    const auto s0 = Clock::now();
    const TaskSums sums = update(clock, &r.batches);
    r.tokens += sums.tokens;
    r.all_tokens += sums.all_tokens;
    step_ms.push_back(ms_between(s0, Clock::now()));
  }
  if (device.is_cuda()) cuda::synchronize(device.index);
  r.seconds = ms_between(t0, Clock::now()) / 1000.0;
  r.step_ms = r.seconds * 1000.0 / static_cast<double>(opts.steps);

  if (r.phase_sync) {
    // The phase split: the same number of updates, the device synchronized
    // at every mark.
    clock = PhaseClock(device, true);
    step_ms.clear();
    for (int64_t i = 0; i < opts.steps; ++i) {
      const double before = clock.phases.total();
      update(clock, nullptr);
      step_ms.push_back(clock.phases.total() - before);
    }
  }
  const double n = static_cast<double>(opts.steps);
  r.phases_ms = {clock.phases.data / n, clock.phases.forward / n, clock.phases.backward / n,
                 clock.phases.optimizer / n};
  r.phase_step_ms = r.phases_ms.total();
  r.step_ms_min = *std::min_element(step_ms.begin(), step_ms.end());
  r.step_ms_max = *std::max_element(step_ms.begin(), step_ms.end());
  r.peak_bytes = peak_bytes(device);
  r.max_rss_bytes = max_rss_bytes();
  return r;
}

namespace {

double mib(size_t bytes) {
  return static_cast<double>(bytes) / 1048576.0;
}

double percent(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0.0;
}

const char* token_kind(const std::string& task) {
  return task == "mlm" ? "masked" : "target";
}

const char* all_kind(const std::string& task) {
  return task == "mlm" ? "all input tokens" : "source + target";
}

}  // namespace

std::string format_bench(const BenchResult& r, const std::string& config_path) {
  std::string out;
  const std::string where =
      r.device_name.empty() ? r.device : r.device + " (" + r.device_name + ")";
  out += fmt::format("rotor bench train {}: task {} on {}, precision {}\n", config_path, r.task,
                     where, r.precision);
  out += fmt::format(
      "model: {} parameters, vocabulary {}; {} warmup + {} timed updates of {} micro-batch(es)\n",
      r.parameters, r.vocab_size, r.warmup, r.steps, r.update_freq);
  if (r.phase_sync)
    out +=
        "timing: tokens/s and step time from updates without synchronization; the phase split "
        "from as many more updates with the device synchronized at every phase boundary (the "
        "bench only: training never synchronizes inside an update)\n";
  else
    out +=
        "timing: wall clock; phases end at the marks the task places (no device to "
        "synchronize on the CPU)\n";
  const double seqs = [&] {
    double s = 0;
    for (const auto& b : r.batches) s += static_cast<double>(b.sequences);
    return s / static_cast<double>(std::max<int64_t>(r.steps, 1));
  }();
  out += fmt::format("throughput: {:.0f} {} tokens/s | {:.0f} tokens/s ({})\n", r.tokens_per_s(),
                     token_kind(r.task), r.all_tokens_per_s(), all_kind(r.task));
  out +=
      fmt::format("per update: {:.1f} sequences, {:.0f} {} tokens, {:.0f} tokens\n", seqs,
                  static_cast<double>(r.tokens) / static_cast<double>(r.steps), token_kind(r.task),
                  static_cast<double>(r.all_tokens) / static_cast<double>(r.steps));
  out += fmt::format("step: {:.2f} ms mean (min {:.2f}, max {:.2f}{})\n", r.step_ms, r.step_ms_min,
                     r.step_ms_max, r.phase_sync ? ", synchronized" : "");
  const double whole = r.phase_step_ms;
  auto line = [&](const char* name, double ms) {
    out += fmt::format("  {:<10} {:9.2f} ms {:5.1f}%\n", name, ms, percent(ms, whole));
  };
  line("data", r.phases_ms.data);
  line("forward", r.phases_ms.forward);
  line("backward", r.phases_ms.backward);
  line("optimizer", r.phases_ms.optimizer);
  if (r.phase_sync) out += fmt::format("  {:<10} {:9.2f} ms (synchronized)\n", "total", whole);
  out += fmt::format(
      "memory: peak {:.1f} MiB held by rotor's {} allocator | process max RSS {:.1f} MiB\n",
      mib(r.peak_bytes), r.device.rfind("cuda", 0) == 0 ? "CUDA pool" : "CPU",
      mib(r.max_rss_bytes));
  return out;
}

json::Value bench_json(const BenchResult& r, const Config& c, const std::string& config_path) {
  using json::Value;
  const auto& m = c.model;
  Value model = Value::object();
  model.set("encoder_layers", m.encoder_layers);
  model.set("decoder_layers", c.task == Task::Mlm ? 0 : m.decoder_layers);
  model.set("d_model", m.d_model);
  model.set("n_heads", m.n_heads);
  model.set("d_ff", m.d_ff);
  model.set("vocab_size", r.vocab_size);
  model.set("activation", to_string(m.activation));
  model.set("norm", to_string(m.norm));
  model.set("position", to_string(m.position));
  model.set("rope_base", m.rope_base);
  model.set("max_positions", m.max_positions);
  model.set("share_embeddings", m.share_embeddings);
  model.set("scale_embeddings", m.scale_embeddings);
  model.set("type_vocab_size", m.type_vocab_size);
  model.set("dropout", m.dropout);
  model.set("attention_dropout", m.attention_dropout);
  model.set("activation_dropout", m.activation_dropout);
  model.set("layer_norm_eps", m.layer_norm_eps);

  Value train = Value::object();
  train.set("update_freq", r.update_freq);
  train.set("label_smoothing", c.task == Task::Translation ? c.train.label_smoothing : 0.0);
  train.set("clip_norm", c.train.clip_norm);
  train.set("max_tokens", c.data.max_tokens);
  train.set("batch_size", c.train.batch_size);
  train.set("seq_len", c.data.seq_len);
  train.set("mask_prob", c.data.mask_prob);
  train.set("optimizer", to_string(c.optim.name));
  train.set("betas", json::Array{Value(c.optim.betas[0]), Value(c.optim.betas[1])});
  train.set("eps", c.optim.eps);
  train.set("weight_decay", c.optim.weight_decay);
  train.set("lr", c.optim.lr);

  Value phases = Value::object();
  auto phase = [&](const char* name, double ms) {
    Value p = Value::object();
    p.set("ms", ms);
    p.set("percent", percent(ms, r.phase_step_ms));
    phases.set(name, std::move(p));
  };
  phase("data", r.phases_ms.data);
  phase("forward", r.phases_ms.forward);
  phase("backward", r.phases_ms.backward);
  phase("optimizer", r.phases_ms.optimizer);

  Value batches = Value::array();
  for (const auto& b : r.batches) {
    Value v = Value::object();
    v.set("sequences", b.sequences);
    v.set("src_len", b.src_len);
    v.set("tgt_len", b.tgt_len);
    v.set("tokens", b.tokens);
    v.set("all_tokens", b.all_tokens);
    batches.push_back(std::move(v));
  }

  Value out = Value::object();
  out.set("producer", std::string("rotor ") + ROTOR_VERSION);
  out.set("config", config_path);
  out.set("task", r.task);
  out.set("device", r.device);
  out.set("device_name", r.device_name);
  out.set("precision", r.precision);
  out.set("parameters", r.parameters);
  out.set("warmup", r.warmup);
  out.set("steps", r.steps);
  out.set("phase_sync", r.phase_sync);
  out.set("seconds", r.seconds);
  out.set("tokens", r.tokens);
  out.set("all_tokens", r.all_tokens);
  out.set("tokens_per_s", r.tokens_per_s());
  out.set("all_tokens_per_s", r.all_tokens_per_s());
  out.set("token_kind", token_kind(r.task));
  out.set("step_ms", r.step_ms);
  out.set("step_ms_min", r.step_ms_min);
  out.set("step_ms_max", r.step_ms_max);
  out.set("phase_step_ms", r.phase_step_ms);
  out.set("phases", std::move(phases));
  out.set("peak_bytes", static_cast<int64_t>(r.peak_bytes));
  out.set("peak_bytes_source",
          r.device.rfind("cuda", 0) == 0 ? "rotor CUDA pool allocator" : "rotor CPU allocator");
  out.set("max_rss_bytes", static_cast<int64_t>(r.max_rss_bytes));
  out.set("model", std::move(model));
  out.set("train", std::move(train));
  out.set("batches", std::move(batches));
  return out;
}

}  // namespace rotor::train
