#include "cli/inference_config.h"

#include "core/error.h"

namespace rotor::cli {

Config load_inference_config(std::string_view cmd, const std::string& dir,
                             const std::vector<std::string>& sets) {
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    std::string key = s.substr(0, eq);
    while (!key.empty() && key.back() == ' ') key.pop_back();
    while (!key.empty() && key.front() == ' ') key.erase(0, 1);
    if (key != "model.rope" && key.rfind("model.rope.", 0) != 0 && key != "data.packing" &&
        key != "data.document_separator")
      ROTOR_FAIL(
          "{}: --set {}: only model.rope.* keys, data.packing and data.document_separator change "
          "at inference (the checkpoint's weights fix every other key)",
          cmd, s);
  }
  return load_config(dir + "/config.yaml", sets);
}

}  // namespace rotor::cli
