// kernels/layer_norm.cu run on the CPU (emulate_cu.py, kernel_emulation.h) and
// held to its CPU twins, ops::layer_norm_forward / layer_norm_backward, with
// f32, f16 and bf16 activations:
//   - forward: the warp-per-row kernel for every VPT (1, 2, 4, 8 vectors a
//     lane; rows that fill the last vector slot and rows that leave lanes
//     idle), with f32 parameters (the mixed-precision master copy) and with
//     the activations' dtype; its grid-stride loop (more rows than the
//     grid's warps); the block-per-row kernel for rows too long for a warp
//     (f32 1028, 16-bit 2056), rows that are not a whole number of vectors
//     (n = 1, 6, 1001; 16-bit 100), a misaligned x/y or gamma, and
//     parameters of a third dtype (bf16 gamma and beta for f16 x, which the
//     CPU op refuses: held to the CPU op given the same values in f32);
//     y aliasing x on both paths.
//   - backward: the warp path (VPT 1, 2, 4; several blocks whose warps loop
//     over rows; warps without a row; then the strided finish, also with
//     more row slices than blocks, which the glue's splits give an H100 from
//     16896 rows on: here a larger `splits` for 40 rows) and the block
//     path (partial column sums per 32-row slice, one and two slices, the
//     dx kernel, the finish), told apart by their launch counts (2 and 3);
//     dgamma and dbeta accumulated into existing values, f32 or 16-bit, of
//     one dtype or two; dx aliasing dy; a misaligned dy/x/dx or gamma; the
//     third parameter dtype; and the glue's layer_norm_backward_add (this
//     kernel's dx, then residual + dx) against the CPU's fused op.
//   - rows = 0 and n = 0: cudaSuccess and no launch.
//   - RMSNorm (rms: the mean taken as 0, its term dropped from the
//     backward): the warp and block paths of both, f32 and 16-bit, and the
//     glue's backward_add, against the CPU op with rms.
// Tolerances: the kernels sum in fp32 (warp shuffles, block sums, per-warp
// column sums over the rows), the CPU in double, so f32 results differ by a
// few fp32 roundings of the largest value: 2e-6 for y, mean, rstd and dx,
// 4e-6 for dgamma and dbeta (a column summed over up to 40 rows in fp32
// by a warp: at most 40 roundings of 2^-24 = 2.4e-6). 16-bit outputs may land one
// rounding of the type apart: 1e-3 (f16), 8e-3 (bf16), relative to the
// largest value; dx + residual in 16 bits rounds twice (twice that).
#include "ops/layer_norm.h"
//
#include "emulate_common.h"
#include "emulated/layer_norm.inc"

namespace {

using rotor::DType;
using rotor::Shape;
using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

// Row outputs (y, dx) and parameter gradients of dtype dt.
double row_tol(DType dt) {
  return dt == DType::F32 ? 2e-6 : dt == DType::F16 ? 1e-3 : 8e-3;
}
double param_tol(DType dt) {
  return dt == DType::F32 ? 4e-6 : dt == DType::F16 ? 1e-3 : 8e-3;
}

// `values` rounded to dt in a tensor of `shape` whose data starts `shift`
// elements past a 64-byte boundary (shift 1: a pointer that is not 16-byte
// aligned).
Tensor make(const std::vector<float>& values, const Shape& shape, DType dt, int64_t shift = 0) {
  if (shift == 0) return Tensor::from_floats(values, shape, dt);
  std::vector<float> padded(static_cast<size_t>(shift), 0.0f);
  padded.insert(padded.end(), values.begin(), values.end());
  const int64_t n = static_cast<int64_t>(values.size());
  return Tensor::from_floats(padded, {n + shift}, dt).narrow(shift, n).view(shape);
}

Tensor nans(const Shape& shape, DType dt, int64_t shift = 0) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return make(std::vector<float>(static_cast<size_t>(n), NAN), shape, dt, shift);
}

// Activations with a non-zero mean per row, and gamma, beta near 1 and 0.
std::vector<float> activations(int64_t rows, int64_t n, unsigned seed) {
  auto x = randoms(static_cast<size_t>(rows * n), seed, -1.5f, 1.5f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(r * n + j)] += 0.25f * (r % 5) - 0.5f;
  return x;
}

enum Shift { kNone, kShiftX, kShiftGamma };
const char* shift_tag(Shift s) {
  return s == kShiftX ? " x+1" : s == kShiftGamma ? " gamma+1" : "";
}

// RMSNorm instead of layer norm in the cases below (run() sets it).
bool rms_mode = false;

// The forward for x [rows, n] of dt and gamma, beta of pdt (ref_pdt: what
// the CPU op gets, the same values).
void forward_case(const char* path, DType dt, DType pdt, int64_t rows, int64_t n,
                  Shift shift = kNone, bool alias = false, DType ref_pdt = DType::F32) {
  if (pdt == dt || pdt == DType::F32) ref_pdt = pdt;
  char what[96];
  std::snprintf(what, sizeof what, "%s fwd %s %s/%s %lldx%lld%s%s", rms_mode ? "rms" : "ln", path,
                rotor::dtype_name(dt), rotor::dtype_name(pdt), static_cast<long long>(rows),
                static_cast<long long>(n), shift_tag(shift), alias ? " y=x" : "");
  const float eps = 1e-5f;
  const auto xv = activations(rows, n, 11);
  const auto gv = randoms(static_cast<size_t>(n), 12, 0.5f, 1.5f);
  const auto bv = randoms(static_cast<size_t>(n), 13, -0.5f, 0.5f);
  const int64_t sx = shift == kShiftX ? 1 : 0, sg = shift == kShiftGamma ? 1 : 0;
  const Tensor x = make(xv, {rows, n}, dt, sx);
  const Tensor gamma = make(gv, {n}, pdt, sg), beta = make(bv, {n}, pdt);
  // The CPU op with gamma and beta's values in ref_pdt (exact: pdt's values).
  const Tensor gamma_ref = make(gamma.to_floats(), {n}, ref_pdt);
  const Tensor beta_ref = make(beta.to_floats(), {n}, ref_pdt);
  Tensor y_ref = Tensor::zeros({rows, n}, dt), mean_ref = Tensor::zeros({rows}),
         rstd_ref = Tensor::zeros({rows});
  rotor::ops::layer_norm_forward(x, gamma_ref, beta_ref, eps, y_ref, mean_ref, rstd_ref, rms_mode);

  Tensor y = alias ? make(xv, {rows, n}, dt, sx) : nans({rows, n}, dt, sx);
  std::vector<float> mean(static_cast<size_t>(rows), NAN), rstd(mean);
  check_status(what, ke::layer_norm_forward_emulated(alias ? y.raw() : x.raw(), gamma.raw(),
                                                     beta.raw(), dt, pdt, rows, n, eps, y.raw(),
                                                     mean.data(), rstd.data(), rms_mode, nullptr));
  check(what, "y", rel_err(y.to_floats(), y_ref.to_floats()), row_tol(dt));
  check(what, "mean", rel_err(mean, mean_ref.to_floats()), 2e-6);
  check(what, "rstd", rel_err(rstd, rstd_ref.to_floats()), 2e-6);
}

// The backward: dx written, dgamma (gdt) and dbeta (bdt) added to random
// values; warp: whether the warp path must run (2 launches, else 3).
struct Grads {
  DType gdt = DType::F32, bdt = DType::F32;
};
void backward_case(const char* path, bool warp, DType dt, DType pdt, int64_t rows, int64_t n,
                   Grads grads = {}, Shift shift = kNone, bool alias = false,
                   bool with_residual = false, DType ref_pdt = DType::F32, int splits = 0) {
  if (pdt == dt || pdt == DType::F32) ref_pdt = pdt;
  char what[96];
  std::snprintf(what, sizeof what, "%s bwd %s %s/%s %lldx%lld d%s/%s%s%s%s",
                rms_mode ? "rms" : "ln", path, rotor::dtype_name(dt), rotor::dtype_name(pdt),
                static_cast<long long>(rows), static_cast<long long>(n),
                rotor::dtype_name(grads.gdt), rotor::dtype_name(grads.bdt), shift_tag(shift),
                alias ? " dx=dy" : "", with_residual ? " +res" : "");
  const auto xv = activations(rows, n, 21);
  const auto dyv = randoms(static_cast<size_t>(rows * n), 22);
  const auto gv = randoms(static_cast<size_t>(n), 23, 0.5f, 1.5f);
  const auto bv = randoms(static_cast<size_t>(n), 24, -0.5f, 0.5f);
  const auto dg0 = randoms(static_cast<size_t>(n), 25), db0 = randoms(static_cast<size_t>(n), 26);
  const int64_t sx = shift == kShiftX ? 1 : 0, sg = shift == kShiftGamma ? 1 : 0;
  const Tensor x = make(xv, {rows, n}, dt, sx), dy = make(dyv, {rows, n}, dt, sx);
  const Tensor gamma = make(gv, {n}, pdt, sg);
  // The CPU op with gamma and beta's values in ref_pdt (exact: pdt's values).
  const Tensor gamma_ref = make(gamma.to_floats(), {n}, ref_pdt);
  const Tensor beta_ref = make(bv, {n}, ref_pdt);
  Tensor y = Tensor::zeros({rows, n}, dt), mean = Tensor::zeros({rows}),
         rstd = Tensor::zeros({rows});
  rotor::ops::layer_norm_forward(x, gamma_ref, beta_ref, 1e-5f, y, mean, rstd, rms_mode);

  const auto resv = randoms(static_cast<size_t>(rows * n), 27);
  const Tensor residual = make(resv, {rows, n}, dt);
  Tensor dx_ref = Tensor::zeros({rows, n}, dt);
  Tensor dg_ref = make(dg0, {n}, grads.gdt), db_ref = make(db0, {n}, grads.bdt);
  if (with_residual)
    rotor::ops::layer_norm_backward_add(dy, x, gamma_ref, mean, rstd, residual, dx_ref, dg_ref,
                                        db_ref, rms_mode);
  else
    rotor::ops::layer_norm_backward(dy, x, gamma_ref, mean, rstd, dx_ref, dg_ref, db_ref, rms_mode);

  if (splits == 0) splits = ke::layer_norm_backward_splits_emulated(rows);  // as the glue
  std::vector<float> partial(static_cast<size_t>(2 * splits * n), NAN);
  Tensor dyk = alias ? make(dyv, {rows, n}, dt, sx) : dy;
  Tensor dx = alias ? dyk : nans({rows, n}, dt, sx);
  Tensor dg = make(dg0, {n}, grads.gdt), db = make(db0, {n}, grads.bdt);
  const int before = emu::launches();
  check_status(what, ke::layer_norm_backward_emulated(
                         dyk.raw(), x.raw(), gamma.raw(), dt, pdt, mean.data<float>(),
                         rstd.data<float>(), rows, n, dx.raw(), dg.raw(), grads.gdt, db.raw(),
                         grads.bdt, partial.data(), splits, rms_mode, nullptr));
  check_true(what, warp ? "warp" : "block", emu::launches() - before == (warp ? 2 : 3));
  std::vector<float> got = dx.to_floats();
  if (with_residual) {  // the glue: add(residual, dx, dx), one rounding to dt
    const std::vector<float> res = residual.to_floats();
    for (size_t i = 0; i < got.size(); ++i) got[i] += res[i];
    got = make(got, {rows, n}, dt).to_floats();
  }
  check(what, "dx", rel_err(got, dx_ref.to_floats()),
        with_residual ? 2 * row_tol(dt) : row_tol(dt));
  check(what, "dgamma", rel_err(dg.to_floats(), dg_ref.to_floats()), param_tol(grads.gdt));
  check(what, "dbeta", rel_err(db.to_floats(), db_ref.to_floats()), param_tol(grads.bdt));
}

void empty_cases() {
  float buf[8] = {};
  const int before = emu::launches();
  check_status("ln fwd rows 0",
               ke::layer_norm_forward_emulated(buf, buf, buf, DType::F32, DType::F32, 0, 4, 1e-5f,
                                               buf, buf, buf, false, nullptr));
  check_status("ln fwd n 0",
               ke::layer_norm_forward_emulated(buf, buf, buf, DType::F32, DType::F32, 3, 0, 1e-5f,
                                               buf, buf, buf, false, nullptr));
  check_status("ln bwd rows 0", ke::layer_norm_backward_emulated(
                                    buf, buf, buf, DType::F32, DType::F32, buf, buf, 0, 4, buf, buf,
                                    DType::F32, buf, DType::F32, buf, 1, false, nullptr));
  check_true("ln rows 0 / n 0", "launches", emu::launches() == before);
}

void run() {
  // Forward, warp path: f32 rows (4 values a vector) for VPT 1, 2, 4, 8.
  forward_case("warp vpt1", DType::F32, DType::F32, 9, 4);
  forward_case("warp vpt1", DType::F32, DType::F32, 6, 128);
  forward_case("warp vpt2", DType::F32, DType::F32, 5, 132);
  forward_case("warp vpt4", DType::F32, DType::F32, 5, 500);
  forward_case("warp vpt8", DType::F32, DType::F32, 5, 1024, kNone, true);
  // 16-bit rows (8 values a vector), f32 and 16-bit parameters.
  for (DType dt : {DType::F16, DType::BF16}) {
    forward_case("warp vpt1", dt, DType::F32, 7, 200);
    forward_case("warp vpt1", dt, dt, 7, 256);
    forward_case("warp vpt2", dt, dt, 5, 264);
    forward_case("warp vpt4", dt, DType::F32, 5, 1000, kNone, true);
    forward_case("warp vpt8", dt, dt, 3, 2048);
    forward_case("warp vpt8", dt, DType::F32, 3, 1032);
  }
  // More rows than the grid's warps (waves_grid: 132 SMs x 8 blocks x 4
  // warps): the grid-stride loop.
  forward_case("warp stride", DType::F32, DType::F32, 4230, 4);
  // Block path: too long, not whole vectors, misaligned, a third param dtype.
  forward_case("block", DType::F32, DType::F32, 3, 1028);
  forward_case("block", DType::F32, DType::F32, 4, 6);
  forward_case("block", DType::F32, DType::F32, 2, 1);
  forward_case("block", DType::F32, DType::F32, 1, 1001, kNone, true);
  forward_case("block", DType::F32, DType::F32, 4, 64, kShiftX);
  forward_case("block", DType::F32, DType::F32, 4, 64, kShiftGamma);
  for (DType dt : {DType::F16, DType::BF16}) {
    forward_case("block", dt, DType::F32, 2, 2056);
    forward_case("block", dt, dt, 3, 100);
    forward_case("block", dt, dt, 3, 64, kShiftX, true);
    forward_case("block", dt, DType::F32, 3, 64, kShiftGamma);
  }
  forward_case("block", DType::F16, DType::BF16, 3, 64, kNone, false, DType::F32);

  // Backward, warp path (n <= 512 f32, 1024 16-bit).
  backward_case("warp vpt1", true, DType::F32, DType::F32, 1, 4);
  backward_case("warp vpt1", true, DType::F32, DType::F32, 40, 100);
  backward_case("warp vpt2", true, DType::F32, DType::F32, 40, 256, {}, kNone, true);
  backward_case("warp vpt4", true, DType::F32, DType::F32, 9, 512);
  // More row slices than blocks (on an H100 from 16896 rows on): 40 rows
  // given 10 slices take 5 blocks, and the finish adds the 5 partial rows
  // written of each half (the rest NaN).
  backward_case("warp used<splits", true, DType::F32, DType::F32, 40, 8, {}, kNone, false, false,
                DType::F32, 10);
  for (DType dt : {DType::F16, DType::BF16}) {
    backward_case("warp vpt1", true, dt, DType::F32, 33, 256);
    backward_case("warp vpt2", true, dt, dt, 40, 264, {dt, dt});
    backward_case("warp vpt4", true, dt, DType::F32, 12, 1024, {DType::F32, dt}, kNone, true);
  }
  // Block path: long rows, odd n, misaligned, a third param dtype.
  backward_case("block", false, DType::F32, DType::F32, 3, 520);
  backward_case("block", false, DType::F32, DType::F32, 3, 1);
  backward_case("block", false, DType::F32, DType::F32, 33, 30, {}, kNone, true);
  backward_case("block", false, DType::F32, DType::F32, 5, 64, {}, kShiftX, true);
  backward_case("block", false, DType::F32, DType::F32, 5, 64, {}, kShiftGamma);
  for (DType dt : {DType::F16, DType::BF16}) {
    backward_case("block", false, dt, DType::F32, 3, 1032, {dt, DType::F32});
    backward_case("block", false, dt, dt, 5, 64, {dt, dt}, kShiftX, true);
  }
  backward_case("block", false, DType::F16, DType::BF16, 5, 64, {DType::F32, DType::F16}, kNone,
                false, false, DType::F32);
  // The glue's layer_norm_backward_add: the kernel's dx, then residual + dx.
  backward_case("warp", true, DType::F32, DType::F32, 10, 64, {}, kNone, false, true);
  backward_case("block", false, DType::F16, DType::F32, 10, 60, {}, kNone, false, true);
  empty_cases();

  // RMSNorm on both paths.
  rms_mode = true;
  forward_case("warp vpt1", DType::F32, DType::F32, 9, 4);
  forward_case("warp vpt4", DType::F32, DType::F32, 5, 500);
  forward_case("warp vpt8", DType::F32, DType::F32, 5, 1024, kNone, true);
  forward_case("block", DType::F32, DType::F32, 3, 1028);
  forward_case("block", DType::F32, DType::F32, 4, 6);
  for (DType dt : {DType::F16, DType::BF16}) {
    forward_case("warp vpt2", dt, DType::F32, 5, 264);
    forward_case("block", dt, dt, 3, 100);
  }
  backward_case("warp vpt1", true, DType::F32, DType::F32, 40, 100);
  backward_case("warp vpt4", true, DType::F32, DType::F32, 9, 512, {}, kNone, true);
  backward_case("block", false, DType::F32, DType::F32, 3, 520);
  backward_case("block", false, DType::F32, DType::F32, 33, 30, {}, kNone, true);
  for (DType dt : {DType::F16, DType::BF16}) {
    backward_case("warp vpt2", true, dt, DType::F32, 33, 264, {DType::F32, dt});
    backward_case("block", false, dt, dt, 5, 64, {dt, dt}, kShiftX, true);
  }
  backward_case("warp", true, DType::F32, DType::F32, 10, 64, {}, kNone, false, true);
  backward_case("block", false, DType::F16, DType::F32, 10, 60, {}, kNone, false, true);
  rms_mode = false;
}

const Register reg("layer_norm", run);

}  // namespace
