// IValue: one argument of an op call (a tensor, a tensor list, a number, an int list, a dtype, a string, or
// None). The op table, the dispatcher, the graph IR and the golden tests all pass arguments this way.
#pragma once
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "eager/tensor.h"

namespace kiln {

using TensorList = std::vector<Tensor>;
using IntList = std::vector<int64_t>;

class IValue {
 public:
  using Variant = std::variant<std::monostate, Tensor, TensorList, Scalar, IntList, DType, std::string>;
  IValue() = default;
  IValue(std::nullopt_t) {}                       // NOLINT
  IValue(Tensor t) : v_(std::move(t)) {}          // NOLINT
  IValue(TensorList t) : v_(std::move(t)) {}      // NOLINT
  IValue(Scalar s) : v_(s) {}                     // NOLINT
  IValue(int v) : v_(Scalar(int64_t(v))) {}       // NOLINT
  IValue(int64_t v) : v_(Scalar(v)) {}            // NOLINT
  IValue(double v) : v_(Scalar(v)) {}             // NOLINT
  IValue(bool v) : v_(Scalar(v)) {}               // NOLINT
  IValue(IntList v) : v_(std::move(v)) {}         // NOLINT
  IValue(std::initializer_list<int64_t> v) : v_(IntList(v)) {}  // NOLINT
  IValue(DType d) : v_(d) {}                      // NOLINT
  IValue(std::string s) : v_(std::move(s)) {}     // NOLINT
  IValue(const char* s) : v_(std::string(s)) {}   // NOLINT
  template <class T>
  IValue(const std::optional<T>& o) { if (o) *this = IValue(*o); }  // NOLINT

  bool is_none() const { return std::holds_alternative<std::monostate>(v_); }
  bool is_tensor() const { return std::holds_alternative<Tensor>(v_); }
  bool is_tensor_list() const { return std::holds_alternative<TensorList>(v_); }
  bool is_scalar() const { return std::holds_alternative<Scalar>(v_); }
  bool is_int_list() const { return std::holds_alternative<IntList>(v_); }
  bool is_dtype() const { return std::holds_alternative<DType>(v_); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }

  const Tensor& tensor() const { return std::get<Tensor>(v_); }
  Tensor& tensor() { return std::get<Tensor>(v_); }
  const TensorList& tensor_list() const { return std::get<TensorList>(v_); }
  TensorList& tensor_list() { return std::get<TensorList>(v_); }
  const Scalar& scalar() const { return std::get<Scalar>(v_); }
  const IntList& int_list() const { return std::get<IntList>(v_); }
  DType dtype() const { return std::get<DType>(v_); }
  const std::string& string() const { return std::get<std::string>(v_); }
  const Variant& variant() const { return v_; }
  std::string str() const;  // as written in a schema default or a .kir attribute

 private:
  Variant v_;
};

}  // namespace kiln
