// Per-op CPU time of a run, for `rotor bench train --profile` (docs/performance.md).
// While profiling is on, every public op (the ROTOR_DISPATCH_CUDA of
// ops/dispatch.h opens a Scope for the rest of the op) adds its self time
// (its wall time less that of the ops it calls) and a call to its name; a
// GEMM also adds its FLOPs, an op the bytes it reads and writes where it
// declares them. Off (the default), a Scope costs one load and a branch.
// Times are of the calling thread: an op's OpenMP team works inside it.
// On a GPU, whose kernels run after the op returns, set_sync(fn) makes each
// scope call fn (a device synchronize) as it opens and closes: an op's time
// is then its kernels' (serialized, launch gaps included).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace rotor::profile {

void set_enabled(bool on);
bool enabled();
// Called at each scope's start and end while profiling (nullptr: none).
void set_sync(void (*fn)());

class Scope {
 public:
  // `call`: the op's call as ROTOR_DISPATCH_CUDA spells it ("gemm(a, b, c,
  // o)"), a string literal; its name is the part before '('. nullptr: off.
  explicit Scope(const char* call);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* call_;
  std::chrono::steady_clock::time_point start_;
  double child_seconds_ = 0;
  Scope* parent_ = nullptr;
  friend void add_work(double flops, double bytes);
};

// FLOPs and bytes of the innermost open scope (nothing when profiling is off).
void add_work(double flops, double bytes);

struct Row {
  std::string op;
  int64_t calls = 0;
  double seconds = 0;  // self time
  double flops = 0, bytes = 0;
};
// What was measured since the last take(), slowest first; then resets.
std::vector<Row> take();

}  // namespace rotor::profile
