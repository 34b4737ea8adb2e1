// 16-bit storage on the CPU (docs/design.md, "Precision" and its notes).
// The CPU ops compute in f32 only. Given f16/bf16 tensors, an op converts its
// inputs to f32, runs its f32 path and rounds each 16-bit output once at the
// end; outputs it accumulates into (beta != 0, +=) are read first. That is
// what a GPU kernel does with 16-bit storage (load, compute and accumulate in
// f32, store rounded), so the mixed-precision training path runs and is
// tested on a machine without a GPU. It is slower than f32 (two extra passes
// over every 16-bit tensor): for development and tests, not for speed.
//
//   if (detail::F32Compute::needed({&x, &y})) {
//     detail::F32Compute f;
//     Tensor y32 = f.output(y);   // f.output(c, true) for an output that is read
//     layer_norm_forward(f.input(x), gamma, beta, eps, y32, mean, rstd);
//     f.commit();                 // rounds y32 into y
//     return;
//   }
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace rotor::ops::detail {

class F32Compute {
 public:
  // True when any of the (defined) tensors is f16 or bf16.
  static bool needed(std::initializer_list<const Tensor*> tensors);
  // t itself when it is not f16/bf16 (f32, integer or undefined), else an f32 copy.
  Tensor input(const Tensor& t) const;
  // t itself when it is not f16/bf16; else an f32 buffer of t's shape, holding
  // t's values when `read` (accumulated outputs), that commit() rounds into t.
  Tensor output(Tensor& t, bool read = false);
  // Rounds every f32 buffer of output() into its 16-bit tensor, once.
  void commit();

 private:
  std::vector<std::pair<Tensor, Tensor>> outputs_;  // (16-bit target, f32 buffer)
};

}  // namespace rotor::ops::detail
