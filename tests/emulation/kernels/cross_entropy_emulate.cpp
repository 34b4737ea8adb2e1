// kernels/cross_entropy.cu run on the CPU (emulate_cu.py, kernel_emulation.h)
// and held to its CPU twins, ops::cross_entropy_forward / _backward, with
// f32, f16 and bf16 logits: label smoothing 0 and 0.1, ignore_index rows
// (the pad id 1, a valid class, and -100), a vocabulary of one class (one
// warp, 31 lanes idle), a few warps, and a block of 512 threads that take
// several classes each; loss_scale 1 and 1024 (the fp16 loss scale);
// dlogits aliasing logits; rows = 0 (no launch).
// A target outside [0, V) that is not ignore_index makes the CPU op throw,
// while the kernels (cross_entropy.cuh) give NaN loss and nll and a NaN
// gradient row: those rows are checked for NaN (lse stays finite), the
// others against the CPU op run with the bad targets made ignore_index.
// Tolerances: the kernels sum the row in fp32 (block_sum) with expf, the CPU
// in double with its own exp_f32; lse, nll and loss are formed in double
// from those sums. f32 results agree to a few fp32 roundings: 1e-6 relative
// to max(1, max |ref|) (loss and dlogits scale with loss_scale). 16-bit
// dlogits may land one rounding of the type apart: 1e-3 (f16), 8e-3 (bf16);
// loss, nll and lse are f32 for every logits dtype.
#include "ops/cross_entropy.h"
//
#include "emulate_common.h"
#include "emulated/cross_entropy.inc"

namespace {

using rotor::DType;
using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

double tolerance(DType dt) {
  return dt == DType::F32 ? 1e-6 : dt == DType::F16 ? 1e-3 : 8e-3;
}

// The targets of `rows` rows over V classes: every third row ignore_index
// (when it is a class, other rows avoid it), bad rows out of range.
std::vector<int32_t> make_targets(int64_t rows, int64_t V, int ignore_index, bool bad) {
  std::vector<int32_t> t(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int32_t v = static_cast<int32_t>((r * 37 + 5) % V);
    if (v == ignore_index) v = static_cast<int32_t>((v + 1) % V);
    if (r % 3 == 1) v = ignore_index;
    if (bad && r % 4 == 2) v = r % 8 == 2 ? static_cast<int32_t>(V) : -7;
    t[static_cast<size_t>(r)] = v;
  }
  return t;
}

bool is_bad(int32_t t, int64_t V, int ignore_index) {
  return t != ignore_index && (t < 0 || t >= V);
}

void ce_case(DType dt, int64_t rows, int64_t V, float smoothing, int ignore_index, float loss_scale,
             bool alias = false, bool bad = false) {
  char what[96];
  std::snprintf(what, sizeof what, "ce %s %lldx%lld eps %g ign %d scale %g%s%s",
                rotor::dtype_name(dt), static_cast<long long>(rows), static_cast<long long>(V),
                smoothing, ignore_index, loss_scale, alias ? " d=x" : "", bad ? " bad" : "");
  const auto xv = randoms(static_cast<size_t>(rows * V), 41, -4.0f, 4.0f);
  const Tensor logits = Tensor::from_floats(xv, {rows, V}, dt);
  const auto targets = make_targets(rows, V, ignore_index, bad);
  auto ref_targets = targets;  // the bad ones ignored: the CPU op would throw
  for (auto& t : ref_targets)
    if (is_bad(t, V, ignore_index)) t = ignore_index;
  const Tensor tt = Tensor::from_ints(ref_targets, {rows});

  Tensor loss_ref = Tensor::zeros({rows}), nll_ref = Tensor::zeros({rows}),
         lse_ref = Tensor::zeros({rows});
  rotor::ops::cross_entropy_forward(logits, tt, smoothing, ignore_index, loss_ref, nll_ref,
                                    lse_ref);
  std::vector<float> want_loss = loss_ref.to_floats(), want_nll = nll_ref.to_floats();
  for (int64_t r = 0; r < rows; ++r)
    if (is_bad(targets[static_cast<size_t>(r)], V, ignore_index))
      want_loss[static_cast<size_t>(r)] = want_nll[static_cast<size_t>(r)] = NAN;

  // Outputs filled with NaN, so that an unwritten one fails; where NaN is
  // expected (bad targets), with a finite value instead.
  const float fill = bad ? 1000.0f : NAN;
  std::vector<float> loss(static_cast<size_t>(rows), fill), nll(loss), lse(loss);
  check_status(what, ke::cross_entropy_forward_emulated(logits.raw(), dt, targets.data(), rows, V,
                                                        smoothing, ignore_index, loss.data(),
                                                        nll.data(), lse.data(), nullptr));
  check(what, "loss", rel_err(loss, want_loss), 1e-6);
  check(what, "nll", rel_err(nll, want_nll), 1e-6);
  check(what, "lse", rel_err(lse, lse_ref.to_floats()), 1e-6);

  // The backward from the CPU's lse.
  Tensor d_ref = Tensor::zeros({rows, V}, dt);
  rotor::ops::cross_entropy_backward(logits, tt, lse_ref, smoothing, ignore_index, loss_scale,
                                     d_ref);
  std::vector<float> want_d = d_ref.to_floats();
  for (int64_t r = 0; r < rows; ++r)
    if (is_bad(targets[static_cast<size_t>(r)], V, ignore_index))
      for (int64_t j = 0; j < V; ++j) want_d[static_cast<size_t>(r * V + j)] = NAN;
  Tensor xk = Tensor::from_floats(xv, {rows, V}, dt);
  Tensor d = alias ? xk : Tensor::full({rows, V}, fill, dt);
  check_status(what, ke::cross_entropy_backward_emulated(
                         xk.raw(), dt, targets.data(), lse_ref.data<float>(), rows, V, smoothing,
                         ignore_index, loss_scale, d.raw(), nullptr));
  check(what, "dlogits", rel_err(d.to_floats(), want_d), tolerance(dt));
}

void empty_case() {
  float buf[4] = {};
  const int32_t t[1] = {0};
  const int before = emu::launches();
  check_status("ce rows 0", ke::cross_entropy_forward_emulated(buf, DType::F32, t, 0, 4, 0.1f, -100,
                                                               buf, buf, buf, nullptr));
  check_status("ce vocab 0", ke::cross_entropy_backward_emulated(buf, DType::F32, t, buf, 1, 0,
                                                                 0.1f, -100, 1.0f, buf, nullptr));
  check_true("ce rows 0 / vocab 0", "launches", emu::launches() == before);
}

void run() {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    ce_case(dt, 6, 45, 0.1f, 1, 1.0f);                   // two warps; the pad id ignored
    ce_case(dt, 4, 1500, 0.0f, -100, 1024.0f, true);     // 512 threads, 3 classes each; d = x
    ce_case(dt, 8, 100, 0.1f, -100, 1.0f, false, true);  // out-of-range targets: NaN
  }
  ce_case(DType::F32, 3, 1, 0.1f, -100, 1.0f);  // one class: loss 0, gradient 0
  ce_case(DType::F32, 5, 33, 0.0f, 1, 8.0f, true);
  ce_case(DType::F16, 8, 40, 0.2f, 1, 1024.0f, true, true);
  empty_case();
}

const Register reg("cross_entropy", run);

}  // namespace
