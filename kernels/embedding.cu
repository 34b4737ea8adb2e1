// Embedding kernels. The forward gathers rows with 16-byte vectors. The
// backward is deterministic without atomics and takes the same time whatever
// the distribution of ids:
//  - tables of at most kSmallVocab rows (BERT's 2-row token-type table) are a
//    column sum: blocks of rows accumulate one partial sum per table row and
//    column in registers, and a finish kernel adds the partials in block order;
//  - larger tables sort (id, position) pairs with CUB's stable radix sort and
//    cut the sorted list into chunks of kChunk entries, one block each. A
//    segment of one id inside a chunk is added to its table row at once; a
//    segment that crosses chunk boundaries (a frequent id) leaves one partial
//    sum per chunk, which a fix-up kernel adds in chunk order. No id is summed
//    by a single block however frequent it is.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/common.cuh"
#include "kernels/embedding.cuh"
#include "kernels/vec.cuh"

namespace rotor::kernels {
namespace {

constexpr int kSmallVocab = 8;   // column-sum path up to this many table rows
constexpr int kSliceRows = 128;  // rows of dout per block of the column sum
constexpr int kChunk = 64;       // sorted entries per block of the segmented sum
constexpr int kRowThreads = 128;

// ---------------------------------------------------------------- forward

// One thread per VEC columns of one output row (VEC = 16-byte vectors, or 1).
template <class T, int VEC>
__global__ void embedding_fwd_kernel(const int32_t* __restrict__ ids, int64_t n,
                                     const T* __restrict__ table, int64_t vocab, int64_t d,
                                     float scale, T* __restrict__ out) {
  const int64_t per_row = d / VEC, total = n * per_row;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / per_row, j = (e - i * per_row) * VEC;
    const int32_t id = ids[i];
    const bool ok = id >= 0 && id < vocab;
    if constexpr (VEC > 1) {
      float v[VEC];
      if (ok) {
        load_vec(table + id * d + j, v);
#pragma unroll
        for (int c = 0; c < VEC; ++c) v[c] *= scale;
      } else {
#pragma unroll
        for (int c = 0; c < VEC; ++c) v[c] = 0.0f;
      }
      store_vec(out + i * d + j, v);
    } else {
      out[i * d + j] = ok ? from_f32<T>(to_f32(table[id * d + j]) * scale) : from_f32<T>(0.0f);
    }
  }
}

// ------------------------------------------------------- small tables: column sum

// Loads VEC columns of row r of dout into v (fp32).
template <class TO, int VEC>
__device__ __forceinline__ void load_cols(const TO* __restrict__ dout, int64_t r, int64_t d,
                                          int64_t j, float (&v)[VEC]) {
  if constexpr (VEC > 1) {
    load_vec(dout + r * d + j, v);
  } else {
    v[0] = to_f32(dout[r * d + j]);
  }
}

// grid (column tiles, row slices); partial [slices, vocab, d] f32.
template <class TO, int VEC>
__global__ void small_vocab_partial_kernel(const int32_t* __restrict__ ids, int64_t n,
                                           const TO* __restrict__ dout, int vocab, int64_t d,
                                           int pad_id, float* __restrict__ partial) {
  const int64_t j = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * VEC;
  if (j >= d) return;
  float acc[kSmallVocab][VEC];
#pragma unroll
  for (int v = 0; v < kSmallVocab; ++v)
#pragma unroll
    for (int c = 0; c < VEC; ++c) acc[v][c] = 0.0f;
  const int64_t r0 = blockIdx.y * int64_t(kSliceRows);
  const int64_t r1 = min(n, r0 + kSliceRows);
  // Loads first, the id test after: the loads of several rows are in flight
  // at once. acc is indexed by compile-time constants only (registers).
#pragma unroll 4
  for (int64_t r = r0; r < r1; ++r) {
    const int32_t id = ids[r];
    float x[VEC];
    load_cols<TO, VEC>(dout, r, d, j, x);
    const int row = (id < 0 || id >= vocab || id == pad_id) ? -1 : id;
#pragma unroll
    for (int v = 0; v < kSmallVocab; ++v)
      if (v == row)
#pragma unroll
        for (int c = 0; c < VEC; ++c) acc[v][c] += x[c];
  }
  float* out = partial + blockIdx.y * int64_t(vocab) * d;
#pragma unroll
  for (int v = 0; v < kSmallVocab; ++v)
    if (v < vocab)
#pragma unroll
      for (int c = 0; c < VEC; ++c) out[v * d + j + c] = acc[v][c];
}

// dtable[v, j] += scale * sum over slices (in slice order) of partial[s, v, j].
template <class T>
__global__ void small_vocab_finish_kernel(const float* __restrict__ partial, int slices, int vocab,
                                          int64_t d, float scale, T* __restrict__ dtable) {
  const int64_t total = int64_t(vocab) * d;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int k = 0; k < slices; ++k) s += partial[k * total + e];
    dtable[e] = from_f32<T>(to_f32(dtable[e]) + s * scale);
  }
}

// ------------------------------------------------- large tables: segmented sum

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

// row[j .. j + VEC) += acc: in 16-byte vectors of T when VEC holds whole ones
// (the caller has checked the alignment), else element by element.
template <class T, int VEC>
__device__ __forceinline__ void add_to_row(T* __restrict__ row, int64_t j,
                                           const float (&acc)[VEC]) {
  constexpr int M = Vec<T>::N;
  if constexpr (VEC % M == 0) {
#pragma unroll
    for (int b = 0; b < VEC; b += M) {
      float cur[M];
      load_vec(row + j + b, cur);
#pragma unroll
      for (int c = 0; c < M; ++c) cur[c] += acc[b + c];
      store_vec(row + j + b, cur);
    }
  } else {
#pragma unroll
    for (int c = 0; c < VEC; ++c) row[j + c] = from_f32<T>(to_f32(row[j + c]) + acc[c]);
  }
}

// One block per chunk of kChunk sorted entries, each thread VEC columns.
// partial [chunks, 2, d]: [c][0] the chunk's part of a segment that began in
// an earlier chunk, [c][1] its part of a segment that began here and goes on.
template <class TO, class T, int VEC>
__global__ void segment_sum_kernel(const uint32_t* __restrict__ keys,
                                   const int32_t* __restrict__ positions, int64_t n,
                                   const TO* __restrict__ dout, float scale, T* __restrict__ dtable,
                                   uint32_t vocab, int64_t d, float* __restrict__ partial) {
  const int64_t c = blockIdx.x;
  const int64_t e0 = c * kChunk, e1 = min(n, e0 + kChunk);
  for (int64_t j = threadIdx.x * int64_t(VEC); j < d; j += int64_t(blockDim.x) * VEC) {
    float acc[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
    int64_t seg_start = e0;
    for (int64_t e = e0; e < e1; ++e) {
      const uint32_t key = keys[e];
      if (key < vocab) {
        float x[VEC];
        load_cols<TO, VEC>(dout, positions[e], d, j, x);
#pragma unroll
        for (int k = 0; k < VEC; ++k) acc[k] += x[k] * scale;
      }
      const bool last_of_segment = e + 1 == e1 || keys[e + 1] != key;
      if (!last_of_segment) continue;
      if (key < vocab) {
        const bool from_before = seg_start == e0 && e0 > 0 && keys[e0 - 1] == key;
        const bool goes_on = e + 1 == e1 && e1 < n && keys[e1] == key;
        if (from_before) {
#pragma unroll
          for (int k = 0; k < VEC; ++k) partial[(c * 2 + 0) * d + j + k] = acc[k];
        } else if (goes_on) {
#pragma unroll
          for (int k = 0; k < VEC; ++k) partial[(c * 2 + 1) * d + j + k] = acc[k];
        } else {
          add_to_row<T, VEC>(dtable + static_cast<int64_t>(key) * d, j, acc);
        }
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
      seg_start = e + 1;
    }
  }
}

// One block per chunk: acts when the chunk's last segment began in it and
// goes on into the next chunks; sums that segment's partials in chunk order
// and adds them to its table row.
template <class T>
__global__ void segment_fixup_kernel(const uint32_t* __restrict__ keys, int64_t n,
                                     const float* __restrict__ partial, T* __restrict__ dtable,
                                     uint32_t vocab, int64_t d) {
  const int64_t c = blockIdx.x;
  const int64_t e0 = c * kChunk, e1 = min(n, e0 + kChunk);
  if (e1 >= n) return;
  const uint32_t key = keys[e1 - 1];
  if (key >= vocab || keys[e1] != key) return;  // the last segment ends in this chunk
  // Did it begin here? Not when the whole chunk continues a segment from before.
  if (keys[e0] == key && e0 > 0 && keys[e0 - 1] == key) return;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float s = partial[(c * 2 + 1) * d + j];
    for (int64_t k = c + 1; k * kChunk < n; ++k) {
      s += partial[(k * 2 + 0) * d + j];
      const int64_t k1 = min(n, (k + 1) * int64_t(kChunk));
      if (k1 >= n || keys[k1 - 1] != key || keys[k1] != key) break;  // ends in chunk k
    }
    T* row = dtable + static_cast<int64_t>(key) * d;
    row[j] = from_f32<T>(to_f32(row[j]) + s);
  }
}

// ----------------------------------------------------------------- workspace

int key_bits(int64_t vocab) {
  int bits = 1;
  while (bits < 32 && (int64_t(1) << bits) <= vocab) ++bits;  // keys go up to vocab
  return bits;
}

size_t align_up(size_t x) {
  return (x + 255) & ~size_t(255);
}

struct Layout {
  bool small = false;
  int64_t blocks = 0;  // slices (small) or chunks
  size_t keys_in = 0, keys_out = 0, pos_in = 0, pos_out = 0, temp = 0, temp_bytes = 0;
  size_t partial = 0, total = 0;
};

Layout layout(int64_t n, int64_t vocab, int64_t d) {
  Layout l{};
  l.small = vocab <= kSmallVocab;
  if (l.small) {
    l.blocks = (n + kSliceRows - 1) / kSliceRows;
    l.partial = 0;
    l.total = align_up(static_cast<size_t>(l.blocks * vocab * d) * sizeof(float));
    return l;
  }
  size_t temp_bytes = 0;
  cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(n), 0,
      key_bits(vocab));
  const size_t words = align_up(static_cast<size_t>(n) * 4);
  l.blocks = (n + kChunk - 1) / kChunk;
  l.keys_in = 0;
  l.keys_out = words;
  l.pos_in = 2 * words;
  l.pos_out = 3 * words;
  l.temp = 4 * words;
  l.temp_bytes = temp_bytes;
  l.partial = l.temp + align_up(temp_bytes);
  l.total = l.partial + align_up(static_cast<size_t>(l.blocks * 2 * d) * sizeof(float));
  return l;
}

template <class TO, class T>
cudaError_t backward_typed(const int32_t* ids, int64_t n, const TO* dout, float scale, T* dtable,
                           int64_t vocab, int64_t d, int pad_id, char* ws, const Layout& l,
                           cudaStream_t stream) {
  // 16-byte vectors of dout where its rows allow (and of dtable's rows when
  // they are as wide); otherwise one column per thread.
  constexpr int N = Vec<TO>::N;
  const bool vec = whole_vectors(d, sizeof(TO)) && aligned16(dout) &&
                   (N % Vec<T>::N != 0 || (aligned16(dtable) && whole_vectors(d, sizeof(T))));
  if (l.small) {
    float* partial = reinterpret_cast<float*>(ws);
    const int v = static_cast<int>(vocab);
    if (vec) {
      const dim3 grid(static_cast<unsigned>((d / N + kRowThreads - 1) / kRowThreads),
                      static_cast<unsigned>(l.blocks));
      small_vocab_partial_kernel<TO, N>
          <<<grid, kRowThreads, 0, stream>>>(ids, n, dout, v, d, pad_id, partial);
    } else {
      const dim3 grid(static_cast<unsigned>((d + kRowThreads - 1) / kRowThreads),
                      static_cast<unsigned>(l.blocks));
      small_vocab_partial_kernel<TO, 1>
          <<<grid, kRowThreads, 0, stream>>>(ids, n, dout, v, d, pad_id, partial);
    }
    small_vocab_finish_kernel<T><<<grid_for(vocab * d), kThreads, 0, stream>>>(
        partial, static_cast<int>(l.blocks), v, d, scale, dtable);
    return cudaGetLastError();
  }
  uint32_t* keys_in = reinterpret_cast<uint32_t*>(ws + l.keys_in);
  uint32_t* keys_out = reinterpret_cast<uint32_t*>(ws + l.keys_out);
  int32_t* pos_in = reinterpret_cast<int32_t*>(ws + l.pos_in);
  int32_t* pos_out = reinterpret_cast<int32_t*>(ws + l.pos_out);
  float* partial = reinterpret_cast<float*>(ws + l.partial);
  make_keys_kernel<<<grid_for(n), kThreads, 0, stream>>>(ids, n, vocab, pad_id, keys_in, pos_in);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  size_t temp_bytes = l.temp_bytes;
  e = cub::DeviceRadixSort::SortPairs(ws + l.temp, temp_bytes, keys_in, keys_out, pos_in, pos_out,
                                      static_cast<int>(n), 0, key_bits(vocab), stream);
  if (e != cudaSuccess) return e;
  const unsigned chunks = static_cast<unsigned>(l.blocks);
  const uint32_t V = static_cast<uint32_t>(vocab);
  if (vec)
    segment_sum_kernel<TO, T, N><<<chunks, kRowThreads, 0, stream>>>(keys_out, pos_out, n, dout,
                                                                     scale, dtable, V, d, partial);
  else
    segment_sum_kernel<TO, T, 1><<<chunks, kRowThreads, 0, stream>>>(keys_out, pos_out, n, dout,
                                                                     scale, dtable, V, d, partial);
  segment_fixup_kernel<T><<<chunks, kRowThreads, 0, stream>>>(keys_out, n, partial, dtable, V, d);
  return cudaGetLastError();
}

}  // namespace

cudaError_t embedding_forward(const int32_t* ids, int64_t n, const void* table, DType dt,
                              int64_t vocab, int64_t d, float scale, void* out,
                              cudaStream_t stream) {
  if (n <= 0 || d <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T, constexpr int N = Vec<T>::N;
      if (whole_vectors(d, sizeof(T)) && aligned16(table) && aligned16(out))
          embedding_fwd_kernel<T, N><<<waves_grid(n * d / N, kThreads), kThreads, 0, stream>>>(
              ids, n, static_cast<const T*>(table), vocab, d, scale, static_cast<T*>(out));
      else embedding_fwd_kernel<T, 1><<<waves_grid(n * d, kThreads), kThreads, 0, stream>>>(
          ids, n, static_cast<const T*>(table), vocab, d, scale, static_cast<T*>(out)));
  return cudaGetLastError();
}

size_t embedding_backward_workspace(int64_t n, int64_t vocab, int64_t d) {
  if (n <= 0 || d <= 0 || vocab <= 0) return 0;
  return layout(n, vocab, d).total;
}

cudaError_t embedding_backward(const int32_t* ids, int64_t n, const void* dout, DType dout_dt,
                               float scale, void* dtable, DType dt, int64_t vocab, int64_t d,
                               int pad_id, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
  if (n <= 0 || d <= 0 || vocab <= 0) return cudaSuccess;
  if (n > INT32_MAX || vocab >= INT32_MAX) return cudaErrorInvalidValue;
  const Layout l = layout(n, vocab, d);
  if (workspace_bytes < l.total) return cudaErrorInvalidValue;
  char* ws = static_cast<char*>(workspace);
  ROTOR_FLOAT_SWITCH(
      dt, T,
      ROTOR_FLOAT_SWITCH(
          dout_dt, TO,
          return backward_typed<TO, T>(ids, n, static_cast<const TO*>(dout), scale,
                                       static_cast<T*>(dtable), vocab, d, pad_id, ws, l, stream)));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
