// The logits of a task-lm checkpoint for lines of token ids, for
// tests/scripts/hf_transformers_check.py to hold against transformers.
//
//   reference_lm_logits CHECKPOINT IDS_FILE OUT.safetensors
//
// IDS_FILE: one sequence a line, token ids separated by spaces. Each line is
// run alone (batch 1, no padding). Writes logits f32 [N, T, V] (T the longest
// line, zeros past a line's end) and lengths i32 [N].
#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "models/decoder_lm.h"
#include "models/model_config.h"

using namespace rotor;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: reference_lm_logits CHECKPOINT IDS_FILE OUT.safetensors\n");
    return 2;
  }
  try {
    const std::string dir = checkpoint::resolve_checkpoint(argv[1]);
    const Config c = load_config(dir + "/config.yaml");
    const checkpoint::NamedTensors w = checkpoint::load_safetensors(dir + "/model.safetensors");
    int64_t V = 0;
    for (const auto& [name, t] : w)
      if (name == "model.embed_tokens.weight") V = t.size(0);
    if (V == 0) throw Error(dir + ": no model.embed_tokens.weight (not a task-lm checkpoint)");
    nn::ParameterStore store;
    models::DecoderLM model(models::lm_options(c, V), store);
    store.allocate(Device::cpu());
    checkpoint::load_weights(dir, store);

    std::vector<std::vector<int32_t>> lines;
    std::ifstream in(argv[2]);
    for (std::string line; std::getline(in, line);) {
      std::istringstream s(line);
      std::vector<int32_t> ids;
      for (int32_t id; s >> id;) ids.push_back(id);
      if (!ids.empty()) lines.push_back(ids);
    }
    const int64_t N = static_cast<int64_t>(lines.size());
    int64_t T = 0;
    for (const auto& l : lines) T = std::max<int64_t>(T, static_cast<int64_t>(l.size()));
    std::vector<float> logits(static_cast<size_t>(N * T * V), 0.0f);
    std::vector<int32_t> lengths;
    nn::Context ctx;
    for (int64_t n = 0; n < N; ++n) {
      const auto& ids = lines[static_cast<size_t>(n)];
      const int64_t L = static_cast<int64_t>(ids.size());
      const std::vector<float> lg =
          model.forward_logits(Tensor::from_ints(ids, {1, L}), ctx).to_floats();  // [1, L, V]
      std::copy(lg.begin(), lg.end(), logits.begin() + n * T * V);
      lengths.push_back(static_cast<int32_t>(L));
    }
    checkpoint::save_safetensors(argv[3], {{"logits", Tensor::from_floats(logits, {N, T, V})},
                                           {"lengths", Tensor::from_ints(lengths, {N})}});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reference_lm_logits: %s\n", e.what());
    return 1;
  }
  return 0;
}
