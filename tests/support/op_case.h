// Op cases run on the CPU and on CUDA and compared, in the manner of ggml's
// test-backend-ops: a table of {op, config (shapes and options), dtype} cases,
// each of which builds its inputs and runs its op on a given device. For
// every case the harness runs
//   ref:   the CPU op on f32 tensors holding the inputs rounded to the dtype
//   got:   the CUDA op on tensors of the dtype
//   plain: the same computation done plainly in the dtype (default: the CPU
//          op on 16-bit tensors, which computes in f32 and rounds each output
//          once, src/ops/cpu_f32.h), for f16 and bf16 cases
// and requires, output by output: f32 results within a relative tolerance of
// ref; 16-bit results within FlashAttention's rule, err(got) <= factor *
// err(plain) + floor with errors against ref and factor 2 unless the case
// says why not. Test names start with the op's name, so `ctest -R
// split_heads` runs the head split's cases. Used by tests/gpu/test_*_cuda.cpp.
//
// The same table is the ops' benchmark: with ROTOR_OPS_MODE=perf each case
// times its op instead (OpEnv::op: warm-up, then doubling repetitions until
// ROTOR_OPS_PERF_SECONDS, default 0.05, pass, the device synchronized around
// them) on the CPU, and on CUDA when a GPU answers, and prints one line
//   perf <op> <config> <dtype> <device> <time> [<GB/s>] [<GFLOP/s>]
// from the case's declared bytes and FLOPs. A case whose run does not mark
// its op is timed whole (inputs and copies back included) and says so. Perf
// mode asserts nothing about speed; it is not run by ctest.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/cuda_context.h"
#include "core/tensor.h"
#include "support/test_util.h"

namespace rotor::test {

// What the table of cases does: check every case against the CPU (the
// default), or time every case's op (ROTOR_OPS_MODE=perf).
enum class OpMode { Check, Perf };
inline OpMode op_mode() {
  const char* m = std::getenv("ROTOR_OPS_MODE");
  if (!m || !*m || std::string(m) == "check") return OpMode::Check;
  if (std::string(m) == "perf") return OpMode::Perf;
  ADD_FAILURE() << "ROTOR_OPS_MODE: expected check or perf, got \"" << m << "\"";
  return OpMode::Check;
}

// Times a function on a device: a warm-up call, then 1, 2, 4, ... calls
// until they take ROTOR_OPS_PERF_SECONDS (default 0.05 s) or 4096 calls,
// with the device's stream synchronized before and after.
struct OpTimer {
  double seconds = -1;  // per call; negative: nothing timed
  int calls = 0;

  void time(const Device& device, const std::function<void()>& f) {
    const char* env = std::getenv("ROTOR_OPS_PERF_SECONDS");
    const double budget = env && *env ? std::atof(env) : 0.05;
    auto sync = [&] {
      if (device.is_cuda()) cuda::synchronize(device.index);
    };
    f();
    sync();
    for (int n = 1;; n *= 2) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) f();
      sync();
      const double dt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (dt >= budget || n >= 4096) {
        seconds = dt / n;
        calls = n;
        return;
      }
    }
  }
};

// Values rounded to `dt` and back (what a low-precision tensor holds).
inline std::vector<float> rounded(const std::vector<float>& v, DType dt) {
  return Tensor::from_floats(v, {static_cast<int64_t>(v.size())}, dt).to_floats();
}

// Where one run of a case happens: floating tensors are made on `device` with
// dtype `dtype` from values first rounded to `inputs` (the case's dtype), so
// that the three runs of a case see the same input values.
struct OpEnv {
  Device device;
  DType dtype;
  DType inputs;

  Tensor in(const std::vector<float>& v, const Shape& s) const {
    return Tensor::from_floats(rounded(v, inputs), s, dtype, device);
  }
  // Kept in f32 whatever the run's dtype (statistics, master weights).
  Tensor in_f32(const std::vector<float>& v, const Shape& s) const {
    return Tensor::from_floats(v, s, DType::F32, device);
  }
  Tensor ints(const std::vector<int32_t>& v, const Shape& s) const {
    return Tensor::from_ints(v, s, device);
  }
  Tensor zeros(const Shape& s) const { return Tensor::zeros(s, dtype, device); }
  Tensor zeros_f32(const Shape& s) const { return Tensor::zeros(s, DType::F32, device); }

  // Runs the case's op (the call the case measures, its inputs made before):
  // once, or timed in perf mode. In-place ops run again on their outputs.
  OpTimer* timer = nullptr;
  void op(const std::function<void()>& f) const {
    if (timer)
      timer->time(device, f);
    else
      f();
  }
};

struct OpOutput {
  std::string name;
  std::vector<double> values;
  bool low_precision = false;  // held in f16/bf16 by this run
  double tol = -1.0;           // f32 tolerance of this output; negative: the case's
};
using OpOutputs = std::vector<OpOutput>;

// An output tensor of a run (floating or integer).
inline OpOutput out(const std::string& name, const Tensor& t, double tol = -1.0) {
  OpOutput o{name, {}, t.dtype() == DType::F16 || t.dtype() == DType::BF16, tol};
  if (is_floating(t.dtype())) {
    const auto v = t.to_floats();
    o.values.assign(v.begin(), v.end());
  } else {
    const auto v = t.to_ints();
    o.values.assign(v.begin(), v.end());
  }
  return o;
}
// A value returned to the host (sum, max_abs).
inline OpOutput out_value(const std::string& name, double v, double tol = -1.0) {
  return {name, {v}, false, tol};
}

struct OpCase {
  std::string op;      // the op's name
  std::string config;  // shapes and options, e.g. "B2_T37_P3_H3_D64_rot2_off1500"
  DType dtype = DType::F32;
  std::function<OpOutputs(const OpEnv&)> run;
  // The computation done plainly in the dtype, when it is not the CPU op on
  // 16-bit tensors; called with a CUDA environment of the dtype.
  std::function<OpOutputs(const OpEnv&)> plain;
  double tol = 1e-5;                  // relative, f32 results
  double factor = 2.0, floor = 1e-5;  // 16-bit results
  // What the op reads and writes and computes, for perf mode's GB/s and
  // GFLOP/s (0: not declared).
  double bytes = 0, flops = 0;
};

inline void PrintTo(const OpCase& c, std::ostream* os) {
  *os << c.op << " " << dtype_name(c.dtype) << " " << c.config;
}

// The test name: op_dtype_config with [A-Za-z0-9_] only.
inline std::string op_case_name(const testing::TestParamInfo<OpCase>& info) {
  std::string n = info.param.op + "_" + dtype_name(info.param.dtype);
  if (!info.param.config.empty()) n += "_" + info.param.config;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

// max |a - b| / max(1, |b|); equal non-finite values (NaN, same-signed inf)
// agree, any other non-finite value is an infinite error.
inline double op_error(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
      const bool same = (std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i];
      if (!same) return INFINITY;
      continue;
    }
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  }
  return worst;
}

inline void check_op_case(const OpCase& c) {
  const Device gpu = Device::cuda(0);
  const OpOutputs ref = c.run({Device::cpu(), DType::F32, c.dtype});
  const OpOutputs got = c.run({gpu, c.dtype, c.dtype});
  OpOutputs plain;
  if (c.dtype != DType::F32)
    plain = c.plain ? c.plain({gpu, c.dtype, c.dtype}) : c.run({Device::cpu(), c.dtype, c.dtype});
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const OpOutput &g = got[i], &r = ref[i];
    ASSERT_EQ(g.name, r.name);
    ASSERT_EQ(g.values.size(), r.values.size()) << g.name;
    const double err = op_error(g.values, r.values);
    if (!g.low_precision) {
      const double tol = g.tol >= 0 ? g.tol : c.tol;
      EXPECT_LE(err, tol) << g.name << ": error " << err << " against the CPU's f32 result";
      continue;
    }
    ASSERT_EQ(plain.at(i).name, g.name);
    const double plain_err = op_error(plain[i].values, r.values);
    EXPECT_LE(err, c.factor * plain_err + c.floor)
        << g.name << " (" << dtype_name(c.dtype) << "): error " << err << ", done plainly "
        << plain_err << " (bound " << c.factor << " x plain + " << c.floor << ")";
  }
}

// Perf mode: the case's op timed on `device` (its inputs in the case's
// dtype), one line on stdout.
inline void time_op_case(const OpCase& c, const Device& device) {
  OpTimer timer;
  OpEnv env{device, c.dtype, c.dtype};
  env.timer = &timer;
  c.run(env);
  const bool whole = timer.seconds < 0;
  if (whole) {  // the run marks no op: time all of it
    env.timer = nullptr;
    timer.time(device, [&] { c.run(env); });
  }
  std::string line =
      fmt::format("perf {:<22} {:<40} {:<4} {:<6} {:>10.2f} us", c.op, c.config,
                  dtype_name(c.dtype), device.is_cuda() ? "cuda" : "cpu", timer.seconds * 1e6);
  if (c.bytes > 0) line += fmt::format(" {:>9.2f} GB/s", c.bytes / timer.seconds * 1e-9);
  if (c.flops > 0) line += fmt::format(" {:>9.2f} GFLOP/s", c.flops / timer.seconds * 1e-9);
  if (whole) line += " (whole case: inputs and copies included)";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// Perf mode for one case: the CPU op, and the CUDA op when a GPU answers.
inline void time_op_case(const OpCase& c) {
  time_op_case(c, Device::cpu());
  if (cuda_device_count() > 0) time_op_case(c, Device::cuda(0));
}

// The value-parameterized test of a table of cases:
//   ROTOR_OP_CASES(Ops, all_cases());
#define ROTOR_OP_CASES(prefix, cases)                                     \
  class CudaOp : public testing::TestWithParam<::rotor::test::OpCase> {}; \
  TEST_P(CudaOp, MatchesCpu) {                                            \
    if (::rotor::test::op_mode() == ::rotor::test::OpMode::Perf)          \
      return ::rotor::test::time_op_case(GetParam());                     \
    ROTOR_REQUIRE_GPU();                                                  \
    ::rotor::test::check_op_case(GetParam());                             \
  }                                                                       \
  INSTANTIATE_TEST_SUITE_P(prefix, CudaOp, testing::ValuesIn(cases), ::rotor::test::op_case_name)

}  // namespace rotor::test
