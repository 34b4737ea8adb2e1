// kernels/reduce.cu run on the CPU (emulate_cu.py, kernel_emulation.h) and
// held to its CPU twins in src/ops/reduce.h, each launcher called as
// src/ops/reduce_cuda.cpp calls it (splits = sum_rows_splits(rows), blocks =
// reduce_blocks(n), the host combination of the partials, one slot range per
// tensor of a global norm), in f32, f16 and bf16 storage:
//   - sum_rows (ops::sum_rows): overwrite and accumulate; one row, one
//     column, 256 rows exactly, 600 rows (3 slices) by 70 columns (3 column
//     tiles, the last partial), 260 by 40 in f16 and bf16; slice counts
//     other than the launcher's (3 slices of 5 rows; 4 slices of 2 rows:
//     empty slices); no rows (overwrite: zeros; accumulate: untouched) and
//     no columns (nothing). Inputs on the 2^-10 grid in [-1, 1] make every
//     sum exact in f32 and in double, whatever the order: bitwise. Random
//     inputs then compare within the kernel's fp32 error bound: a thread
//     adds ceil(rows per slice / 8) values, the tile adds 8 more (at most
//     38 roundings for 256 rows a slice), each within 2^-24 of the running
//     sum, and both results round once to f32; hence |got - ref| <= 40 *
//     2^-24 * (|init| + sum |x|) per column, the error measured against
//     that scale (the bound computed per case from its slice length).
//   - sum_partials (ops::sum) and max_abs_partials (ops::max_abs): each
//     block's partial against the same reduction of the block's grid-stride
//     elements, and the host combination against the CPU op; 1 element, one
//     block, 3 blocks, 2 blocks for 5000 (f16, bf16: 3000) elements (each
//     thread loops) and 3 blocks for 100 (empty blocks); max |x| with an
//     inf, with a NaN (it must propagate into its partial and the result,
//     also behind an inf), in every dtype. The random inputs are multiples
//     of 2^-23 in [-1, 1]: sums in double are exact in any order, so
//     everything is compared exactly.
//   - sumsq_partials + global_norm_finish (ops::global_norm) over a list of
//     f32, f16, bf16 (and an empty) tensors, each in its own slot range:
//     bitwise on the 2^-8 grid (squares and sums exact), within one f32 ulp
//     (2^-23 relative) for random inputs (double sums in another order:
//     ~1e-15, only the final rounding to f32 can differ); the finish kernel
//     alone over 2500 slots (each of its 1024 threads loops) and one slot.
//   - nonfinite_reset / nonfinite_check (ops::any_nonfinite): the flag
//     reset, kept 0 by a finite tensor, set by +inf (the last element of the
//     last of 2 blocks), -inf and NaN in f32, f16 and bf16, kept 1 by a
//     later finite tensor (f32); an empty tensor launches nothing.
//   - an integer dtype is refused (cudaErrorInvalidValue, nothing launched).
#include "ops/reduce.h"
//
#include "emulate_common.h"
#include "emulated/reduce.inc"

namespace {

using rotor::DType;
using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

// n values on the grid of 2^-bits in [-1, 1] (bits <= 10: exact in f16;
// rounded to bf16 they stay multiples of 2^-bits).
std::vector<float> grid_values(size_t n, unsigned seed, int bits) {
  std::vector<float> v = randoms(n, seed);
  const float s = std::ldexp(1.0f, bits);
  for (float& x : v) x = std::nearbyint(x * s) / s;
  return v;
}

// Exactly equal (NaN where the reference has NaN).
void check_exact(const char* what, const char* name, const std::vector<float>& got,
                 const std::vector<float>& ref) {
  check(what, name, rel_err(got, ref), 0.0);
}
void check_exact(const char* what, const char* name, double got, double ref) {
  const bool same = got == ref || (std::isnan(got) && std::isnan(ref));
  check(what, name, same ? 0.0 : INFINITY, 0.0);
}

// ---- sum_rows -------------------------------------------------------------------------

// splits 0: the launcher's own count (sum_rows_splits), as the CUDA glue.
void sum_rows_case(DType dt, int64_t rows, int64_t n, bool accumulate, int splits, bool exact) {
  char what[96];
  std::snprintf(what, sizeof what, "sum_rows %s %lldx%lld %s%s splits %d", rotor::dtype_name(dt),
                static_cast<long long>(rows), static_cast<long long>(n),
                accumulate ? "acc" : "over", exact ? " grid" : " random", splits);
  const size_t count = static_cast<size_t>(rows * n);
  const Tensor x =
      Tensor::from_floats(exact ? grid_values(count, 11, 10) : randoms(count, 11), {rows, n}, dt);
  const auto init = exact ? grid_values(static_cast<size_t>(n), 12, 6)
                          : randoms(static_cast<size_t>(n), 12, -4.0f, 4.0f);
  Tensor ref = accumulate ? Tensor::from_floats(init, {n}) : Tensor::zeros({n});
  rotor::ops::sum_rows(x, ref, accumulate);

  if (splits == 0) splits = ke::sum_rows_splits_emulated(rows);
  std::vector<float> out = accumulate ? init : std::vector<float>(static_cast<size_t>(n), NAN);
  std::vector<float> partial(static_cast<size_t>(splits * n) + 1, NAN);
  check_status(what, ke::sum_rows_emulated(x.raw(), dt, rows, n, out.data(), accumulate,
                                           partial.data(), splits, nullptr));
  const auto r = ref.to_floats();
  if (exact) {
    check_bits(what, "out", out, r);
    return;
  }
  // Against each column's scale |init| + sum |x| (see the header).
  const auto xs = x.to_floats();
  double err = 0.0;
  for (int64_t c = 0; c < n; ++c) {
    double scale = accumulate ? std::abs(static_cast<double>(init[static_cast<size_t>(c)])) : 0.0;
    for (int64_t k = 0; k < rows; ++k) scale += std::abs(xs[static_cast<size_t>(k * n + c)]);
    const double d = std::abs(static_cast<double>(out[static_cast<size_t>(c)]) - r[c]);
    if (d != 0.0) err = std::max(err, scale > 0 ? d / scale : INFINITY);
  }
  const int64_t per = (rows + splits - 1) / splits;
  check(what, "out", err, static_cast<double>((per + 7) / 8 + 7 + 2) * std::ldexp(1.0, -24));
}

void sum_rows_edge_cases() {
  // No rows: zeros when overwriting, the output untouched when accumulating.
  const std::vector<float> init = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 7.0f, 1.0f};
  std::vector<float> out(init.size(), NAN), partial(8, NAN);
  const int before = emu::launches();
  check_status("sum_rows f32 0x7 over",
               ke::sum_rows_emulated(partial.data(), DType::F32, 0, 7, out.data(), false,
                                     partial.data(), 1, nullptr));
  check_bits("sum_rows f32 0x7 over", "out", out, std::vector<float>(init.size(), 0.0f));
  out = init;
  check_status("sum_rows f32 0x7 acc",
               ke::sum_rows_emulated(partial.data(), DType::F32, 0, 7, out.data(), true,
                                     partial.data(), 1, nullptr));
  check_bits("sum_rows f32 0x7 acc", "out", out, init);
  // No columns: nothing at all.
  check_status("sum_rows f32 5x0",
               ke::sum_rows_emulated(partial.data(), DType::F32, 5, 0, out.data(), false,
                                     partial.data(), 1, nullptr));
  check_true("sum_rows f32 0x7, 5x0", "no launch", emu::launches() == before);
  check_bits("sum_rows f32 5x0", "out", out, init);
}

// ---- sum_partials / max_abs_partials ------------------------------------------------

// The elements of block b of a grid-stride loop of `blocks` blocks of 256.
template <class F>
void for_block(int64_t n, int blocks, int b, F f) {
  for (int64_t i = static_cast<int64_t>(b) * 256; i < n; i += static_cast<int64_t>(blocks) * 256)
    for (int64_t k = i; k < std::min(n, i + 256); ++k) f(k);
}

// blocks 0: reduce_blocks(n), as the CUDA glue. `poison`: (index, value)
// written into the input (inf, NaN).
void whole_case(DType dt, int64_t n, int blocks, std::vector<std::pair<int64_t, float>> poison) {
  char what[96];
  std::snprintf(what, sizeof what, "sum/max_abs %s n %lld blocks %d%s", rotor::dtype_name(dt),
                static_cast<long long>(n), blocks, poison.empty() ? "" : " non-finite");
  if (blocks == 0) blocks = ke::reduce_blocks_emulated(n);
  auto v = randoms(static_cast<size_t>(n), 21);
  for (auto [i, value] : poison) v[static_cast<size_t>(i)] = value;
  const Tensor x = Tensor::from_floats(v, {n}, dt);
  const auto xs = x.to_floats();  // the stored values

  if (poison.empty()) {  // sums of finite values only
    std::vector<double> partial(static_cast<size_t>(blocks) + 1, NAN);
    check_status(what, ke::sum_partials_emulated(x.raw(), dt, n, partial.data(), blocks, nullptr));
    double host = 0.0, worst = 0.0;
    for (int b = 0; b < blocks; ++b) {
      double s = 0.0;  // exact: see the header
      for_block(n, blocks, b, [&](int64_t k) { s += xs[static_cast<size_t>(k)]; });
      if (!(partial[static_cast<size_t>(b)] == s)) worst = INFINITY;
      host += partial[static_cast<size_t>(b)];
    }
    check(what, "sum partials", worst, 0.0);
    check_true(what, "sum slot past blocks", std::isnan(partial[static_cast<size_t>(blocks)]));
    check_exact(what, "sum", host, rotor::ops::sum(x));
  }

  std::vector<float> partial(static_cast<size_t>(blocks) + 1, NAN);
  check_status(what,
               ke::max_abs_partials_emulated(x.raw(), dt, n, partial.data(), blocks, nullptr));
  std::vector<float> want(static_cast<size_t>(blocks));
  for (int b = 0; b < blocks; ++b) {
    float m = 0.0f;
    for_block(n, blocks, b, [&](int64_t k) {
      const float a = std::fabs(xs[static_cast<size_t>(k)]);
      if (std::isnan(m) || std::isnan(a)) {
        m = NAN;
      } else {
        m = std::max(m, a);
      }
    });
    want[static_cast<size_t>(b)] = m;
  }
  check_true(what, "max slot past blocks", std::isnan(partial[static_cast<size_t>(blocks)]));
  partial.pop_back();
  check_exact(what, "max partials", partial, want);
  float host = 0.0f;  // reduce_cuda.cpp's combination
  for (float p : partial) {
    if (std::isnan(p)) {
      host = p;
      break;
    }
    if (p > host) host = p;
  }
  check_exact(what, "max_abs", host, rotor::ops::max_abs(x));
}

// ---- global norm ----------------------------------------------------------------------

void global_norm_case(bool exact) {
  const char* what = exact ? "global_norm f32+f16+bf16 grid" : "global_norm f32+f16+bf16 random";
  const std::vector<std::pair<DType, int64_t>> specs = {{DType::F32, 300},   {DType::F16, 1500},
                                                        {DType::BF16, 2100}, {DType::F32, 0},
                                                        {DType::F32, 1},     {DType::BF16, 1024}};
  std::vector<Tensor> list;
  unsigned seed = 31;
  for (auto [dt, n] : specs) {
    const size_t count = static_cast<size_t>(n);
    list.push_back(Tensor::from_floats(
        exact ? grid_values(count, seed, 8) : randoms(count, seed, -2.0f, 2.0f), {n}, dt));
    ++seed;
  }
  const float ref = rotor::ops::global_norm(list).item();

  std::vector<int> blocks;
  int64_t nslots = 0;
  for (const Tensor& t : list) {
    blocks.push_back(ke::reduce_blocks_emulated(t.numel()));
    nslots += blocks.back();
  }
  std::vector<double> slots(static_cast<size_t>(nslots), NAN);
  int64_t at = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    check_status(what, ke::sumsq_partials_emulated(list[i].raw(), list[i].dtype(), list[i].numel(),
                                                   slots.data() + at, blocks[i], nullptr));
    at += blocks[i];
  }
  std::vector<float> out = {NAN, NAN};
  check_status(what, ke::global_norm_finish_emulated(slots.data(), nslots, out.data(), nullptr));
  check_true(what, "out[1] untouched", std::isnan(out[1]));
  out.pop_back();
  if (exact)
    check_bits(what, "norm", out, {ref});
  else
    check(what, "norm", rel_err(out, {ref}), std::ldexp(1.0, -23));
}

void global_norm_finish_case(int64_t nslots) {
  char what[96];
  std::snprintf(what, sizeof what, "global_norm_finish %lld slots", static_cast<long long>(nslots));
  // Dyadic slots: the sum is exact in any order.
  std::vector<double> slots(static_cast<size_t>(nslots));
  const auto v = grid_values(slots.size(), 41, 8);
  double sum = 0.0;
  for (size_t i = 0; i < slots.size(); ++i) sum += slots[i] = std::abs(v[i]) * 3.0;
  std::vector<float> out = {NAN};
  check_status(what, ke::global_norm_finish_emulated(slots.data(), nslots, out.data(), nullptr));
  check_bits(what, "norm", out, {static_cast<float>(std::sqrt(sum))});
}

// ---- non-finite flag --------------------------------------------------------------------

void nonfinite_case(DType dt) {
  char what[96];
  std::snprintf(what, sizeof what, "nonfinite %s", rotor::dtype_name(dt));
  uint8_t flag[2] = {0xab, 0xcd};
  check_status(what, ke::nonfinite_reset_emulated(flag, nullptr));
  check_true(what, "reset", flag[0] == 0 && flag[1] == 0xcd);

  const int64_t n = 300;  // 2 blocks of 256
  const Tensor fine =
      Tensor::from_floats(randoms(static_cast<size_t>(n), 51, -100.0f, 100.0f), {n}, dt);
  auto with = [&](int64_t i, float value) {
    auto v = randoms(static_cast<size_t>(n), 52);
    v[static_cast<size_t>(i)] = value;
    return Tensor::from_floats(v, {n}, dt);
  };
  const Tensor pos_inf = with(n - 1, INFINITY), neg_inf = with(40, -INFINITY), nan = with(260, NAN);

  auto flag_after = [&](const std::vector<Tensor>& list, const char* name, int want) {
    bool ok = ke::nonfinite_reset_emulated(flag, nullptr) == cudaSuccess;
    for (const Tensor& t : list)
      ok &= ke::nonfinite_check_emulated(t.raw(), dt, t.numel(), flag, nullptr) == cudaSuccess;
    const uint8_t ref = rotor::ops::any_nonfinite(list).to_ints()[0];
    char label[64];
    std::snprintf(label, sizeof label, "%s: flag %d, CPU %d", name, flag[0], ref);
    check_true(what, label, ok && flag[0] == want && ref == want && flag[1] == 0xcd);
  };
  flag_after({fine}, "finite", 0);
  flag_after({pos_inf}, "+inf last", 1);
  flag_after({neg_inf}, "-inf", 1);
  flag_after({nan}, "NaN", 1);
  if (dt == DType::F32) flag_after({fine, nan, fine}, "NaN then finite", 1);

  const int before = emu::launches();
  flag[0] = 7;
  check_status(what, ke::nonfinite_check_emulated(fine.raw(), dt, 0, flag, nullptr));
  check_true(what, "empty: no launch", emu::launches() == before && flag[0] == 7);
}

void refusal_case() {
  int32_t x[4] = {1, 2, 3, 4};
  double dp[2] = {0, 0};
  float fp[8] = {};
  uint8_t flag = 0;
  const int before = emu::launches();
  const bool refused =
      ke::sum_partials_emulated(x, DType::I32, 4, dp, 1, nullptr) == cudaErrorInvalidValue &&
      ke::max_abs_partials_emulated(x, DType::I32, 4, fp, 1, nullptr) == cudaErrorInvalidValue &&
      ke::sumsq_partials_emulated(x, DType::I32, 4, dp, 1, nullptr) == cudaErrorInvalidValue &&
      ke::nonfinite_check_emulated(x, DType::I32, 4, &flag, nullptr) == cudaErrorInvalidValue &&
      ke::sum_rows_emulated(x, DType::I32, 2, 2, fp, false, fp + 4, 1, nullptr) ==
          cudaErrorInvalidValue;
  check_true("reduce launchers refuse i32", "refused", refused && emu::launches() == before);
}

void run() {
  sum_rows_case(DType::F32, 600, 70, false, 0, true);  // 3 slices, 3 column tiles
  sum_rows_case(DType::F16, 260, 40, false, 0, true);  // 2 slices, 2 column tiles
  sum_rows_case(DType::BF16, 260, 40, true, 0, true);
  sum_rows_case(DType::F32, 300, 40, false, 0, false);
  sum_rows_case(DType::F16, 300, 20, true, 0, false);
  sum_rows_case(DType::F32, 1, 1, false, 0, true);
  sum_rows_case(DType::F32, 1, 33, true, 0, false);
  sum_rows_case(DType::F32, 256, 32, false, 0, true);  // one whole slice, one whole tile
  sum_rows_case(DType::F32, 256, 32, true, 0, false);
  sum_rows_case(DType::F32, 513, 3, true, 0, false);  // a last slice of one row
  sum_rows_case(DType::F16, 5, 33, false, 3, true);   // slices of 2, 2, 1 rows
  sum_rows_case(DType::BF16, 2, 4, true, 4, true);    // two empty slices
  sum_rows_edge_cases();

  whole_case(DType::F32, 1, 0, {});
  whole_case(DType::F32, 1000, 0, {});                            // one block
  whole_case(DType::F32, 2 * 1024 + 7, 0, {});                    // 3 blocks
  whole_case(DType::F32, 5000, 2, {});                            // threads loop
  whole_case(DType::F32, 100, 3, {});                             // empty blocks
  whole_case(DType::F32, 2100, 0, {{2090, NAN}, {3, INFINITY}});  // NaN in the last block
  whole_case(DType::F32, 2100, 0, {{1030, INFINITY}, {17, -INFINITY}});
  for (DType dt : {DType::F16, DType::BF16}) {
    whole_case(dt, 1000, 0, {});
    whole_case(dt, 3000, 2, {});
    whole_case(dt, 1500, 0, {{1, -INFINITY}, {1499, NAN}});
    whole_case(dt, 1500, 0, {{1200, INFINITY}});
  }

  global_norm_case(true);
  global_norm_case(false);
  global_norm_finish_case(2500);
  global_norm_finish_case(1);

  for (DType dt : {DType::F32, DType::F16, DType::BF16}) nonfinite_case(dt);
  refusal_case();
}

const Register reg("reduce", run);

}  // namespace
