#include "ops/attention_device.h"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "core/cuda_context.h"
#include "core/error.h"
#include "core/t5_bias.h"
#if ROTOR_WITH_CUDA
#include "kernels/flash_attention_sm70.cuh"
#include "kernels/flash_attention_tc.cuh"
#include "ops/cudnn_attention_cuda.h"
#endif
#ifndef ROTOR_WITH_CUDNN_FRONTEND
#define ROTOR_WITH_CUDNN_FRONTEND 0
#endif

namespace rotor::ops {

const char* flash_kernel_name(FlashKernel kernel) {
  switch (kernel) {
    case FlashKernel::Portable:
      return "portable";
    case FlashKernel::TensorCore:
      return "tc";
    case FlashKernel::Volta:
      return "volta";
  }
  return "?";
}

namespace {

#if ROTOR_WITH_CUDA
AttentionDevice query_cuda_device(const Device& device) {
  AttentionDevice d;
  d.cuda = true;
  for (const cuda::DeviceInfo& info : cuda::devices())
    if (info.index == device.index) d.sm = 10 * info.cc_major + info.cc_minor;
  d.tc_code = kernels::flash_tc_device_ok(device.index);
  {
    // The Volta kernel answers for the current device.
    const int prev = cuda::current_device();
    cuda::set_device(device.index);
    d.volta_code = kernels::flash_attention_sm70_available();
    cuda::set_device(prev);
  }
  d.cudnn = cudnn_capability(device);
#if ROTOR_WITH_CUDNN_FRONTEND
  const int index = device.index;
  d.cudnn_builds = [index](const CudnnAttentionCase& c, float scale) {
    return cuda_impl::cudnn_attention_prepare(c, scale, index);
  };
#endif
  return d;
}
#endif

}  // namespace

AttentionDevice attention_device(const Device& device) {
  AttentionDevice d;
  d.cudnn.built = ROTOR_WITH_CUDNN_FRONTEND != 0;
  if (!device.is_cuda()) return d;
#if ROTOR_WITH_CUDA
  static std::mutex mutex;
  static std::map<int, AttentionDevice> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(device.index);
  if (it == known.end()) it = known.emplace(device.index, query_cuda_device(device)).first;
  return it->second;
#else
  ROTOR_FAIL("device {} in a build without CUDA", device.str());
#endif
}

bool flash_head_dim_instantiated(FlashKernel kernel, int64_t head_dim) {
  if (kernel == FlashKernel::Volta) return head_dim == 64 || head_dim == 128;
  return head_dim == 32 || head_dim == 64 || head_dim == 128;
}

std::string flash_kernel_unsupported(FlashKernel kernel, const FlashCase& c,
                                     const AttentionDevice& device) {
  if (!device.cuda) return "";
  const char* name = flash_kernel_name(kernel);
  if (!flash_head_dim_instantiated(kernel, c.D))
    return fmt::format("rotor's {} flash kernel takes head dims {}, not {}", name,
                       kernel == FlashKernel::Volta ? "64 and 128" : "32, 64 and 128", c.D);
  if (c.B * c.H > kFlashMaxBatchHeads)
    return fmt::format("batch x heads = {} exceeds {} in rotor's flash kernels", c.B * c.H,
                       kFlashMaxBatchHeads);
  if (c.rope && kernel != FlashKernel::TensorCore)
    return fmt::format(
        "RoPE inside the kernel is rotor's tensor-core kernel's alone, not the {} one's", name);
  if (c.rel_bias && (c.rel_max < 0 || c.rel_max > t5::kFlashMaxDistance))
    return fmt::format(
        "rotor's {} flash kernel holds T5's table for model.t5.max_distance up to {}, not {}; "
        "the reference core takes any",
        name, t5::kFlashMaxDistance, c.rel_max);
  if (c.rel_bias && kernel == FlashKernel::TensorCore && c.D >= 128)
    return "rotor's tc flash kernel adds T5's bias at head dims 32 and 64, not 128 (its "
           "backward has no registers to spare there)";
  if (c.rope && !c.rope_interleaved_full)
    return "rotor's tc flash kernel rotates interleaved pairs over the whole head, not "
           "model.rope.layout half or a model.rope.fraction below 1";
  switch (kernel) {
    case FlashKernel::Portable:
      return "";
    case FlashKernel::TensorCore:
      if (c.dtype != DType::F16 && c.dtype != DType::BF16)
        return fmt::format("rotor's tc flash kernel computes f16 or bf16, not {}",
                           dtype_name(c.dtype));
      if (device.sm < 80)
        return fmt::format("rotor's tc flash kernel needs sm_80+, not sm_{}", device.sm);
      if (!device.tc_code) return "this build carries no sm_80+ code for rotor's tc flash kernel";
      return "";
    case FlashKernel::Volta:
      if (c.dtype != DType::F16)
        return fmt::format("rotor's volta flash kernel computes f16, not {}", dtype_name(c.dtype));
      if (device.sm < 70 || device.sm >= 80)
        return fmt::format("rotor's volta flash kernel is for sm_70, not sm_{}", device.sm);
      if (!device.volta_code)
        return "this build carries no sm_70 code for rotor's volta flash kernel (a CUDA 12 build)";
      return "";
  }
  return "unknown flash kernel";
}

}  // namespace rotor::ops
