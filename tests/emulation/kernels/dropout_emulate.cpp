// kernels/dropout.cu (dropout_apply, dropout_add) run on the CPU
// (emulate_cu.py, kernel_emulation.h) and held to its CPU twin,
// ops::dropout_forward / dropout_backward / dropout_add_forward
// (src/ops/dropout.*), bitwise: the mask is the CPU's Philox mask, element
// for element (also checked against ops::detail::dropout_factors directly),
// and each output is one product (and one sum) in f32 rounded once, as the
// CPU computes it. f32, f16 and bf16; the 16-byte vector path (aligned
// pointers) with and without a tail of n % G elements, the element-wise path
// (x, y or residual one element off a 16-byte boundary), several blocks,
// p = 0 (a copy, or nothing when y == x; dropout_add keeps all with scale 1),
// y aliasing x and y aliasing residual, seeds and stream ids with high words.
//
// The main cases compare with +0 and -0 taken as equal: the kernel computes a
// dropped element as x * 0.0f (-0 for a negative x, NaN for an infinite or
// NaN x) where the CPU writes 0.0f. The case "dropped non-finite / negative"
// holds those elements to the CPU's bits and fails while the kernel does that
// (see the report: kernels/dropout.cu, keep4 / dropout_kernel).
// dropout_add's r + x * k is not contracted into an FMA by the host compiler
// (x86-64 without -mfma) as nvcc may do; with the keep scales of p = 0.5 and
// p = 0 (2 and 1) the product is exact and the contraction cannot change a bit.
#include "ops/dropout.h"
//
#include "emulate_common.h"
#include "emulated/dropout.inc"

namespace {

using rotor::DType;
using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

// n values in [-2, 2) rounded to dt, none of them zero (a kept element is then
// nonzero, so the output shows the mask).
std::vector<float> values(int64_t n, unsigned seed, DType dt) {
  std::vector<float> v =
      Tensor::from_floats(randoms(static_cast<size_t>(n), seed, -2.0f, 2.0f), {n}, dt).to_floats();
  for (float& x : v)
    if (x == 0.0f) x = 1.0f;
  return v;
}

std::vector<float> no_negative_zeros(std::vector<float> v) {
  for (float& x : v)
    if (x == 0.0f) x = 0.0f;
  return v;
}

enum class Alias { none, x, residual };  // y == x, y == residual

struct Case {
  DType dt = DType::F32;
  int64_t n = 0;
  float p = 0.1f;
  uint64_t seed = 1234, stream = 0;
  int x_shift = 0, y_shift = 0, r_shift = 0;
  Alias alias = Alias::none;
};

void describe(char (&what)[112], const char* op, const Case& c) {
  std::snprintf(what, sizeof what, "%s %s n%lld p%g shift %d/%d/%d%s", op, rotor::dtype_name(c.dt),
                static_cast<long long>(c.n), static_cast<double>(c.p), c.x_shift, c.y_shift,
                c.r_shift,
                c.alias == Alias::x          ? " y=x"
                : c.alias == Alias::residual ? " y=res"
                                             : "");
}

void apply_case(const Case& c, bool backward = false) {
  char what[112];
  describe(what, backward ? "dropout bwd" : "dropout", c);
  const auto xv = values(c.n, 3, c.dt);
  Tensor y_ref = Tensor::zeros({c.n}, c.dt);
  if (backward)
    rotor::ops::dropout_backward(Tensor::from_floats(xv, {c.n}, c.dt), y_ref, c.p, c.seed,
                                 c.stream);
  else
    rotor::ops::dropout_forward(Tensor::from_floats(xv, {c.n}, c.dt), y_ref, c.p, c.seed, c.stream);
  Buf x(c.dt, c.n, c.x_shift), y_own(c.dt, c.n, c.y_shift);
  x.set(xv);
  Buf& y = c.alias == Alias::x ? x : y_own;
  if (c.alias != Alias::x) y.set(std::vector<float>(static_cast<size_t>(c.n), NAN));
  check_status(what, ke::dropout_apply_emulated(x.get(), y.get(), c.dt, c.n, c.p, c.seed, c.stream,
                                                nullptr));
  const auto got = y.floats();
  check_bits(what, "y", no_negative_zeros(got), y_ref.to_floats());
  if (c.p > 0) {
    std::vector<float> factor(static_cast<size_t>(c.n));
    rotor::ops::detail::dropout_factors(c.seed, c.stream, 0, c.n, c.p, factor.data());
    bool same = true;
    for (size_t i = 0; i < factor.size(); ++i) same &= (got[i] != 0.0f) == (factor[i] != 0.0f);
    check_true(what, "mask", same);
  }
}

void add_case(const Case& c) {
  char what[112];
  describe(what, "dropout_add", c);
  const auto xv = values(c.n, 4, c.dt), rv = values(c.n, 5, c.dt);
  Tensor y_ref = Tensor::zeros({c.n}, c.dt);
  rotor::ops::dropout_add_forward(Tensor::from_floats(rv, {c.n}, c.dt),
                                  Tensor::from_floats(xv, {c.n}, c.dt), c.p, c.seed, c.stream,
                                  y_ref);
  Buf x(c.dt, c.n, c.x_shift), r(c.dt, c.n, c.r_shift), y_own(c.dt, c.n, c.y_shift);
  x.set(xv);
  r.set(rv);
  Buf& y = c.alias == Alias::x ? x : c.alias == Alias::residual ? r : y_own;
  if (c.alias == Alias::none) y.set(std::vector<float>(static_cast<size_t>(c.n), NAN));
  check_status(what, ke::dropout_add_emulated(r.get(), x.get(), y.get(), c.dt, c.n, c.p, c.seed,
                                              c.stream, nullptr));
  check_bits(what, "y", y.floats(), y_ref.to_floats());
}

// Dropped elements that are negative, infinite or NaN: the CPU writes +0
// (dropout) and the residual (dropout_add) there.
void nonfinite_case(DType dt, int64_t n, float p) {
  char what[112];
  std::snprintf(what, sizeof what, "dropped non-finite / negative %s n%lld", rotor::dtype_name(dt),
                static_cast<long long>(n));
  const uint64_t seed = 99, stream = 7;
  std::vector<float> factor(static_cast<size_t>(n));
  rotor::ops::detail::dropout_factors(seed, stream, 0, n, p, factor.data());
  auto xv = values(n, 6, dt);
  const float specials[] = {INFINITY, -INFINITY, NAN, -1.5f};
  for (size_t i = 0, k = 0; i < xv.size(); ++i)
    if (factor[i] == 0.0f) xv[i] = specials[k++ % 4];
  const auto rv = values(n, 7, dt);
  Tensor y_ref = Tensor::zeros({n}, dt), s_ref = Tensor::zeros({n}, dt);
  rotor::ops::dropout_forward(Tensor::from_floats(xv, {n}, dt), y_ref, p, seed, stream);
  rotor::ops::dropout_add_forward(Tensor::from_floats(rv, {n}, dt),
                                  Tensor::from_floats(xv, {n}, dt), p, seed, stream, s_ref);
  Buf x(dt, n), r(dt, n), y(dt, n), s(dt, n);
  x.set(xv);
  r.set(rv);
  check_status(what, ke::dropout_apply_emulated(x.get(), y.get(), dt, n, p, seed, stream, nullptr));
  check_bits(what, "y", y.floats(), y_ref.to_floats());
  check_status(
      what, ke::dropout_add_emulated(r.get(), x.get(), s.get(), dt, n, p, seed, stream, nullptr));
  check_bits(what, "res+y", s.floats(), s_ref.to_floats());
}

void run() {
  const uint64_t big_seed = 0x0123456789abcdefull, big_stream = 0xfedcba9876543210ull;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Case c;
    c.dt = dt;
    // dropout_apply
    c.n = 2053, c.p = 0.1f;  // vectors over several blocks, a tail of n % G
    apply_case(c);
    c.n = 2048, c.p = 0.5f, c.seed = big_seed, c.stream = big_stream;  // no tail
    apply_case(c);
    c.n = 515, c.p = 0.3f, c.x_shift = 1;  // misaligned x: element-wise
    apply_case(c);
    c.x_shift = 0, c.y_shift = 1;  // misaligned y
    apply_case(c, true);
    c.y_shift = 0, c.n = 3, c.p = 0.9f;  // only a tail
    apply_case(c);
    c.n = 1;
    apply_case(c);
    c.n = 1027, c.p = 0.2f, c.alias = Alias::x;  // in place
    apply_case(c);
    c.x_shift = c.y_shift = 1;  // in place, misaligned
    apply_case(c);
    c.x_shift = c.y_shift = 0, c.p = 0.0f;  // p = 0 in place: nothing
    apply_case(c);
    c.alias = Alias::none;  // p = 0: a copy
    apply_case(c);
    // dropout_add
    c.n = 2053, c.p = 0.1f, c.seed = 1234, c.stream = 0;
    add_case(c);
    c.p = 0.5f, c.seed = big_seed, c.stream = big_stream, c.alias = Alias::residual;
    add_case(c);
    c.alias = Alias::x;
    add_case(c);
    c.n = 515, c.p = 0.3f, c.alias = Alias::none, c.r_shift = 1;  // misaligned residual only
    add_case(c);
    c.x_shift = c.y_shift = 1, c.alias = Alias::residual;  // in place, misaligned
    add_case(c);
    c.x_shift = c.y_shift = c.r_shift = 0, c.alias = Alias::none, c.p = 0.0f;  // keeps all
    add_case(c);
    c.n = 5, c.p = 0.4f;  // a vector and a tail of one block
    add_case(c);
  }
  {
    const char* what = "dropout n = 0";
    float x[4] = {1, 2, 3, 4}, y[4] = {NAN, NAN, NAN, NAN};
    check_status(what, ke::dropout_apply_emulated(x, y, DType::F32, 0, 0.5f, 1, 2, nullptr));
    check_status(what, ke::dropout_add_emulated(x, x, y, DType::F32, 0, 0.5f, 1, 2, nullptr));
    check_true(what, "untouched", std::isnan(y[0]) && std::isnan(y[3]));
  }
  nonfinite_case(DType::F32, 67, 0.5f);
}

const Register reg("dropout", run);

}  // namespace
