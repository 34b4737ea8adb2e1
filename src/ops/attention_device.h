// What a device offers attention: the facts about one device that decide
// which attention core and kernel can run a case, and the limits of each of
// rotor's flash kernels as pure functions of a case and those facts.
// nn/attention_plan.h decides from them; the ops only check that what they are
// asked to run can run. Being plain data, the facts can be made up, so the
// plan is tested on the CPU for devices this machine does not have
// (tests/cpu/test_attention_plan.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "ops/attention.h"
#include "ops/cudnn_attention.h"

namespace rotor::ops {

struct AttentionDevice {
  bool cuda = false;        // false: the CPU, where every core runs (the flash core as its twin)
  int sm = 0;               // 10 * major + minor compute capability
  bool tc_code = false;     // the build carries the tensor-core kernels for this GPU (sm_80+)
  bool volta_code = false;  // the build carries the Volta kernel for this GPU (sm_70, CUDA 12)
  CudnnCapability cudnn;
  // What only cuDNN can tell: "" when it builds graphs for the case (asking
  // builds and caches them), else its reason. Empty function: assume it does.
  std::function<std::string(const CudnnAttentionCase&, float scale)> cudnn_builds;
};

// The facts of `device` (the CPU, or a CUDA device asked once and remembered).
AttentionDevice attention_device(const Device& device);

// An attention call as the flash kernels' limits see it.
struct FlashCase {
  DType dtype = DType::F32;
  int64_t B = 0, H = 0, Tq = 0, Tk = 0, D = 0;
  bool rope = false;  // AttentionOptions::rope: RoPE inside the kernel
  // Its settings rotate interleaved pairs over the whole head
  // (rope::interleaved_full): what the tensor-core kernel's fragments hold.
  bool rope_interleaved_full = true;
  bool alibi = false;  // AttentionOptions::alibi: a per-head linear bias (every kernel adds it)
  // AttentionOptions::rel_bias: T5's learned bias, which every flash kernel
  // adds for rel_max (its table's max_distance) up to t5::kFlashMaxDistance.
  bool rel_bias = false;
  int64_t rel_max = 0;
};

// The head dims every CUDA flash kernel is instantiated for, and the most
// (batch x heads) one grid row per pair allows.
bool flash_head_dim_instantiated(FlashKernel kernel, int64_t head_dim);
constexpr int64_t kFlashMaxBatchHeads = 65535;

// "" when `kernel` runs `c` on `device`, else one line saying why not (the
// CPU twin runs every case: "" there whatever `kernel` says).
std::string flash_kernel_unsupported(FlashKernel kernel, const FlashCase& c,
                                     const AttentionDevice& device);

}  // namespace rotor::ops
