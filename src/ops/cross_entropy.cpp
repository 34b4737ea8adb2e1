// CPU label-smoothed cross-entropy (fairseq's definition), row sums in double.
// The exponentials are ops/cpu_math.h's exp_f32 in vector clones
// (ops/cpu_clones.h); the row sums run in 16 fixed double lanes, added in a
// fixed order, so that every clone and every CPU gives the same bits.
#include "ops/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "ops/cpu_clones.h"
#include "ops/cpu_f32.h"
#include "ops/cpu_lanes.h"
#include "ops/cpu_math.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {
// Checks logits [N, V] and targets i32 [N]; returns V.
int64_t check_ce(const Tensor& logits, const Tensor& targets, float smoothing, const char* op) {
  if (logits.dim() != 2) ROTOR_FAIL("{}: logits must be [N, V], got {}", op, logits.str());
  require_floating(logits, op);
  const int64_t n = logits.size(0);
  if (targets.dtype() != DType::I32 || targets.numel() != n)
    ROTOR_FAIL("{}: targets must be i32 [{}], got {}", op, n, targets.str());
  check_same_device(logits, targets, op);
  if (!(smoothing >= 0.0f && smoothing < 1.0f))
    ROTOR_FAIL("{}: label smoothing must be in [0, 1), got {}", op, smoothing);
  return logits.size(1);
}

void check_row_output(const Tensor& t, int64_t n, const Tensor& logits, const char* what) {
  if (t.dtype() != DType::F32 || t.numel() != n)
    ROTOR_FAIL("{} must be f32 [{}], got {}", what, n, t.str());
  check_same_device(t, logits, what);
}

// The smoothed target distribution q: q[target] = 1 - eps, others eps / (V - 1).
struct Smoothing {
  double on, off;
  Smoothing(float eps, int64_t vocab)
      : on(1.0 - eps), off(vocab > 1 ? static_cast<double>(eps) / (vocab - 1) : 0.0) {}
};

// The largest of row[0, n).
ROTOR_CPU_CLONES float row_max(const float* row, int64_t n) {
  return detail::lane_max(row, n);
}

// sum_j e^(row[j] - mx) and sum_j row[j], in double: 16 lanes, lane l adding
// the elements j = l mod 16 in order, then the lanes and the tail in order.
ROTOR_CPU_CLONES void row_sums(const float* row, int64_t n, float mx, double& sum_exp,
                               double& sum_x) {
  detail::lane_sum2(
      n,
      [&](int64_t j, double& e, double& x) {
        e = static_cast<double>(detail::exp_f32(row[j] - mx));
        x = static_cast<double>(row[j]);
      },
      sum_exp, sum_x);
}

// d[j] = scale * (e^(row[j] - lse) - off) for every j (the caller fixes the
// target's).
ROTOR_CPU_CLONES void softmax_minus(const float* row, int64_t n, float lse, float off, float scale,
                                    float* d) {
  for (int64_t j = 0; j < n; ++j) d[j] = scale * (detail::exp_f32(row[j] - lse) - off);
}

int32_t checked_target(const int32_t* targets, int64_t i, int64_t vocab, const char* op) {
  const int32_t t = targets[i];
  if (t < 0 || t >= vocab)
    ROTOR_FAIL("{}: target {} of row {} is outside the vocabulary [0, {})", op, t, i, vocab);
  return t;
}
}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, float smoothing,
                           int ignore_index, Tensor& loss, Tensor& nll, Tensor& lse) {
  const int64_t vocab = check_ce(logits, targets, smoothing, "cross_entropy_forward");
  const int64_t n = logits.size(0);
  check_row_output(loss, n, logits, "cross_entropy_forward loss");
  check_row_output(nll, n, logits, "cross_entropy_forward nll");
  check_row_output(lse, n, logits, "cross_entropy_forward lse");
  ROTOR_DISPATCH_CUDA(
      logits, cross_entropy_forward(logits, targets, smoothing, ignore_index, loss, nll, lse));
  if (detail::F32Compute::needed({&logits})) {  // 16-bit logits, f32 loss, nll and lse
    cross_entropy_forward(detail::F32Compute().input(logits), targets, smoothing, ignore_index,
                          loss, nll, lse);
    return;
  }
  const float* px = logits.data<float>();       // [N, V]
  const int32_t* pt = targets.data<int32_t>();  // [N]
  float* pl = loss.data<float>();               // [N]
  float* pn = nll.data<float>();                // [N]
  float* ps = lse.data<float>();                // [N]
  const Smoothing q(smoothing, vocab);
  for (int64_t i = 0; i < n; ++i)
    if (pt[i] != ignore_index) checked_target(pt, i, vocab, "cross_entropy_forward");
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = px + i * vocab;
    const float mx = row_max(row, vocab);
    double s = 0.0, sum_x = 0.0;
    row_sums(row, vocab, mx, s, sum_x);
    const double l = static_cast<double>(mx) + std::log(s);
    ps[i] = static_cast<float>(l);
    if (pt[i] == ignore_index) {
      pl[i] = 0.0f;
      pn[i] = 0.0f;
      continue;
    }
    // -sum_j q_j logp_j with logp_j = x_j - lse and sum_j q_j = 1.
    const double nll_i = l - row[pt[i]];
    const double rest = (vocab * l - sum_x) - nll_i;  // -sum_{j != t} logp_j
    pn[i] = static_cast<float>(nll_i);
    pl[i] = static_cast<float>(q.on * nll_i + q.off * rest);
  }
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            float smoothing, int ignore_index, float loss_scale, Tensor& dlogits) {
  const int64_t vocab = check_ce(logits, targets, smoothing, "cross_entropy_backward");
  const int64_t n = logits.size(0);
  check_row_output(lse, n, logits, "cross_entropy_backward lse");
  check_shape(dlogits, logits.shape(), "cross_entropy_backward dlogits");
  if (dlogits.dtype() != logits.dtype())
    ROTOR_FAIL("cross_entropy_backward: dlogits dtype must match logits");
  check_same_device(dlogits, logits, "cross_entropy_backward");
  ROTOR_DISPATCH_CUDA(logits, cross_entropy_backward(logits, targets, lse, smoothing, ignore_index,
                                                     loss_scale, dlogits));
  if (detail::F32Compute::needed({&logits})) {
    detail::F32Compute f;
    Tensor d32 = f.output(dlogits);
    cross_entropy_backward(f.input(logits), targets, lse, smoothing, ignore_index, loss_scale, d32);
    f.commit();
    return;
  }
  const float* px = logits.data<float>();       // [N, V]
  const int32_t* pt = targets.data<int32_t>();  // [N]
  const float* ps = lse.data<float>();          // [N]
  float* pd = dlogits.data<float>();            // [N, V] (may alias logits)
  const Smoothing q(smoothing, vocab);
  for (int64_t i = 0; i < n; ++i)
    if (pt[i] != ignore_index) checked_target(pt, i, vocab, "cross_entropy_backward");
  const float on = static_cast<float>(q.on), off = static_cast<float>(q.off);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = px + i * vocab;
    float* drow = pd + i * vocab;
    const int32_t t = pt[i];
    if (t == ignore_index) {
      for (int64_t j = 0; j < vocab; ++j) drow[j] = 0.0f;
      continue;
    }
    const float pt_i = detail::exp_f32(row[t] - ps[i]);  // before drow, which may alias row
    softmax_minus(row, vocab, ps[i], off, loss_scale, drow);
    drow[t] = loss_scale * (pt_i - on);
  }
}

void top1_hits(const Tensor& logits, const Tensor& targets, int ignore_index, Tensor& hits) {
  const int64_t vocab = check_ce(logits, targets, 0.0f, "top1_hits");
  const int64_t n = logits.size(0);
  if (hits.dtype() != DType::I32 || hits.numel() != n)
    ROTOR_FAIL("top1_hits: hits must be i32 [{}], got {}", n, hits.str());
  check_same_device(hits, logits, "top1_hits");
  ROTOR_DISPATCH_CUDA(logits, top1_hits(logits, targets, ignore_index, hits));
  if (detail::F32Compute::needed({&logits})) {
    top1_hits(detail::F32Compute().input(logits), targets, ignore_index, hits);
    return;
  }
  const float* px = logits.data<float>();       // [N, V]
  const int32_t* pt = targets.data<int32_t>();  // [N]
  int32_t* ph = hits.data<int32_t>();           // [N]
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = px + i * vocab;
    int64_t at = vocab;  // the first index of the largest (NaN never is)
    float mx = -INFINITY;
    for (int64_t j = 0; j < vocab; ++j)
      if (row[j] > mx || (at == vocab && row[j] == mx)) {
        mx = row[j];
        at = j;
      }
    ph[i] = (pt[i] != ignore_index && at == pt[i]) ? 1 : 0;
  }
}

int64_t count_top1_hits(const Tensor& logits, const Tensor& targets, int ignore_index) {
  Tensor hits = Tensor::empty({logits.dim() == 2 ? logits.size(0) : 0}, DType::I32,
                              logits.device());  // i32 [N]
  top1_hits(logits, targets, ignore_index, hits);
  int64_t n = 0;
  for (int32_t h : hits.to_ints()) n += h;
  return n;
}

}  // namespace rotor::ops
