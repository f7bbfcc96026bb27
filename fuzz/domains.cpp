// The domain table and the guard nodes of fuzz/domains.h; the step table of discontinuous ops.
#include "fuzz/domains.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "ops/api.h"

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

namespace {

// Where an op's result steps, as a function of its arguments `a` (and `b`): the step variable `d` (a, a / b,
// a - b, a * 10^decimals), the lattice of steps in it, and the magnitude its ulps are measured against.
enum class Lattice { None, Integers, HalfIntegers, Zero };
enum class StepVariable { Self, Quotient, Difference, EachArgument };
struct Steps {
  Lattice lattice = Lattice::None;
  StepVariable variable = StepVariable::Self;
};

// The step table: every discontinuous op of the op table (ops/ops.def) whose steps lie in one element's
// arguments; argmax/argmin (steps between elements: near ties) are judged by top_two_have_margin, and bernoulli
// (a draw against the probability) is left out.
Steps steps_of(const graph::Node& n) {
  switch (n.op) {
    case OpId::floor: case OpId::ceil: case OpId::trunc: return {Lattice::Integers};
    case OpId::round: return {Lattice::HalfIntegers};
    case OpId::sign: case OpId::logical_not: return {Lattice::Zero};
    case OpId::logical_and: case OpId::logical_or: case OpId::logical_xor:
      return {Lattice::Zero, StepVariable::EachArgument};
    case OpId::eq: case OpId::ne: case OpId::lt: case OpId::le: case OpId::gt: case OpId::ge:
      return {Lattice::Zero, StepVariable::Difference};
    case OpId::remainder: return {Lattice::Integers, StepVariable::Quotient};
    case OpId::div:
      if (std::holds_alternative<std::string>(n.args[2])) return {Lattice::Integers, StepVariable::Quotient};
      return {};
    case OpId::to: {
      const DType to = std::get<DType>(n.args[1]);
      if (to == DType::Bool) return {Lattice::Zero};
      return is_floating(to) ? Steps{} : Steps{Lattice::Integers};
    }
    default: return {};
  }
}

// Argument `i` of `n` in fp64 (a number argument as a 0-dim tensor), and whether it is floating in `g`.
std::pair<Tensor, bool> argument(const graph::Graph& g, const graph::Node& n, size_t i, const std::vector<Tensor>& values) {
  if (const auto* t = std::get_if<graph::TensorArg>(&n.args[i]))
    return {to(values[size_t(t->id)], DType::F64), is_floating(g.value(t->id).meta.dtype)};
  const Scalar s = std::get<Scalar>(n.args[i]);
  return {full({}, Scalar(s.to_double()), DType::F64), s.is_float()};
}

// Whether every element of `d` is exactly on its lattice or `margin` x max(|scale|, 1) away from it.
bool keeps_margin(const Tensor& d, const Tensor& scale, Lattice lattice, double margin) {
  const std::vector<double> dv = d.to_double_vector(), sv = scale.to_double_vector();
  for (size_t i = 0; i < dv.size(); ++i) {
    const double x = dv[i];
    if (!std::isfinite(x)) continue;
    double distance = std::abs(x);
    if (lattice == Lattice::Integers) distance = std::abs(x - std::nearbyint(x));
    if (lattice == Lattice::HalfIntegers) distance = std::abs(x - (std::floor(x) + 0.5));
    if (distance != 0 && distance < margin * std::max(std::abs(sv[i]), 1.0)) return false;
  }
  return true;
}

// argmax/argmin: along the reduced dim (every element for dim=None), the best value and the best value unequal
// to it are `margin` x max(|best|, 1) apart (exact ties are fine: the first wins everywhere).
bool top_two_have_margin(const graph::Node& n, const Tensor& x, double margin) {
  const bool max = n.op == OpId::argmax;
  Tensor t = contiguous(x);
  int64_t outer = 1, extent = t.numel(), inner = 1;
  if (const auto* d = std::get_if<Scalar>(&n.args[1]); d && t.dim() > 0) {
    const int64_t dim = (d->to_int() + t.dim()) % t.dim();
    extent = t.sizes()[size_t(dim)];
    for (int64_t i = 0; i < dim; ++i) outer *= t.sizes()[size_t(i)];
    for (int64_t i = dim + 1; i < t.dim(); ++i) inner *= t.sizes()[size_t(i)];
  }
  const std::vector<double> v = t.to_double_vector();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double best = max ? -INFINITY : INFINITY, second = best;
      for (int64_t e = 0; e < extent; ++e) {
        const double x = v[size_t((o * extent + e) * inner + i)];
        if (max ? x > best : x < best) second = best, best = x;
        else if (x != best && (max ? x > second : x < second)) second = x;  // the best value unequal to it
      }
      const double gap = std::abs(best - second);
      if (std::isfinite(gap) && gap != 0 && gap < margin * std::max(std::abs(best), 1.0)) return false;
    }
  return true;
}

bool node_has_margin(const graph::Graph& g, const graph::Node& n, const std::vector<Tensor>& values) {
  if (n.op == OpId::argmax || n.op == OpId::argmin) {
    auto [x, floating] = argument(g, n, 0, values);
    const bool f64 = g.value(std::get<graph::TensorArg>(n.args[0]).id).meta.dtype == DType::F64;
    return !floating || top_two_have_margin(n, x, kStepMarginUlps * (f64 ? std::numeric_limits<double>::epsilon()
                                                                          : double(std::numeric_limits<float>::epsilon())));
  }
  const Steps steps = steps_of(n);
  if (steps.lattice == Lattice::None) return true;
  const bool binary = steps.variable == StepVariable::Quotient || steps.variable == StepVariable::Difference ||
                      steps.variable == StepVariable::EachArgument;
  auto [a, a_floating] = argument(g, n, 0, values);
  Tensor b;
  bool b_floating = false;
  if (binary) std::tie(b, b_floating) = argument(g, n, 1, values);
  if (!a_floating && !b_floating) return true;  // integer arithmetic is exact
  bool f64 = false;
  for (const graph::Arg& arg : n.args)
    if (const auto* t = std::get_if<graph::TensorArg>(&arg)) f64 = f64 || g.value(t->id).meta.dtype == DType::F64;
  const double margin = kStepMarginUlps * (f64 ? std::numeric_limits<double>::epsilon()
                                               : double(std::numeric_limits<float>::epsilon()));
  switch (steps.variable) {
    case StepVariable::Self: {
      Tensor d = a;
      if (n.op == OpId::round) d = mul(a, std::pow(10.0, double(std::get<Scalar>(n.args[1]).to_int())));
      return keeps_margin(d, d, steps.lattice, margin);
    }
    case StepVariable::Quotient: {
      Tensor q = div(a, b);
      return keeps_margin(q, q, steps.lattice, margin);
    }
    case StepVariable::Difference:
      return keeps_margin(sub(a, b), maximum(abs(a), abs(b)), steps.lattice, margin);
    case StepVariable::EachArgument:
      return (!a_floating || keeps_margin(a, a, steps.lattice, margin)) &&
             (!b_floating || keeps_margin(b, b, steps.lattice, margin));
  }
  return true;
}

}  // namespace

bool has_steps(const graph::Graph& g) {
  return std::any_of(g.nodes().begin(), g.nodes().end(), [](const graph::Node& n) {
    return n.kind == graph::NodeKind::Op &&
           (steps_of(n).lattice != Lattice::None || n.op == OpId::argmax || n.op == OpId::argmin);
  });
}

bool steps_have_margin(const graph::Graph& g, const std::vector<Tensor>& values) {
  for (const graph::Node& n : g.nodes())
    if (n.kind == graph::NodeKind::Op && !node_has_margin(g, n, values)) return false;
  return true;
}

}  // namespace kiln::fuzz
