// The domain table and the guard nodes of fuzz/domains.h.
#include "fuzz/domains.h"

#include <map>
#include <string>
#include <utility>

namespace kiln::fuzz {

Domain domain_of(const OpInfo& op, std::string_view arg) {
  // (op, argument) -> domain; "*" = every tensor argument of the op.
  static const std::map<std::pair<std::string_view, std::string_view>, Domain> table = {
      {{"log", "*"}, Domain::Positive},        {{"log2", "*"}, Domain::Positive},
      {{"log1p", "*"}, Domain::Positive},      {{"sqrt", "*"}, Domain::Positive},
      {{"rsqrt", "*"}, Domain::Positive},      {{"reciprocal", "*"}, Domain::Positive},
      {{"div", "other"}, Domain::Positive},    {{"remainder", "other"}, Domain::Positive},
      {{"pow", "self"}, Domain::Positive},     {{"pow", "exponent"}, Domain::SmallExponent},
      {{"asin", "*"}, Domain::Unit},           {{"acos", "*"}, Domain::Unit},
      {{"exp", "*"}, Domain::Bounded},         {{"exp2", "*"}, Domain::Bounded},
      {{"expm1", "*"}, Domain::Bounded},       {{"sinh", "*"}, Domain::Bounded},
      {{"cosh", "*"}, Domain::Bounded},        {{"tan", "*"}, Domain::Unit},
      {{"bernoulli", "self"}, Domain::Probability},
  };
  if (auto it = table.find({op.name, arg}); it != table.end()) return it->second;
  if (auto it = table.find({op.name, "*"}); it != table.end()) return it->second;
  return Domain::Any;
}

graph::ValueId guard_value(graph::Graph& g, graph::ValueId v, Domain d) {
  using graph::TensorArg;
  const DType dt = g.value(v).meta.dtype;
  auto op1 = [&](OpId op, std::vector<graph::Arg> args) { return g.add_op1(op, std::move(args)); };
  switch (d) {
    case Domain::Any: return v;
    case Domain::Positive: {  // |v| + 0.5 (integers: clamp(v, 1, 100), which cannot wrap around; bool: v + 1)
      if (dt == DType::Bool) return op1(OpId::add, {TensorArg{v}, Scalar(int64_t(1)), Scalar(int64_t(1))});
      if (!is_floating(dt)) return op1(OpId::clamp, {TensorArg{v}, Scalar(int64_t(1)), Scalar(int64_t(100))});
      graph::ValueId a = op1(OpId::abs, {TensorArg{v}});
      return op1(OpId::add, {TensorArg{a}, Scalar(0.5), Scalar(int64_t(1))});
    }
    case Domain::Unit: {  // tanh(v) * 0.9
      graph::ValueId t = op1(OpId::tanh, {TensorArg{v}});
      return op1(OpId::mul, {TensorArg{t}, Scalar(0.9)});
    }
    case Domain::Probability: return op1(OpId::sigmoid, {TensorArg{v}});
    case Domain::Bounded:  // clamp(v, -8, 8): e^8 fits in f16 (integer inputs hold 0..9 and need none)
      if (!is_floating(dt)) return v;
      return op1(OpId::clamp, {TensorArg{v}, Scalar(int64_t(-8)), Scalar(int64_t(8))});
    case Domain::SmallExponent: {  // clamp(|v|, 0, 3): integers to negative powers are errors
      if (dt == DType::Bool) return v;
      if (!is_floating(dt)) return op1(OpId::clamp, {TensorArg{v}, Scalar(int64_t(0)), Scalar(int64_t(3))});
      graph::ValueId a = op1(OpId::abs, {TensorArg{v}});
      return op1(OpId::clamp, {TensorArg{a}, Scalar(int64_t(0)), Scalar(int64_t(3))});
    }
  }
  return v;
}

}  // namespace kiln::fuzz
