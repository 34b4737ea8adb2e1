// A task registered from the test tree (tasks/task.h register_task), with no
// line of src/ touched: its config row is accepted by `task:`, validated by
// its own rules, trained by the trainer as any task, and its checkpoint's
// config names it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "config/tasks.h"
#include "core/error.h"
#include "core/io.h"
#include "nn/parameters.h"
#include "support/test_util.h"
#include "tasks/data.h"
#include "tasks/task.h"
#include "train/trainer.h"

namespace rotor {
namespace {

using test::TempDir;

// Task toy_mean: one parameter learns the mean of the numbers of data.train
// (a number a line) under the squared error, one number a micro-batch.
class ToyMean : public tasks::TrainingTask {
 public:
  ToyMean(const Config& c, Device device) : tokenizer_(tasks::ensure_tokenizer(c)) {
    w_ = store_.add("toy.w", {1}, nn::Init::zeros());
    store_.allocate(device);
    std::ifstream in(c.data.train);
    for (double x; in >> x;) xs_.push_back(x);
    if (xs_.empty()) ROTOR_FAIL("data.train {}: no number", c.data.train);
  }
  nn::ParameterStore& params() override { return store_; }
  std::string tokenizer_path() const override { return tokenizer_; }
  int64_t vocab_size() const override { return 1; }
  tasks::TaskSums train_micro_batch(const nn::Context& ctx) override {
    const double x = xs_[position_.batch_index++ % xs_.size()];
    const double w = store_.values().to_floats()[0];
    float* grad = store_.grads().data<float>();  // CPU: the test's device
    grad[0] += static_cast<float>((w - x) * ctx.loss_scale);
    tasks::TaskSums s;
    s.loss = s.nll = 0.5 * (w - x) * (w - x);
    s.tokens = s.all_tokens = 1;
    return s;
  }
  bool has_split(tasks::EvalSplit) const override { return false; }
  tasks::ValidationResult evaluate(tasks::EvalSplit, Device) override { return {}; }
  data::BatchPosition position() const override { return position_; }
  void set_position(data::BatchPosition p) override { position_ = p; }

 private:
  nn::ParameterStore store_;
  nn::Parameter* w_ = nullptr;
  std::string tokenizer_;
  std::vector<double> xs_;
  data::BatchPosition position_;
};

std::optional<ConfigProblem> toy_rules(const Config& c) {
  if (c.data.tokenizer != TokenizerType::Bytes)
    return ConfigProblem{"data.tokenizer", "task toy_mean reads numbers; set it to bytes"};
  return std::nullopt;
}

const TaskSpec kToySpec{
    .name = "toy_mean",
    .model = ModelFamily::Decoder,
    .length_key = "data.seq_len",
    .length = &DataConfig::seq_len,
    .metrics = {{ValidMetric::Loss}},
    .required_data = {{"data.train", &DataConfig::train, "a file of numbers, one a line"}},
    .rules = toy_rules,
};

const tasks::TaskSlice kToySlice{
    .make = [](const Config& c, Device device, int, int) -> std::unique_ptr<tasks::TrainingTask> {
      return std::make_unique<ToyMean>(c, device);
    },
};

Task toy_task() {
  static const Task task = tasks::register_task(kToySpec, kToySlice);
  return task;
}

TEST(TaskRegistry, ATaskFromTheTestTreeTrains) {
  const Task toy = toy_task();
  EXPECT_EQ(task_kind("toy_mean"), toy);
  EXPECT_EQ(toy.name(), "toy_mean");
  TempDir dir;
  {
    std::ofstream numbers(dir / "numbers.txt");
    numbers << "1\n2\n3\n6\n";  // mean 3
  }
  const std::string yaml = "task: toy_mean\noutput_dir: " + dir / "run" +
                           "\ndevice: cpu\n"
                           "data: {train: " +
                           dir / "numbers.txt" +
                           ", tokenizer: bytes}\n"
                           "train: {max_updates: 400, batch_size: 1, log_interval: 100, "
                           "save_interval: 400}\n"
                           "optim: {lr: 0.05, schedule: constant, warmup_updates: 0}\n";
  const Config c = load_config_from_string(yaml, "toy.yaml");
  EXPECT_EQ(c.task, toy);
  ASSERT_EQ(train::run_training(c, yaml, {}), 0);
  // The checkpoint's config names the task, and reads back as it.
  const Config saved = load_config(dir / "run/checkpoint_last/config.yaml");
  EXPECT_EQ(saved.task, toy);
  // The mean of the numbers, up to Adam's last steps around it.
  const std::vector<float> w = [&] {
    nn::ParameterStore store;
    store.add("toy.w", {1}, nn::Init::zeros());
    store.allocate(Device::cpu());
    checkpoint::load_weights(dir / "run/checkpoint_last", store);
    return store.values().to_floats();
  }();
  EXPECT_NEAR(w[0], 3.0, 0.3);
}

TEST(TaskRegistry, ItsRulesAndNameAreItsOwn) {
  toy_task();
  try {
    load_config_from_string("task: toy_mean\ndata: {train: x.txt}\n", "toy.yaml");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.tokenizer: task toy_mean reads numbers"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tasks::register_task(kToySpec, kToySlice), Error);  // the name is taken
  // The built-in tasks are unchanged, and an unknown name lists the new one.
  EXPECT_EQ(Config{}.task.name(), "translation");
  try {
    load_config_from_string("task: toy\n", "toy.yaml");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("toy_mean"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rotor
