// cuBLASLt GEMM for row-major tensors. cuBLASLt is column-major, and a
// row-major [r, c] matrix is the column-major [c, r] matrix of its transpose,
// so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: the operands swap
// and every layout keeps its storage. The bias of a row-major [m, n] output is
// then per column-major row (length n), which is what the BIAS epilogues add.
#include <cublasLt.h>

#include <array>
#include <map>
#include <mutex>

#include "kernels/gemm_cublaslt.cuh"

namespace rotor::kernels {
namespace {

constexpr int kMaxDevices = 64;

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::F16:
      return CUDA_R_16F;
    case DType::BF16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

std::mutex& lt_mutex() {
  static std::mutex m;
  return m;
}

// One cuBLASLt handle per device, created on first use and kept for the process.
cublasStatus_t handle_for(int device, cublasLtHandle_t* out) {
  static std::array<cublasLtHandle_t, kMaxDevices> handles{};
  if (device < 0 || device >= kMaxDevices) return CUBLAS_STATUS_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(lt_mutex());
  if (!handles[device]) {
    cublasStatus_t s = cublasLtCreate(&handles[device]);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
  }
  *out = handles[device];
  return CUBLAS_STATUS_SUCCESS;
}

// Heuristic results are cached by everything that shapes the descriptors.
using AlgoKey = std::array<int64_t, 22>;
struct AlgoEntry {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
};
std::map<AlgoKey, AlgoEntry>& algo_cache() {
  static std::map<AlgoKey, AlgoEntry> c;
  return c;
}

// The largest power of two (at most 256) dividing the address of every batch
// matrix: cuBLASLt's heuristic otherwise assumes 256-byte aligned pointers.
uint32_t alignment_of(const void* p, int64_t stride_elems, int64_t batch, size_t elsize) {
  uint64_t v = reinterpret_cast<uintptr_t>(p);
  if (batch > 1) v |= static_cast<uint64_t>(stride_elems) * elsize;
  uint32_t a = 256;
  while (a > 1 && (v & (a - 1)) != 0) a >>= 1;
  return a;
}

struct Desc {
  cublasLtMatmulDesc_t d = nullptr;
  ~Desc() {
    if (d) cublasLtMatmulDescDestroy(d);
  }
};
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  ~Layout() {
    if (l) cublasLtMatrixLayoutDestroy(l);
  }
};
struct Pref {
  cublasLtMatmulPreference_t p = nullptr;
  ~Pref() {
    if (p) cublasLtMatmulPreferenceDestroy(p);
  }
};

#define ROTOR_LT_TRY(call)                                                                  \
  do {                                                                                      \
    cublasStatus_t s_ = (call);                                                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) return GemmStatus{static_cast<int>(s_), false, #call}; \
  } while (0)

cublasStatus_t make_layout(Layout& out, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                           int64_t batch, int64_t stride) {
  cublasStatus_t s = cublasLtMatrixLayoutCreate(&out.l, type, static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(cols), ld);
  if (s != CUBLAS_STATUS_SUCCESS || batch <= 1) return s;
  int32_t count = static_cast<int32_t>(batch);
  s = cublasLtMatrixLayoutSetAttribute(out.l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                       sizeof(count));
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  return cublasLtMatrixLayoutSetAttribute(out.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                          &stride, sizeof(stride));
}

// `align_batch`: the batch whose matrix addresses set the alignment (the full
// batch also when a broadcast batch runs as single matmuls, so that every one
// of them gets the same algorithm).
GemmStatus run(const GemmArgs& g, int64_t align_batch, void* workspace, cudaStream_t stream) {
  int device = 0;
  cudaError_t ce = cudaGetDevice(&device);
  if (ce != cudaSuccess) return GemmStatus{static_cast<int>(ce), false, "cudaGetDevice"};
  cublasLtHandle_t handle = nullptr;
  ROTOR_LT_TRY(handle_for(device, &handle));

  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  const bool has_bias = g.bias != nullptr;
  switch (g.act) {
    case GemmEpilogue::None:
      epi = has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      break;
    case GemmEpilogue::ReLU:
      // RELU_AUX stores a bit mask, not the pre-activation: the caller falls back.
      if (g.aux) return GemmStatus{0, true, "ReLU with a pre-activation output"};
      epi = has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
      break;
    case GemmEpilogue::GELU:
      if (g.aux) {
        if (g.n % 8 != 0) return GemmStatus{0, true, "GELU_AUX needs n % 8 == 0"};
        epi = has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      } else {
        epi = has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      }
      break;
  }

  const cudaDataType_t ab = lt_type(g.ab_type), cd = lt_type(g.cd_type);
  const size_t ab_size = dtype_size(g.ab_type), cd_size = dtype_size(g.cd_type);
  const void* c_ptr = g.c ? g.c : g.d;

  // Column-major operands: first = B (col-major view B^T), second = A.
  const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t first_rows = g.trans_b ? g.k : g.n, first_cols = g.trans_b ? g.n : g.k;
  const int64_t second_rows = g.trans_a ? g.m : g.k, second_cols = g.trans_a ? g.k : g.m;

  Desc desc;
  ROTOR_LT_TRY(cublasLtMatmulDescCreate(&desc.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  ROTOR_LT_TRY(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                              sizeof(op_first)));
  ROTOR_LT_TRY(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                              sizeof(op_second)));
  ROTOR_LT_TRY(
      cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (has_bias) {
    ROTOR_LT_TRY(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                sizeof(g.bias)));
    int32_t bias_type = static_cast<int32_t>(cd);
    ROTOR_LT_TRY(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                &bias_type, sizeof(bias_type)));
  }
  int64_t aux_ld = g.n, aux_stride = g.stride_cd;
  if (g.aux) {
    ROTOR_LT_TRY(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                &g.aux, sizeof(g.aux)));
    ROTOR_LT_TRY(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                &aux_ld, sizeof(aux_ld)));
    if (g.batch > 1)
      ROTOR_LT_TRY(cublasLtMatmulDescSetAttribute(
          desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &aux_stride, sizeof(aux_stride)));
  }

  Layout la, lb, lc, ld;
  ROTOR_LT_TRY(make_layout(la, ab, first_rows, first_cols, first_rows, g.batch, g.stride_b));
  ROTOR_LT_TRY(make_layout(lb, ab, second_rows, second_cols, second_rows, g.batch, g.stride_a));
  ROTOR_LT_TRY(make_layout(lc, cd, g.n, g.m, g.n, g.batch, g.stride_cd));
  ROTOR_LT_TRY(make_layout(ld, cd, g.n, g.m, g.n, g.batch, g.stride_cd));

  const uint32_t align_first = alignment_of(g.b, g.stride_b, align_batch, ab_size);
  const uint32_t align_second = alignment_of(g.a, g.stride_a, align_batch, ab_size);
  const uint32_t align_c = alignment_of(c_ptr, g.stride_cd, align_batch, cd_size);
  const uint32_t align_d = alignment_of(g.d, g.stride_cd, align_batch, cd_size);

  AlgoKey key{
      device,
      static_cast<int64_t>(g.ab_type),
      static_cast<int64_t>(g.cd_type),
      g.trans_a,
      g.trans_b,
      g.m,
      g.n,
      g.k,
      g.batch,
      g.stride_a,
      g.stride_b,
      g.stride_cd,
      static_cast<int64_t>(epi),
      has_bias,
      g.aux != nullptr,
      align_first,
      align_second,
      align_c,
      align_d,
      g.aux ? static_cast<int64_t>(alignment_of(g.aux, g.stride_cd, align_batch, cd_size)) : 0,
      0,
      0};
  AlgoEntry entry;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(lt_mutex());
    auto it = algo_cache().find(key);
    if (it != algo_cache().end()) {
      entry = it->second;
      cached = true;
    }
  }
  if (!cached) {
    Pref pref;
    ROTOR_LT_TRY(cublasLtMatmulPreferenceCreate(&pref.p));
    uint64_t ws = kGemmWorkspaceBytes;
    ROTOR_LT_TRY(cublasLtMatmulPreferenceSetAttribute(
        pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    ROTOR_LT_TRY(cublasLtMatmulPreferenceSetAttribute(
        pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_first, sizeof(align_first)));
    ROTOR_LT_TRY(cublasLtMatmulPreferenceSetAttribute(
        pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_second, sizeof(align_second)));
    ROTOR_LT_TRY(cublasLtMatmulPreferenceSetAttribute(
        pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
    ROTOR_LT_TRY(cublasLtMatmulPreferenceSetAttribute(
        pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));
    if (g.cd_type != DType::F32) {
      // Split-K partial sums stay in f32. The in-place and output-type
      // reductions add them up in D's type: with a 16-bit D every partial sum
      // is rounded, an error of several units of rounding instead of one.
      const uint32_t reductions =
          CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      ROTOR_LT_TRY(cublasLtMatmulPreferenceSetAttribute(
          pref.p, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions, sizeof(reductions)));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle, desc.d, la.l, lb.l, lc.l, ld.l,
                                                      pref.p, 1, &result, &returned);
    entry.found = s == CUBLAS_STATUS_SUCCESS && returned > 0;
    if (entry.found) entry.algo = result.algo;
    if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED)
      return GemmStatus{static_cast<int>(s), false, "cublasLtMatmulAlgoGetHeuristic"};
    std::lock_guard<std::mutex> lock(lt_mutex());
    algo_cache()[key] = entry;
  }
  if (!entry.found) return GemmStatus{0, true, "no cuBLASLt algorithm for this epilogue/type"};

  const float alpha = g.alpha, beta = g.beta;
  cublasStatus_t s =
      cublasLtMatmul(handle, desc.d, &alpha, g.b, la.l, g.a, lb.l, &beta, c_ptr, lc.l, g.d, ld.l,
                     &entry.algo, workspace, kGemmWorkspaceBytes, stream);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) return GemmStatus{0, true, "cublasLtMatmul: not supported"};
  if (s != CUBLAS_STATUS_SUCCESS) return GemmStatus{static_cast<int>(s), false, "cublasLtMatmul"};
  return GemmStatus{};
}

}  // namespace

GemmStatus gemm_cublaslt(const GemmArgs& args, void* workspace, cudaStream_t stream) {
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return GemmStatus{};
  if (args.k <= 0) return GemmStatus{0, true, "k == 0"};
  if (args.batch > 1 && (args.stride_a == 0 || args.stride_b == 0)) {
    // A broadcast operand: one matmul per batch matrix (a zero batch stride
    // is not documented as supported by cuBLASLt).
    const size_t ab = dtype_size(args.ab_type), cd = dtype_size(args.cd_type);
    for (int64_t i = 0; i < args.batch; ++i) {
      GemmArgs one = args;
      one.batch = 1;
      one.a = static_cast<const char*>(args.a) + i * args.stride_a * ab;
      one.b = static_cast<const char*>(args.b) + i * args.stride_b * ab;
      if (args.c) one.c = static_cast<const char*>(args.c) + i * args.stride_cd * cd;
      one.d = static_cast<char*>(args.d) + i * args.stride_cd * cd;
      if (args.aux) one.aux = static_cast<char*>(args.aux) + i * args.stride_cd * cd;
      GemmStatus s = run(one, args.batch, workspace, stream);
      if (!s.ok()) return s;
    }
    return GemmStatus{};
  }
  return run(args, args.batch, workspace, stream);
}

}  // namespace rotor::kernels
