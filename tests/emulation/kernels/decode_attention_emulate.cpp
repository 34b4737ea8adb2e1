// kernels/decode_attention.cu (incremental decoding) run on the CPU
// (emulate_cu.py, kernel_emulation.h) and held to its CPU twins in
// src/ops/decode.h:
//   - decode_attention: f32, f16 and bf16 caches; head dims 8, 40 (lanes
//     past D idle), 64, 96, 128 and 256 (8 columns a lane); lengths 1 (one
//     warp works), 3, 6 (some warps see no key: their empty partials must
//     drop out of the merge) and up to the cache's Tmax; ALiBi (one slope a
//     head) and T5's gathered table. The kernel sums in fp32 with an online
//     softmax, the CPU in double: out within 2e-6 of the largest |out| for
//     f32; 16-bit outputs within one rounding of the type (f16 1e-3, bf16
//     8e-3 relative).
//   - the launcher's refusals: D > 256, length > Tmax, ALiBi heads that do
//     not divide BH, ALiBi with T5 together (cudaErrorInvalidValue).
//   - kv_cache_write (bitwise) and index_select_rows (bitwise; rows of 4k
//     bytes take the word kernel, other rows the byte kernel).
#include "core/dtype.h"
#include "ops/decode.h"
//
#include "emulate_common.h"
#include "emulated/decode_attention.inc"

namespace {

using rotor::DType;
using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

double tolerance(DType dt) {
  return dt == DType::F32 ? 2e-6 : dt == DType::F16 ? 1e-3 : 8e-3;
}

enum class Bias { None, Alibi, T5 };

void attention_case(DType dt, int64_t B, int64_t H, int64_t Tmax, int64_t D, int64_t length,
                    Bias bias) {
  char what[96];
  std::snprintf(what, sizeof what, "decode %s B%lld H%lld D%lld len %lld/%lld%s",
                rotor::dtype_name(dt), static_cast<long long>(B), static_cast<long long>(H),
                static_cast<long long>(D), static_cast<long long>(length),
                static_cast<long long>(Tmax),
                bias == Bias::Alibi ? " alibi"
                : bias == Bias::T5  ? " t5"
                                    : "");
  const int64_t BH = B * H;
  // Scores of a few units, so that the softmax is neither flat nor one-hot.
  const Tensor q =
      Tensor::from_floats(randoms(static_cast<size_t>(BH * D), 21, -0.6f, 0.6f), {B, H, 1, D}, dt);
  const Tensor k =
      Tensor::from_floats(randoms(static_cast<size_t>(BH * Tmax * D), 22), {B, H, Tmax, D}, dt);
  const Tensor v =
      Tensor::from_floats(randoms(static_cast<size_t>(BH * Tmax * D), 23), {B, H, Tmax, D}, dt);
  const int64_t rel_max = 6;
  Tensor rel;
  if (bias == Bias::T5)
    rel = Tensor::from_floats(randoms(static_cast<size_t>((2 * rel_max + 1) * H), 24, -2.0f, 2.0f),
                              {2 * rel_max + 1, H});
  Tensor ref = Tensor::zeros({B, H, 1, D}, dt);
  rotor::ops::decode_attention(q, k, v, length, ref, bias == Bias::Alibi, rel, rel_max);
  Tensor out = Tensor::full({B, H, 1, D}, NAN, dt);
  rotor::kernels::DecodeBias db;
  db.alibi_heads = bias == Bias::Alibi ? H : 0;
  if (bias == Bias::T5) {
    db.rel = rel.data<float>();
    db.rel_max = rel_max;
    db.heads = H;
  }
  check_status(what, ke::decode_attention_emulated(q.raw(), k.raw(), v.raw(), out.raw(), BH, Tmax,
                                                   D, length, dt, nullptr, db));
  check(what, "out", rel_err(out.to_floats(), ref.to_floats()), tolerance(dt));
}

void refusal_cases() {
  std::vector<float> buf(64 * 300, 0.0f);
  const void* p = buf.data();
  void* o = buf.data();
  auto refused = [&](const char* what, int64_t BH, int64_t Tmax, int64_t D, int64_t length,
                     rotor::kernels::DecodeBias b) {
    const int before = emu::launches();
    const cudaError_t e =
        ke::decode_attention_emulated(p, p, p, o, BH, Tmax, D, length, DType::F32, nullptr, b);
    check_true(what, "refused", e == cudaErrorInvalidValue && emu::launches() == before);
  };
  refused("decode refuses D 257", 1, 4, 257, 2, {});
  refused("decode refuses length past Tmax", 1, 4, 8, 5, {});
  rotor::kernels::DecodeBias alibi;
  alibi.alibi_heads = 3;
  refused("decode refuses ALiBi heads not dividing BH", 4, 4, 8, 2, alibi);
  const float table[3] = {0, 0, 0};
  rotor::kernels::DecodeBias both = alibi;
  both.alibi_heads = 1;
  both.rel = table;
  both.rel_max = 1;
  refused("decode refuses ALiBi with T5", 4, 4, 8, 2, both);
}

void cache_write_case(DType dt, int64_t B, int64_t H, int64_t Tmax, int64_t D, int64_t position) {
  char what[96];
  std::snprintf(what, sizeof what, "kv_cache_write %s BH%lld D%lld at %lld", rotor::dtype_name(dt),
                static_cast<long long>(B * H), static_cast<long long>(D),
                static_cast<long long>(position));
  const Tensor src =
      Tensor::from_floats(randoms(static_cast<size_t>(B * H * D), 31), {B, H, 1, D}, dt);
  Tensor ref =
      Tensor::from_floats(randoms(static_cast<size_t>(B * H * Tmax * D), 32), {B, H, Tmax, D}, dt);
  Tensor cache = Tensor::from_floats(ref.to_floats(), {B, H, Tmax, D}, dt);
  rotor::ops::kv_cache_write(src, ref, position);
  check_status(what, ke::kv_cache_write_emulated(src.raw(), cache.raw(), B * H, Tmax, D, position,
                                                 dt, nullptr));
  check_bits(what, "cache", cache.to_floats(), ref.to_floats());
}

void index_select_case(DType dt, int64_t N, int64_t cols, std::vector<int32_t> index) {
  char what[96];
  std::snprintf(what, sizeof what, "index_select_rows %s N%lld cols %lld M%zu",
                rotor::dtype_name(dt), static_cast<long long>(N), static_cast<long long>(cols),
                index.size());
  const Tensor src = Tensor::from_floats(randoms(static_cast<size_t>(N * cols), 41), {N, cols}, dt);
  const int64_t M = static_cast<int64_t>(index.size());
  const Tensor idx = Tensor::from_ints(index, {M});
  Tensor ref = Tensor::zeros({M, cols}, dt);
  rotor::ops::index_select(src, idx, ref);
  Tensor dst = Tensor::full({M, cols}, NAN, dt);
  check_status(what,
               ke::index_select_rows_emulated(src.raw(), idx.data<int32_t>(), dst.raw(), M,
                                              src.nbytes() / static_cast<size_t>(N), nullptr));
  check_bits(what, "rows", dst.to_floats(), ref.to_floats());
}

void run() {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    attention_case(dt, 2, 2, 9, 64, 9, Bias::None);
    attention_case(dt, 1, 3, 12, 40, 7, Bias::Alibi);
    attention_case(dt, 2, 2, 16, 128, 13, Bias::T5);
  }
  attention_case(DType::F32, 1, 2, 5, 8, 1, Bias::None);    // one key: three warps idle
  attention_case(DType::F32, 1, 2, 8, 96, 3, Bias::Alibi);  // a warp without keys
  attention_case(DType::F32, 2, 1, 8, 256, 6, Bias::None);  // 8 columns a lane
  attention_case(DType::F32, 1, 4, 40, 64, 40, Bias::T5);   // distances past rel_max
  attention_case(DType::BF16, 1, 1, 33, 256, 33, Bias::Alibi);
  refusal_cases();
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) cache_write_case(dt, 2, 3, 7, 24, 4);
  cache_write_case(DType::F16, 1, 1, 3, 5, 0);
  cache_write_case(DType::F32, 1, 2, 3, 5, 2);
  index_select_case(DType::F32, 5, 7, {4, 0, 0, 3});
  index_select_case(DType::F16, 6, 3, {5, 1, 2});  // 6-byte rows: the byte kernel
  index_select_case(DType::BF16, 4, 64, {3, 3, 1, 0, 2});
}

const Register reg("decode_attention", run);

}  // namespace
