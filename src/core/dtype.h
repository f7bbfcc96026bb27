// Element types: the dtype enum, its names and sizes, PyTorch's promotion lattice, and the dispatch macros
// that turn a runtime dtype into a C++ type inside kernels.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/half.h"

namespace kiln {

// Order matters: it is the order `kiln ops` and the docs list dtypes in.
#define KILN_FORALL_DTYPES(X) \
  X(Bool, bool, "bool")       \
  X(U8, uint8_t, "u8")        \
  X(I8, int8_t, "i8")         \
  X(I16, int16_t, "i16")      \
  X(I32, int32_t, "i32")      \
  X(I64, int64_t, "i64")      \
  X(F16, Half, "f16")         \
  X(BF16, BFloat16, "bf16")   \
  X(F32, float, "f32")        \
  X(F64, double, "f64")

enum class DType : uint8_t {
#define KILN_DT_ENUM(name, type, str) name,
  KILN_FORALL_DTYPES(KILN_DT_ENUM)
#undef KILN_DT_ENUM
};
inline constexpr int kNumDTypes = 10;

std::string_view dtype_name(DType dt);                 // "f32"
std::optional<DType> dtype_from_name(std::string_view);  // accepts kiln names and torch names ("float32")
std::string_view dtype_torch_name(DType dt);           // "torch.float32"
int64_t dtype_size(DType dt);

inline bool is_floating(DType dt) { return dt == DType::F16 || dt == DType::BF16 || dt == DType::F32 || dt == DType::F64; }
inline bool is_integral(DType dt, bool include_bool) {
  return (dt == DType::Bool) ? include_bool : !is_floating(dt);
}
inline bool is_low_precision(DType dt) { return dt == DType::F16 || dt == DType::BF16; }

// torch.promote_types
DType promote_types(DType a, DType b);
// The dtype a floating op computes in: f64 stays f64, everything else computes in f32.
inline DType compute_dtype(DType dt) { return dt == DType::F64 ? DType::F64 : DType::F32; }
// The dtype integer-to-float ops produce (torch.get_default_dtype()).
inline constexpr DType kDefaultFloat = DType::F32;

template <class T> struct DTypeOf;
#define KILN_DT_OF(name, type, str) \
  template <> struct DTypeOf<type> { static constexpr DType value = DType::name; };
KILN_FORALL_DTYPES(KILN_DT_OF)
#undef KILN_DT_OF

}  // namespace kiln

// KILN_DISPATCH(dt, T, body): runs `body` with `using T = <C++ type of dt>`.
#define KILN_DISPATCH_CASE(name, type, str) \
  case ::kiln::DType::name: { using scalar_t = type; return fn_(scalar_t{}); }
#define KILN_DISPATCH_ALL(dt, ...)                            \
  [&] {                                                       \
    auto fn_ = __VA_ARGS__;                                   \
    switch (dt) { KILN_FORALL_DTYPES(KILN_DISPATCH_CASE) }    \
    return fn_(float{});                                      \
  }()
// Floating kernels run in f32 or f64 only; callers convert f16/bf16 operands first.
#define KILN_DISPATCH_FLOAT(dt, ...)                                          \
  [&] {                                                                       \
    auto fn_ = __VA_ARGS__;                                                   \
    if ((dt) == ::kiln::DType::F64) return fn_(double{});                     \
    return fn_(float{});                                                      \
  }()
