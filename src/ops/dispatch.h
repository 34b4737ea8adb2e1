// Device dispatch for the op API. Each public op checks its arguments (shapes,
// dtypes, devices, and the limits of every implementation, so that bad input
// gets the same message on every device), then
//   ROTOR_DISPATCH_CUDA(x, gemm(a, b, c, options));
// forwards to rotor::ops::cuda_impl (src/ops/*_cuda.cpp, kernels/*.cu) when x
// lives on a GPU, and falls through to the CPU implementation otherwise.
#pragma once

#include "core/error.h"
#include "core/profile.h"
#include "core/tensor.h"

//
// It also opens the op's profiling scope (core/profile.h) for the rest of the
// op: `rotor bench train --profile` reports each op's self time.
#define ROTOR_PROFILE_OP(call) ::rotor::profile::Scope rotor_profile_scope_(#call)

#if ROTOR_WITH_CUDA
#include "ops/cuda_ops.h"
#define ROTOR_DISPATCH_CUDA(tensor, call) \
  ROTOR_PROFILE_OP(call);                 \
  do {                                    \
    if ((tensor).is_cuda()) {             \
      ::rotor::ops::cuda_impl::call;      \
      return;                             \
    }                                     \
  } while (0)
#else
#define ROTOR_DISPATCH_CUDA(tensor, call)                                               \
  ROTOR_PROFILE_OP(call);                                                               \
  do {                                                                                  \
    if ((tensor).is_cuda()) ROTOR_FAIL("a CUDA tensor reached a CPU-only rotor build"); \
  } while (0)
#endif

namespace rotor::ops {
// The public ops check their arguments once, before dispatching: the CPU
// implementations and the CUDA glue trust those checks. This one is shared by
// most of them: a rotor::Error naming `what` unless t is f32, f16 or bf16.
inline void require_floating(const Tensor& t, const char* what) {
  if (!is_floating(t.dtype()))
    ROTOR_FAIL("{}: expected a floating tensor (f32, f16 or bf16), got {}", what, t.str());
}
}  // namespace rotor::ops
