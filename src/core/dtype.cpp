#include "core/dtype.h"

#include "core/error.h"

namespace rotor {

DType parse_dtype(std::string_view n) {
  if (n == "f32" || n == "fp32" || n == "float32") return DType::F32;
  if (n == "f16" || n == "fp16" || n == "float16") return DType::F16;
  if (n == "bf16" || n == "bfloat16") return DType::BF16;
  if (n == "i32" || n == "int32") return DType::I32;
  if (n == "u8" || n == "uint8") return DType::U8;
  ROTOR_FAIL("unknown dtype '{}' (expected fp32, fp16, bf16, i32 or u8)", n);
}

}  // namespace rotor
