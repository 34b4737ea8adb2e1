// `rotor average`: checkpoint averaging (docs/design.md, "Checkpoints and run directories"), as
// fairseq's scripts/average_checkpoints.py does it: the element-wise mean of the model weights of
// several checkpoints of one model, accumulated in double.
#pragma once

#include <string>
#include <vector>

namespace rotor::checkpoint {

// The newest `n` step_N checkpoint directories of a run (RUN_DIR/checkpoints/),
// oldest first. A rotor::Error when the run holds fewer than `n`.
std::vector<std::string> last_checkpoints(const std::string& run_dir, int n);

// Averages the model.safetensors of `inputs` (each a checkpoint directory or a
// run directory, resolved as resolve_checkpoint does) and publishes `output`
// atomically as a checkpoint directory that `rotor translate` reads:
// model.safetensors, config.yaml and spm.model (copied from the last input),
// trainer_state.json (the last input's, with "averaged_from"); no optimizer
// state. Every input must hold the same tensor names, shapes and dtype (f32);
// a mismatch, or a non-finite value in an input, is a rotor::Error naming the
// file and the tensor, and nothing is written. An existing
// `output` is replaced only when it is itself a checkpoint directory.
// Returns the resolved input directories.
std::vector<std::string> average_checkpoints(const std::vector<std::string>& inputs,
                                             const std::string& output);

}  // namespace rotor::checkpoint
