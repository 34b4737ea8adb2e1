// The attention plan (nn/attention_plan.h) for CPUs and for made-up sm_70,
// sm_80 and sm_90 devices: one table of cases per attention kind with the
// plan each must get (core, kernel, who rotates q and k, and the reason) --
// every registered kind has its rows -- then every combination of device,
// dtype, head dim, length, mask, RoPE and attention.impl checked for what any
// plan must hold (the kernel it names runs the case, cuDNN only where it
// serves, RoPE in the core only where the core rotates).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/attention_kind.h"
#include "nn/attention_plan.h"
#include "ops/attention_device.h"
#include "ops/cudnn_attention.h"

namespace rotor {
namespace {

using nn::AttentionCase;
using nn::AttentionCore;
using nn::AttentionImpl;
using nn::AttentionKind;
using nn::AttentionPlan;
using nn::RopePlacement;
using ops::AttentionDevice;
using ops::FlashKernel;

AttentionDevice gpu(int sm, bool tc, bool volta, ops::CudnnCapability cudnn) {
  AttentionDevice d;
  d.cuda = true;
  d.sm = sm;
  d.tc_code = tc;
  d.volta_code = volta;
  d.cudnn = cudnn;
  return d;
}

AttentionDevice cpu_with_frontend() {
  AttentionDevice d;
  d.cudnn = {true, 0, 0};  // as in a build with the cuDNN frontend: the CPU is the reason
  return d;
}

struct Machines {
  AttentionDevice cpu = cpu_with_frontend();
  AttentionDevice v100 = gpu(70, false, true, {true, 70, 91400});          // a CUDA 12 build
  AttentionDevice v100_cuda13 = gpu(70, false, false, {true, 70, 91400});  // no sm_70 code
  AttentionDevice a100 = gpu(80, true, false, {true, 80, 90100});
  AttentionDevice a100_cudnn_9_10 = gpu(80, true, false, {true, 80, 91000});
  AttentionDevice h100 = gpu(90, true, false, {true, 90, 91400});
  AttentionDevice h100_no_frontend = gpu(90, true, false, {false, 90, 91400});
};
const Machines M;

struct Row {
  std::string name;
  const AttentionDevice* device;
  AttentionImpl impl;
  DType dtype;
  int64_t D, Tq, Tk;
  bool causal = false, padding = false, rope = false, rope_in_kernel = false;
  int64_t B = 8, H = 8;
  std::string plan;                // AttentionPlan::str(), or "error"
  std::string why;                 // a part of the reason (or of the error)
  std::string kind = "softmax";    // the key of its table in kRows
  nn::LinearKindOptions linear{};  // kind linear's settings
  bool dropout = false;
  bool alibi = false;      // model.position alibi: only a core that adds the bias may run it
  bool t5 = false;         // model.position t5: likewise, and it sums the table's gradient
  bool xl = false;         // model.position transformer_xl: a dense bias, the CPU reference only
  int64_t rel_max = 128;   // model.t5.max_distance (with t5)
  bool packed = false;     // data.packing documents: the plan lays them end to end or regroups
  bool inference = false;  // a forward outside training (validation, inference)
};

// r outside training.
Row inference(Row r) {
  r.inference = true;
  return r;
}

// r over packed documents (its Tq, Tk: the longest document's length).
Row packed(Row r) {
  r.packed = true;
  return r;
}

// gtest prints a failing row by its name.
void PrintTo(const Row& r, std::ostream* os) {
  *os << r.name;
}

AttentionCase case_of(const Row& r) {
  AttentionCase c;
  const std::optional<AttentionKind> kind = nn::attention_kind(r.kind);
  if (!kind) throw std::invalid_argument("row " + r.name + ": no attention kind " + r.kind);
  c.kind = *kind;
  c.impl = r.impl;
  c.rope = r.rope;
  c.rope_in_kernel = r.rope_in_kernel;
  c.causal = r.causal;
  c.key_padding = r.padding;
  c.dtype = r.dtype;
  c.B = r.B;
  c.H = r.H;
  c.Tq = r.Tq;
  c.Tk = r.Tk;
  c.D = r.D;
  c.linear = r.linear;
  c.dropout = r.dropout;
  c.alibi = r.alibi;
  c.rel_bias = r.t5;
  c.rel_max = r.t5 ? r.rel_max : 0;
  c.score_bias = r.xl;
  c.packed = r.packed;
  c.training = !r.inference;
  return c;
}

nn::LinearKindOptions linear_options(ops::LinearFeatureMap map, ops::LinearRope rope,
                                     int64_t features = 0) {
  nn::LinearKindOptions l;
  l.feature_map = map;
  l.rope = rope;
  l.features = features;
  return l;
}

constexpr auto Auto = AttentionImpl::Auto;
constexpr auto Rotor = AttentionImpl::Rotor;
constexpr auto Cudnn = AttentionImpl::Cudnn;
constexpr auto Ref = AttentionImpl::Reference;
constexpr auto F32 = DType::F32;
constexpr auto F16 = DType::F16;
constexpr auto BF16 = DType::BF16;
constexpr auto Elu1 = ops::LinearFeatureMap::Elu1;
constexpr auto Favor = ops::LinearFeatureMap::Favor;
constexpr auto After = ops::LinearRope::AfterFeatureMap;
constexpr auto Before = ops::LinearRope::BeforeFeatureMap;

// The rows of each attention kind, by its name:
// name, device, impl, dtype, D, Tq, Tk, causal, padding, rope, rope_in_kernel, B, H, plan, why
const std::map<std::string, std::vector<Row>> kRows = {
    {"softmax",
     {
         // The CPU: the materialized core for auto, the flash twin when asked for.
         // ALiBi (model.position alibi): every rotor core adds its bias -- both
         // CPU cores, the CUDA reference and every CUDA flash kernel -- and cuDNN
         // does not: a GPU never chooses cuDNN for it, and asking is an error.
         {"cpu auto alibi",
          &M.cpu,
          Auto,
          F32,
          64,
          128,
          128,
          true,
          true,
          false,
          false,
          8,
          8,
          "reference, ALiBi in the core",
          "ALiBi's bias computed inside the core",
          "",
          {},
          false,
          true},
         {"cpu rotor alibi",
          &M.cpu,
          Rotor,
          F32,
          64,
          128,
          128,
          false,
          true,
          false,
          false,
          8,
          8,
          "rotor (cpu), ALiBi in the core",
          "flash core's CPU twin; ALiBi",
          "",
          {},
          false,
          true},
         {"cpu reference alibi bf16",
          &M.cpu,
          Ref,
          BF16,
          64,
          64,
          64,
          true,
          false,
          false,
          false,
          8,
          8,
          "reference, ALiBi in the core",
          "ALiBi's bias computed inside the core",
          "",
          {},
          false,
          true},
         // T5's bias (model.position t5): every rotor core adds it and sums
         // its gradient -- the CPU cores, the CUDA materialized core and the
         // CUDA flash kernels up to max_distance 512 (their shared-memory
         // column) -- and cuDNN does not.
         {"cpu auto t5",
          &M.cpu,
          Auto,
          F32,
          32,
          128,
          128,
          false,
          true,
          false,
          false,
          8,
          8,
          "reference, T5 bias in the core",
          "T5's bias added inside the core",
          "",
          {},
          false,
          false,
          true},
         {"cpu rotor t5",
          &M.cpu,
          Rotor,
          F32,
          32,
          128,
          128,
          true,
          false,
          false,
          false,
          8,
          8,
          "rotor (cpu), T5 bias in the core",
          "the flash core's CPU twin",
          "",
          {},
          false,
          false,
          true},
         {"h100 auto t5",
          &M.h100,
          Auto,
          BF16,
          64,
          512,
          512,
          true,
          false,
          false,
          false,
          8,
          8,
          "rotor (tc), T5 bias in the core",
          "rotor's tc flash kernel, cuDNN's attention does not add T5's relative bias "
          "(model.position t5); T5's bias added inside the core",
          "",
          {},
          false,
          false,
          true},
         {"h100 rotor t5",
          &M.h100,
          Rotor,
          BF16,
          64,
          512,
          512,
          true,
          false,
          false,
          false,
          8,
          8,
          "rotor (tc), T5 bias in the core",
          "attention.impl rotor: rotor's tc flash kernel",
          "",
          {},
          false,
          false,
          true},
         {"h100 auto fp32 t5",
          &M.h100,
          Auto,
          F32,
          64,
          512,
          512,
          true,
          false,
          false,
          false,
          8,
          8,
          "rotor (portable), T5 bias in the core",
          "rotor's portable flash kernel",
          "",
          {},
          false,
          false,
          true},
         {"v100 auto fp16 t5",
          &M.v100,
          Auto,
          F16,
          128,
          512,
          512,
          false,
          true,
          false,
          false,
          8,
          8,
          "rotor (volta), T5 bias in the core",
          "rotor's volta flash kernel",
          "",
          {},
          false,
          false,
          true},
         // A table past what the kernels hold in shared memory: the
         // materialized core, or an error naming the limit.
         {"h100 auto t5 max_distance 1024",
          &M.h100,
          Auto,
          BF16,
          64,
          512,
          512,
          true,
          false,
          false,
          false,
          8,
          8,
          "reference, T5 bias in the core",
          "holds T5's table for model.t5.max_distance up to 512, not 1024; the reference core "
          "takes any",
          "",
          {},
          false,
          false,
          true,
          false,
          1024},
         {"h100 rotor t5 max_distance 1024",
          &M.h100,
          Rotor,
          BF16,
          64,
          512,
          512,
          true,
          false,
          false,
          false,
          8,
          8,
          "error",
          "attention.impl: rotor: rotor's portable flash kernel holds T5's table for "
          "model.t5.max_distance up to 512, not 1024",
          "",
          {},
          false,
          false,
          true,
          false,
          1024},
         {"h100 cudnn t5",
          &M.h100,
          Cudnn,
          BF16,
          64,
          512,
          512,
          false,
          false,
          false,
          false,
          8,
          8,
          "error",
          "attention.impl: cudnn: cuDNN's attention does not add T5's relative bias",
          "",
          {},
          false,
          false,
          true},
         // Transformer-XL's terms: a dense bias, which the CPU's
         // materialized core alone adds so far.
         {"cpu auto transformer_xl",
          &M.cpu,
          Auto,
          F32,
          32,
          128,
          128,
          true,
          false,
          false,
          false,
          8,
          8,
          "reference",
          "adds the dense score bias of Transformer-XL's terms, TUPE's correlation",
          "",
          {},
          false,
          false,
          false,
          true},
         {"cpu rotor transformer_xl",
          &M.cpu,
          Rotor,
          F32,
          32,
          128,
          128,
          true,
          false,
          false,
          false,
          8,
          8,
          "error",
          "attention.impl: rotor: Transformer-XL's relative terms",
          "",
          {},
          false,
          false,
          false,
          true},
         // A dense bias on a GPU (TUPE's correlation; XL's and DeBERTa's
         // layers are refused there at load): the CUDA materialized core.
         {"h100 auto dense bias",
          &M.h100,
          Auto,
          F32,
          64,
          512,
          512,
          false,
          true,
          false,
          false,
          8,
          8,
          "reference",
          "adds the dense score bias",
          "",
          {},
          false,
          false,
          false,
          true},
         {"h100 rotor dense bias",
          &M.h100,
          Rotor,
          F32,
          64,
          512,
          512,
          false,
          true,
          false,
          false,
          8,
          8,
          "error",
          "a dense bias that only the materialized core adds",
          "",
          {},
          false,
          false,
          false,
          true},
         {"h100 auto alibi",
          &M.h100,
          Auto,
          BF16,
          64,
          512,
          512,
          true,
          false,
          false,
          false,
          8,
          8,
          "rotor (tc), ALiBi in the core",
          "rotor's tc flash kernel, cuDNN's attention does not add ALiBi's bias",
          "",
          {},
          false,
          true},
         {"h100 auto short alibi",
          &M.h100,
          Auto,
          BF16,
          64,
          64,
          64,
          true,
          false,
          false,
          false,
          8,
          8,
          "rotor (tc), ALiBi in the core",
          "below 128 keys",
          "",
          {},
          false,
          true},
         {"h100 auto alibi decoder queries",
          &M.h100,
          Auto,
          F16,
          128,
          7,
          300,
          true,
          false,
          false,
          false,
          8,
          8,
          "rotor (tc), ALiBi in the core",
          "ALiBi's bias computed inside the core",
          "",
          {},
          false,
          true},
         {"h100 rotor alibi",
          &M.h100,
          Rotor,
          BF16,
          64,
          512,
          512,
          true,
          false,
          false,
          false,
          8,
          8,
          "rotor (tc), ALiBi in the core",
          "attention.impl rotor: rotor's tc flash kernel; ALiBi's bias computed inside the core",
          "",
          {},
          false,
          true},
         {"h100 auto fp32 alibi",
          &M.h100,
          Auto,
          F32,
          32,
          512,
          512,
          false,
          false,
          false,
          false,
          8,
          8,
          "rotor (portable), ALiBi in the core",
          "rotor's portable flash kernel, cuDNN's attention does not add ALiBi",
          "",
          {},
          false,
          true},
         {"v100 auto fp16 alibi",
          &M.v100,
          Auto,
          F16,
          128,
          512,
          512,
          false,
          false,
          false,
          false,
          8,
          8,
          "rotor (volta), ALiBi in the core",
          "cuDNN's attention does not add ALiBi's bias",
          "",
          {},
          false,
          true},
         {"h100 auto head dim 96 alibi",
          &M.h100,
          Auto,
          BF16,
          96,
          64,
          64,
          true,
          false,
          false,
          false,
          8,
          8,
          "reference, ALiBi in the core",
          "(rotor's portable flash kernel takes head dims 32, 64 and 128, not 96; cuDNN: cuDNN's "
          "attention does not add ALiBi's bias (model.position alibi))",
          "",
          {},
          false,
          true},
         {"h100 cudnn alibi",
          &M.h100,
          Cudnn,
          BF16,
          64,
          512,
          512,
          true,
          false,
          false,
          false,
          8,
          8,
          "error",
          "attention.impl: cudnn: cuDNN's attention does not add ALiBi's bias (model.position "
          "alibi)",
          "",
          {},
          false,
          true},
         {"h100 reference alibi",
          &M.h100,
          Ref,
          BF16,
          64,
          512,
          512,
          true,
          false,
          false,
          false,
          8,
          8,
          "reference, ALiBi in the core",
          "attention.impl reference: the materialized core; ALiBi's bias computed inside the core",
          "",
          {},
          false,
          true},
         {"cpu auto", &M.cpu, Auto, F32, 64, 512, 512, false, true, false, false, 8, 8, "reference",
          "materialized core on the CPU"},
         {"cpu auto rope_in_kernel", &M.cpu, Auto, F32, 64, 64, 64, false, true, true, true, 8, 8,
          "reference, RoPE in the head split", "the reference core does not rotate"},
         {"cpu rotor rope_in_kernel", &M.cpu, Rotor, F32, 64, 64, 64, true, false, true, true, 8, 8,
          "rotor (cpu), RoPE in the core", "RoPE rotated inside the flash attention core"},
         {"cpu rotor odd head dim", &M.cpu, Rotor, F32, 80, 9, 9, false, false, false, false, 8, 8,
          "rotor (cpu)", "CPU twin"},
         {"cpu rotor rope", &M.cpu, Rotor, F32, 32, 7, 7, false, false, true, false, 8, 8,
          "rotor (cpu), RoPE in the head split", "CPU twin"},
         {"cpu reference", &M.cpu, Ref, F32, 128, 3, 3, false, false, false, false, 8, 8,
          "reference", "attention.impl reference"},
         {"cpu cudnn", &M.cpu, Cudnn, F32, 64, 64, 64, false, false, false, false, 8, 8, "error",
          "attention.impl: cudnn: cuDNN attention runs on CUDA devices only"},
         // sm_90: cuDNN from 128 keys where it serves, rotor's tc kernel below.
         {"h100 auto mlm", &M.h100, Auto, BF16, 64, 512, 512, false, true, false, false, 64, 12,
          "cudnn", "cuDNN attention for 128 keys or more"},
         {"h100 auto long causal", &M.h100, Auto, F16, 128, 4096, 4096, true, false, false, false,
          4, 16, "cudnn", "128 keys or more"},
         {"h100 auto short", &M.h100, Auto, BF16, 64, 64, 64, false, true, false, false, 8, 8,
          "rotor (tc)", "below 128 keys"},
         {"h100 auto 127 keys", &M.h100, Auto, BF16, 32, 127, 127, false, false, false, false, 8, 8,
          "rotor (tc)", "below 128 keys"},
         {"h100 auto one query", &M.h100, Auto, BF16, 64, 1, 1, false, false, false, false, 8, 8,
          "rotor (tc)", "below 128 keys"},
         {"h100 auto fp32", &M.h100, Auto, F32, 64, 512, 512, false, true, false, false, 8, 8,
          "rotor (portable)", "f16 or bf16, not f32"},
         {"h100 auto fp32 head dim 256", &M.h100, Auto, F32, 256, 512, 512, false, false, false,
          false, 8, 8, "reference", "not 256"},
         {"h100 auto head dim 96", &M.h100, Auto, BF16, 96, 64, 64, false, false, false, false, 8,
          8, "cudnn", "takes head dims 32, 64 and 128, not 96"},
         {"h100 auto head dim 100", &M.h100, Auto, BF16, 100, 64, 64, false, false, false, false, 8,
          8, "reference", "head dim 100"},
         {"h100 auto causal decoder queries", &M.h100, Auto, BF16, 64, 7, 512, true, true, false,
          false, 8, 8, "rotor (tc)", "neither key lengths nor dropout"},
         {"h100 auto batch x heads", &M.h100, Auto, BF16, 64, 64, 64, false, false, false, false,
          8192, 16, "cudnn", "exceeds 65535"},
         {"h100 auto no frontend", &M.h100_no_frontend, Auto, BF16, 64, 512, 512, false, true,
          false, false, 8, 8, "rotor (tc)", "without the cuDNN frontend"},
         {"h100 rotor", &M.h100, Rotor, BF16, 64, 512, 512, false, true, false, false, 8, 8,
          "rotor (tc)", "attention.impl rotor"},
         {"h100 rotor fp32", &M.h100, Rotor, F32, 128, 512, 512, true, false, false, false, 8, 8,
          "rotor (portable)", "portable"},
         // Packed documents: rotor's flash core reads them end to end
         // (cu_seqlens); the other cores take them regrouped.
         packed({"cpu rotor packed", &M.cpu, Rotor, F32, 64, 70, 70, true, true, true, false, 8, 8,
                 "rotor (cpu), RoPE in the head split, documents end to end",
                 "packed documents end to end (cu_seqlens)"}),
         packed({"cpu auto packed", &M.cpu, Auto, F32, 64, 70, 70, true, true, false, false, 8, 8,
                 "reference", "materialized core on the CPU"}),
         packed({"h100 auto packed", &M.h100, Auto, BF16, 64, 100, 100, true, true, true, true, 8,
                 8, "rotor (tc), RoPE in the core, documents end to end", "cu_seqlens"}),
         packed({"h100 auto packed long", &M.h100, Auto, BF16, 64, 512, 512, false, true, false,
                 false, 8, 8, "cudnn", "cuDNN attention for 128 keys or more"}),
         packed({"a100 rotor packed fp32", &M.a100, Rotor, F32, 32, 9, 9, false, true, false, false,
                 8, 8, "rotor (portable), documents end to end", "cu_seqlens"}),
         {"h100 rotor head dim 96", &M.h100, Rotor, BF16, 96, 64, 64, false, false, false, false, 8,
          8, "error",
          "attention.impl: rotor: rotor's portable flash kernel takes head dims 32, 64 and 128"},
         {"h100 cudnn short", &M.h100, Cudnn, BF16, 64, 64, 64, false, true, false, false, 8, 8,
          "cudnn", "attention.impl cudnn"},
         {"h100 cudnn fp32", &M.h100, Cudnn, F32, 64, 512, 512, false, false, false, false, 8, 8,
          "error", "attention.impl: cudnn: cuDNN attention computes in f16 or bf16"},
         // Validation and inference run in f32 under every precision: there
         // attention.impl cudnn takes auto's core and says why.
         inference({"h100 cudnn fp32 validation", &M.h100, Cudnn, F32, 64, 512, 512, false, true,
                    false, false, 8, 8, "rotor (portable)",
                    "attention.impl cudnn outside training: f32"}),
         inference({"h100 cudnn bf16 inference", &M.h100, Cudnn, BF16, 64, 512, 512, false, true,
                    false, false, 8, 8, "cudnn", "attention.impl cudnn: cuDNN's fused attention"}),
         inference({"cpu cudnn validation", &M.cpu, Cudnn, F32, 64, 64, 64, false, false, false,
                    false, 8, 8, "error", "attention.impl: cudnn"}),
         {"h100 cudnn no frontend", &M.h100_no_frontend, Cudnn, BF16, 64, 512, 512, false, false,
          false, false, 8, 8, "error", "built without the cuDNN frontend"},
         {"h100 reference", &M.h100, Ref, BF16, 64, 512, 512, false, true, true, true, 8, 8,
          "reference, RoPE in the head split", "does not rotate"},
         // RoPE's placement on a GPU: the tc kernel alone rotates.
         {"h100 rotor rope_in_kernel", &M.h100, Rotor, BF16, 64, 512, 512, false, true, true, true,
          8, 8, "rotor (tc), RoPE in the core", "RoPE rotated inside the flash attention core"},
         {"h100 rotor fp32 rope_in_kernel", &M.h100, Rotor, F32, 64, 512, 512, false, true, true,
          true, 8, 8, "rotor (portable), RoPE in the head split",
          "only the tc kernel rotates on a GPU"},
         {"h100 auto long rope_in_kernel", &M.h100, Auto, BF16, 64, 512, 512, false, true, true,
          true, 8, 8, "cudnn, RoPE in the head split", "the cudnn core does not rotate"},
         {"h100 auto short rope_in_kernel", &M.h100, Auto, BF16, 64, 64, 64, true, false, true,
          true, 8, 8, "rotor (tc), RoPE in the core",
          "RoPE rotated inside the flash attention core"},
         {"h100 auto short rope", &M.h100, Auto, BF16, 64, 64, 64, true, false, true, false, 8, 8,
          "rotor (tc), RoPE in the head split", "below 128 keys"},
         // sm_80.
         {"a100 auto long", &M.a100, Auto, F16, 32, 2048, 2048, false, false, false, false, 8, 8,
          "cudnn", "128 keys or more"},
         {"a100 auto short causal", &M.a100, Auto, BF16, 128, 100, 100, true, true, false, false, 8,
          8, "rotor (tc)", "below 128 keys"},
         {"a100 cuDNN 9.10.0", &M.a100_cudnn_9_10, Auto, BF16, 64, 512, 512, false, true, false,
          false, 8, 8, "rotor (tc)", "known attention bugs"},
         {"a100 auto fp32", &M.a100, Auto, F32, 32, 64, 64, false, false, false, false, 8, 8,
          "rotor (portable)", "below 128 keys"},
         // sm_70: the Volta kernel in a CUDA 12 build, the portable one otherwise.
         {"v100 auto fp16", &M.v100, Auto, F16, 64, 512, 512, false, true, false, false, 8, 8,
          "rotor (volta)", "sm_80 or newer, this GPU is sm_70"},
         {"v100 auto fp16 head dim 32", &M.v100, Auto, F16, 32, 512, 512, false, true, false, false,
          8, 8, "rotor (portable)", "sm_80 or newer"},
         {"v100 auto bf16", &M.v100, Auto, BF16, 128, 64, 64, true, false, false, false, 8, 8,
          "rotor (portable)", "below 128 keys"},
         {"v100 auto fp32", &M.v100, Auto, F32, 128, 512, 512, false, false, false, false, 8, 8,
          "rotor (portable)", "sm_80 or newer"},
         {"v100 cuda 13 build", &M.v100_cuda13, Auto, F16, 64, 512, 512, false, true, false, false,
          8, 8, "rotor (portable)", "sm_80 or newer"},
         {"v100 auto rope_in_kernel", &M.v100, Auto, F16, 64, 64, 64, false, false, true, true, 8,
          8, "rotor (volta), RoPE in the head split", "only the tc kernel rotates"},
         {"v100 cudnn", &M.v100, Cudnn, F16, 64, 512, 512, false, false, false, false, 8, 8,
          "error", "attention.impl: cudnn: cuDNN attention needs sm_80 or newer"},
         {"v100 rotor head dim 256", &M.v100, Rotor, F16, 256, 64, 64, false, false, false, false,
          8, 8, "error", "not 256"},
     }},
    // Linear attention: one core, the CPU op; under RoPE the op rotates (after
    // or before the feature map), never the head split; on a GPU its CUDA path.
    {"linear",
     {
         {"cpu alibi", &M.cpu, Auto, F32, 64, 128, 128, true, false, false, false, 8, 8, "error",
          "attention.kind: linear attention has no scores to add ALiBi's bias to", "",
          linear_options(Elu1, After), false, true},
         {"cpu elu1 rope", &M.cpu, Auto, F32, 64, 128, 128, false, false, true, false, 8, 8,
          "linear: linear (elu1, M 64), RoPE in the core (after_feature_map)",
          "RoPE inside the core, after_feature_map", "", linear_options(Elu1, After)},
         {"cpu elu1 no positions", &M.cpu, Auto, F32, 64, 128, 128, false, false, false, false, 8,
          8, "linear: linear (elu1, M 64)", "elu1 features (M = 64) on the CPU", "",
          linear_options(Elu1, After)},
         {"cpu elu1 rope_in_kernel changes nothing", &M.cpu, Auto, F32, 64, 128, 128, false, false,
          true, true, 8, 8, "linear: linear (elu1, M 64), RoPE in the core (after_feature_map)",
          "after_feature_map", "", linear_options(Elu1, After)},
         {"cpu causal padding favor rope before", &M.cpu, Auto, F32, 64, 128, 128, true, true, true,
          false, 8, 8, "linear: linear (favor, M 266), RoPE in the core (before_feature_map)",
          "favor features (M = 266)", "", linear_options(Favor, Before)},
         {"cpu causal favor D 128 rope after: M even", &M.cpu, Auto, F32, 128, 64, 64, true, false,
          true, false, 8, 8, "linear: linear (favor, M 620), RoPE in the core (after_feature_map)",
          "M = 620", "", linear_options(Favor, After)},
         {"cpu favor D 128 no rope: floor(D ln D)", &M.cpu, Auto, F32, 128, 64, 64, false, true,
          false, false, 8, 8, "linear: linear (favor, M 621)", "M = 621", "",
          linear_options(Favor, After)},
         {"cpu favor 8 features bf16", &M.cpu, Ref, BF16, 32, 100, 100, true, true, true, false, 2,
          4, "linear: linear (favor, M 8), RoPE in the core (after_feature_map)", "M = 8", "",
          linear_options(Favor, After, 8)},
         {"cpu favor odd features rotated after", &M.cpu, Auto, F32, 64, 64, 64, false, false, true,
          false, 8, 8, "error", "attention.features: RoPE after the feature map", "",
          linear_options(Favor, After, 7)},
         {"cpu favor odd features rotated before", &M.cpu, Auto, F32, 64, 64, 64, false, false,
          true, false, 8, 8, "linear: linear (favor, M 7), RoPE in the core (before_feature_map)",
          "M = 7", "", linear_options(Favor, Before, 7)},
         {"cpu rotor", &M.cpu, Rotor, F32, 64, 64, 64, false, false, true, false, 8, 8, "error",
          "attention.impl: rotor is a core of softmax attention", "", linear_options(Elu1, After)},
         {"cpu dropout", &M.cpu, Auto, F32, 64, 64, 64, false, false, false, false, 8, 8, "error",
          "model.attention_dropout", "", linear_options(Elu1, After), true},
         {"h100 auto", &M.h100, Auto, BF16, 64, 512, 512, true, false, true, false, 8, 8,
          "linear: linear (elu1, M 64), RoPE in the core (after_feature_map)",
          "elu1 features (M = 64) on the GPU", "", linear_options(Elu1, After)},
         {"v100 auto f32", &M.v100, Auto, F32, 64, 64, 64, false, true, false, false, 8, 8,
          "linear: linear (favor, M 266)", "M = 266) on the GPU (fused feature kernels", "",
          linear_options(Favor, Before)},
     }}};

// Every row, its kind set from the key of its table.
std::vector<Row> all_rows() {
  std::vector<Row> out;
  for (const auto& [kind, rows] : kRows)
    for (Row r : rows) {
      r.kind = kind;
      r.name = kind + " " + r.name;
      out.push_back(r);
    }
  return out;
}

class AttentionPlanTable : public ::testing::TestWithParam<Row> {};

TEST_P(AttentionPlanTable, PlansTheCase) {
  const Row& r = GetParam();
  if (r.plan == "error") {
    try {
      const AttentionPlan p = nn::plan_attention(case_of(r), *r.device);
      FAIL() << "expected an error, got the plan " << p.str() << " (" << p.why << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(r.why), std::string::npos) << e.what();
    }
    return;
  }
  const AttentionPlan p = nn::plan_attention(case_of(r), *r.device);
  EXPECT_EQ(p.str(), r.plan) << p.why;
  EXPECT_NE(p.why.find(r.why), std::string::npos) << p.why;
  EXPECT_EQ(p.kind.name(), r.kind);
}

std::string row_name(const ::testing::TestParamInfo<Row>& info) {
  std::string s;
  for (char c : info.param.name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Rows, AttentionPlanTable, ::testing::ValuesIn(all_rows()), row_name);

// A new attention kind comes with its rows: every registered kind has a
// table, every table is a registered kind, and each kind is complete.
TEST(AttentionPlan, EveryKindHasRows) {
  ASSERT_FALSE(nn::attention_kinds().empty());
  EXPECT_EQ(nn::attention_kinds().front(), AttentionKind::Softmax);  // the default
  for (AttentionKind k : nn::attention_kinds()) {
    const std::string name(k.name());
    auto it = kRows.find(name);
    ASSERT_TRUE(it != kRows.end()) << "attention kind " << name << " has no rows";
    EXPECT_GE(it->second.size(), 3u) << name;
    EXPECT_EQ(nn::attention_kind(name), k);
    EXPECT_TRUE(k->plan && k->forward && k->backward) << name;
  }
  for (const auto& [name, rows] : kRows) EXPECT_TRUE(nn::attention_kind(name)) << name;
  EXPECT_FALSE(nn::attention_kind("Softmax"));
  EXPECT_FALSE(nn::attention_kind(""));
  // softmax normalizes a constant added to a query's scores away, and the
  // incremental decoder's cached step computes it.
  EXPECT_TRUE(AttentionKind::Softmax->shift_invariant);
  EXPECT_TRUE(AttentionKind::Softmax->cached_decode);
  // linear attention's numerator is not normalized by a softmax, and the
  // decoder has no running-sum step for it yet.
  const std::optional<AttentionKind> linear = nn::attention_kind("linear");
  ASSERT_TRUE(linear);
  EXPECT_FALSE((*linear)->shift_invariant);
  EXPECT_FALSE((*linear)->cached_decode);
}

// What every linear plan on the CPU holds: its own core, q left unscaled by
// the split, RoPE inside the op exactly where the model rotates, and the
// op's placement the one asked for.
TEST(AttentionPlan, LinearRotatesInsideItsCoreOnly) {
  int plans = 0;
  for (AttentionImpl impl : {Auto, Ref})
    for (DType dt : {F32, F16, BF16})
      for (int64_t D : {8, 32, 64, 128})
        for (int mask = 0; mask < 4; ++mask)
          for (bool rope : {false, true})
            for (auto map : {Elu1, ops::LinearFeatureMap::Relu, Favor})
              for (auto placement : {After, Before}) {
                Row r{"", &M.cpu, impl, dt, D, 64, 64, false, false, rope, false, 2, 2, "", ""};
                r.kind = "linear";
                r.causal = mask & 1;
                r.padding = mask & 2;
                r.linear = linear_options(map, placement);
                const AttentionPlan p = nn::plan_attention(case_of(r), M.cpu);
                const std::string where =
                    fmt::format("{} D{} mask {} rope {}", p.str(), D, mask, rope);
                ++plans;
                EXPECT_EQ(p.core, AttentionCore::Linear) << where;
                EXPECT_FALSE(p.split_scales_q) << where;
                EXPECT_FALSE(p.on_gpu) << where;
                EXPECT_EQ(p.rope, rope ? RopePlacement::Core : RopePlacement::None) << where;
                EXPECT_EQ(p.linear.rope, rope ? placement : ops::LinearRope::None) << where;
                EXPECT_EQ(p.linear.feature_map, map) << where;
                if (map != Favor) {
                  EXPECT_EQ(p.linear.features, D) << where;
                } else if (p.linear.rope == After) {
                  EXPECT_EQ(p.linear.features % 2, 0) << where;
                }
              }
  EXPECT_EQ(plans, 2 * 3 * 4 * 4 * 2 * 3 * 2);
}

// Asking cuDNN whether it builds a graph costs a build: the plan asks only
// where cuDNN could be chosen, and a refusal there leaves rotor's kernel.
TEST(AttentionPlan, AsksCudnnToBuildOnlyWhereItMatters) {
  AttentionDevice d = M.h100;
  int asked = 0;
  std::string answer;
  d.cudnn_builds = [&](const ops::CudnnAttentionCase&, float scale) {
    ++asked;
    EXPECT_EQ(scale, 1.0f);  // q arrives scaled by the head split
    return answer;
  };
  AttentionCase c;
  c.dtype = DType::BF16;
  c.B = c.H = 8;
  c.D = 64;
  c.Tq = c.Tk = 64;
  EXPECT_EQ(nn::plan_attention(c, d).str(), "rotor (tc)");
  EXPECT_EQ(asked, 0);
  c.Tq = c.Tk = 512;
  EXPECT_EQ(nn::plan_attention(c, d).str(), "cudnn");
  EXPECT_EQ(asked, 1);
  answer = "cuDNN found no engine for this graph";
  const AttentionPlan p = nn::plan_attention(c, d);
  EXPECT_EQ(p.str(), "rotor (tc)");
  EXPECT_NE(p.why.find("no engine"), std::string::npos) << p.why;
}

// What every softmax plan must hold, over every combination.
TEST(AttentionPlan, EveryPlanRunsWhereItSays) {
  const std::vector<const AttentionDevice*> devices = {&M.cpu,  &M.v100, &M.v100_cuda13,
                                                       &M.a100, &M.h100, &M.h100_no_frontend};
  int plans = 0, errors = 0;
  for (const AttentionDevice* dev : devices)
    for (AttentionImpl impl : {Auto, Rotor, Cudnn, Ref})
      for (DType dt : {F32, F16, BF16})
        for (int64_t D : {32, 64, 80, 96, 128, 256})
          for (int64_t T : {1, 64, 127, 128, 512, 4096})
            for (int mask = 0; mask < 4; ++mask)
              for (int rope = 0; rope < 3; ++rope) {
                Row r{"", dev, impl, dt, D, T, T, false, false, false, false, 8, 8, "", ""};
                r.causal = mask & 1;
                r.padding = mask & 2;
                r.rope = rope > 0;
                r.rope_in_kernel = rope == 2;
                const AttentionCase c = case_of(r);
                const std::string where = fmt::format(
                    "sm_{} impl {} {} D{} T{} causal {} padding {} rope {}", dev->sm,
                    static_cast<int>(impl), dtype_name(dt), D, T, r.causal, r.padding, rope);
                AttentionPlan p;
                try {
                  p = nn::plan_attention(c, *dev);
                } catch (const Error& e) {
                  ++errors;
                  // Only an explicit impl the device cannot serve is refused.
                  EXPECT_TRUE(impl == Rotor || impl == Cudnn) << where << ": " << e.what();
                  EXPECT_EQ(std::string(e.what()).rfind("attention.impl: ", 0), 0u) << e.what();
                  continue;
                }
                ++plans;
                EXPECT_EQ(p.kind, AttentionKind::Softmax) << where;
                EXPECT_FALSE(p.why.empty()) << where;
                EXPECT_EQ(p.on_gpu, dev->cuda) << where;
                if (impl == Ref) {
                  EXPECT_EQ(p.core, AttentionCore::Reference) << where;
                }
                if (impl == Rotor) {
                  EXPECT_EQ(p.core, AttentionCore::Rotor) << where;
                }
                if (impl == Cudnn) {
                  EXPECT_EQ(p.core, AttentionCore::Cudnn) << where;
                }
                const ops::FlashCase fc{dt, c.B, c.H, T, T, D, p.rope == RopePlacement::Core};
                if (p.core == AttentionCore::Rotor) {
                  EXPECT_EQ(ops::flash_kernel_unsupported(p.kernel, fc, *dev), "") << where;
                }
                if (p.core == AttentionCore::Rotor && dev->cuda &&
                    ops::flash_kernel_unsupported(FlashKernel::TensorCore, fc, *dev).empty()) {
                  EXPECT_EQ(p.kernel, FlashKernel::TensorCore) << where << ": the fastest kernel";
                }
                ops::CudnnAttentionCase cc{dt, c.B, c.H, T, T, D, r.causal, r.padding, 0.0f};
                const bool cudnn_serves = ops::cudnn_attention_unsupported(cc, dev->cudnn).empty();
                if (p.core == AttentionCore::Cudnn) {
                  EXPECT_TRUE(cudnn_serves) << where;
                }
                if (impl == Auto && dev->cuda && T >= nn::kCudnnMinKeys && cudnn_serves) {
                  EXPECT_EQ(p.core, AttentionCore::Cudnn) << where;
                }
                if (impl == Auto && !dev->cuda) {
                  EXPECT_EQ(p.core, AttentionCore::Reference);
                }
                EXPECT_EQ(p.rope == RopePlacement::None, !r.rope) << where;
                if (p.rope == RopePlacement::Core) {
                  EXPECT_TRUE(r.rope_in_kernel) << where;
                  EXPECT_EQ(p.core, AttentionCore::Rotor) << where;
                  if (dev->cuda) {
                    EXPECT_EQ(p.kernel, FlashKernel::TensorCore) << where;
                  }
                }
                if (r.rope_in_kernel && p.core == AttentionCore::Rotor &&
                    (!dev->cuda || p.kernel == FlashKernel::TensorCore)) {
                  EXPECT_EQ(p.rope, RopePlacement::Core) << where;
                }
              }
  EXPECT_GT(plans, 0);
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace rotor
