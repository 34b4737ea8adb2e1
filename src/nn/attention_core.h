// Which attention core a MultiHeadAttention layer runs for one call
// (nn/attention.cpp), decided from the config's attention.impl and what each
// core supports for the case at hand. A pure function of its inputs, so the
// policy is tested on the CPU with made-up capabilities
// (tests/cpu/test_cudnn_attention.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "nn/kinds.h"

namespace rotor::nn {

enum class AttentionCore {
  Reference,  // ops::attention_forward: materialized probabilities
  Rotor,      // ops::flash_attention_forward: rotor's fused kernel
  Cudnn,      // ops::cudnn_attention_forward: cuDNN's fused SDPA
};
const char* attention_core_name(AttentionCore core);

// `auto` gives cuDNN sequences of at least this many keys. Below it rotor's
// kernel is the one that measured ahead of PyTorch's flash attention, and it
// needs no graph per shape, while translation batches bring a new (B, Tq, Tk)
// at almost every step. To be revisited with the cuDNN column of
// bench_attention (scripts/gpu/measure.sh).
constexpr int64_t kCudnnMinKeys = 128;

struct AttentionCoreQuery {
  bool on_cpu = true;
  bool rotor_supported = true;  // ops::flash_attention_supported
  int64_t Tk = 0;               // keys per query row (padded length)
  // "" when cuDNN serves the case, else why not (ops::cudnn_attention_supported).
  // Called only when the answer matters: asking may build cuDNN graphs.
  std::function<std::string()> cudnn_unsupported;
};

struct AttentionCoreChoice {
  AttentionCore core = AttentionCore::Reference;
  // For `auto` on a GPU: one line on why this core (logged once per distinct
  // line); empty otherwise.
  std::string why;
};

// impl Reference and Rotor are taken as they are (an unsupported case fails
// in the op with its own message); Cudnn where cuDNN does not serve the case
// is a rotor::Error with cuDNN's reason. Auto: the reference core on the CPU
// (its products are OpenBLAS GEMMs); on a GPU cuDNN from kCudnnMinKeys keys
// where it serves the case, else rotor's kernel where it does, else the
// reference core.
AttentionCoreChoice choose_attention_core(AttentionImpl impl, const AttentionCoreQuery& query);

// Logs `line` at info level the first time this process sees it.
void log_once(const std::string& line);

}  // namespace rotor::nn
