// The part of cuBLASLt that rotor calls (kernels/gemm_cublaslt.cu), for the
// emulated device (tests/emulation/device/README.md): the descriptors keep
// what is set on them, and cublasLtMatmul computes on host memory what the
// cuBLASLt documentation (cublasLt.h) says the call computes:
//   D = epilogue(alpha op(A) op(B) + beta C + bias)
// column-major, each operand at its layout's leading dimension and strided
// batch offset, op from the descriptor's TRANSA / TRANSB, the bias a vector
// of D's rows, GELU the tanh approximation, the GELU_AUX epilogues storing
// the GELU input at the AUX pointer, LD and batch stride. Products are summed
// in double (OpenBLAS's dgemm on double copies of the operands) and each
// output rounded once to D's type.
//
// What cuBLASLt documents as invalid is refused as it would be (an attribute
// of the wrong size, an ld below the rows, layouts whose shapes do not
// multiply, an AUX LD or batch stride not divisible by 8), and what would
// make a real algorithm read out of line is an emulation failure that names
// it: a pointer or batch stride less aligned than the preference promised
// the heuristic, or a call whose descriptors or pointers differ from the
// ones the algorithm was chosen for.
#include <cblas.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device/device_memory.h"

namespace {

struct Desc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;
  void* aux = nullptr;
  int64_t aux_ld = 0, aux_stride = 0;
};

struct Layout {
  cudaDataType type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct Pref {
  uint64_t workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D: cuBLASLt's default
};

// What the heuristic saw, kept in the algorithm's opaque words: the call must
// come with the same descriptors and alignments.
struct Algo {
  uint64_t magic;
  uint32_t align[4];
};
constexpr uint64_t kMagic = 0x726f746f72656d75;  // "rotoremu"

template <class T, class H>
T* as(H h) {
  return reinterpret_cast<T*>(h);
}

bool is_float_type(int t) {
  return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF;
}

size_t type_size(int t) {
  return t == CUDA_R_32F ? 4 : 2;
}

double load(const void* p, int t, int64_t i) {
  switch (t) {
    case CUDA_R_32F:
      return static_cast<const float*>(p)[i];
    case CUDA_R_16F:
      return __half2float(static_cast<const __half*>(p)[i]);
    default:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

void store(void* p, int t, int64_t i, float v) {
  switch (t) {
    case CUDA_R_32F:
      static_cast<float*>(p)[i] = v;
      break;
    case CUDA_R_16F:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    default:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
  }
}

template <class T>
cublasStatus_t take(const void* buf, size_t size, T& out) {
  if (!buf || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&out, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

uint32_t alignment(const void* p, int64_t stride_bytes) {
  uint32_t a = 256;
  while (a > 1 && ((reinterpret_cast<uintptr_t>(p) % a) != 0 || (stride_bytes % a) != 0)) a /= 2;
  return a;
}

bool gelu(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool relu(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_RELU || e == CUBLASLT_EPILOGUE_RELU_BIAS;
}
bool has_bias(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool has_aux(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool known_epilogue(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || has_bias(e) || gelu(e) || relu(e);
}

// The shapes of op(A) [m, k], op(B) [k, n], C and D [m, n], column-major, and
// the batch; INVALID_VALUE when they do not fit together.
struct Shape {
  int64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
};
cublasStatus_t shape_of(const Desc& d, const Layout& a, const Layout& b, const Layout& c,
                        const Layout& dd, Shape& s) {
  const bool ta = d.trans_a != CUBLAS_OP_N, tb = d.trans_b != CUBLAS_OP_N;
  s.m = static_cast<int64_t>(ta ? a.cols : a.rows);
  s.k = static_cast<int64_t>(ta ? a.rows : a.cols);
  const int64_t kb = static_cast<int64_t>(tb ? b.cols : b.rows);
  s.n = static_cast<int64_t>(tb ? b.rows : b.cols);
  if (kb != s.k || static_cast<int64_t>(c.rows) != s.m || static_cast<int64_t>(c.cols) != s.n ||
      static_cast<int64_t>(dd.rows) != s.m || static_cast<int64_t>(dd.cols) != s.n)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (a.type != b.type || c.type != dd.type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (a.batch != dd.batch || b.batch != dd.batch || c.batch != dd.batch)
    return CUBLAS_STATUS_INVALID_VALUE;
  s.batch = dd.batch;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t supported(const Desc& d, const Layout& a, const Layout& dd, const Shape& s) {
  if (d.compute != CUBLAS_COMPUTE_32F || d.scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!is_float_type(a.type) || !is_float_type(dd.type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (a.type == CUDA_R_32F && dd.type != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!known_epilogue(d.epilogue)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (has_bias(d.epilogue) && (!d.bias || (d.bias_type != -1 && d.bias_type != dd.type)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (has_aux(d.epilogue)) {
    if (!d.aux || d.aux_ld < s.m || d.aux_ld % 8 != 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (s.batch > 1 && d.aux_stride % 8 != 0) return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// What the heuristic and the matmul both check: the shapes fit, and the
// types and epilogue are ones this emulation (and cuBLASLt) serves.
cublasStatus_t check_call(const Desc& d, const Layout& a, const Layout& b, const Layout& c,
                          const Layout& dd, Shape& s) {
  const cublasStatus_t st = shape_of(d, a, b, c, dd, s);
  return st == CUBLAS_STATUS_SUCCESS ? supported(d, a, dd, s) : st;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "emulated cuBLASLt: FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Every element an operand's layout reaches lies in one device allocation.
void check_reach(const char* name, const void* p, const Layout& l) {
  if (l.rows == 0 || l.cols == 0) return;
  const int64_t last = (static_cast<int64_t>(l.batch) - 1) * l.stride +
                       (static_cast<int64_t>(l.cols) - 1) * l.ld + static_cast<int64_t>(l.rows) - 1;
  emu_device::check_range(std::string("cublasLtMatmul ") + name, p,
                          static_cast<size_t>(last + 1) * type_size(l.type));
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = reinterpret_cast<cublasLtHandle_t>(new int(1));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete reinterpret_cast<int*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

size_t cublasLtGetVersion(void) {
  return CUBLAS_VERSION;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  Desc* d = new Desc;
  d->compute = compute;
  d->scale = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete as<Desc>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size) {
  Desc& d = *as<Desc>(desc);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return take(buf, size, d.trans_a);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return take(buf, size, d.trans_b);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return take(buf, size, d.epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return take(buf, size, d.bias);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return take(buf, size, d.bias_type);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return take(buf, size, d.aux);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return take(buf, size, d.aux_ld);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
      return take(buf, size, d.aux_stride);
    default:
      fail("cublasLtMatmulDescSetAttribute: attribute " + std::to_string(attr) +
           " is not emulated");
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  // Column order: ld at least the rows (cublasLt.h, CUBLASLT_MATRIX_LAYOUT_LD).
  if (ld < 0 || static_cast<uint64_t>(ld) < rows) return CUBLAS_STATUS_INVALID_VALUE;
  Layout* l = new Layout;
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete as<Layout>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  Layout& l = *as<Layout>(layout);
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: {
      const cublasStatus_t s = take(buf, size, l.batch);
      return s == CUBLAS_STATUS_SUCCESS && l.batch < 1 ? CUBLAS_STATUS_INVALID_VALUE : s;
    }
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: {
      const cublasStatus_t s = take(buf, size, l.stride);
      return s == CUBLAS_STATUS_SUCCESS && l.stride < 0 ? CUBLAS_STATUS_INVALID_VALUE : s;
    }
    default:
      fail("cublasLtMatrixLayoutSetAttribute: attribute " + std::to_string(attr) +
           " is not emulated");
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete as<Pref>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  Pref& p = *as<Pref>(pref);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return take(buf, size, p.workspace);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      return take(buf, size, p.align[0]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      return take(buf, size, p.align[1]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      return take(buf, size, p.align[2]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return take(buf, size, p.align[3]);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: {
      uint32_t mask = 0;
      return take(buf, size, mask);  // no split-K here: every scheme is the same
    }
    default:
      fail("cublasLtMatmulPreferenceSetAttribute: attribute " + std::to_string(attr) +
           " is not emulated");
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* returned) {
  if (requested < 1 || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  Shape s;
  const cublasStatus_t st = check_call(*as<Desc>(desc), *as<Layout>(a), *as<Layout>(b),
                                       *as<Layout>(c), *as<Layout>(d), s);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const Pref& p = *as<Pref>(pref);
  std::memset(&results[0], 0, sizeof results[0]);
  Algo algo{kMagic, {p.align[0], p.align[1], p.align[2], p.align[3]}};
  static_assert(sizeof(Algo) <= sizeof(cublasLtMatmulAlgo_t));
  std::memcpy(&results[0].algo, &algo, sizeof algo);
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t adesc, const void* B,
                              cublasLtMatrixLayout_t bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t cdesc, void* D, cublasLtMatrixLayout_t ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  emu_device::in_order(stream);
  if (!handle || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  const Desc& d = *as<Desc>(desc);
  const Layout &la = *as<Layout>(adesc), &lb = *as<Layout>(bdesc), &lc = *as<Layout>(cdesc),
               &ld = *as<Layout>(ddesc);
  Shape s;
  const cublasStatus_t st = check_call(d, la, lb, lc, ld, s);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (!algo) fail("cublasLtMatmul without an algorithm (rotor always passes the heuristic's)");
  Algo chosen;
  std::memcpy(&chosen, algo, sizeof chosen);
  if (chosen.magic != kMagic) fail("cublasLtMatmul: an algorithm no heuristic returned");
  if (workspace_bytes > 0)
    emu_device::check_range("cublasLtMatmul workspace", workspace, workspace_bytes);
  // The alignments the algorithm was chosen for must hold for every matrix
  // of the batch.
  const void* ptrs[4] = {A, B, C, D};
  const Layout* lays[4] = {&la, &lb, &lc, &ld};
  const char* names[4] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; ++i) {
    const int64_t stride_bytes =
        lays[i]->batch > 1 ? lays[i]->stride * static_cast<int64_t>(type_size(lays[i]->type)) : 0;
    if (alignment(ptrs[i], stride_bytes) < chosen.align[i])
      fail(std::string("cublasLtMatmul: ") + names[i] + " is aligned to " +
           std::to_string(alignment(ptrs[i], stride_bytes)) + " bytes, the algorithm to " +
           std::to_string(chosen.align[i]));
  }
  const float a_ = *static_cast<const float*>(alpha), b_ = *static_cast<const float*>(beta);
  check_reach("A", A, la);
  check_reach("B", B, lb);
  check_reach("D", D, ld);
  if (b_ != 0.0f) check_reach("C", C, lc);
  const bool ta = d.trans_a != CUBLAS_OP_N, tb = d.trans_b != CUBLAS_OP_N;
  const bool bias = has_bias(d.epilogue), aux = has_aux(d.epilogue);
  if (bias) emu_device::check_range("cublasLtMatmul bias", d.bias, s.m * type_size(ld.type));
  if (aux) {
    Layout lx = ld;
    lx.ld = d.aux_ld;
    lx.stride = d.aux_stride;
    check_reach("AUX", d.aux, lx);
  }
  // Each batch matrix's operands in double, as stored (column-major, the
  // layout's rows apart), multiplied by OpenBLAS's dgemm.
  std::vector<double> ad(static_cast<size_t>(la.rows * la.cols)),
      bd(static_cast<size_t>(lb.rows * lb.cols)), prod(static_cast<size_t>(s.m * s.n));
  for (int32_t bi = 0; bi < s.batch; ++bi) {
    const int64_t oa = bi * la.stride, ob = bi * lb.stride, oc = bi * lc.stride,
                  od = bi * ld.stride;
    for (uint64_t j = 0; j < la.cols; ++j)
      for (uint64_t i = 0; i < la.rows; ++i)
        ad[i + j * la.rows] = load(A, la.type, oa + static_cast<int64_t>(i + j * la.ld));
    for (uint64_t j = 0; j < lb.cols; ++j)
      for (uint64_t i = 0; i < lb.rows; ++i)
        bd[i + j * lb.rows] = load(B, lb.type, ob + static_cast<int64_t>(i + j * lb.ld));
    cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(s.m), static_cast<blasint>(s.n), static_cast<blasint>(s.k),
                1.0, ad.data(), static_cast<blasint>(std::max<uint64_t>(la.rows, 1)), bd.data(),
                static_cast<blasint>(std::max<uint64_t>(lb.rows, 1)), 0.0, prod.data(),
                static_cast<blasint>(s.m));
    for (int64_t j = 0; j < s.n; ++j)
      for (int64_t i = 0; i < s.m; ++i) {
        float v = static_cast<float>(a_ * prod[static_cast<size_t>(i + j * s.m)]);
        if (b_ != 0.0f) v += b_ * static_cast<float>(load(C, lc.type, oc + i + j * lc.ld));
        if (bias) v += static_cast<float>(load(d.bias, ld.type, i));
        if (aux) store(d.aux, ld.type, bi * d.aux_stride + i + j * d.aux_ld, v);
        if (relu(d.epilogue)) v = v > 0.0f ? v : 0.0f;
        if (gelu(d.epilogue))
          v = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
        store(D, ld.type, od + i + j * ld.ld, v);
      }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
