// The preprocessor machinery that turns the `api` column of src/ops/ops.def into the typed API: api.h expands
// each row into a declaration and api.cpp into a definition that forwards to the dispatcher. Nothing else
// should need it.
//
// A row's `api` column is a sequence of parameters, one parenthesised element each, in schema order:
//   (const Tensor&, x)(int64_t, dim, 0)(OptDType, dtype, std::nullopt)
// that is (C++ type, name) or (C++ type, name, default). The three expansions below walk the sequence the way
// Boost.Preprocessor's SEQ macros do (two macros that name each other, so each element is a fresh call), and
// each element ends in a comma: the `CallSite where` that every function takes last, or the closing brace of
// the argument list, comes after it.
#pragma once
#include <string_view>
#include <type_traits>
#include <vector>

// `type name = default,` per parameter: the declaration (api.h).
#define KILN_API_PARAMS(seq) KILN_API_SEQ_END(KILN_API_PARAMS_A seq)
#define KILN_API_PARAMS_A(type, name, ...) type name __VA_OPT__(= __VA_ARGS__), KILN_API_PARAMS_B
#define KILN_API_PARAMS_B(type, name, ...) type name __VA_OPT__(= __VA_ARGS__), KILN_API_PARAMS_A
#define KILN_API_PARAMS_A_END
#define KILN_API_PARAMS_B_END

// `type name,` per parameter: the definition (api.cpp).
#define KILN_API_FORMALS(seq) KILN_API_SEQ_END(KILN_API_FORMALS_A seq)
#define KILN_API_FORMALS_A(type, name, ...) type name, KILN_API_FORMALS_B
#define KILN_API_FORMALS_B(type, name, ...) type name, KILN_API_FORMALS_A
#define KILN_API_FORMALS_A_END
#define KILN_API_FORMALS_B_END

// `name,` per parameter: the arguments passed to the dispatcher, in schema order (api.cpp).
#define KILN_API_ARGS(seq) KILN_API_SEQ_END(KILN_API_ARGS_A seq)
#define KILN_API_ARGS_A(type, name, ...) name, KILN_API_ARGS_B
#define KILN_API_ARGS_B(type, name, ...) name, KILN_API_ARGS_A
#define KILN_API_ARGS_A_END
#define KILN_API_ARGS_B_END

// The walk leaves the name of the next step (`..._A` or `..._B`) after the last element; pasting `_END` onto it
// names an empty macro.
#define KILN_API_SEQ_END(...) KILN_API_SEQ_END_I(__VA_ARGS__)
#define KILN_API_SEQ_END_I(...) __VA_ARGS__##_END

namespace kiln::api_detail {
// Whether a schema returns a list (`-> Tensor[]`): its function returns std::vector<Tensor>, else Tensor.
constexpr bool returns_list(std::string_view schema) { return schema.ends_with("-> Tensor[]"); }
}  // namespace kiln::api_detail

// The C++ result of the op with this schema.
#define KILN_API_RESULT(schema) \
  std::conditional_t<::kiln::api_detail::returns_list(schema), std::vector<Tensor>, Tensor>
