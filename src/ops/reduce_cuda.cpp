// CUDA glue for the reductions (src/ops/reduce.h). sum and max_abs return host
// values and so synchronize; global_norm and any_nonfinite stay on the device.
#if ROTOR_WITH_CUDA

#include <cmath>
#include <vector>

#include "kernels/reduce.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

using cuda_glue::DeviceScope;
using cuda_glue::Scratch;

void sum_rows(const Tensor& x, Tensor& out, bool accumulate) {
  DeviceScope s(out);
  const int64_t n = x.size(-1);
  if (n == 0) return;
  const int64_t rows = x.numel() / n;
  const int splits = kernels::sum_rows_splits(rows);
  Scratch partial(sizeof(float) * static_cast<size_t>(splits * n), s.index());  // [splits, n]
  ROTOR_CUDA_CHECK(kernels::sum_rows(x.raw(), x.dtype(), rows, n, out.data<float>(), accumulate,
                                     partial.as<float>(), splits, s.stream()));
}

void sum(const Tensor& x, double& result) {
  DeviceScope s(x);
  const int blocks = kernels::reduce_blocks(x.numel());
  Scratch partial(sizeof(double) * blocks, s.index());  // [blocks]
  ROTOR_CUDA_CHECK(kernels::sum_partials(x.raw(), x.dtype(), x.numel(), partial.as<double>(),
                                         blocks, s.stream()));
  std::vector<double> host(static_cast<size_t>(blocks));
  cuda::memcpy(host.data(), partial.get(), sizeof(double) * blocks, cuda::CopyKind::DeviceToHost,
               s.index());  // synchronizes
  result = 0.0;
  for (double v : host) result += v;
}

void max_abs(const Tensor& x, float& result) {
  DeviceScope s(x);
  const int blocks = kernels::reduce_blocks(x.numel());
  Scratch partial(sizeof(float) * blocks, s.index());  // [blocks]
  ROTOR_CUDA_CHECK(kernels::max_abs_partials(x.raw(), x.dtype(), x.numel(), partial.as<float>(),
                                             blocks, s.stream()));
  std::vector<float> host(static_cast<size_t>(blocks));
  cuda::memcpy(host.data(), partial.get(), sizeof(float) * blocks, cuda::CopyKind::DeviceToHost,
               s.index());  // synchronizes
  result = 0.0f;
  for (float v : host) {
    if (std::isnan(v)) {
      result = v;  // a NaN anywhere is reported, as on the CPU
      break;
    }
    if (v > result) result = v;
  }
}

void global_norm(const std::vector<Tensor>& tensors, Tensor& out) {
  DeviceScope s(out);
  std::vector<int> blocks(tensors.size());
  int64_t nslots = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    blocks[i] = kernels::reduce_blocks(tensors[i].numel());
    nslots += blocks[i];
  }
  Scratch slots(sizeof(double) * static_cast<size_t>(nslots), s.index());  // [nslots]
  int64_t at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    ROTOR_CUDA_CHECK(kernels::sumsq_partials(tensors[i].raw(), tensors[i].dtype(),
                                             tensors[i].numel(), slots.as<double>() + at, blocks[i],
                                             s.stream()));
    at += blocks[i];
  }
  ROTOR_CUDA_CHECK(
      kernels::global_norm_finish(slots.as<double>(), nslots, out.data<float>(), s.stream()));
}

void any_nonfinite(const std::vector<Tensor>& tensors, Tensor& out) {
  DeviceScope s(out);
  uint8_t* flag = static_cast<uint8_t*>(out.raw());
  ROTOR_CUDA_CHECK(kernels::nonfinite_reset(flag, s.stream()));
  for (const Tensor& t : tensors) {
    ROTOR_CUDA_CHECK(kernels::nonfinite_check(t.raw(), t.dtype(), t.numel(), flag, s.stream()));
  }
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
