// kernels/adamw.cu (adamw_step: one fused pass over params, grads and both
// moments) run on the CPU (emulate_cu.py, kernel_emulation.h) and held to its
// CPU twin, ops::adamw_step (src/ops/adamw.*), bitwise, over several steps:
// the kernel evaluates the CPU loop's expressions in the same order, with
// correctly rounded sqrt and division, so params, m and v must be the CPU's
// bits after every step. Gradients in f32, f16 and bf16 (the CPU op takes
// f32: it gets the same 16-bit values widened), decoupled weight decay,
// Adam's l2 term, both at once, grad_multiplier, device_scale set (changing
// between steps) and null, zero gradients (v = 0: the denominator is eps),
// one element, several blocks. The AdamWArgs are computed as
// src/ops/adamw_cuda.cpp computes them (bias corrections in double).
// Bitwise holds for this host build, which does not contract a * b + c into
// FMAs (x86-64 without -mfma); nvcc does contract, so on a GPU the kernel
// agrees to about an ulp, as its header says.
#include "ops/adamw.h"
//
#include "emulate_common.h"
#include "emulated/adamw.inc"

namespace {

using rotor::DType;
using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

// The launcher's arguments, as the CUDA glue (src/ops/adamw_cuda.cpp) fills them.
rotor::kernels::AdamWArgs args_of(const rotor::ops::AdamWOptions& o, const float* device_scale) {
  rotor::kernels::AdamWArgs a;
  a.lr = o.lr;
  a.beta1 = o.beta1;
  a.beta2 = o.beta2;
  a.eps = o.eps;
  const double bc1 = 1.0 - std::pow(static_cast<double>(o.beta1), static_cast<double>(o.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(o.beta2), static_cast<double>(o.step));
  a.step_size = static_cast<float>(o.lr / bc1);
  a.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  a.decay = 1.0f - o.lr * o.weight_decay;
  a.l2 = o.l2;
  a.grad_multiplier = o.grad_multiplier;
  a.device_scale = device_scale;
  return a;
}

// Gradients of step `step` rounded to dt, every 17th zero, of magnitude `mag`.
std::vector<float> grads_of(int64_t n, int step, float mag, DType dt) {
  auto g = randoms(static_cast<size_t>(n), 40u + static_cast<unsigned>(step), -mag, mag);
  for (size_t i = 0; i < g.size(); i += 17) g[i] = 0.0f;
  return Tensor::from_floats(g, {n}, dt).to_floats();
}

// grads as the launcher takes them: dt's bytes.
std::vector<uint8_t> bytes_of(const std::vector<float>& g, DType dt) {
  const Tensor t = Tensor::from_floats(g, {static_cast<int64_t>(g.size())}, dt);
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

struct Setup {
  const char* name;
  float lr, beta1, beta2, eps, weight_decay, l2, grad_multiplier;
  float grad_mag;                        // gradients in [-grad_mag, grad_mag)
  std::vector<float> device_scale = {};  // per step; empty: null
};

void adamw_case(const Setup& s, DType dt, int64_t n, int steps) {
  char what[112];
  const auto p0 = randoms(static_cast<size_t>(n), 30, -1.0f, 1.0f);
  // The CPU's state, and the kernel's (host memory standing for the device's).
  Tensor p_ref = Tensor::from_floats(p0, {n}), m_ref = Tensor::zeros({n}),
         v_ref = Tensor::zeros({n});
  std::vector<float> p = p0, m(static_cast<size_t>(n), 0.0f), v(static_cast<size_t>(n), 0.0f);
  for (int step = 1; step <= steps; ++step) {
    std::snprintf(what, sizeof what, "adamw %s grads %s n%lld step %d", s.name,
                  rotor::dtype_name(dt), static_cast<long long>(n), step);
    rotor::ops::AdamWOptions o;
    o.lr = s.lr, o.beta1 = s.beta1, o.beta2 = s.beta2, o.eps = s.eps;
    o.weight_decay = s.weight_decay, o.l2 = s.l2, o.grad_multiplier = s.grad_multiplier;
    o.step = step;
    float scale = 0;
    if (!s.device_scale.empty()) {
      scale = s.device_scale[static_cast<size_t>(step - 1) % s.device_scale.size()];
      o.device_scale = Tensor::from_floats({scale}, {1});
    }
    const auto g = grads_of(n, step, s.grad_mag, dt);
    rotor::ops::adamw_step(p_ref, Tensor::from_floats(g, {n}), m_ref, v_ref, o);
    const auto gb = bytes_of(g, dt);
    const rotor::kernels::AdamWArgs a = args_of(o, s.device_scale.empty() ? nullptr : &scale);
    check_status(
        what, ke::adamw_step_emulated(p.data(), gb.data(), dt, m.data(), v.data(), n, a, nullptr));
    check_bits(what, "params", p, p_ref.to_floats());
    check_bits(what, "m", m, m_ref.to_floats());
    check_bits(what, "v", v, v_ref.to_floats());
  }
}

void run() {
  const std::vector<Setup> setups = {
      // AdamW: decoupled weight decay, PyTorch's defaults otherwise.
      {"wd", 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.0f, 1.0f, 1.0f},
      // Adam with L2, a multiplier that is not a power of two, a device scale.
      {"l2 scaled", 3e-3f, 0.8f, 0.99f, 1e-6f, 0.0f, 0.01f, 1.0f / 3.0f, 2.0f, {0.25f, 0.5f}},
      // Both decays; loss-scaled gradients (x 1024) brought back by the
      // multiplier times the clipping coefficient on the device.
      {"wd+l2 loss-scaled",
       1e-2f,
       0.9f,
       0.95f,
       1e-8f,
       0.1f,
       0.02f,
       1.0f / 1024.0f,
       2000.0f,
       {0.7f, 1.3f, 0.0f}},
  };
  for (const Setup& s : setups)
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      adamw_case(s, dt, 1000, 3);  // 4 blocks of 256
      adamw_case(s, dt, 1, 2);     // one element
    }
  adamw_case(setups[1], DType::F32, 257, 4);  // a block and one thread of the next
  {
    const char* what = "adamw n = 0";
    float p[1] = {NAN}, g[1] = {1}, m[1] = {NAN}, v[1] = {NAN};
    rotor::kernels::AdamWArgs a;
    check_status(what, ke::adamw_step_emulated(p, g, DType::F32, m, v, 0, a, nullptr));
    check_true(what, "untouched", std::isnan(p[0]) && std::isnan(m[0]) && std::isnan(v[0]));
  }
}

const Register reg("adamw", run);

}  // namespace
