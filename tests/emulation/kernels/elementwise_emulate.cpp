// kernels/elementwise.cu run on the CPU (emulate_cu.py, kernel_emulation.h)
// and held to its CPU twins in ops/elementwise.h, called as
// src/ops/elementwise_cuda.cpp calls the launchers (n = numel; add_bias with
// rows = numel / cols).
//
// Bitwise, f32, f16 and bf16 alike, wherever both sides do the same fp32
// operations and round once (no FMA contraction on either side here): fill,
// cast between every pair of floating dtypes (zeros, infinities, overflow,
// f16 subnormals and bf16 ties included; NaN only as NaN, since cuda_fp16's
// canonical NaN 0x7fff is not the CPU's 0x7e00), add, mul, scale, axpby
// (beta 0 must not read y, which holds NaN; beta != 0), add_bias (a bias of
// another dtype: the twin adds it widened to f32, as the kernel does, then
// rounds once), and the None and ReLU activations (ReLU's gradient with
// -2, inf and NaN in dy where x <= 0: +0 on both sides, as in PyTorch);
// tanh and its gradient within the tolerances of tanh_case; SiLU and the GLU
// (glu_case) as GELU.
// fill of i32 and u8 (no CPU twin: the value converted as static_cast does).
//
// GELU is the tanh approximation on both sides but written differently: the
// kernel 0.5 x (1 + tanhf(u)), the CPU x / (1 + e^(-2u)) (ops/elementwise.cpp)
// and their gradients likewise, so they agree to fp32 rounding only: a few
// ulps of 1 (~1e-6 absolute, the kernel's 1 + tanh and 1 - tanh^2 cancel for
// x < 0; inputs in [-6, 6]) in f32, and one ulp of the 16-bit type (2^-10
// for f16, 2^-7 for bf16 relative to max(1, |ref|)) where the fp32 values
// fall on both sides of a rounding boundary.
//
// Paths: the vector kernels (16-byte aligned; N = 4 or 8 elements, 8 for a
// cast with a 16-bit side) with and without a tail of n % N, the scalar
// kernels (an operand moved by one element), n smaller than one vector,
// outputs aliasing inputs, add_bias's vector kernel (cols % N == 0) and its
// scalar one, n = 0, and (add, f32) more vectors than the grid has threads.
#include "ops/elementwise.h"
//
#include "emulate_common.h"
#include "emulated/elementwise.inc"

namespace {

using rotor::DType;
using rotor::Shape;
using rotor::Tensor;
using rotor::ops::Activation;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;
using rotor::kernels::Act;

const DType kDtypes[] = {DType::F32, DType::F16, DType::BF16};

// Device memory stand-in: n elements of dt filled with `value`, 64-byte
// aligned (rotor's allocator) or `shift` elements past that (misaligned).
Tensor buffer(int64_t n, DType dt, int64_t shift, float value = NAN) {
  return Tensor::full({n + shift}, value, dt).narrow(shift, n);
}

// The same, holding `values` rounded to dt.
Tensor buffer_of(const std::vector<float>& values, DType dt, int64_t shift) {
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor t = buffer(n, dt, shift);
  t.copy_from(Tensor::from_floats(values, {n}, dt));
  return t;
}

// A CPU copy (the twin's operand, or its expected output).
Tensor copy_of(const Tensor& t) {
  return t.clone();
}

// Bitwise, except that any NaN matches any NaN (both sides' NaNs are quiet,
// with other payloads).
void check_bits_or_nan(const char* what, const char* name, const std::vector<float>& got,
                       const std::vector<float>& ref) {
  bool ok = got.size() == ref.size();
  for (size_t i = 0; ok && i < ref.size(); ++i)
    ok = (std::isnan(got[i]) && std::isnan(ref[i])) ||
         std::memcmp(&got[i], &ref[i], sizeof(float)) == 0;
  check_true(what, name, ok);
  if (!ok) std::printf("           (rel err %.3g)\n", rel_err(got, ref));
}

const char* tag(const char* op, int64_t n, DType dt, int64_t shift, const char* extra = "") {
  static char what[96];
  std::snprintf(what, sizeof what, "%s n%lld %s%s%s", op, static_cast<long long>(n),
                rotor::dtype_name(dt), shift ? " misaligned" : "", extra);
  return what;
}

// ---- fill ---------------------------------------------------------------------

void fill_case(int64_t n, DType dt, int64_t shift, float value) {
  const char* what = tag("fill", n, dt, shift);
  Tensor ref = Tensor::zeros({n}, dt), got = buffer(n, dt, shift);
  rotor::ops::fill(ref, value);
  check_status(what, ke::fill_emulated(got.raw(), dt, n, value, nullptr));
  check_bits(what, "x", got.to_floats(), ref.to_floats());
}

void fill_int_cases() {
  {
    std::vector<int32_t> buf(40, 12345);  // elements 1..37 filled: 0 and 38.. stay
    const char* what = "fill n37 i32 7.9";
    check_status(what, ke::fill_emulated(buf.data() + 1, DType::I32, 37, 7.9f, nullptr));
    bool ok = buf[0] == 12345 && buf[38] == 12345;
    for (int i = 1; i <= 37; ++i) ok = ok && buf[static_cast<size_t>(i)] == 7;
    check_true(what, "x", ok);
    check_status("fill n5 i32 -3.5", ke::fill_emulated(buf.data(), DType::I32, 5, -3.5f, nullptr));
    ok = true;
    for (int i = 0; i < 5; ++i) ok = ok && buf[static_cast<size_t>(i)] == -3;
    check_true("fill n5 i32 -3.5", "x", ok && buf[5] == 7);
  }
  {
    std::vector<uint8_t> buf(21, 9);
    const char* what = "fill n19 u8 200";
    check_status(what, ke::fill_emulated(buf.data() + 1, DType::U8, 19, 200.0f, nullptr));
    bool ok = buf[0] == 9 && buf[20] == 9;
    for (int i = 1; i <= 19; ++i) ok = ok && buf[static_cast<size_t>(i)] == 200;
    check_true(what, "x", ok);
  }
  {
    // n = 0: nothing is written.
    Tensor t = buffer(4, DType::F32, 0, 5.0f);
    check_status("fill n0 f32", ke::fill_emulated(t.raw(), DType::F32, 0, 1.0f, nullptr));
    check_bits("fill n0 f32", "x", t.to_floats(), std::vector<float>(4, 5.0f));
  }
}

// ---- cast ---------------------------------------------------------------------

// Random values over many binades, led by the edge cases of the 16-bit types.
std::vector<float> cast_values(size_t n) {
  std::vector<float> v = randoms(n, 41, -4.0f, 4.0f);
  const auto e = randoms(n, 42, -30.0f, 30.0f);
  for (size_t i = 0; i < n; ++i) v[i] *= std::exp2(std::round(e[i]));
  const float edges[] = {0.0f,        -0.0f,       INFINITY,      -INFINITY,     NAN,
                         65504.0f,    65519.99f,   65520.0f,      -1e6f,         6e-8f,
                         2.9e-8f,     3.0e-8f,     1e-5f,         -5.96e-8f,     3.3e38f,
                         1.00390625f, 1.01171875f, 1.0009765625f, 1.0029296875f, 1e-40f};
  for (size_t i = 0; i < std::size(edges) && i < n; ++i) v[i] = edges[i];
  return v;
}

void cast_case(int64_t n, DType from, DType to, int64_t shift) {
  char what[96];
  std::snprintf(what, sizeof what, "cast n%lld %s->%s%s", static_cast<long long>(n),
                rotor::dtype_name(from), rotor::dtype_name(to), shift ? " misaligned" : "");
  const Tensor src = buffer_of(cast_values(static_cast<size_t>(n)), from, shift);
  Tensor ref = Tensor::zeros({n}, to), got = buffer(n, to, 0);
  rotor::ops::cast(copy_of(src), ref);
  check_status(what, ke::cast_emulated(src.raw(), from, got.raw(), to, n, nullptr));
  check_bits_or_nan(what, "dst", got.to_floats(), ref.to_floats());
}

// ---- add, mul -----------------------------------------------------------------

enum class Alias { None, OutA, OutB };

void binary_case(bool is_mul, int64_t n, DType dt, int64_t shift_a, Alias alias) {
  const char* what = tag(is_mul ? "mul" : "add", n, dt, shift_a,
                         alias == Alias::OutA   ? " out=a"
                         : alias == Alias::OutB ? " out=b"
                                                : "");
  Tensor a = buffer_of(randoms(static_cast<size_t>(n), 51, -3.0f, 3.0f), dt, shift_a);
  Tensor b = buffer_of(randoms(static_cast<size_t>(n), 52, -3.0f, 3.0f), dt, 0);
  Tensor ref = Tensor::zeros({n}, dt);
  if (is_mul)
    rotor::ops::mul(copy_of(a), copy_of(b), ref);
  else
    rotor::ops::add(copy_of(a), copy_of(b), ref);
  Tensor out = alias == Alias::OutA ? a : alias == Alias::OutB ? b : buffer(n, dt, 0);
  const auto launch = is_mul ? ke::mul_emulated : ke::add_emulated;
  check_status(what, launch(a.raw(), b.raw(), out.raw(), dt, n, nullptr));
  check_bits(what, "out", out.to_floats(), ref.to_floats());
}

// ---- scale, axpby ----------------------------------------------------------------

void scale_case(int64_t n, DType dt, int64_t shift) {
  const char* what = tag("scale", n, dt, shift);
  Tensor x = buffer_of(randoms(static_cast<size_t>(n), 61, -5.0f, 5.0f), dt, shift);
  Tensor ref = copy_of(x);
  rotor::ops::scale(ref, 0.3f);
  check_status(what, ke::scale_emulated(x.raw(), dt, n, 0.3f, nullptr));
  check_bits(what, "x", x.to_floats(), ref.to_floats());
}

// y = alpha x + beta y; beta 0: y holds NaN (not to be read). x_is_y: the
// launcher gets y for x (y = (alpha + beta) y in two products).
void axpby_case(int64_t n, DType dt, int64_t shift, float alpha, float beta, bool x_is_y) {
  const char* what =
      tag("axpby", n, dt, shift,
          beta == 0.0f ? (x_is_y ? " beta0 x=y" : " beta0 y=NaN") : (x_is_y ? " x=y" : ""));
  const Tensor x = buffer_of(randoms(static_cast<size_t>(n), 71, -2.0f, 2.0f), dt, shift);
  Tensor y = beta == 0.0f && !x_is_y
                 ? buffer(n, dt, 0)
                 : buffer_of(randoms(static_cast<size_t>(n), 72, -2.0f, 2.0f), dt, 0);
  if (x_is_y) y = buffer_of(x.to_floats(), dt, shift);
  Tensor ref = copy_of(y);
  if (x_is_y)
    rotor::ops::axpby(alpha, ref, beta, ref);
  else
    rotor::ops::axpby(alpha, copy_of(x), beta, ref);
  check_status(
      what, ke::axpby_emulated(alpha, x_is_y ? y.raw() : x.raw(), beta, y.raw(), dt, n, nullptr));
  check_bits(what, "y", y.to_floats(), ref.to_floats());
}

// ---- add_bias ---------------------------------------------------------------------

void add_bias_case(int64_t rows, int64_t cols, DType dt, DType bias_dt, int64_t shift,
                   int64_t bias_shift) {
  char what[96];
  std::snprintf(what, sizeof what, "add_bias %lldx%lld %s+%s%s%s", static_cast<long long>(rows),
                static_cast<long long>(cols), rotor::dtype_name(dt), rotor::dtype_name(bias_dt),
                shift ? " misaligned" : "", bias_shift ? " bias-misaligned" : "");
  const int64_t n = rows * cols;
  Tensor x = buffer_of(randoms(static_cast<size_t>(n), 81, -3.0f, 3.0f), dt, shift);
  const Tensor bias =
      buffer_of(randoms(static_cast<size_t>(cols), 82, -3.0f, 3.0f), bias_dt, bias_shift);
  // The twin: ops::add_bias in x's dtype when the dtypes agree; otherwise in
  // f32 on the widened values, then one rounding to x's dtype (ops::cast).
  Tensor ref = Tensor::zeros({n}, dt);
  if (dt == bias_dt) {
    ref.copy_from(x);
    Tensor rows_ref = ref.view({rows, cols});
    rotor::ops::add_bias(rows_ref, copy_of(bias));
  } else {
    Tensor x32 = Tensor::from_floats(x.to_floats(), {n}),
           b32 = Tensor::from_floats(bias.to_floats(), {cols});
    Tensor rows32 = x32.view({rows, cols});
    rotor::ops::add_bias(rows32, b32);
    rotor::ops::cast(x32, ref);
  }
  check_status(what, ke::add_bias_emulated(x.raw(), dt, bias.raw(), bias_dt, rows, cols, nullptr));
  check_bits(what, "x", x.to_floats(), ref.to_floats());
}

// ---- activations --------------------------------------------------------------------

const char* act_name(Activation a) {
  return a == Activation::None   ? " none"
         : a == Activation::ReLU ? " relu"
         : a == Activation::GELU ? " gelu"
                                 : " silu";
}
Act to_act(Activation a) {  // the glue's (ops/cuda_glue.h)
  return a == Activation::ReLU   ? Act::ReLU
         : a == Activation::GELU ? Act::GELU
         : a == Activation::SiLU ? Act::SiLU
                                 : Act::None;
}
// GELU and SiLU are computed by other formulas on the two sides (expf and
// tanhf in the kernel, exp_f32 on the CPU): fp32 rounding apart.
bool smooth(Activation a) {
  return a == Activation::GELU || a == Activation::SiLU;
}

// GELU's tolerance (see the header): f32 rounding of two formulas, or one
// ulp of the 16-bit type.
double gelu_tol(DType dt) {
  return dt == DType::F16 ? 0x1p-10 : dt == DType::BF16 ? 0x1p-7 : 1e-6;
}

std::vector<float> act_inputs(size_t n, unsigned seed) {
  std::vector<float> v = randoms(n, seed, -6.0f, 6.0f);
  const float edges[] = {0.0f, -0.0f, 1e-3f, -1e-3f, 1.0f, -1.0f, -3.0f, -5.5f};
  for (size_t i = 0; i < std::size(edges) && i < n; ++i) v[i] = edges[i];
  return v;
}

// alias: y is x (forward) and dx is dy (backward).
void activation_case(int64_t n, DType dt, int64_t shift, Activation act, bool alias) {
  char extra[32];
  std::snprintf(extra, sizeof extra, "%s%s", act_name(act), alias ? " in-place" : "");
  const char* what = tag("activation", n, dt, shift, extra);
  const Tensor x = buffer_of(act_inputs(static_cast<size_t>(n), 91), dt, shift);
  Tensor y_ref = Tensor::zeros({n}, dt);
  rotor::ops::activation_forward(copy_of(x), y_ref, act);
  Tensor y = alias ? buffer_of(x.to_floats(), dt, shift) : buffer(n, dt, 0);
  check_status(what, ke::activation_forward_emulated(alias ? y.raw() : x.raw(), y.raw(), dt, n,
                                                     to_act(act), nullptr));
  if (smooth(act))
    check(what, "y", rel_err(y.to_floats(), y_ref.to_floats()), gelu_tol(dt));
  else
    check_bits(what, "y", y.to_floats(), y_ref.to_floats());

  std::vector<float> dy_values = randoms(static_cast<size_t>(n), 92, -2.0f, 2.0f);
  if (act == Activation::ReLU) {  // where x <= 0 (edges 0, -0, -1e-3, -1): dx is +0 whatever dy
    const float inactive_dy[] = {-2.0f, INFINITY, -INFINITY, NAN};
    const size_t at[] = {0, 1, 3, 5};
    for (size_t i = 0; i < 4 && at[i] < dy_values.size(); ++i) dy_values[at[i]] = inactive_dy[i];
  }
  const Tensor dy = buffer_of(dy_values, dt, 0);
  Tensor dx_ref = Tensor::zeros({n}, dt);
  rotor::ops::activation_backward(copy_of(dy), copy_of(x), dx_ref, act);
  Tensor dx = alias ? buffer_of(dy.to_floats(), dt, 0) : buffer(n, dt, 0);
  check_status(what, ke::activation_backward_emulated(alias ? dx.raw() : dy.raw(), x.raw(),
                                                      dx.raw(), dt, n, to_act(act), nullptr));
  if (smooth(act))
    check(what, "dx", rel_err(dx.to_floats(), dx_ref.to_floats()), gelu_tol(dt));
  else
    check_bits(what, "dx", dx.to_floats(), dx_ref.to_floats());
}

// tanh: tanhf in the kernel, the CPU's exp-based tanh_row: within a few
// ulps of 1 in f32 (and one ulp of the 16-bit type); the gradient from the
// output, dy (1 - y^2), within fp32 rounding (the kernel may contract it to
// an FMA).
void tanh_case(int64_t n, DType dt, int64_t shift, bool alias) {
  const char* what = tag("tanh", n, dt, shift, alias ? " in-place" : "");
  const Tensor x = buffer_of(act_inputs(static_cast<size_t>(n), 93), dt, shift);
  Tensor y_ref = Tensor::zeros({n}, dt);
  rotor::ops::tanh_forward(copy_of(x), y_ref);
  Tensor y = alias ? buffer_of(x.to_floats(), dt, shift) : buffer(n, dt, 0);
  check_status(what, ke::tanh_forward_emulated(alias ? y.raw() : x.raw(), y.raw(), dt, n, nullptr));
  check(what, "y", rel_err(y.to_floats(), y_ref.to_floats()), gelu_tol(dt));

  const Tensor dy = buffer_of(randoms(static_cast<size_t>(n), 94, -2.0f, 2.0f), dt, 0);
  Tensor dx_ref = Tensor::zeros({n}, dt);
  rotor::ops::tanh_backward(copy_of(dy), copy_of(y_ref), dx_ref);
  Tensor dx = alias ? buffer_of(dy.to_floats(), dt, 0) : buffer(n, dt, 0);
  check_status(what, ke::tanh_backward_emulated(alias ? dx.raw() : dy.raw(), y_ref.raw(), dx.raw(),
                                                dt, n, nullptr));
  check(what, "dx", rel_err(dx.to_floats(), dx_ref.to_floats()), gelu_tol(dt));
}

// The GLU (ops::glu_forward / glu_backward) against the CPU: rows of 2F,
// the vector path where N divides F and the pointers are aligned, the
// scalar one otherwise (F odd, or h moved by one element); in place (dh
// aliasing h). ReLU and none bit for bit, GELU and SiLU within gelu_tol.
void glu_case(int64_t rows, int64_t F, DType dt, int64_t shift, Activation act, bool alias) {
  char extra[48];
  std::snprintf(extra, sizeof extra, " F=%lld%s%s", static_cast<long long>(F), act_name(act),
                alias ? " in-place" : "");
  const char* what = tag("glu", rows * F, dt, shift, extra);
  const int64_t n = rows * F;
  const Tensor h = buffer_of(act_inputs(static_cast<size_t>(2 * n), 95), dt, shift);
  Tensor y_ref = Tensor::zeros({rows, F}, dt);
  rotor::ops::glu_forward(copy_of(h).view({rows, 2 * F}), y_ref, act);
  Tensor y = buffer(n, dt, 0);
  check_status(what, ke::glu_forward_emulated(h.raw(), y.raw(), dt, rows, F, to_act(act), nullptr));
  if (smooth(act))
    check(what, "y", rel_err(y.to_floats(), y_ref.to_floats()), gelu_tol(dt));
  else
    check_bits(what, "y", y.to_floats(), y_ref.to_floats());

  const Tensor dy = buffer_of(randoms(static_cast<size_t>(n), 96, -2.0f, 2.0f), dt, 0);
  Tensor dh_ref = Tensor::zeros({rows, 2 * F}, dt);
  rotor::ops::glu_backward(copy_of(dy).view({rows, F}), copy_of(h).view({rows, 2 * F}), dh_ref,
                           act);
  Tensor dh = alias ? buffer_of(h.to_floats(), dt, shift) : buffer(2 * n, dt, 0);
  check_status(what, ke::glu_backward_emulated(dy.raw(), alias ? dh.raw() : h.raw(), dh.raw(), dt,
                                               rows, F, to_act(act), nullptr));
  if (smooth(act))
    check(what, "dh", rel_err(dh.to_floats(), dh_ref.to_floats()), gelu_tol(dt));
  else
    check_bits(what, "dh", dh.to_floats(), dh_ref.to_floats());
}

void run() {
  for (DType dt : kDtypes) {
    fill_case(45, dt, 0, 0.1f);  // vectors and a tail
    fill_case(45, dt, 1, -3.75f);
    fill_case(3, dt, 0, 0.1f);  // less than a vector
    fill_case(1, dt, 1, 2.5f);
  }
  fill_int_cases();

  for (DType from : kDtypes)
    for (DType to : kDtypes) {
      cast_case(45, from, to, 0);
      cast_case(45, from, to, 1);
    }
  cast_case(5, DType::F32, DType::BF16, 0);  // less than a vector (8 a thread)

  for (DType dt : kDtypes)
    for (bool is_mul : {false, true}) {
      binary_case(is_mul, 45, dt, 0, Alias::None);
      binary_case(is_mul, 45, dt, 1, Alias::None);
      binary_case(is_mul, 45, dt, 0, Alias::OutA);
      binary_case(is_mul, 45, dt, 1, Alias::OutB);
      binary_case(is_mul, 6, dt, 0, Alias::None);
    }
  // More vectors than the grid's threads (waves_grid: 132 SMs x 8 blocks x
  // 256 = 270336): the grid-stride loop's second round, then a tail of 3.
  binary_case(false, 4 * 270341 + 3, DType::F32, 0, Alias::None);

  for (DType dt : kDtypes) {
    scale_case(45, dt, 0);
    scale_case(45, dt, 1);
    scale_case(2, dt, 0);
    axpby_case(45, dt, 0, 1.5f, 0.0f, false);
    axpby_case(45, dt, 1, -0.7f, 0.0f, false);
    axpby_case(45, dt, 0, -2.0f, 0.75f, false);
    axpby_case(45, dt, 1, 0.3f, 1.25f, false);
    axpby_case(45, dt, 0, 0.3f, 1.25f, true);
    axpby_case(45, dt, 1, 0.5f, 0.0f, true);
  }

  for (DType dt : kDtypes)
    for (DType bdt : kDtypes) {
      add_bias_case(5, 24, dt, bdt, 0, 0);  // vector kernel
      add_bias_case(3, 13, dt, bdt, 0, 0);  // cols % N != 0: scalar
    }
  for (DType dt : kDtypes) {
    add_bias_case(4, 24, dt, dt, 1, 0);          // misaligned x: scalar
    add_bias_case(4, 24, dt, DType::F32, 0, 1);  // misaligned bias: vector (read by element)
    add_bias_case(1, 1, dt, dt, 0, 0);
    add_bias_case(7, 1, dt, DType::F32, 0, 0);
  }

  for (DType dt : kDtypes)
    for (Activation act :
         {Activation::None, Activation::ReLU, Activation::GELU, Activation::SiLU}) {
      glu_case(5, 16, dt, 0, act, false);  // vectors (N divides 16)
      glu_case(3, 21, dt, 0, act, false);  // F odd: the scalar kernel
      glu_case(4, 8, dt, 1, act, false);   // unaligned: the scalar kernel
      glu_case(5, 16, dt, 0, act, true);   // dh over h
      activation_case(93, dt, 0, act, false);
      activation_case(93, dt, 1, act, false);
      activation_case(93, dt, 0, act, true);
      activation_case(5, dt, 1, act, true);
    }
  for (DType dt : kDtypes) {
    tanh_case(93, dt, 0, false);
    tanh_case(93, dt, 1, false);
    tanh_case(93, dt, 0, true);
    tanh_case(5, dt, 1, true);
  }
}

const Register reg("elementwise", run);

}  // namespace
