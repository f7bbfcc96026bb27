// A Python-like number: bool, integer or float. Scalars appear as op attributes (alpha, fill values, clamp
// bounds) and as "wrapped number" operands, which take part in type promotion with lower priority than
// tensors (torch.result_type).
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace kiln {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar() : kind_(Kind::Int), i_(0) {}
  Scalar(bool b) : kind_(Kind::Bool), i_(b) {}  // NOLINT
  Scalar(int v) : kind_(Kind::Int), i_(v) {}     // NOLINT
  Scalar(int64_t v) : kind_(Kind::Int), i_(v) {}  // NOLINT
  Scalar(double v) : kind_(Kind::Float), d_(v) {}  // NOLINT
  Kind kind() const { return kind_; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  double to_double() const { return kind_ == Kind::Float ? d_ : double(i_); }
  int64_t to_int() const { return kind_ == Kind::Float ? int64_t(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0 : i_ != 0; }
  // The dtype a wrapped-number tensor of this scalar has (PyTorch: f64, i64 or bool).
  DType dtype() const { return kind_ == Kind::Float ? DType::F64 : kind_ == Kind::Int ? DType::I64 : DType::Bool; }
  std::string str() const;
  bool operator==(const Scalar& o) const {
    return kind_ == o.kind_ && (kind_ == Kind::Float ? (d_ == o.d_ || (d_ != d_ && o.d_ != o.d_)) : i_ == o.i_);
  }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

}  // namespace kiln
