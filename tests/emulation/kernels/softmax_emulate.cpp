// kernels/softmax.cu run on the CPU (emulate_cu.py, kernel_emulation.h) and
// held to its CPU twins, ops::softmax_forward / softmax_backward, in f32,
// f16 and bf16: one column (one warp, 31 lanes idle), a few warps, a block
// of 512 threads whose threads take two or three columns each, a misaligned
// row start (the kernels read element by element: no vector path), rows of
// all -inf (zeros, as on the CPU), rows partly -inf (masked scores), y
// aliasing x and dx aliasing dy, and rows = 0 (no launch).
// Tolerances: the kernels sum the row in fp32 (block_sum), the CPU in
// double; the exponentials are the same expf. f32 outputs (at most 1 in the
// forward) agree to a few fp32 roundings: 1e-6 relative to max(1, |ref|).
// 16-bit outputs may land one rounding of the type apart: 1e-3 (f16),
// 8e-3 (bf16).
#include "ops/softmax.h"
//
#include "emulate_common.h"
#include "emulated/softmax.inc"

namespace {

using rotor::DType;
using rotor::Shape;
using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

double tolerance(DType dt) {
  return dt == DType::F32 ? 1e-6 : dt == DType::F16 ? 1e-3 : 8e-3;
}

// `values` rounded to dt, the data `shift` elements past a 64-byte boundary.
Tensor make(const std::vector<float>& values, const Shape& shape, DType dt, int64_t shift = 0) {
  if (shift == 0) return Tensor::from_floats(values, shape, dt);
  std::vector<float> padded(static_cast<size_t>(shift), 0.0f);
  padded.insert(padded.end(), values.begin(), values.end());
  const int64_t n = static_cast<int64_t>(values.size());
  return Tensor::from_floats(padded, {n + shift}, dt).narrow(shift, n).view(shape);
}

// Scores of a few units; row `masked` all -inf, rows after it partly -inf.
std::vector<float> scores(int64_t rows, int64_t n, int64_t masked) {
  auto x = randoms(static_cast<size_t>(rows * n), 31, -4.0f, 4.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      float& v = x[static_cast<size_t>(r * n + j)];
      if (r == masked || (r > masked && masked >= 0 && (j * 7 + r) % 3 == 0)) v = -INFINITY;
    }
  return x;
}

// rows x n of dt; masked: the all -inf row (-1: none); shift: the buffers'
// offset in elements; alias: y = x (forward), dx = dy (backward).
void softmax_case(DType dt, int64_t rows, int64_t n, int64_t masked, int64_t shift = 0,
                  bool alias = false) {
  char what[96];
  std::snprintf(what, sizeof what, "softmax %s %lldx%lld%s%s%s", rotor::dtype_name(dt),
                static_cast<long long>(rows), static_cast<long long>(n),
                masked >= 0 ? " -inf rows" : "", shift ? " +1" : "", alias ? " aliased" : "");
  const Shape shape{rows, n};
  const auto xv = scores(rows, n, masked);
  const Tensor x = make(xv, shape, dt, shift);
  Tensor y_ref = Tensor::zeros(shape, dt);
  rotor::ops::softmax_forward(x, y_ref);
  const std::vector<float> nan(xv.size(), NAN);
  Tensor y = alias ? make(xv, shape, dt, shift) : make(nan, shape, dt, shift);
  check_status(
      what, ke::softmax_forward_emulated(alias ? y.raw() : x.raw(), y.raw(), dt, rows, n, nullptr));
  const auto yf = y.to_floats();
  check(what, "y", rel_err(yf, y_ref.to_floats()), tolerance(dt));
  bool zeros = true;  // the all -inf row: exact zeros
  for (int64_t j = 0; masked >= 0 && j < n; ++j)
    zeros &= yf[static_cast<size_t>(masked * n + j)] == 0.0f;
  if (masked >= 0) check_true(what, "y 0 row", zeros);

  // The backward from the CPU's y (a fully masked row: y = 0, so dx = 0).
  const auto dyv = randoms(xv.size(), 32);
  const Tensor dy = make(dyv, shape, dt, shift);
  Tensor dx_ref = Tensor::zeros(shape, dt);
  rotor::ops::softmax_backward(y_ref, dy, dx_ref);
  const Tensor yk = make(y_ref.to_floats(), shape, dt, shift);
  Tensor dyk = alias ? make(dyv, shape, dt, shift) : dy;
  Tensor dx = alias ? dyk : make(nan, shape, dt, shift);
  check_status(what,
               ke::softmax_backward_emulated(yk.raw(), dyk.raw(), dx.raw(), dt, rows, n, nullptr));
  check(what, "dx", rel_err(dx.to_floats(), dx_ref.to_floats()), tolerance(dt));
}

void empty_case() {
  float buf[4] = {};
  const int before = emu::launches();
  check_status("softmax rows 0", ke::softmax_forward_emulated(buf, buf, DType::F32, 0, 4, nullptr));
  check_status("softmax n 0",
               ke::softmax_backward_emulated(buf, buf, buf, DType::F32, 2, 0, nullptr));
  check_true("softmax rows 0 / n 0", "launches", emu::launches() == before);
}

void run() {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    softmax_case(dt, 3, 1, -1);            // one column: 32 threads, one busy
    softmax_case(dt, 5, 77, 2);            // three warps, the last partial; masked rows
    softmax_case(dt, 2, 1300, 0, 1);       // 512 threads, two or three columns each; misaligned
    softmax_case(dt, 4, 40, -1, 0, true);  // y = x, dx = dy
  }
  softmax_case(DType::F32, 1, 513, -1, 1, true);
  softmax_case(DType::F16, 2, 1, 1);  // a single -inf column
  empty_case();
}

const Register reg("softmax", run);

}  // namespace
