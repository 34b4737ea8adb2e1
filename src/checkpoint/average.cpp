#include "checkpoint/average.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

std::vector<std::string> last_checkpoints(const std::string& run_dir, int n) {
  if (n <= 0) ROTOR_FAIL("--last {}: expected a positive number of checkpoints", n);
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    ROTOR_FAIL("{}: not a run directory (no checkpoints/ in it)", run_dir);
  const std::vector<std::pair<int64_t, std::string>> found = list_checkpoints(run_dir);
  if (static_cast<int64_t>(found.size()) < n)
    ROTOR_FAIL("{}: --last {} asks for {} checkpoints, the run holds {}", run_dir, n, n,
               found.size());
  std::vector<std::string> out;
  for (size_t i = found.size() - static_cast<size_t>(n); i < found.size(); ++i)
    out.push_back(found[i].second);
  return out;
}

std::vector<std::string> average_checkpoints(const std::vector<std::string>& inputs,
                                             const std::string& output) {
  if (inputs.empty()) ROTOR_FAIL("average: no checkpoints given");
  if (output.empty()) ROTOR_FAIL("average: --output is required");
  std::vector<std::string> dirs;
  for (const auto& in : inputs) dirs.push_back(resolve_checkpoint(in));
  {
    // The output may replace an earlier average, never an input, a training
    // checkpoint (it holds optimizer state) or anything that is not a checkpoint.
    std::error_code ec;
    for (const auto& d : dirs)
      if (fs::exists(output, ec) && fs::equivalent(output, d, ec))
        ROTOR_FAIL("--output {} is also an input ({}); write the average elsewhere", output, d);
    if (fs::exists(output, ec)) {
      const fs::path out(output);
      if (!fs::is_directory(out, ec) ||
          !(fs::is_empty(out, ec) || fs::exists(out / "model.safetensors", ec)))
        ROTOR_FAIL("--output {}: exists and is not a checkpoint directory; not replacing it",
                   output);
      if (fs::exists(out / "optimizer.safetensors", ec))
        ROTOR_FAIL("--output {}: a training checkpoint is there; not replacing it with an average",
                   output);
      // A link (a run's checkpoint_last, say) would have its target replaced
      // (core/io.h): name the directory itself.
      if (fs::is_symlink(out, ec))
        ROTOR_FAIL("--output {}: is a symbolic link to a checkpoint; give the directory itself",
                   output);
    }
  }

  std::vector<SafetensorsFile> files;
  for (const auto& d : dirs) files.emplace_back(d + "/model.safetensors");
  // Every file must hold exactly the tensors of the first.
  const SafetensorsFile& first = files.front();
  for (const auto& e : first.entries())
    if (e.dtype != DType::F32)
      ROTOR_FAIL("{}: {} is {}; rotor averages f32 weights only", first.path(), e.name,
                 dtype_name(e.dtype));
  for (size_t f = 1; f < files.size(); ++f) {
    const SafetensorsFile& file = files[f];
    for (const auto& e : first.entries()) {
      const SafetensorsEntry* o = file.find(e.name);
      if (!o)
        ROTOR_FAIL("{}: tensor {} is missing (present in {}); not checkpoints of one model",
                   file.path(), e.name, first.path());
      if (o->shape != e.shape || o->dtype != e.dtype)
        ROTOR_FAIL("{}: {} is {}{} but {}{} in {}; not checkpoints of one model", file.path(),
                   e.name, dtype_name(o->dtype), shape_str(o->shape), dtype_name(e.dtype),
                   shape_str(e.shape), first.path());
    }
    if (file.entries().size() != first.entries().size())
      for (const auto& o : file.entries())
        if (!first.contains(o.name))
          ROTOR_FAIL("{}: tensor {} is not in {}; not checkpoints of one model", file.path(),
                     o.name, first.path());
  }

  // Tensor by tensor: one double accumulator at a time.
  NamedTensors averaged;
  const double scale = 1.0 / static_cast<double>(files.size());
  for (const auto& e : first.entries()) {
    std::vector<double> sum;
    for (const auto& file : files) {
      Tensor t = file.load(e.name);
      const float* x = t.data<float>();
      if (sum.empty()) sum.assign(static_cast<size_t>(t.numel()), 0.0);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += static_cast<double>(x[i]);
      // Non-finite weights are never saved: the input is named, nothing written.
      for (size_t i = 0; i < sum.size(); ++i)
        if (!std::isfinite(x[i]))
          ROTOR_FAIL(
              "{}: {} holds a non-finite value ({} at element {}); the run that saved it "
              "diverged; not averaging it",
              file.path(), e.name, x[i], i);
    }
    Tensor out = Tensor::empty(e.shape, DType::F32);
    float* y = out.data<float>();
    for (size_t i = 0; i < sum.size(); ++i) y[i] = static_cast<float>(sum[i] * scale);
    averaged.emplace_back(e.name, std::move(out));
  }

  // Metadata, config, tokenizer and trainer state from the last checkpoint.
  const std::string& last = dirs.back();
  Metadata meta = files.back().metadata();
  json_io::Json from = json_io::Json::array();
  for (const auto& d : dirs) from.push_back(d);
  meta.erase(std::remove_if(meta.begin(), meta.end(),
                            [](const auto& kv) { return kv.first == "rotor_averaged_from"; }),
             meta.end());
  // A directory name that is not UTF-8 is recorded with U+FFFD for its bad bytes.
  constexpr auto kReplace = json_io::Json::error_handler_t::replace;
  meta.emplace_back("rotor_averaged_from", from.dump(-1, ' ', false, kReplace));
  const std::string state_path = last + "/trainer_state.json";
  // Kept as read (key order, numbers) but for "averaged_from".
  json_io::Json state = json_io::load(state_path);
  if (!state.is_object()) ROTOR_FAIL("{}: not a rotor trainer state", state_path);
  state["averaged_from"] = from;
  const std::string config_yaml = read_file(last + "/config.yaml", kMaxConfigBytes);
  const bool has_spm = fs::exists(last + "/spm.model");
  const std::string spm = has_spm ? read_file(last + "/spm.model") : std::string();
  // The task's files (labels.txt, an EHR run's vocab.txt and ehr_data.json), as the newest
  // holds them.
  std::vector<std::pair<std::string, std::string>> task_files;
  for (const char* name : {kLabelsFile, kEhrVocabFile, kEhrDataFile})
    if (fs::exists(last + "/" + name)) task_files.emplace_back(name, read_file(last + "/" + name));
  files.clear();

  const fs::path parent = fs::path(output).parent_path();
  if (!parent.empty()) ensure_directory(parent.string());
  publish_directory(output, [&](const std::string& tmp) {
    save_safetensors(tmp + "/model.safetensors", averaged, meta);
    atomic_write_file(tmp + "/trainer_state.json", state.dump(2, ' ', false, kReplace) + "\n");
    atomic_write_file(tmp + "/config.yaml", config_yaml);
    if (has_spm) atomic_write_file(tmp + "/spm.model", spm);
    for (const auto& [name, text] : task_files) atomic_write_file(tmp + "/" + name, text);
  });
  return dirs;
}

}  // namespace rotor::checkpoint
