// The part of cuDNN that rotor's attention calls, for the emulated device
// (tests/emulation/device/README.md): the backend API under the real cuDNN
// frontend, which rotor's src/ops/cudnn_attention_cuda.cpp drives unchanged.
// The frontend validates rotor's SDPA graphs, lowers them to backend
// operations (matmuls, pointwise operations, reductions, a Philox draw) and
// sets them on backend descriptors; this file keeps what is set on each
// descriptor, answers the frontend's queries (one engine, no knobs, no
// notes), and at cudnnBackendExecute interprets the operation graph on host
// memory, one operation at a time in the order the graph lists them, as the
// cuDNN documentation (cudnn_graph.h and the graph API's operation pages)
// defines each:
//   - tensors at their dimensions and strides, read and written in their
//     data type; a virtual tensor (an intermediate) rounded to its data type
//     as the fused kernel's registers would hold it;
//   - pointwise operations with broadcasting of size-1 dimensions, GEN_INDEX
//     along its axis, comparisons and logical operations as 0 or 1,
//     BINARY_SELECT as y = t ? x : b;
//   - matmuls over the trailing two dimensions, batched over the leading
//     ones with broadcasting, in double (OpenBLAS), with the M, N and K
//     overrides as per-batch bounds (entries past them take the padding
//     value, or 0);
//   - reductions over the dimensions where the output has size 1;
//   - the RNG's Bernoulli draw from a counter hash of (seed, offset, index):
//     not cuDNN's Philox stream (no test may depend on its bits), but the
//     same mask for the same seed and offset, another for another seed.
// What the graph names is held to the device: every non-virtual tensor's
// extent must lie in one live allocation (a by-value scalar in host memory),
// the workspace must be one of at least the size the plan reported (the
// backward plan asks for one, as cuDNN's does), and the variant pack must
// carry every non-virtual tensor's unique id. Work runs in stream order on
// the handle's stream (cudnnSetStream).
//
// cudnnGetVersion reports the headers' CUDNN_VERSION, so the frontend
// lowers the graphs as it would for the library rotor is built with. An
// operation or attribute this file does not interpret fails the run with
// its name, rather than letting the plan leave cuDNN quietly.
// ROTOR_EMU_CUDNN=off makes cudnnCreate fail, as on a machine whose cuDNN
// cannot start (the plan then refuses cuDNN with the reason).
#include <cblas.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "device/device_memory.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "emulated cuDNN: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

size_t type_bytes(cudnnBackendAttributeType_t t) {
  switch (t) {
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_INT64:
    case CUDNN_TYPE_DOUBLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
      return 8;
    case CUDNN_TYPE_BOOLEAN:
      return sizeof(bool);
    case CUDNN_TYPE_CHAR:
      return 1;
    case CUDNN_TYPE_FRACTION:
      return sizeof(cudnnFraction_t);
    default:  // FLOAT, INT32 and the enums
      return 4;
  }
}

// ------------------------------------------------------------ the graph, snapshot

struct TensorInfo {
  int64_t uid = 0;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims, strides;
  bool is_virtual = false, by_value = false;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

enum class OpKind { Pointwise, Matmul, Reduction, Rng, Reshape, SdpaFwd };

struct Op {
  OpKind kind;
  std::string name;  // for messages
  // Tensor uids; -1 where absent.
  int64_t x = -1, b = -1, t = -1, y = -1;      // pointwise; reduction x, y; rng y
  int64_t m_ovr = -1, n_ovr = -1, k_ovr = -1;  // matmul (x = A, b = B, y = C)
  int64_t seed = -1, offset = -1;              // rng tensors
  int64_t v = -1, stats = -1, scale = -1;      // SDPA (x = Q, b = K, y = O)
  int64_t seq_q = -1, seq_kv = -1;
  int64_t seed_value = 0;         // rng seed set as a value
  int mode = 0;                   // pointwise mode, reduction operator
  int64_t axis = 0;               // GEN_INDEX
  double alpha1 = 1, alpha2 = 1;  // pointwise
  bool has_padding = false;
  double padding = 0, probability = 0;
};

struct Program {
  std::map<int64_t, TensorInfo> tensors;
  std::vector<Op> ops;
  int64_t workspace = 0;
};

// ---------------------------------------------------------------- descriptors

struct Desc;

// An attribute as set. A descriptor-valued one holds copies of the
// descriptors it names, taken when it is set, as cuDNN does: the frontend
// frees some (an RNG descriptor, a pointwise one) before the graph that
// names them is finalized.
struct Attr {
  cudnnBackendAttributeType_t type;
  int64_t count = 0;
  std::vector<unsigned char> bytes;
  std::vector<std::shared_ptr<const Desc>> refs;
};

struct Desc {
  cudnnBackendDescriptorType_t type;
  std::map<int, Attr> attrs;
  bool finalized = false;
  std::shared_ptr<const Program> program;  // op graph, engine, engine config, plan
};

Attr refs_attr(std::vector<std::shared_ptr<const Desc>> refs) {
  Attr a;
  a.type = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  a.count = static_cast<int64_t>(refs.size());
  a.refs = std::move(refs);
  return a;
}

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

const Attr* find(const Desc* d, cudnnBackendAttributeName_t name) {
  auto it = d->attrs.find(name);
  return it == d->attrs.end() ? nullptr : &it->second;
}

double scalar(const Attr& a, const char* what) {
  const unsigned char* p = a.bytes.data();
  switch (a.type) {
    case CUDNN_TYPE_INT64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case CUDNN_TYPE_DOUBLE: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case CUDNN_TYPE_FLOAT: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case CUDNN_TYPE_BOOLEAN:
      return *reinterpret_cast<const bool*>(p) ? 1 : 0;
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_CHAR:
    case CUDNN_TYPE_FRACTION:
      fail(std::string("attribute ") + what + " is not a scalar");
    default: {  // INT32 and the enums
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
}

std::vector<int64_t> int64s(const Attr& a) {
  std::vector<int64_t> v(static_cast<size_t>(a.count));
  std::memcpy(v.data(), a.bytes.data(), v.size() * 8);
  return v;
}

const Desc* desc_attr(const Desc* d, cudnnBackendAttributeName_t name) {
  const Attr* a = find(d, name);
  if (!a || a->type != CUDNN_TYPE_BACKEND_DESCRIPTOR || a->refs.empty()) return nullptr;
  return a->refs[0].get();
}

std::vector<const Desc*> desc_attrs(const Desc* d, cudnnBackendAttributeName_t name) {
  std::vector<const Desc*> v;
  const Attr* a = find(d, name);
  if (!a || a->type != CUDNN_TYPE_BACKEND_DESCRIPTOR) return v;
  for (const auto& r : a->refs) v.push_back(r.get());
  return v;
}

double scalar_or(const Desc* d, cudnnBackendAttributeName_t name, double dflt, const char* what) {
  const Attr* a = find(d, name);
  return a ? scalar(*a, what) : dflt;
}

TensorInfo tensor_info(const Desc* t) {
  if (!t || t->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR) fail("an operation names no tensor");
  TensorInfo i;
  const Attr* uid = find(t, CUDNN_ATTR_TENSOR_UNIQUE_ID);
  const Attr* dims = find(t, CUDNN_ATTR_TENSOR_DIMENSIONS);
  const Attr* strides = find(t, CUDNN_ATTR_TENSOR_STRIDES);
  if (!uid || !dims || !strides) fail("a tensor without unique id, dimensions or strides");
  i.uid = static_cast<int64_t>(scalar(*uid, "TENSOR_UNIQUE_ID"));
  i.dims = int64s(*dims);
  i.strides = int64s(*strides);
  i.dtype = static_cast<cudnnDataType_t>(
      static_cast<int>(scalar_or(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_DATA_FLOAT, "DATA_TYPE")));
  i.is_virtual = scalar_or(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, 0, "IS_VIRTUAL") != 0;
  i.by_value = scalar_or(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, 0, "IS_BY_VALUE") != 0;
  if (find(t, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC)) fail("ragged tensors are not emulated");
  return i;
}

int64_t add_tensor(Program& p, const Desc* t) {
  if (!t) return -1;
  TensorInfo i = tensor_info(t);
  auto it = p.tensors.find(i.uid);
  if (it != p.tensors.end() && (it->second.dims != i.dims || it->second.dtype != i.dtype))
    fail("two tensors share unique id " + std::to_string(i.uid));
  p.tensors[i.uid] = i;
  return i.uid;
}

// The operation graph's snapshot, taken at its finalize: the frontend may
// free the operation descriptors while a plan built from them lives on.
cudnnStatus_t snapshot(Desc* graph) {
  auto p = std::make_shared<Program>();
  for (const Desc* o : desc_attrs(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS)) {
    if (!o) return CUDNN_STATUS_BAD_PARAM;
    Op op;
    switch (o->type) {
      case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
        op.kind = OpKind::Pointwise;
        const Desc* pw = desc_attr(o, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR);
        if (!pw) fail("a pointwise operation without its pointwise descriptor");
        op.mode = static_cast<int>(scalar_or(pw, CUDNN_ATTR_POINTWISE_MODE, -1, "POINTWISE_MODE"));
        op.axis = static_cast<int64_t>(scalar_or(pw, CUDNN_ATTR_POINTWISE_AXIS, 0, "AXIS"));
        if (find(o, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC) ||
            find(o, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC))
          fail("pointwise backward modes are not emulated (mode " + std::to_string(op.mode) + ")");
        op.x = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_POINTWISE_XDESC));
        op.b = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_POINTWISE_BDESC));
        op.t = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_POINTWISE_TDESC));
        op.y = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_POINTWISE_YDESC));
        op.alpha1 = scalar_or(o, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, 1, "ALPHA1");
        op.alpha2 = scalar_or(o, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, 1, "ALPHA2");
        op.name = "pointwise mode " + std::to_string(op.mode);
        break;
      }
      case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: {
        op.kind = OpKind::Matmul;
        op.x = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_MATMUL_ADESC));
        op.b = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_MATMUL_BDESC));
        op.y = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_MATMUL_CDESC));
        op.m_ovr = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC));
        op.n_ovr = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC));
        op.k_ovr = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC));
        if (const Desc* mm = desc_attr(o, CUDNN_ATTR_OPERATION_MATMUL_DESC)) {
          if (const Attr* pad = find(mm, CUDNN_ATTR_MATMUL_PADDING_VALUE)) {
            op.has_padding = true;
            op.padding = scalar(*pad, "MATMUL_PADDING_VALUE");
          }
        }
        op.name = "matmul";
        break;
      }
      case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: {
        op.kind = OpKind::Reduction;
        const Desc* r = desc_attr(o, CUDNN_ATTR_OPERATION_REDUCTION_DESC);
        if (!r) fail("a reduction without its reduction descriptor");
        op.mode = static_cast<int>(scalar_or(r, CUDNN_ATTR_REDUCTION_OPERATOR, -1, "OPERATOR"));
        op.x = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_REDUCTION_XDESC));
        op.y = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_REDUCTION_YDESC));
        op.name = "reduction " + std::to_string(op.mode);
        break;
      }
      case CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR: {
        op.kind = OpKind::Rng;
        const Desc* r = desc_attr(o, CUDNN_ATTR_OPERATION_RNG_DESC);
        if (!r) fail("an RNG operation without its RNG descriptor");
        const int dist =
            static_cast<int>(scalar_or(r, CUDNN_ATTR_RNG_DISTRIBUTION, -1, "RNG_DISTRIBUTION"));
        if (dist != CUDNN_RNG_DISTRIBUTION_BERNOULLI)
          fail("RNG distribution " + std::to_string(dist) + " is not emulated");
        op.probability =
            scalar_or(r, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, -1, "BERNOULLI_PROBABILITY");
        op.y = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_RNG_YDESC));
        const Attr* seed = find(o, CUDNN_ATTR_OPERATION_RNG_SEED);
        if (seed && seed->type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
          op.seed = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_RNG_SEED));
        } else if (seed) {
          std::memcpy(&op.seed_value, seed->bytes.data(), 8);
        }
        op.offset = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC));
        op.name = "rng";
        break;
      }
      case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: {
        op.kind = OpKind::Reshape;
        op.x = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_RESHAPE_XDESC));
        op.y = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_RESHAPE_YDESC));
        op.name = "reshape";
        break;
      }
      case CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR: {
        op.kind = OpKind::SdpaFwd;
        for (const auto& [name, a] : o->attrs) {
          switch (name) {
            case CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC:
            case CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC:
            case CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC:
            case CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC:
            case CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC:
            case CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC:
            case CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_QDESC:
            case CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_KVDESC:
              break;
            default:
              fail("unified SDPA attribute " + std::to_string(name) + " is not emulated");
          }
        }
        op.x = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC));
        op.b = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC));
        op.v = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC));
        op.y = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC));
        op.stats = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC));
        op.scale = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC));
        op.seq_q = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_QDESC));
        op.seq_kv = add_tensor(*p, desc_attr(o, CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_KVDESC));
        if ((op.seq_q < 0) != (op.seq_kv < 0)) fail("unified SDPA with one sequence length of two");
        op.name = "unified sdpa forward";
        break;
      }
      default:
        fail("backend operation type " + std::to_string(o->type) +
             " is not emulated (the frontend lowered the graph to it)");
    }
    p->ops.push_back(op);
  }
  if (p->ops.empty()) return CUDNN_STATUS_BAD_PARAM;
  // The backward asks for a workspace, as cuDNN's does (dQ accumulated in
  // f32): enough to hold every f32 [.., D] output the graph writes.
  int64_t outputs = 0, ws = 0;
  for (const auto& [uid, t] : p->tensors)
    if (!t.is_virtual && t.dims.size() == 4 && t.dims[3] > 1) ws = std::max(ws, t.numel() * 4);
  for (const Op& op : p->ops)
    if (op.kind == OpKind::Matmul && !p->tensors[op.y].is_virtual) ++outputs;
  p->workspace = outputs >= 3 ? ws : 0;  // the backward writes dQ, dK and dV
  graph->program = p;
  if (const char* trace = std::getenv("ROTOR_EMU_CUDNN_TRACE"); trace && *trace == '1') {
    std::map<std::string, int> n;
    for (const Op& op : p->ops) ++n[op.name];
    std::string line;
    for (const auto& [name, c] : n)
      line += (line.empty() ? "" : ", ") + std::to_string(c) + " " + name;
    std::fprintf(stderr, "emulated cuDNN: a graph of %zu operations (%s), workspace %lld bytes\n",
                 p->ops.size(), line.c_str(), static_cast<long long>(p->workspace));
  }
  return CUDNN_STATUS_SUCCESS;
}

// -------------------------------------------------------------------- values

struct Buffer {
  std::vector<int64_t> dims;
  std::vector<double> v;  // row-major over dims
};

std::vector<int64_t> row_major(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

size_t dtype_bytes(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32:
      return 4;
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64:
      return 8;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16:
      return 2;
    case CUDNN_DATA_BOOLEAN:
    case CUDNN_DATA_INT8:
    case CUDNN_DATA_UINT8:
      return 1;
    default:
      fail("data type " + std::to_string(t) + " is not emulated");
  }
}

double load_one(const unsigned char* p, cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case CUDNN_DATA_DOUBLE: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case CUDNN_DATA_HALF: {
      __half v;
      std::memcpy(&v, p, 2);
      return __half2float(v);
    }
    case CUDNN_DATA_BFLOAT16: {
      __nv_bfloat16 v;
      std::memcpy(&v, p, 2);
      return __bfloat162float(v);
    }
    case CUDNN_DATA_INT32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case CUDNN_DATA_INT64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case CUDNN_DATA_BOOLEAN:
    case CUDNN_DATA_UINT8:
      return *p;
    case CUDNN_DATA_INT8:
      return static_cast<int8_t>(*p);
    default:
      fail("data type " + std::to_string(t) + " is not emulated");
  }
}

void store_one(unsigned char* p, cudnnDataType_t t, double x) {
  switch (t) {
    case CUDNN_DATA_FLOAT: {
      const float v = static_cast<float>(x);
      std::memcpy(p, &v, 4);
      break;
    }
    case CUDNN_DATA_DOUBLE:
      std::memcpy(p, &x, 8);
      break;
    case CUDNN_DATA_HALF: {
      const __half v = __float2half_rn(static_cast<float>(x));
      std::memcpy(p, &v, 2);
      break;
    }
    case CUDNN_DATA_BFLOAT16: {
      const __nv_bfloat16 v = __float2bfloat16_rn(static_cast<float>(x));
      std::memcpy(p, &v, 2);
      break;
    }
    case CUDNN_DATA_INT32: {
      const int32_t v = static_cast<int32_t>(x);
      std::memcpy(p, &v, 4);
      break;
    }
    case CUDNN_DATA_INT64: {
      const int64_t v = static_cast<int64_t>(x);
      std::memcpy(p, &v, 8);
      break;
    }
    case CUDNN_DATA_BOOLEAN:
      *p = x != 0 ? 1 : 0;
      break;
    default:
      fail("writing data type " + std::to_string(t) + " is not emulated");
  }
}

// The value as a tensor of type t holds it (integers rounded to nearest).
double round_to(double x, cudnnDataType_t t) {
  if (t == CUDNN_DATA_INT32 || t == CUDNN_DATA_INT64) x = std::nearbyint(x);
  unsigned char b[8];
  store_one(b, t, x);
  return load_one(b, t);
}

// Bytes from the base pointer to one past the last element.
size_t extent(const TensorInfo& t) {
  int64_t last = 0;
  for (size_t i = 0; i < t.dims.size(); ++i) {
    if (t.dims[i] == 0) return 0;
    last += (t.dims[i] - 1) * t.strides[i];
  }
  return static_cast<size_t>(last + 1) * dtype_bytes(t.dtype);
}

// Steps idx to the next index of dims in row-major order (the last wraps
// to all zeros).
void next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
    if (++idx[d] < dims[d]) return;
    idx[d] = 0;
  }
}

// Calls f(row-major index, element offset) for every element of t.
template <class F>
void for_each(const TensorInfo& t, F&& f) {
  const size_t n = t.dims.size();
  std::vector<int64_t> idx(n, 0);
  const int64_t total = t.numel();
  for (int64_t i = 0; i < total; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < n; ++d) off += idx[d] * t.strides[d];
    f(i, off);
    next_index(idx, t.dims);
  }
}

uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Interpreter {
 public:
  Interpreter(const Program& p, const std::unordered_map<int64_t, void*>& ptrs)
      : p_(p), ptrs_(ptrs) {}

  void run() {
    for (const Op& op : p_.ops) {
      switch (op.kind) {
        case OpKind::Pointwise:
          pointwise(op);
          break;
        case OpKind::Matmul:
          matmul(op);
          break;
        case OpKind::Reduction:
          reduction(op);
          break;
        case OpKind::Rng:
          rng(op);
          break;
        case OpKind::Reshape:
          reshape(op);
          break;
        case OpKind::SdpaFwd:
          sdpa_forward(op);
          break;
      }
    }
  }

 private:
  const TensorInfo& info(int64_t uid) const { return p_.tensors.at(uid); }

  const Buffer& get(int64_t uid) {
    auto it = values_.find(uid);
    if (it != values_.end()) return it->second;
    const TensorInfo& t = info(uid);
    if (t.is_virtual) fail("virtual tensor " + std::to_string(uid) + " read before it is written");
    Buffer b;
    b.dims = t.dims;
    b.v.resize(static_cast<size_t>(t.numel()));
    const auto* base = static_cast<const unsigned char*>(ptrs_.at(uid));
    const size_t eb = dtype_bytes(t.dtype);
    for_each(t, [&](int64_t i, int64_t off) { b.v[i] = load_one(base + off * eb, t.dtype); });
    return values_.emplace(uid, std::move(b)).first->second;
  }

  void put(int64_t uid, Buffer b) {
    const TensorInfo& t = info(uid);
    if (b.dims != t.dims) fail("an operation's output does not have its tensor's dimensions");
    for (double& x : b.v) x = round_to(x, t.dtype);
    if (!t.is_virtual) {
      auto* base = static_cast<unsigned char*>(ptrs_.at(uid));
      const size_t eb = dtype_bytes(t.dtype);
      for_each(t, [&](int64_t i, int64_t off) { store_one(base + off * eb, t.dtype, b.v[i]); });
    }
    values_[uid] = std::move(b);
  }

  // Offset into a buffer of dims `in` (broadcast to `out`) of the element at
  // row-major index i of `out`.
  static std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in,
                                                const std::vector<int64_t>& out,
                                                const std::string& what) {
    if (in.size() != out.size()) fail(what + ": operands of different ranks");
    std::vector<int64_t> rm = row_major(in), s(in.size(), 0);
    for (size_t d = 0; d < in.size(); ++d) {
      if (in[d] == out[d])
        s[d] = rm[d];
      else if (in[d] != 1)
        fail(what + ": dimension " + std::to_string(d) + " of an operand is " +
             std::to_string(in[d]) + ", the output's " + std::to_string(out[d]));
    }
    return s;
  }

  void pointwise(const Op& op) {
    const TensorInfo& yt = info(op.y);
    Buffer y;
    y.dims = yt.dims;
    const int64_t n = yt.numel();
    y.v.resize(static_cast<size_t>(n));
    const Buffer* x = op.x >= 0 ? &get(op.x) : nullptr;
    const Buffer* b = op.b >= 0 ? &get(op.b) : nullptr;
    const Buffer* t = op.t >= 0 ? &get(op.t) : nullptr;
    std::vector<int64_t> sx, sb, st;
    if (x) sx = broadcast_strides(x->dims, y.dims, op.name);
    if (b) sb = broadcast_strides(b->dims, y.dims, op.name);
    if (t) st = broadcast_strides(t->dims, y.dims, op.name);
    const size_t rank = y.dims.size();
    std::vector<int64_t> idx(rank, 0);
    if (op.mode == CUDNN_POINTWISE_GEN_INDEX && (op.axis < 0 || op.axis >= int64_t(rank)))
      fail("GEN_INDEX axis " + std::to_string(op.axis) + " out of range");
    for (int64_t i = 0; i < n; ++i) {
      int64_t ox = 0, ob = 0, ot = 0;
      for (size_t d = 0; d < rank; ++d) {
        if (x) ox += idx[d] * sx[d];
        if (b) ob += idx[d] * sb[d];
        if (t) ot += idx[d] * st[d];
      }
      const double a = x ? x->v[ox] * op.alpha1 : 0;
      const double c = b ? b->v[ob] * op.alpha2 : 0;
      auto need_b = [&] {
        if (!b) fail(op.name + " without its second operand");
      };
      double r = 0;
      switch (op.mode) {
        case CUDNN_POINTWISE_ADD:
          need_b();
          r = a + c;
          break;
        case CUDNN_POINTWISE_SUB:
          need_b();
          r = a - c;
          break;
        case CUDNN_POINTWISE_MUL:
          need_b();
          r = a * c;
          break;
        case CUDNN_POINTWISE_DIV:
          need_b();
          r = a / c;
          break;
        case CUDNN_POINTWISE_MAX:
          need_b();
          r = std::max(a, c);
          break;
        case CUDNN_POINTWISE_MIN:
          need_b();
          r = std::min(a, c);
          break;
        case CUDNN_POINTWISE_EXP:
          r = std::exp(a);
          break;
        case CUDNN_POINTWISE_LOG:
          r = std::log(a);
          break;
        case CUDNN_POINTWISE_NEG:
          r = -a;
          break;
        case CUDNN_POINTWISE_ABS:
          r = std::abs(a);
          break;
        case CUDNN_POINTWISE_SQRT:
          r = std::sqrt(a);
          break;
        case CUDNN_POINTWISE_RSQRT:
          r = 1 / std::sqrt(a);
          break;
        case CUDNN_POINTWISE_RECIPROCAL:
          r = 1 / a;
          break;
        case CUDNN_POINTWISE_IDENTITY:
          r = a;
          break;
        case CUDNN_POINTWISE_TANH_FWD:
          r = std::tanh(a);
          break;
        case CUDNN_POINTWISE_CMP_EQ:
          need_b();
          r = a == c;
          break;
        case CUDNN_POINTWISE_CMP_NEQ:
          need_b();
          r = a != c;
          break;
        case CUDNN_POINTWISE_CMP_GT:
          need_b();
          r = a > c;
          break;
        case CUDNN_POINTWISE_CMP_GE:
          need_b();
          r = a >= c;
          break;
        case CUDNN_POINTWISE_CMP_LT:
          need_b();
          r = a < c;
          break;
        case CUDNN_POINTWISE_CMP_LE:
          need_b();
          r = a <= c;
          break;
        case CUDNN_POINTWISE_LOGICAL_AND:
          need_b();
          r = (a != 0) && (c != 0);
          break;
        case CUDNN_POINTWISE_LOGICAL_OR:
          need_b();
          r = (a != 0) || (c != 0);
          break;
        case CUDNN_POINTWISE_LOGICAL_NOT:
          r = a == 0;
          break;
        case CUDNN_POINTWISE_GEN_INDEX:
          r = static_cast<double>(idx[op.axis]);
          break;
        case CUDNN_POINTWISE_BINARY_SELECT:
          need_b();
          if (!t) fail("BINARY_SELECT without its mask");
          r = t->v[ot] != 0 ? a : c;
          break;
        default:
          fail("pointwise mode " + std::to_string(op.mode) + " is not emulated");
      }
      y.v[i] = r;
      next_index(idx, y.dims);
    }
    put(op.y, std::move(y));
  }

  // A per-batch bound from an override tensor ([B, 1, 1, 1]), or `full`.
  int64_t bound(int64_t uid, int64_t batch0, int64_t full) {
    if (uid < 0) return full;
    const Buffer& b = get(uid);
    if (b.v.size() == 1) return std::min(full, static_cast<int64_t>(b.v[0]));
    if (batch0 >= static_cast<int64_t>(b.v.size())) fail("a matmul override has too few batches");
    const int64_t v = static_cast<int64_t>(b.v[batch0]);
    if (v < 0) fail("a negative matmul override");
    return std::min(full, v);
  }

  void matmul(const Op& op) {
    const Buffer& a = get(op.x);
    const Buffer& bm = get(op.b);
    const TensorInfo& ct = info(op.y);
    const size_t r = ct.dims.size();
    if (r < 2 || a.dims.size() != r || bm.dims.size() != r) fail("matmul operands of another rank");
    const int64_t M = ct.dims[r - 2], N = ct.dims[r - 1], K = a.dims[r - 1];
    if (a.dims[r - 2] != M || bm.dims[r - 2] != K || bm.dims[r - 1] != N)
      fail("matmul shapes do not multiply: A [" + std::to_string(a.dims[r - 2]) + ", " +
           std::to_string(K) + "], B [" + std::to_string(bm.dims[r - 2]) + ", " +
           std::to_string(bm.dims[r - 1]) + "], C [" + std::to_string(M) + ", " +
           std::to_string(N) + "]");
    std::vector<int64_t> batch(ct.dims.begin(), ct.dims.end() - 2);
    std::vector<int64_t> ab(a.dims.begin(), a.dims.end() - 2),
        bb(bm.dims.begin(), bm.dims.end() - 2);
    const std::vector<int64_t> sa = broadcast_strides(ab, batch, "matmul A");
    const std::vector<int64_t> sb = broadcast_strides(bb, batch, "matmul B");
    int64_t nb = 1;
    for (int64_t d : batch) nb *= d;
    Buffer c;
    c.dims = ct.dims;
    c.v.assign(static_cast<size_t>(nb * M * N), op.has_padding ? op.padding : 0.0);
    std::vector<int64_t> idx(batch.size(), 0);
    std::vector<double> ta, tb, tc;
    for (int64_t bi = 0; bi < nb; ++bi) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d < batch.size(); ++d) {
        oa += idx[d] * sa[d];
        ob += idx[d] * sb[d];
      }
      const int64_t b0 = batch.empty() ? 0 : idx[0];
      const int64_t m = bound(op.m_ovr, b0, M), n = bound(op.n_ovr, b0, N),
                    k = bound(op.k_ovr, b0, K);
      if (m > 0 && n > 0) {
        tc.assign(static_cast<size_t>(m * n), 0.0);
        if (k > 0) {
          ta.resize(static_cast<size_t>(m * k));
          tb.resize(static_cast<size_t>(k * n));
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < k; ++j) ta[i * k + j] = a.v[(oa * M + i) * K + j];
          for (int64_t i = 0; i < k; ++i)
            for (int64_t j = 0; j < n; ++j) tb[i * n + j] = bm.v[(ob * K + i) * N + j];
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
                      static_cast<int>(n), static_cast<int>(k), 1.0, ta.data(), static_cast<int>(k),
                      tb.data(), static_cast<int>(n), 0.0, tc.data(), static_cast<int>(n));
        }
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) c.v[(bi * M + i) * N + j] = tc[i * n + j];
      }
      next_index(idx, batch);
    }
    put(op.y, std::move(c));
  }

  void reduction(const Op& op) {
    const Buffer& x = get(op.x);
    const TensorInfo& yt = info(op.y);
    if (yt.dims.size() != x.dims.size()) fail("a reduction to another rank");
    std::vector<int64_t> rm = row_major(yt.dims), s(yt.dims.size(), 0);
    for (size_t d = 0; d < yt.dims.size(); ++d) {
      if (yt.dims[d] == x.dims[d])
        s[d] = rm[d];
      else if (yt.dims[d] != 1)
        fail("a reduction's output dimension is neither its input's nor 1");
    }
    Buffer y;
    y.dims = yt.dims;
    double init = 0;
    switch (op.mode) {
      case CUDNN_REDUCE_TENSOR_ADD:
      case CUDNN_REDUCE_TENSOR_AMAX:
        init = 0;
        break;
      case CUDNN_REDUCE_TENSOR_MUL:
        init = 1;
        break;
      case CUDNN_REDUCE_TENSOR_MAX:
        init = -INFINITY;
        break;
      case CUDNN_REDUCE_TENSOR_MIN:
        init = INFINITY;
        break;
      default:
        fail("reduction operator " + std::to_string(op.mode) + " is not emulated");
    }
    y.v.assign(static_cast<size_t>(yt.numel()), init);
    std::vector<int64_t> idx(x.dims.size(), 0);
    for (size_t i = 0; i < x.v.size(); ++i) {
      int64_t o = 0;
      for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * s[d];
      double& r = y.v[o];
      const double v = x.v[i];
      switch (op.mode) {
        case CUDNN_REDUCE_TENSOR_ADD:
          r += v;
          break;
        case CUDNN_REDUCE_TENSOR_MUL:
          r *= v;
          break;
        case CUDNN_REDUCE_TENSOR_MAX:
          r = std::max(r, v);
          break;
        case CUDNN_REDUCE_TENSOR_MIN:
          r = std::min(r, v);
          break;
        case CUDNN_REDUCE_TENSOR_AMAX:
          r = std::max(r, std::abs(v));
          break;
        default:
          break;
      }
      next_index(idx, x.dims);
    }
    put(op.y, std::move(y));
  }

  // y is x's memory seen through y's dimensions and strides (the frontend's
  // transposes: P and dS as [.., Tk, Tq], K as [.., D, Tk]).
  void reshape(const Op& op) {
    const Buffer& x = get(op.x);
    const TensorInfo& xt = info(op.x);
    const TensorInfo& yt = info(op.y);
    const size_t span = extent(xt) / dtype_bytes(xt.dtype);
    std::vector<double> mem(span, 0.0);
    std::vector<char> written(span, 0);
    for_each(xt, [&](int64_t i, int64_t off) {
      mem[off] = x.v[i];
      written[off] = 1;
    });
    Buffer y;
    y.dims = yt.dims;
    y.v.resize(static_cast<size_t>(yt.numel()));
    for_each(yt, [&](int64_t i, int64_t off) {
      if (off < 0 || static_cast<size_t>(off) >= span || !written[off])
        fail("a reshape reads memory its input does not cover");
      y.v[i] = mem[off];
    });
    put(op.y, std::move(y));
  }

  // The unified forward (CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR):
  // O = softmax(scale Q K^T) V with keys past seq_len_kv[b] masked (and
  // query rows past seq_len_q[b] left 0), Stats = the row's log-sum-exp of
  // the scaled scores (natural log). Scores and the softmax in double from
  // the stored inputs; P rounded to V's type before P V, as a flash kernel
  // holds it.
  void sdpa_forward(const Op& op) {
    const Buffer& q = get(op.x);
    const Buffer& k = get(op.b);
    const Buffer& v = get(op.v);
    const TensorInfo& ot = info(op.y);
    if (q.dims.size() != 4 || k.dims.size() != 4 || v.dims.size() != 4)
      fail("unified SDPA operands are not 4-D");
    const int64_t B = q.dims[0], Hq = q.dims[1], Tq = q.dims[2], D = q.dims[3];
    const int64_t Hk = k.dims[1], Tk = k.dims[2], Hv = v.dims[1], Dv = v.dims[3];
    if (k.dims[0] != B || k.dims[3] != D || v.dims[0] != B || v.dims[2] != Tk || Hq % Hk != 0 ||
        Hq % Hv != 0 || ot.dims != std::vector<int64_t>{B, Hq, Tq, Dv})
      fail("unified SDPA shapes do not agree");
    const double scale = op.scale >= 0 ? get(op.scale).v.at(0) : 1.0;
    const cudnnDataType_t pt = info(op.v).dtype;
    Buffer o;
    o.dims = ot.dims;
    o.v.assign(static_cast<size_t>(B * Hq * Tq * Dv), 0.0);
    Buffer st;
    if (op.stats >= 0) {
      st.dims = info(op.stats).dims;
      if (static_cast<int64_t>(info(op.stats).numel()) != B * Hq * Tq)
        fail("unified SDPA stats is not [B, H, Tq, 1]");
      st.v.assign(static_cast<size_t>(B * Hq * Tq), 0.0);
    }
    std::vector<double> sc(static_cast<size_t>(Tk));
    for (int64_t b = 0; b < B; ++b) {
      const int64_t lq = op.seq_q >= 0 ? std::min<int64_t>(Tq, get(op.seq_q).v.at(b)) : Tq;
      const int64_t lk = op.seq_kv >= 0 ? std::min<int64_t>(Tk, get(op.seq_kv).v.at(b)) : Tk;
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t hk = h / (Hq / Hk), hv = h / (Hq / Hv);
        for (int64_t i = 0; i < lq; ++i) {
          const double* qi = &q.v[((b * Hq + h) * Tq + i) * D];
          double mx = -INFINITY;
          for (int64_t j = 0; j < lk; ++j) {
            const double* kj = &k.v[((b * Hk + hk) * Tk + j) * D];
            double d = 0;
            for (int64_t x = 0; x < D; ++x) d += qi[x] * kj[x];
            sc[j] = static_cast<float>(d * scale);
            mx = std::max(mx, sc[j]);
          }
          double sum = 0;
          for (int64_t j = 0; j < lk; ++j) sum += std::exp(sc[j] - mx);
          double* oi = &o.v[((b * Hq + h) * Tq + i) * Dv];
          for (int64_t j = 0; j < lk; ++j) {
            const double pj = round_to(std::exp(sc[j] - mx) / sum, pt);
            const double* vj = &v.v[((b * Hv + hv) * Tk + j) * Dv];
            for (int64_t x = 0; x < Dv; ++x) oi[x] += pj * vj[x];
          }
          if (op.stats >= 0) st.v[(b * Hq + h) * Tq + i] = lk > 0 ? mx + std::log(sum) : -INFINITY;
        }
      }
    }
    put(op.y, std::move(o));
    if (op.stats >= 0) put(op.stats, std::move(st));
  }

  // An int64 read exactly (a double would round a 63-bit seed).
  int64_t exact_int64(int64_t uid) {
    const TensorInfo& t = info(uid);
    if (t.is_virtual || t.numel() != 1) fail("an RNG seed or offset that is not one stored value");
    const auto* p = static_cast<const unsigned char*>(ptrs_.at(uid));
    if (t.dtype == CUDNN_DATA_INT64) {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    return static_cast<int64_t>(load_one(p, t.dtype));
  }

  void rng(const Op& op) {
    const uint64_t seed =
        static_cast<uint64_t>(op.seed >= 0 ? exact_int64(op.seed) : op.seed_value);
    const uint64_t offset = op.offset >= 0 ? static_cast<uint64_t>(exact_int64(op.offset)) : 0;
    if (!(op.probability >= 0 && op.probability <= 1))
      fail("a Bernoulli probability outside [0, 1]");
    const TensorInfo& yt = info(op.y);
    Buffer y;
    y.dims = yt.dims;
    y.v.resize(static_cast<size_t>(yt.numel()));
    const uint64_t key = mix64(seed) ^ mix64(offset + 0x5bd1e995ULL);
    for (size_t i = 0; i < y.v.size(); ++i) {
      const double u = static_cast<double>(mix64(key + i) >> 11) * 0x1.0p-53;
      y.v[i] = u < op.probability ? 1.0 : 0.0;
    }
    put(op.y, std::move(y));
  }

  const Program& p_;
  const std::unordered_map<int64_t, void*>& ptrs_;
  std::unordered_map<int64_t, Buffer> values_;
};

// ------------------------------------------------------------------ handles

struct Handle {
  cudaStream_t stream = nullptr;
};

int64_t engine_count() {
  return 1;
}

}  // namespace

// ==================================================================== the API

extern "C" {

size_t cudnnGetVersion(void) {
  return CUDNN_VERSION;
}

size_t cudnnGetCudartVersion(void) {
  return CUDART_VERSION;
}

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS:
      return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED:
      return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM:
      return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED:
      return "CUDNN_STATUS_NOT_SUPPORTED";
    default:
      return "CUDNN_STATUS (emulated cuDNN)";
  }
}

void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (message && max_size) std::snprintf(message, max_size, "%s", "");
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  const char* off = std::getenv("ROTOR_EMU_CUDNN");
  if (off && std::string(off) == "off") return CUDNN_STATUS_NOT_INITIALIZED;
  if (!handle) return CUDNN_STATUS_BAD_PARAM;
  *handle = reinterpret_cast<cudnnHandle_t>(new Handle);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete reinterpret_cast<Handle*>(handle);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUDNN_STATUS_BAD_PARAM;
  reinterpret_cast<Handle*>(handle)->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* stream) {
  if (!handle || !stream) return CUDNN_STATUS_BAD_PARAM;
  *stream = reinterpret_cast<Handle*>(handle)->stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t* descriptor) {
  if (!descriptor) return CUDNN_STATUS_BAD_PARAM;
  auto* d = new Desc;
  d->type = type;
  *descriptor = reinterpret_cast<cudnnBackendDescriptor_t>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  delete reinterpret_cast<Desc*>(descriptor);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendInitialize(cudnnBackendDescriptor_t) {
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count,
                                       const void* elements) {
  auto* d = reinterpret_cast<Desc*>(descriptor);
  if (!d || count < 0 || (count > 0 && !elements)) return CUDNN_STATUS_BAD_PARAM;
  if (d->finalized) return CUDNN_STATUS_NOT_INITIALIZED;  // set after finalize
  Attr a;
  a.type = type;
  a.count = count;
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    std::lock_guard<std::mutex> lock(mutex());
    for (int64_t i = 0; i < count; ++i) {
      const Desc* r = static_cast<Desc* const*>(elements)[i];
      a.refs.push_back(r ? std::make_shared<const Desc>(*r) : nullptr);
    }
  } else {
    const size_t n = type_bytes(type) * static_cast<size_t>(count);
    a.bytes.resize(n);
    if (n) std::memcpy(a.bytes.data(), elements, n);
  }
  d->attrs[name] = std::move(a);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  auto* d = reinterpret_cast<Desc*>(descriptor);
  if (!d) return CUDNN_STATUS_BAD_PARAM;
  std::lock_guard<std::mutex> lock(mutex());
  switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
      const Attr* dims = find(d, CUDNN_ATTR_TENSOR_DIMENSIONS);
      const Attr* strides = find(d, CUDNN_ATTR_TENSOR_STRIDES);
      if (!dims || !strides || !find(d, CUDNN_ATTR_TENSOR_UNIQUE_ID) ||
          dims->count != strides->count)
        return CUDNN_STATUS_BAD_PARAM;
      for (int64_t v : int64s(*dims))
        if (v <= 0) return CUDNN_STATUS_BAD_PARAM;
      break;
    }
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: {
      const cudnnStatus_t s = snapshot(d);
      if (s != CUDNN_STATUS_SUCCESS) return s;
      break;
    }
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: {
      const Desc* g = desc_attr(d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH);
      if (!g || !g->program) return CUDNN_STATUS_BAD_PARAM;
      if (scalar_or(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, 0, "GLOBAL_INDEX") >= engine_count())
        return CUDNN_STATUS_NOT_SUPPORTED;
      d->program = g->program;
      break;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: {
      const Desc* e = desc_attr(d, CUDNN_ATTR_ENGINECFG_ENGINE);
      if (!e || !e->program) return CUDNN_STATUS_BAD_PARAM;
      d->program = e->program;
      break;
    }
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
      const Desc* c = desc_attr(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
      if (!c || !c->program) return CUDNN_STATUS_BAD_PARAM;
      d->program = c->program;
      break;
    }
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: {
      const Desc* g = desc_attr(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
      if (!g || !g->program) return CUDNN_STATUS_BAD_PARAM;
      d->program = g->program;
      break;
    }
    default:
      break;
  }
  d->finalized = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t* count, void* elements) {
  auto* d = reinterpret_cast<Desc*>(descriptor);
  if (!d) return CUDNN_STATUS_BAD_PARAM;
  std::lock_guard<std::mutex> lock(mutex());
  auto answer_int64 = [&](int64_t v) {
    if (count) *count = 1;
    if (requested >= 1 && elements) {
      if (type == CUDNN_TYPE_INT64)
        std::memcpy(elements, &v, 8);
      else
        return CUDNN_STATUS_BAD_PARAM;
    }
    return CUDNN_STATUS_SUCCESS;
  };
  auto answer_none = [&] {
    if (count) *count = 0;
    return CUDNN_STATUS_SUCCESS;
  };
  // Copies an internal descriptor into one the caller made.
  auto copy_into = [&](const Desc& from, void* to) {
    Desc* t = *static_cast<Desc**>(to);
    if (!t) fail("GetAttribute with a null descriptor to fill");
    *t = from;
  };
  switch (name) {
    case CUDNN_ATTR_ENGINEHEUR_RESULTS: {
      if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR) return CUDNN_STATUS_BAD_PARAM;
      if (!d->finalized || !d->program) return CUDNN_STATUS_BAD_PARAM;
      if (count) *count = engine_count();
      if (requested >= 1 && elements) {
        Desc engine;
        engine.type = CUDNN_BACKEND_ENGINE_DESCRIPTOR;
        engine.finalized = true;
        engine.program = d->program;
        engine.attrs[CUDNN_ATTR_ENGINE_OPERATION_GRAPH] =
            d->attrs.at(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
        int64_t zero = 0;
        Attr ia{CUDNN_TYPE_INT64, 1, std::vector<unsigned char>(8), {}};
        std::memcpy(ia.bytes.data(), &zero, 8);
        engine.attrs[CUDNN_ATTR_ENGINE_GLOBAL_INDEX] = ia;
        Desc cfg;
        cfg.type = CUDNN_BACKEND_ENGINECFG_DESCRIPTOR;
        cfg.finalized = true;
        cfg.program = d->program;
        cfg.attrs[CUDNN_ATTR_ENGINECFG_ENGINE] = refs_attr({std::make_shared<const Desc>(engine)});
        copy_into(cfg, elements);
      }
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT:
      return answer_int64(engine_count());
    case CUDNN_ATTR_ENGINECFG_ENGINE: {
      const Desc* e = desc_attr(d, CUDNN_ATTR_ENGINECFG_ENGINE);
      if (!e) return CUDNN_STATUS_BAD_PARAM;
      if (count) *count = 1;
      if (requested >= 1 && elements) copy_into(*e, elements);
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_ATTR_ENGINECFG_KNOB_CHOICES:
    case CUDNN_ATTR_ENGINE_KNOB_INFO:
    case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE:
    case CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE:
    case CUDNN_ATTR_ENGINE_LAYOUT_INFO:
    case CUDNN_ATTR_EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS:
      return answer_none();
    case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE:
    case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
      if (!d->program) return CUDNN_STATUS_BAD_PARAM;
      return answer_int64(d->program->workspace);
    case CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED:
      return answer_int64(0);
    default:
      break;
  }
  const Attr* a = find(d, name);
  if (!a) {
    fail("GetAttribute of attribute " + std::to_string(name) + " on a descriptor of type " +
         std::to_string(d->type) + " is not emulated");
  }
  if (a->type != type) return CUDNN_STATUS_BAD_PARAM;
  if (count) *count = a->count;
  if (elements && requested > 0) {
    const int64_t n = std::min(requested, a->count);
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
      for (int64_t i = 0; i < n; ++i) {
        Desc* to = static_cast<Desc**>(elements)[i];
        if (to && a->refs[i]) *to = *a->refs[i];
      }
    } else {
      std::memcpy(elements, a->bytes.data(), static_cast<size_t>(n) * type_bytes(type));
    }
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                  cudnnBackendDescriptor_t variant_pack) {
  auto* h = reinterpret_cast<Handle*>(handle);
  auto* p = reinterpret_cast<Desc*>(plan);
  auto* vp = reinterpret_cast<Desc*>(variant_pack);
  if (!h || !p || !vp || !p->finalized || !p->program || !vp->finalized)
    return CUDNN_STATUS_BAD_PARAM;
  std::shared_ptr<const Program> program;
  std::unordered_map<int64_t, void*> ptrs;
  void* workspace = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex());
    program = p->program;
    const Attr* uids = find(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    const Attr* data = find(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    if (!uids || !data || uids->count != data->count) return CUDNN_STATUS_BAD_PARAM;
    const std::vector<int64_t> ids = int64s(*uids);
    std::vector<void*> pv(static_cast<size_t>(data->count));
    std::memcpy(pv.data(), data->bytes.data(), pv.size() * 8);
    for (size_t i = 0; i < ids.size(); ++i) ptrs[ids[i]] = pv[i];
    if (const Attr* ws = find(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE))
      std::memcpy(&workspace, ws->bytes.data(), 8);
  }
  for (const auto& [uid, t] : program->tensors) {
    if (t.is_virtual) continue;
    auto it = ptrs.find(uid);
    if (it == ptrs.end() || !it->second)
      fail("the variant pack has no pointer for tensor " + std::to_string(uid));
    if (t.by_value) {
      if (emu_device::is_device(it->second))
        fail("by-value tensor " + std::to_string(uid) + " points into device memory");
      continue;
    }
    emu_device::check_range("cuDNN tensor " + std::to_string(uid), it->second, extent(t));
  }
  if (program->workspace > 0)
    emu_device::check_range("cuDNN workspace", workspace, static_cast<size_t>(program->workspace));
  const cudaStream_t stream = h->stream;
  emu_device::in_order(stream);
  if (program->workspace > 0) std::memset(workspace, 0xa5, static_cast<size_t>(program->workspace));
  Interpreter(*program, ptrs).run();
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
