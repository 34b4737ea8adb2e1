// CPU element-wise ops: f32 arithmetic; fill and cast handle f16/bf16 storage
// directly, the others through f32 copies (ops/cpu_f32.h).
#include "ops/elementwise.h"

#include <algorithm>
#include <cmath>

#include "ops/cpu_clones.h"
#include "ops/cpu_f32.h"
#include "ops/cpu_math.h"
#include "ops/cpu_rows.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {

// sqrt(2/pi) and the cubic coefficient of the tanh GELU approximation.
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;

void check_same_numel(const Tensor& a, const Tensor& b, const char* op) {
  if (a.numel() != b.numel())
    ROTOR_FAIL("{}: element counts differ: {} vs {}", op, shape_str(a.shape()),
               shape_str(b.shape()));
  check_same_device(a, b, op);
}

// a is floating and has b's element count, dtype and device.
void check_like(const Tensor& a, const Tensor& b, const char* op) {
  require_floating(a, op);
  check_same_numel(a, b, op);
  if (a.dtype() != b.dtype())
    ROTOR_FAIL("{}: dtypes differ: {} vs {}", op, dtype_name(a.dtype()), dtype_name(b.dtype()));
}

// Reads element i of a floating CPU tensor as float.
float load(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32:
      return t.data<float>()[i];
    case DType::F16:
      return half_bits_to_float(static_cast<const uint16_t*>(t.raw())[i]);
    case DType::BF16:
      return bf16_bits_to_float(static_cast<const uint16_t*>(t.raw())[i]);
    default:
      return 0.0f;
  }
}

void store(Tensor& t, int64_t i, float v) {
  switch (t.dtype()) {
    case DType::F32:
      t.data<float>()[i] = v;
      break;
    case DType::F16:
      static_cast<uint16_t*>(t.raw())[i] = float_to_half_bits(v);
      break;
    case DType::BF16:
      static_cast<uint16_t*>(t.raw())[i] = float_to_bf16_bits(v);
      break;
    default:
      break;
  }
}

// GELU's tanh approximation and its derivative, written with the logistic
// function: 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)), u = c (x + a x^3), so
// gelu(x) = x / (1 + e^(-2u)) -- one exp_f32 and one division, where tanh
// needs both and, for x below about -3, loses the result to the
// cancellation 1 + tanh u. With s = 1 / (1 + e) and e = e^(-2u), gelu'(x) =
// s + x e s^2 2u'(x). -2u is capped at 80 so that e stays a normal float
// (gelu(x) is then below 1e-33 in magnitude). The same bits on every CPU
// (ops/cpu_math.h); libm's expf keeps the loops from vectorizing.
inline float gelu(float x) {
  const float m2u = -2.0f * kGeluC * (x + kGeluA * x * x * x);
  return x / (1.0f + detail::exp_f32(m2u < 80.0f ? m2u : 80.0f));
}

inline float gelu_grad(float x) {
  const float x2 = x * x;
  const float m2u = -2.0f * kGeluC * (x + kGeluA * x * x * x);  // gelu's bits
  const float e = detail::exp_f32(m2u < 80.0f ? m2u : 80.0f);
  const float s = 1.0f / (1.0f + e);
  return s + x * (e * s * s) * (2.0f * kGeluC) * (1.0f + 3.0f * kGeluA * x2);
}

// SiLU (Elfwing et al. 2018; "swish"): silu(x) = x s(x), s the logistic
// function 1 / (1 + e^(-x)), and silu'(x) = s + x s (1 - s) = s + x e s^2
// with e = e^(-x) (1 - s = e s). -x is capped at 80 as gelu's exponent is.
inline float silu(float x) {
  return x / (1.0f + detail::exp_f32(-x < 80.0f ? -x : 80.0f));
}

inline float silu_grad(float x) {
  const float e = detail::exp_f32(-x < 80.0f ? -x : 80.0f);
  const float s = 1.0f / (1.0f + e);
  return s + x * (e * s * s);
}

// The activations over [0, n), in vector clones (ops/cpu_clones.h). x and y
// (dy and dx) may be one array: element i is read before it is written.
ROTOR_CPU_CLONES void relu_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
ROTOR_CPU_CLONES void gelu_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gelu(x[i]);
}
ROTOR_CPU_CLONES void silu_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = silu(x[i]);
}
// The subgradient of ReLU at 0 is taken as 0, as PyTorch does.
ROTOR_CPU_CLONES void relu_grad_span(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}
ROTOR_CPU_CLONES void gelu_grad_span(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_grad(x[i]);
}
ROTOR_CPU_CLONES void silu_grad_span(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * silu_grad(x[i]);
}
ROTOR_CPU_CLONES void add_span(float* x, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += b[i];
}
ROTOR_CPU_CLONES void mul_span(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

// y = act(x) and dx = dy act'(x) over [0, n), by the spans above (None
// copies); x and y (dy and dx) may be one array.
void act_span(Activation a, const float* x, float* y, int64_t n) {
  switch (a) {
    case Activation::None:
      if (x != y) std::copy(x, x + n, y);
      break;
    case Activation::ReLU:
      relu_span(x, y, n);
      break;
    case Activation::GELU:
      gelu_span(x, y, n);
      break;
    case Activation::SiLU:
      silu_span(x, y, n);
      break;
  }
}
void act_grad_span(Activation a, const float* dy, const float* x, float* dx, int64_t n) {
  switch (a) {
    case Activation::None:
      if (dy != dx) std::copy(dy, dy + n, dx);
      break;
    case Activation::ReLU:
      relu_grad_span(dy, x, dx, n);
      break;
    case Activation::GELU:
      gelu_grad_span(dy, x, dx, n);
      break;
    case Activation::SiLU:
      silu_grad_span(dy, x, dx, n);
      break;
  }
}

// out = op(a, b) element by element, in f32 (16-bit tensors through f32
// copies, rounded once).
template <class Op>
void binary_f32(const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  detail::F32Compute f;
  Tensor out32 = f.output(out);
  const Tensor a32 = f.input(a), b32 = f.input(b);
  const float* pa = a32.data<float>();
  const float* pb = b32.data<float>();
  float* po = out32.data<float>();
  const int64_t n = out32.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], pb[i]);
  f.commit();
}

}  // namespace

void fill(Tensor& x, float value) {
  require_floating(x, "fill");
  ROTOR_DISPATCH_CUDA(x, fill(x, value));
  const int64_t n = x.numel();
  if (x.dtype() == DType::F32) {
    float* p = x.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) p[i] = value;
    return;
  }
  const uint16_t bits =
      x.dtype() == DType::F16 ? float_to_half_bits(value) : float_to_bf16_bits(value);
  auto* p = static_cast<uint16_t*>(x.raw());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = bits;
}

void cast(const Tensor& src, Tensor& dst) {
  require_floating(src, "cast");
  require_floating(dst, "cast");
  check_same_numel(src, dst, "cast");
  ROTOR_DISPATCH_CUDA(dst, cast(src, dst));
  if (src.dtype() == dst.dtype()) {
    dst.copy_from(src);
    return;
  }
  const int64_t n = src.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) store(dst, i, load(src, i));
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  check_like(a, out, "add");
  check_like(b, out, "add");
  ROTOR_DISPATCH_CUDA(out, add(a, b, out));
  binary_f32(a, b, out, [](float x, float y) { return x + y; });
}

void mul(const Tensor& a, const Tensor& b, Tensor& out) {
  check_like(a, out, "mul");
  check_like(b, out, "mul");
  ROTOR_DISPATCH_CUDA(out, mul(a, b, out));
  binary_f32(a, b, out, [](float x, float y) { return x * y; });
}

void scale(Tensor& x, float s) {
  require_floating(x, "scale");
  ROTOR_DISPATCH_CUDA(x, scale(x, s));
  if (detail::F32Compute::needed({&x})) {
    detail::F32Compute f;
    Tensor x32 = f.output(x, true);
    scale(x32, s);
    f.commit();
    return;
  }
  float* p = x.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] *= s;
}

void axpby(float alpha, const Tensor& x, float beta, Tensor& y) {
  check_like(x, y, "axpby");
  ROTOR_DISPATCH_CUDA(y, axpby(alpha, x, beta, y));
  if (detail::F32Compute::needed({&y})) {
    detail::F32Compute f;
    Tensor y32 = f.output(y, beta != 0.0f);
    axpby(alpha, f.input(x), beta, y32);
    f.commit();
    return;
  }
  const float* px = x.data<float>();
  float* py = y.data<float>();
  const int64_t n = y.numel();
  // beta == 0 overwrites y, so stale NaN/inf in y do not leak through (BLAS convention).
  if (beta == 0.0f) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) py[i] = alpha * px[i];
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) py[i] = alpha * px[i] + beta * py[i];
  }
}

void add_bias(Tensor& x, const Tensor& bias) {
  if (x.dim() < 1 || bias.dim() != 1 || x.size(-1) != bias.size(0))
    ROTOR_FAIL("add_bias: x {} needs a bias [{}], got {}", shape_str(x.shape()),
               x.dim() ? x.size(-1) : 0, shape_str(bias.shape()));
  require_floating(x, "add_bias");
  if (bias.dtype() != x.dtype())
    ROTOR_FAIL("add_bias: dtypes differ: {} vs {}", dtype_name(x.dtype()),
               dtype_name(bias.dtype()));
  check_same_device(x, bias, "add_bias");
  ROTOR_DISPATCH_CUDA(x, add_bias(x, bias));
  if (detail::F32Compute::needed({&x})) {
    detail::F32Compute f;
    Tensor x32 = f.output(x, true);
    add_bias(x32, f.input(bias));
    f.commit();
    return;
  }
  const int64_t n = bias.size(0);
  const int64_t rows = n ? x.numel() / n : 0;
  float* px = x.data<float>();           // [rows, n]
  const float* pb = bias.data<float>();  // [n]
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) px[r * n + j] += pb[j];
}

void activation_forward(const Tensor& x, Tensor& y, Activation act) {
  check_like(x, y, "activation_forward");
  ROTOR_DISPATCH_CUDA(y, activation_forward(x, y, act));
  if (detail::F32Compute::needed({&y})) {
    detail::F32Compute f;
    Tensor y32 = f.output(y);
    activation_forward(f.input(x), y32, act);
    f.commit();
    return;
  }
  const float* px = x.data<float>();
  float* py = y.data<float>();
  detail::for_chunks(y.numel(),
                     [&](int64_t b, int64_t e) { act_span(act, px + b, py + b, e - b); });
}

namespace detail {

void bias_activation_rows(float* c, const float* bias, float* pre, int64_t rows, int64_t n,
                          Activation act) {
  if (!bias && !pre && act == Activation::None) return;
  ROTOR_PROFILE_OP(bias_activation());
  // A row at a time while it is in L1: the bias, the copy and the activation
  // read it once from memory instead of three times.
#pragma omp parallel for schedule(static) if (rows * n > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c + r * n;
    if (bias) add_span(row, bias, n);
    if (pre) std::copy(row, row + n, pre + r * n);
    act_span(act, row, row, n);
  }
}

}  // namespace detail

void activation_backward(const Tensor& dy, const Tensor& x, Tensor& dx, Activation act) {
  check_like(dy, dx, "activation_backward");
  check_like(x, dx, "activation_backward");
  ROTOR_DISPATCH_CUDA(dx, activation_backward(dy, x, dx, act));
  if (detail::F32Compute::needed({&dx})) {
    detail::F32Compute f;
    Tensor dx32 = f.output(dx);
    activation_backward(f.input(dy), f.input(x), dx32, act);
    f.commit();
    return;
  }
  const float* pdy = dy.data<float>();
  const float* px = x.data<float>();
  float* pdx = dx.data<float>();
  detail::for_chunks(dx.numel(), [&](int64_t b, int64_t e) {
    act_grad_span(act, pdy + b, px + b, pdx + b, e - b);
  });
}

namespace {

// The GLU's shapes: h [..., 2F] against y (or dy) [..., F], one dtype.
int64_t glu_width(const Tensor& h, const Tensor& y, const char* op) {
  require_floating(h, op);
  if (h.dtype() != y.dtype())
    ROTOR_FAIL("{}: dtypes differ: {} vs {}", op, dtype_name(h.dtype()), dtype_name(y.dtype()));
  const int64_t F = y.dim() > 0 ? y.size(-1) : 0;
  if (h.dim() == 0 || h.size(-1) != 2 * F || h.numel() != 2 * y.numel())
    ROTOR_FAIL("{}: h {} must be [..., 2F] for y {} [..., F]", op, shape_str(h.shape()),
               shape_str(y.shape()));
  return F;
}

}  // namespace

void glu_forward(const Tensor& h, Tensor& y, Activation act) {
  const int64_t F = glu_width(h, y, "glu_forward");
  ROTOR_DISPATCH_CUDA(y, glu_forward(h, y, act));
  if (detail::F32Compute::needed({&y})) {
    detail::F32Compute f;
    Tensor y32 = f.output(y);
    glu_forward(f.input(h), y32, act);
    f.commit();
    return;
  }
  if (F == 0) return;
  const float* ph = h.data<float>();
  float* py = y.data<float>();
  const int64_t rows = y.numel() / F;
  // A row at a time while it is in L1: y = act(gate), then y *= value.
#pragma omp parallel for schedule(static) if (rows * F > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const float *gate = ph + 2 * r * F, *value = gate + F;
    float* out = py + r * F;
    act_span(act, gate, out, F);
    mul_span(out, value, out, F);
  }
}

void glu_backward(const Tensor& dy, const Tensor& h, Tensor& dh, Activation act) {
  const int64_t F = glu_width(h, dy, "glu_backward");
  check_like(h, dh, "glu_backward");
  ROTOR_DISPATCH_CUDA(dh, glu_backward(dy, h, dh, act));
  if (detail::F32Compute::needed({&dh})) {
    detail::F32Compute f;
    Tensor dh32 = f.output(dh);
    glu_backward(f.input(dy), f.input(h), dh32, act);
    f.commit();
    return;
  }
  if (F == 0) return;
  if (dh.raw() == h.raw()) {  // in place: the spans below write a half before reading it
    glu_backward(dy, h.clone(), dh, act);
    return;
  }
  const float* pdy = dy.data<float>();
  const float* ph = h.data<float>();
  float* pdh = dh.data<float>();
  const int64_t rows = dy.numel() / F;
  // A row at a time: d gate = act'(gate) (dy value), d value = act(gate) dy
  // (the activations' own spans; ReLU's gradient is +0 where gate <= 0).
#pragma omp parallel for schedule(static) if (rows * F > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const float *d = pdy + r * F, *gate = ph + 2 * r * F, *value = gate + F;
    float *dgate = pdh + 2 * r * F, *dvalue = dgate + F;
    mul_span(d, value, dgate, F);
    act_grad_span(act, dgate, gate, dgate, F);
    act_span(act, gate, dvalue, F);
    mul_span(dvalue, d, dvalue, F);
  }
}

void tanh_forward(const Tensor& x, Tensor& y) {
  check_like(x, y, "tanh_forward");
  ROTOR_DISPATCH_CUDA(y, tanh_forward(x, y));
  if (detail::F32Compute::needed({&y})) {
    detail::F32Compute f;
    Tensor y32 = f.output(y);
    tanh_forward(f.input(x), y32);
    f.commit();
    return;
  }
  const float* px = x.data<float>();
  float* py = y.data<float>();
  detail::for_chunks(y.numel(), [&](int64_t b, int64_t e) {
    if (py != px) std::copy(px + b, px + e, py + b);
    detail::tanh_row(py + b, e - b);
  });
}

void tanh_backward(const Tensor& dy, const Tensor& y, Tensor& dx) {
  check_like(dy, dx, "tanh_backward");
  check_like(y, dx, "tanh_backward");
  ROTOR_DISPATCH_CUDA(dx, tanh_backward(dy, y, dx));
  if (detail::F32Compute::needed({&dx})) {
    detail::F32Compute f;
    Tensor dx32 = f.output(dx);
    tanh_backward(f.input(dy), f.input(y), dx32);
    f.commit();
    return;
  }
  const float* pdy = dy.data<float>();
  const float* py = y.data<float>();
  float* pdx = dx.data<float>();
  detail::for_chunks(dx.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) pdx[i] = pdy[i] * (1.0f - py[i] * py[i]);
  });
}

}  // namespace rotor::ops
