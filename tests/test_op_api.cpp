// The typed API generated from ops.def's `api` column (ops/api.h, ops/api_columns.h): each row's C++
// parameters agree with its ATen schema (same count, a C++ type that holds the schema type, and equal
// defaults where both give one), the generated functions reach the dispatcher with their arguments in order,
// and the rows without the column are exactly the ops whose functions api.h writes by hand or leaves out.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ops/api.h"
#include "ops/op_info.h"

namespace kiln {
namespace {

// The rows of ops.def as the preprocessor sees them: the `api` column stringified ("" when absent).
struct ApiRow {
  const char* op;
  const char* params;
};
constexpr ApiRow kApiRows[] = {
#define KILN_OP(id, family, kind, flags, schema, aten, ...) {#id, #__VA_ARGS__},
#include "ops/ops.def"
#undef KILN_OP
};

struct CxxParam {
  std::string type, name, default_value;  // default_value "" when none
};

std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// "(const Tensor&, x)(IntList, stride, {1, 1})" -> its parameters.
std::vector<CxxParam> parse_params(std::string_view seq) {
  std::vector<CxxParam> out;
  size_t i = 0;
  while (i < seq.size()) {
    if (seq[i] == ' ') { ++i; continue; }
    EXPECT_EQ(seq[i], '(') << seq;
    std::vector<std::string> fields(1);
    int depth = 0;
    bool quoted = false;
    for (++i; i < seq.size(); ++i) {
      char c = seq[i];
      if (c == '"') quoted = !quoted;
      if (!quoted && (c == '(' || c == '{' || c == '<')) ++depth;
      if (!quoted && (c == ')' || c == '}' || c == '>')) {
        if (depth == 0) break;  // the element's closing parenthesis
        --depth;
      }
      if (!quoted && depth == 0 && c == ',' && fields.size() < 3) { fields.emplace_back(); continue; }
      fields.back() += c;
    }
    ++i;
    EXPECT_GE(fields.size(), 2u) << seq;
    out.push_back({trim(fields[0]), trim(fields.size() > 1 ? fields[1] : ""), trim(fields.size() > 2 ? fields[2] : "")});
  }
  return out;
}

// The C++ types that hold an argument of the schema's type (an IValue also takes a number for a Tensor).
std::set<std::string> cxx_types_for(const ArgSpec& a) {
  switch (a.type) {
    case ArgType::Tensor: return a.optional ? std::set<std::string>{"const Tensor&"} : std::set<std::string>{"const Tensor&", "const IValue&"};
    case ArgType::TensorList: return {"const TensorList&"};
    case ArgType::OptTensorList: return {"const OptTensorList&"};
    case ArgType::Scalar: return {a.optional ? "OptScalar" : "Scalar"};
    case ArgType::Int: return {a.optional ? "OptInt" : "int64_t"};
    case ArgType::Float: return {a.optional ? "std::optional<double>" : "double"};
    case ArgType::Bool: return {"bool"};
    case ArgType::IntList: return {a.optional ? "OptIntList" : "IntList"};
    case ArgType::DType: return {a.optional ? "OptDType" : "DType"};
    case ArgType::Str: return {a.optional ? "std::optional<std::string>" : "const std::string&"};
  }
  return {};
}

// A C++ default written as the schema would print it (IValue::str): None, [1,1], True, 1e-05, "none".
std::string as_schema_default(const std::string& cxx, const ArgSpec& a) {
  if (cxx == "std::nullopt") return "None";
  if (cxx.front() == '{') {
    if (a.type != ArgType::IntList || a.optional) return cxx == "{}" ? "None" : cxx;
    std::string inner = cxx.substr(1, cxx.size() - 2), list;
    for (char c : inner)
      if (c != ' ') list += c;
    return "[" + list + "]";
  }
  if (cxx == "true") return "True";
  if (cxx == "false") return "False";
  if (cxx.front() == '"') return cxx;
  if (cxx.find_first_of(".eE") != std::string::npos) return Scalar(std::strtod(cxx.c_str(), nullptr)).str();
  return Scalar(int64_t(std::strtoll(cxx.c_str(), nullptr, 10))).str();
}

TEST(OpApi, EveryApiColumnAgreesWithItsSchema) {
  std::string report;
  int checked = 0;
  for (const ApiRow& row : kApiRows) {
    if (std::string_view(row.params).empty()) continue;
    const OpInfo* op = find_op(row.op);
    ASSERT_NE(op, nullptr) << row.op;
    const std::vector<CxxParam> params = parse_params(row.params);
    const std::vector<ArgSpec>& args = op->schema.args;
    if (params.size() != args.size()) {
      report += fmt::format("  {}: {} C++ parameters for the schema's {} arguments ({})\n", row.op, params.size(),
                            args.size(), op->schema.str());
      continue;
    }
    for (size_t i = 0; i < args.size(); ++i) {
      const CxxParam& p = params[i];
      if (!cxx_types_for(args[i]).count(p.type))
        report += fmt::format("  {}: parameter {} ({}) has C++ type '{}' for schema argument '{}'\n", row.op, i,
                              p.name, p.type, args[i].name);
      if (!p.default_value.empty() && args[i].default_value &&
          as_schema_default(p.default_value, args[i]) != args[i].default_value->str())
        report += fmt::format("  {}: parameter {} defaults to {} where the schema says {}\n", row.op, p.name,
                              p.default_value, args[i].default_value->str());
    }
    ++checked;
  }
  EXPECT_EQ(report, "") << "ops.def rows whose api column disagrees with their schema:\n" << report;
  EXPECT_GT(checked, 140);
}

TEST(OpApi, OnlyTheHandWrittenOrOmittedFunctionsHaveNoApiColumn) {
  std::set<std::string> without;
  for (const ApiRow& row : kApiRows)
    if (std::string_view(row.params).empty()) without.insert(row.op);
  // std: written by hand as std_; detach: Tensor::detach(); philox_rand: emitted by AOT's rng pass only.
  EXPECT_EQ(without, (std::set<std::string>{"std", "detach", "philox_rand"}));
}

TEST(OpApi, GeneratedFunctionsPassTheirArgumentsInSchemaOrder) {
  Tensor x = Tensor::from_vector<float>({4.0f, 1.0f, 3.0f, 2.0f}, {2, 2});
  // A list result, and an argument after one with a default: split(x, 1, 1) gives the two columns.
  std::vector<Tensor> cols = split(x, 1, 1);
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(cols[1].sizes(), (Shape{2, 1}));
  EXPECT_EQ(cols[1].to_double_vector(), (std::vector<double>{1.0, 2.0}));
  // A keyword-only argument: sub(a, b, alpha) is a - alpha * b.
  EXPECT_EQ(sub(x, x, 0.5).to_double_vector(), (std::vector<double>{2.0, 0.5, 1.5, 1.0}));
  // Defaults filled in: gelu's approximate="none" differs from "tanh".
  EXPECT_NE(gelu(x).to_double_vector(), gelu(x, "tanh").to_double_vector());
  // The hand-written std_ reaches the std op (sample standard deviation of 4, 1, 3, 2).
  EXPECT_NEAR(std_(x).item<double>(), std::sqrt(5.0 / 3.0), 1e-6);
}

}  // namespace
}  // namespace kiln
