#include "checkpoint/init_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <set>

#include "checkpoint/checkpoint.h"
#include "checkpoint/label_rows.h"
#include "checkpoint/safetensors.h"
#include "config/tasks.h"
#include "core/error.h"
#include "data/ehr.h"
#include "models/model_config.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

namespace {

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

// The config keys a checkpoint's weights do not show by their shapes.
void check_same_model(const Config& was, const Config& c, const std::string& where) {
  auto same = [&](const char* key, const std::string& a, const std::string& b) {
    if (a != b) ROTOR_FAIL("model.init_from: {} has {} {}, the config {}", where, key, a, b);
  };
  if (task_spec(was.task).model != ModelFamily::BertEncoder)
    ROTOR_FAIL("model.init_from: {} is a task-{} checkpoint, not a BERT/RoFormer encoder", where,
               to_string(was.task));
  same("model.position", std::string(was.model.position.name()),
       std::string(c.model.position.name()));
  same("model.position_source", std::string(to_string(was.model.position_source)),
       std::string(to_string(c.model.position_source)));
  same("model.age_embedding", std::string(to_string(was.model.age_embedding)),
       std::string(to_string(c.model.age_embedding)));
  same("model.activation", std::string(to_string(was.model.activation)),
       std::string(to_string(c.model.activation)));
  same("model.norm", std::string(to_string(was.model.norm)), std::string(to_string(c.model.norm)));
  same("model.norm_type", std::string(to_string(was.model.norm_type)),
       std::string(to_string(c.model.norm_type)));
  same("model.gated_ffn", was.model.gated_ffn ? "true" : "false",
       c.model.gated_ffn ? "true" : "false");
  same("model.bias", was.model.bias ? "true" : "false", c.model.bias ? "true" : "false");
  same("data.format", std::string(to_string(was.data.format)),
       std::string(to_string(c.data.format)));
  // The rotation the weights were trained with: its base, its dimensions and
  // their order (context scaling may differ: fine-tuning can extend it).
  if (c.model.position->rotates_qk) {
    const rope::Params &a = was.model.rope, &b = c.model.rope;
    if (a.theta != b.theta)
      ROTOR_FAIL("model.init_from: {} has model.rope.theta {}, the config {}", where, a.theta,
                 b.theta);
    if (a.fraction != b.fraction)
      ROTOR_FAIL("model.init_from: {} has model.rope.fraction {}, the config {}", where, a.fraction,
                 b.fraction);
    same("model.rope.layout", std::string(to_string(a.layout)), std::string(to_string(b.layout)));
  }
}

}  // namespace

bool is_rotor_checkpoint(const std::string& path) {
  if (path.empty()) return false;
  std::error_code ec;
  if (fs::exists(fs::path(path) / "config.json", ec)) return false;  // Hugging Face
  try {
    const std::string dir = resolve_checkpoint(path);
    return fs::exists(fs::path(dir) / "config.yaml", ec) &&
           fs::exists(fs::path(dir) / "trainer_state.json", ec);
  } catch (const Error&) {
    return false;
  }
}

HfImportResult import_rotor_checkpoint(const std::string& path, const Config& c,
                                       nn::ParameterStore& store,
                                       const std::vector<std::string>& labels) {
  if (task_spec(c.task).model != ModelFamily::BertEncoder)
    ROTOR_FAIL("model.init_from: task {} has no BERT/RoFormer encoder to start from {}",
               to_string(c.task), path);
  const std::string dir = resolve_checkpoint(path);
  const std::string cfg = dir + "/config.yaml";
  const Config was = load_config(cfg);
  check_same_model(was, c, cfg);
  const std::vector<std::string> saved_labels = checkpoint_label_names(dir, was);
  if (c.data.format == DataFormat::Ehr) {
    const std::string saved = dir + "/" + kEhrVocabFile;
    if (!fs::exists(saved))
      ROTOR_FAIL("model.init_from: {} lacks {} (the code vocabulary of its EHR data)", dir,
                 kEhrVocabFile);
    const std::string ours = data::ehr_dir_of(c.data.train);
    if (data::read_ehr_vocab(dir) != data::read_ehr_vocab(ours))
      ROTOR_FAIL(
          "model.init_from: {} numbers the codes differently from {}/vocab.txt (prepare both "
          "from the same patients with the same --min-visits, --min-count and --seed)",
          saved, ours);
  }
  const std::string prefix = models::hf_encoder_options(c).prefix;
  HfImportResult r;
  r.model_type = "rotor";
  const SafetensorsFile file(dir + "/model.safetensors");
  std::set<std::string> used;
  for (const auto& p : store.parameters()) {
    const SafetensorsEntry* e = file.find(p->name);
    const bool encoder =
        starts_with(p->name, prefix + ".") && !starts_with(p->name, prefix + ".pooler.");
    if (!e) {
      if (encoder)
        ROTOR_FAIL("{}: the weights lack {} (is it a {} encoder of this size?)", file.path(),
                   p->name, prefix);
      r.fresh.push_back(p->name);
      continue;
    }
    // A classifier's label rows are read by label name (checkpoint/label_rows.h).
    const LabelRows rows = label_rows_of(*p, e->shape, saved_labels, labels, dir, r.notes);
    if (rows.none) {
      r.fresh.push_back(p->name);
      continue;
    }
    if (rows.identity && e->shape != p->shape)
      ROTOR_FAIL("{}: {} has shape {}, the model expects {}", file.path(), p->name,
                 shape_str(e->shape), shape_str(p->shape));
    if (e->dtype != DType::F32)
      ROTOR_FAIL("{}: {} is {}, expected f32", file.path(), p->name, dtype_name(e->dtype));
    const Tensor w = file.load(p->name);
    const float* x = w.data<float>();
    for (int64_t i = 0, n = w.numel(); i < n; ++i)
      if (!std::isfinite(x[i]))
        ROTOR_FAIL("{}: {} holds a non-finite value ({} at element {})", file.path(), p->name, x[i],
                   i);
    if (rows.identity)
      p->value.copy_from(w);
    else
      read_label_rows(p->value, w.to_floats(), rows);
    used.insert(p->name);
    ++r.loaded;
  }
  for (const auto& name : file.names())
    if (!used.count(name)) r.unused.push_back(name);
  return r;
}

}  // namespace rotor::checkpoint
