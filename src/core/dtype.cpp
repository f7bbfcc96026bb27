// dtype names, sizes and PyTorch's promotion rules (c10/core/ScalarType.h promoteTypes).
#include "core/dtype.h"

#include <array>

namespace kiln {

std::string_view dtype_name(DType dt) {
  switch (dt) {
#define KILN_DT_NAME(name, type, str) case DType::name: return str;
    KILN_FORALL_DTYPES(KILN_DT_NAME)
#undef KILN_DT_NAME
  }
  return "?";
}

int64_t dtype_size(DType dt) {
  switch (dt) {
#define KILN_DT_SIZE(name, type, str) case DType::name: return sizeof(type);
    KILN_FORALL_DTYPES(KILN_DT_SIZE)
#undef KILN_DT_SIZE
  }
  return 0;
}

std::string_view dtype_torch_name(DType dt) {
  static constexpr std::array<std::string_view, kNumDTypes> names = {
      "torch.bool", "torch.uint8", "torch.int8", "torch.int16", "torch.int32", "torch.int64",
      "torch.float16", "torch.bfloat16", "torch.float32", "torch.float64"};
  return names[size_t(dt)];
}

std::optional<DType> dtype_from_name(std::string_view s) {
  if (s.starts_with("torch.")) s.remove_prefix(6);
  for (int i = 0; i < kNumDTypes; ++i) {
    DType dt = DType(i);
    if (s == dtype_name(dt) || s == dtype_torch_name(dt).substr(6)) return dt;
  }
  if (s == "float" ) return DType::F32;
  if (s == "double") return DType::F64;
  if (s == "half") return DType::F16;
  if (s == "long") return DType::I64;
  if (s == "int") return DType::I32;
  return std::nullopt;
}

namespace {
int int_rank(DType dt) {  // bits of a signed integer type
  switch (dt) {
    case DType::I8: return 8;
    case DType::I16: return 16;
    case DType::I32: return 32;
    case DType::I64: return 64;
    default: return 0;
  }
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if (a == DType::F64 || b == DType::F64) return DType::F64;
    return DType::F32;  // f16 with bf16, or either with f32
  }
  // both integral, not bool
  if (a == DType::U8) return b == DType::I8 ? DType::I16 : b;
  if (b == DType::U8) return a == DType::I8 ? DType::I16 : a;
  return int_rank(a) >= int_rank(b) ? a : b;
}

}  // namespace kiln
