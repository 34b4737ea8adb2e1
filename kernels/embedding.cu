// Embedding kernels. The backward sorts (id, position) pairs with CUB's
// stable radix sort so that every table row is owned by one block and its
// gradient rows are added in position order, as on the CPU.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/common.cuh"
#include "kernels/embedding.cuh"

namespace rotor::kernels {
namespace {

template <class T>
__global__ void embedding_fwd_kernel(const int32_t* ids, int64_t n, const T* table, int64_t vocab,
                                     int64_t d, float scale, T* out) {
  const int64_t total = n * d;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / d, j = e - i * d;
    const int32_t id = ids[i];
    out[e] = (id >= 0 && id < vocab) ? from_f32<T>(to_f32(table[id * d + j]) * scale)
                                     : from_f32<T>(0.0f);
  }
}

// key = id, or `vocab` (sorted last, skipped) for the pad id and bad ids.
__global__ void make_keys_kernel(const int32_t* ids, int64_t n, int64_t vocab, int pad_id,
                                 uint32_t* keys, int32_t* positions) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int32_t id = ids[i];
    const bool skip = id < 0 || id >= vocab || (pad_id >= 0 && id == pad_id);
    keys[i] = skip ? static_cast<uint32_t>(vocab) : static_cast<uint32_t>(id);
    positions[i] = static_cast<int32_t>(i);
  }
}

// dout of type TO, the table gradient of type T (f32 under mixed precision).
template <class TO, class T>
__global__ void embedding_bwd_kernel(const uint32_t* keys, const int32_t* positions, int64_t n,
                                     const TO* dout, float scale, T* dtable, int64_t vocab,
                                     int64_t d) {
  for (int64_t s = blockIdx.x; s < n; s += gridDim.x) {
    const uint32_t key = keys[s];
    if (key >= vocab || (s > 0 && keys[s - 1] == key)) continue;  // not a segment start
    T* row = dtable + static_cast<int64_t>(key) * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float acc = to_f32(row[j]);
      for (int64_t e = s; e < n && keys[e] == key; ++e)
        acc += to_f32(dout[static_cast<int64_t>(positions[e]) * d + j]) * scale;
      row[j] = from_f32<T>(acc);
    }
  }
}

int key_bits(int64_t vocab) {
  int bits = 1;
  while (bits < 32 && (int64_t(1) << bits) <= vocab) ++bits;  // keys go up to vocab
  return bits;
}

size_t align_up(size_t x) {
  return (x + 255) & ~size_t(255);
}

struct Layout {
  size_t keys_in, keys_out, pos_in, pos_out, temp, temp_bytes, total;
};

Layout layout(int64_t n, int64_t vocab) {
  size_t temp_bytes = 0;
  cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(n), 0,
      key_bits(vocab));
  Layout l{};
  const size_t words = align_up(static_cast<size_t>(n) * 4);
  l.keys_in = 0;
  l.keys_out = words;
  l.pos_in = 2 * words;
  l.pos_out = 3 * words;
  l.temp = 4 * words;
  l.temp_bytes = temp_bytes;
  l.total = 4 * words + align_up(temp_bytes);
  return l;
}

}  // namespace

cudaError_t embedding_forward(const int32_t* ids, int64_t n, const void* table, DType dt,
                              int64_t vocab, int64_t d, float scale, void* out,
                              cudaStream_t stream) {
  if (n <= 0 || d <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      embedding_fwd_kernel<T><<<grid_for(n * d), kThreads, 0, stream>>>(
          ids, n, static_cast<const T*>(table), vocab, d, scale, static_cast<T*>(out)));
  return cudaGetLastError();
}

size_t embedding_backward_workspace(int64_t n, int64_t vocab) {
  if (n <= 0) return 0;
  return layout(n, vocab).total;
}

cudaError_t embedding_backward(const int32_t* ids, int64_t n, const void* dout, DType dout_dt,
                               float scale, void* dtable, DType dt, int64_t vocab, int64_t d,
                               int pad_id, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
  if (n <= 0 || d <= 0 || vocab <= 0) return cudaSuccess;
  if (n > INT32_MAX || vocab >= INT32_MAX) return cudaErrorInvalidValue;
  const Layout l = layout(n, vocab);
  if (workspace_bytes < l.total) return cudaErrorInvalidValue;
  char* ws = static_cast<char*>(workspace);
  uint32_t* keys_in = reinterpret_cast<uint32_t*>(ws + l.keys_in);
  uint32_t* keys_out = reinterpret_cast<uint32_t*>(ws + l.keys_out);
  int32_t* pos_in = reinterpret_cast<int32_t*>(ws + l.pos_in);
  int32_t* pos_out = reinterpret_cast<int32_t*>(ws + l.pos_out);
  make_keys_kernel<<<grid_for(n), kThreads, 0, stream>>>(ids, n, vocab, pad_id, keys_in, pos_in);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  size_t temp_bytes = l.temp_bytes;
  e = cub::DeviceRadixSort::SortPairs(ws + l.temp, temp_bytes, keys_in, keys_out, pos_in, pos_out,
                                      static_cast<int>(n), 0, key_bits(vocab), stream);
  if (e != cudaSuccess) return e;
  const unsigned blocks = static_cast<unsigned>(n < (1 << 30) ? n : (1 << 30));
  ROTOR_FLOAT_SWITCH(
      dt, T,
      ROTOR_FLOAT_SWITCH(dout_dt, TO,
                         embedding_bwd_kernel<TO, T><<<blocks, row_threads(d, 256), 0, stream>>>(
                             keys_out, pos_out, n, static_cast<const TO*>(dout), scale,
                             static_cast<T*>(dtable), vocab, d)));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
