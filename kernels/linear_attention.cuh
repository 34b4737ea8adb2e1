// Linear attention's CUDA kernels (kernels/linear_attention.cu, device code
// in kernels/linear_attention_device.cuh): their arguments and raw-pointer
// launchers, called by src/ops/linear_attention_cuda.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/rope.h"

namespace rotor::kernels::linattn {

constexpr int kChunk = 32;        // query rows per chunk of the causal kernels
constexpr int kRowThreads = 128;  // features kernels: threads per row
constexpr int kChunkThreads = 256;

enum Map : int { kElu1 = 0, kRelu = 1, kFavor = 2 };

// One side (queries or keys) of the feature kernels: x [BH, T, D] -> xs (x
// rotated before phi if asked, times scale) [BH, T, D], phi [BH, T, M], a =
// R phi [BH, T, M] (rotate_after). Rows t >= key_len[bh / H] (if given) get
// zero features.
struct FeatureArgs {
  const void* x = nullptr;
  DType dt = DType::F32;
  int64_t BH = 0, H = 1, T = 0, D = 0, M = 0;
  const float* W = nullptr;          // favor: [M, D]
  const int32_t* key_len = nullptr;  // optional [B]
  float scale = 1.0f;
  int map = kElu1;
  bool rotate_before = false, rotate_after = false;
  rope::Params rope{};  // resolved at the call's length
  int64_t pos0 = 0;
  const float* stab = nullptr;  // favor: [BH, T] constants; null: each row's own max
  bool only_max = false;        // favor: write rowmax only
  float* rowmax = nullptr;      // [BH, T] max_j w_j.xs (only_max)
  float* xs = nullptr;
  float* phi = nullptr;
  float* a = nullptr;
  // backward
  const float* dphi = nullptr;  // [BH, T, M] or null
  const float* da = nullptr;    // d(R phi) [BH, T, M] (rotate_after) or null
  const float* coef = nullptr;  // [BH, T] or null: dphi += coef[row] vec[bh]
  const float* vec = nullptr;   // [BH, M] or null (coef null: 1)
  void* dx = nullptr;           // [BH, T, D] in dt
};

// The causal kernels' arguments; pointers are of the whole tensors, f32
// unless said otherwise. aq == phq and bk == phk without rotation after phi.
struct ChunkArgs {
  int64_t H = 1, Tq = 0, Tk = 0, M = 0, Dv = 0;
  const int32_t* key_len = nullptr;
  const float *phq = nullptr, *aq = nullptr, *phk = nullptr, *bk = nullptr, *v = nullptr;
  const float* ck = nullptr;         // favor: [BH, Tk] prefix stabilizers; null: none
  float *S = nullptr, *z = nullptr;  // scratch [BH, M Dv], [BH, M]
  float eps = 1e-6f;
  void* out = nullptr;  // forward: [BH, Tq, Dv] in dt
  DType dt = DType::F32;
  float* den = nullptr;  // [BH, Tq]
  // backward: G [BH, Tq, Dv], dden [BH, Tq], scratch U, y like S, z; da,
  // dphq [BH, Tq, M] (may be one buffer), db, dphk [BH, Tk, M] (may be one),
  // dv [BH, Tk, Dv]: all written.
  const float *G = nullptr, *dden = nullptr;
  float *U = nullptr, *y = nullptr, *da = nullptr, *dphq = nullptr, *db = nullptr, *dphk = nullptr,
        *dv = nullptr;
};

// Grid: one block per row of f (BH T rows).
cudaError_t launch_features(const FeatureArgs& f, cudaStream_t stream);
cudaError_t launch_features_backward(const FeatureArgs& f, cudaStream_t stream);
// rowmax, stab [BH, T]; key_len optional [B] with H heads per batch row.
cudaError_t launch_key_stabilizers(const float* rowmax, const int32_t* key_len, int64_t H,
                                   int64_t BH, int64_t T, bool prefix, float* stab,
                                   cudaStream_t stream);
cudaError_t launch_grad_prep(const void* dout, const void* out, DType dt, const float* den,
                             float eps, int64_t rows, int64_t Dv, float* G, float* dden,
                             cudaStream_t stream);
cudaError_t launch_normalize(const float* num, const float* den, float eps, int64_t rows,
                             int64_t Dv, void* out, DType dt, cudaStream_t stream);
cudaError_t launch_chunk_forward(const ChunkArgs& a, int64_t BH, cudaStream_t stream);
cudaError_t launch_chunk_backward(const ChunkArgs& a, int64_t BH, cudaStream_t stream);

}  // namespace rotor::kernels::linattn
