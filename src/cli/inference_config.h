// The config a checkpoint runs under in `rotor eval`, `generate` and
// `translate`: its config.yaml with the command's --set overrides, which may
// change model.rope.* (RoPE context scaling applied at inference to a model
// trained without it) and data.packing (how `rotor eval` lays an LM's text
// into blocks) alone: the weights fix every other key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace rotor::cli {

// DIR/config.yaml with `sets` ("model.rope.scaling=linear") applied and
// checked as keys of the file are; an override of another key is a one-line
// rotor::Error naming the command and the override.
Config load_inference_config(std::string_view cmd, const std::string& dir,
                             const std::vector<std::string>& sets);

// The --set option's help text.
inline constexpr const char* kInferenceSetHelp =
    "Change a model.rope key for this run, e.g. --set model.rope.scaling=linear --set "
    "model.rope.factor=4 (RoPE scaling at inference), or data.packing (stream|documents)";

}  // namespace rotor::cli
