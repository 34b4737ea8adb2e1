#include "ops/decode.h"

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "core/alibi.h"
#include "core/t5_bias.h"
#include "ops/cpu_f32.h"
#include "ops/dispatch.h"

namespace rotor::ops {

void kv_cache_write(const Tensor& src, Tensor& cache, int64_t position) {
  ROTOR_CHECK(src.dim() == 4 && cache.dim() == 4 && src.size(2) == 1, "kv_cache_write: {} into {}",
              src.str(), cache.str());
  const int64_t B = cache.size(0), H = cache.size(1), Tmax = cache.size(2), D = cache.size(3);
  check_shape(src, {B, H, 1, D}, "kv_cache_write");
  ROTOR_CHECK(position >= 0 && position < Tmax, "kv_cache_write: position {} of {}", position,
              Tmax);
  check_same_device(src, cache, "kv_cache_write");
  require_floating(src, "kv_cache_write");
  if (src.dtype() != cache.dtype())
    ROTOR_FAIL("kv_cache_write: {} into {}", src.str(), cache.str());
  ROTOR_DISPATCH_CUDA(src, kv_cache_write(src, cache, position));
  if (detail::F32Compute::needed({&src})) {
    detail::F32Compute f;
    Tensor cache32 = f.output(cache, true);
    kv_cache_write(f.input(src), cache32, position);
    f.commit();
    return;
  }
  const float* s = src.data<float>();
  float* c = cache.data<float>();
  for (int64_t bh = 0; bh < B * H; ++bh)
    std::memcpy(c + (bh * Tmax + position) * D, s + bh * D, static_cast<size_t>(D) * sizeof(float));
}

void decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t length,
                      Tensor& out, bool alibi, const Tensor& rel_bias, int64_t rel_max) {
  if (k_cache.dim() != 4)
    ROTOR_FAIL("decode_attention: k_cache must be [B, H, Tmax, D], got {}", k_cache.str());
  const int64_t B = k_cache.size(0), H = k_cache.size(1), Tmax = k_cache.size(2),
                D = k_cache.size(3);
  check_shape(q, {B, H, 1, D}, "decode_attention q");
  check_shape(v_cache, k_cache.shape(), "decode_attention v_cache");
  check_shape(out, {B, H, 1, D}, "decode_attention out");
  ROTOR_CHECK(length > 0 && length <= Tmax, "decode_attention: length {} of {}", length, Tmax);
  require_floating(q, "decode_attention");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&k_cache, &v_cache, &out}) {
    if (t->dtype() != q.dtype())
      ROTOR_FAIL("decode_attention: {} differs in dtype from q {}", t->str(), q.str());
    check_same_device(q, *t, "decode_attention");
  }
  if (rel_bias.defined()) {
    if (alibi) ROTOR_FAIL("decode_attention: ALiBi and T5's relative bias together");
    if (rel_bias.dtype() != DType::F32 || rel_bias.shape() != Shape{2 * rel_max + 1, H})
      ROTOR_FAIL("decode_attention: rel_bias must be f32 [{}, {}], got {}", 2 * rel_max + 1, H,
                 rel_bias.str());
    check_same_device(q, rel_bias, "decode_attention");
  }
  // kernels/decode_attention.cu keeps a query in registers: head dims up to 256.
  if (q.is_cuda() && D > 256)
    ROTOR_FAIL("decode_attention: head dim {} above 256 is not supported on CUDA", D);
  ROTOR_DISPATCH_CUDA(q,
                      decode_attention(q, k_cache, v_cache, length, out, alibi, rel_bias, rel_max));
  if (detail::F32Compute::needed({&q})) {
    detail::F32Compute f;
    Tensor out32 = f.output(out);
    decode_attention(f.input(q), f.input(k_cache), f.input(v_cache), length, out32, alibi, rel_bias,
                     rel_max);
    f.commit();
    return;
  }
  const float* qp = q.data<float>();
  const float* kp = k_cache.data<float>();
  const float* vp = v_cache.data<float>();
  float* op = out.data<float>();
  const float* rel = rel_bias.defined() ? rel_bias.data<float>() : nullptr;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    std::vector<double> w(static_cast<size_t>(length));
    const float* qr = qp + bh * D;
    const float slope = alibi ? static_cast<float>(alibi::slope(bh % H, H)) : 0.0f;
    double mx = -INFINITY;
    for (int64_t j = 0; j < length; ++j) {
      const float* kr = kp + (bh * Tmax + j) * D;
      double s = 0;
      for (int64_t i = 0; i < D; ++i) s += static_cast<double>(qr[i]) * kr[i];
      if (alibi) s += alibi::bias(slope, length - 1, j);
      if (rel) s += rel[t5::relative_row(j - (length - 1), rel_max) * H + bh % H];
      w[j] = s;
      mx = std::max(mx, s);
    }
    double z = 0;
    for (int64_t j = 0; j < length; ++j) z += (w[j] = std::exp(w[j] - mx));
    for (int64_t i = 0; i < D; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < length; ++j) acc += w[j] * vp[(bh * Tmax + j) * D + i];
      op[bh * D + i] = static_cast<float>(acc / z);
    }
  }
}

void index_select(const Tensor& src, const Tensor& index, Tensor& dst) {
  if (src.dim() < 1 || index.dim() != 1 || index.dtype() != DType::I32)
    ROTOR_FAIL("index_select: expected rows [N, ...] and an i32 index [M], got {} and {}",
               src.str(), index.str());
  Shape want = src.shape();  // [M, ...]
  want[0] = index.size(0);
  check_shape(dst, want, "index_select dst");
  if (dst.dtype() != src.dtype())
    ROTOR_FAIL("index_select: dst {} differs in dtype from src {}", dst.str(), src.str());
  check_same_device(src, dst, "index_select");
  // The index may live on the host even for device rows (beam search builds
  // it there); packed documents (nn::DocLayout) keep it beside the rows.
  // Read in place where it is on the host, and checked here.
  std::vector<int32_t> copied;
  const int32_t* rows = nullptr;
  if (index.is_cpu()) {
    rows = index.data<int32_t>();
  } else {
    copied = index.to_ints();
    rows = copied.data();
  }
  const int64_t M = index.size(0), N = src.size(0);
  for (int64_t i = 0; i < M; ++i)
    if (rows[i] < 0 || rows[i] >= N)
      ROTOR_FAIL("index_select: index {} outside [0, {})", rows[i], N);
  ROTOR_DISPATCH_CUDA(src, index_select(src, index, dst));
  const size_t row_bytes = N ? src.nbytes() / static_cast<size_t>(N) : 0;
  const char* s = static_cast<const char*>(src.raw());
  char* d = static_cast<char*>(dst.raw());
  // Rows in parallel where there are many (a batch's tokens), on the calling
  // thread where there are few (beam hypotheses).
#pragma omp parallel for schedule(static) if (M * static_cast <int64_t>(row_bytes) > (1 << 18))
  for (int64_t i = 0; i < M; ++i)
    std::memcpy(d + i * row_bytes, s + static_cast<int64_t>(rows[i]) * row_bytes, row_bytes);
}

}  // namespace rotor::ops
