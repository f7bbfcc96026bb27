// Builds the op table from ops.def: parses each row's schema, then lets each family file attach its
// functions. Also the schema parser and IValue printing (both shared with the .kir format).
#include <cctype>
#include <mutex>
#include <unordered_map>

#include "core/inject.h"
#include "core/options.h"
#include "ops/custom.h"
#include "ops/dispatch.h"
#include "ops/families.h"

namespace kiln {

std::string_view op_kind_name(OpKind k) {
  static constexpr std::string_view names[] = {"pointwise", "reduction", "view",      "extern",  "data",
                                               "creation",  "random",    "composite", "inplace", "backward"};
  return names[int(k)];
}

std::string IValue::str() const {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) return "None";
        else if constexpr (std::is_same_v<V, Tensor>) return v.defined() ? v.str() : "None";
        else if constexpr (std::is_same_v<V, TensorList>) return fmt::format("Tensor[{}]", v.size());
        else if constexpr (std::is_same_v<V, Scalar>) return v.str();
        else if constexpr (std::is_same_v<V, IntList>) return fmt::format("[{}]", fmt::join(v, ","));
        else if constexpr (std::is_same_v<V, DType>) return std::string(dtype_name(v));
        else return "\"" + v + "\"";
      },
      v_);
}

std::string Scalar::str() const {
  switch (kind_) {
    case Kind::Bool: return i_ ? "True" : "False";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: {
      if (d_ != d_) return "nan";
      if (d_ == 1.0 / 0.0) return "inf";
      if (d_ == -1.0 / 0.0) return "-inf";
      std::string s = fmt::format("{}", d_);  // shortest round-trip form
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      return s;
    }
  }
  return "?";
}

// ---------------------------------------------------------------- schema parsing
namespace {

class SchemaParser {
 public:
  explicit SchemaParser(std::string_view t) : t_(t) {}

  Schema parse() {
    Schema s;
    s.name = op_name();
    expect('(');
    bool kwonly = false;
    skip_ws();
    if (peek() != ')') {
      for (;;) {
        skip_ws();
        if (peek() == '*') { ++i_; kwonly = true; }
        else s.args.push_back(arg(kwonly));
        skip_ws();
        if (peek() == ',') { ++i_; continue; }
        break;
      }
    }
    expect(')');
    expect('-');
    expect('>');
    skip_ws();
    if (peek() == '(') {  // tuple of tensors
      ++i_;
      s.num_returns = 0;
      for (;;) {
        type_name();
        ++s.num_returns;
        skip_ws();
        if (peek() == ',') { ++i_; continue; }
        break;
      }
      expect(')');
    } else {
      std::string rt = type_name();
      s.returns_list = rt.ends_with("[]");
    }
    skip_ws();
    if (i_ != t_.size()) error("trailing text");
    return s;
  }

 private:
  ArgSpec arg(bool kwonly) {
    ArgSpec a;
    a.kwarg_only = kwonly;
    std::string ty = type_name();
    if (ty.find("!") != std::string::npos) a.mutated = true;
    auto paren = ty.find('(');
    if (paren != std::string::npos) ty = ty.substr(0, paren) + ty.substr(ty.find(')') + 1);
    if (ty == "Tensor?[]") a.type = ArgType::OptTensorList;
    else {
      if (ty.ends_with("?")) { a.optional = true; ty.pop_back(); }
      if (ty == "Tensor") a.type = ArgType::Tensor;
      else if (ty == "Tensor[]") a.type = ArgType::TensorList;
      else if (ty == "Scalar") a.type = ArgType::Scalar;
      else if (ty == "int") a.type = ArgType::Int;
      else if (ty == "float") a.type = ArgType::Float;
      else if (ty == "bool") a.type = ArgType::Bool;
      else if (ty == "int[]") a.type = ArgType::IntList;
      else if (ty == "ScalarType") a.type = ArgType::DType;
      else if (ty == "str") a.type = ArgType::Str;
      else error("unknown argument type '" + ty + "'");
    }
    skip_ws();
    a.name = ident();
    skip_ws();
    if (peek() == '=') {
      ++i_;
      a.default_value = default_value(a);
    }
    return a;
  }

  IValue default_value(const ArgSpec& a) {
    skip_ws();
    size_t start = i_;
    if (peek() == '"') {
      ++i_;
      while (i_ < t_.size() && t_[i_] != '"') ++i_;
      std::string s(t_.substr(start + 1, i_ - start - 1));
      expect('"');
      return IValue(s);
    }
    if (peek() == '[') {
      ++i_;
      IntList v;
      skip_ws();
      while (peek() != ']') {
        v.push_back(std::stoll(token()));
        skip_ws();
        if (peek() == ',') ++i_;
        skip_ws();
      }
      expect(']');
      return IValue(v);
    }
    std::string tok = token();
    if (tok == "None") return IValue();
    if (tok == "True") return IValue(true);
    if (tok == "False") return IValue(false);
    if (a.type == ArgType::Float || tok.find_first_of(".e") != std::string::npos) return IValue(std::stod(tok));
    return IValue(int64_t(std::stoll(tok)));
  }

  std::string type_name() {
    skip_ws();
    size_t start = i_;
    while (i_ < t_.size() && (std::isalnum(uchar()) || std::string_view("_?[]()!").find(t_[i_]) != std::string_view::npos)) {
      if (t_[i_] == '(' && i_ > start && !std::isalpha((unsigned char)t_[i_ + 1])) break;
      ++i_;
    }
    if (start == i_) error("expected a type");
    return std::string(t_.substr(start, i_ - start));
  }
  std::string token() {
    size_t start = i_;
    while (i_ < t_.size() && (std::isalnum(uchar()) || t_[i_] == '-' || t_[i_] == '.' || t_[i_] == '+')) ++i_;
    if (start == i_) error("expected a value");
    return std::string(t_.substr(start, i_ - start));
  }
  std::string ident() {
    skip_ws();
    size_t start = i_;
    while (i_ < t_.size() && (std::isalnum(uchar()) || t_[i_] == '_' || t_[i_] == '.')) ++i_;
    if (start == i_) error("expected a name");
    return std::string(t_.substr(start, i_ - start));
  }
  // An op name: an identifier, or `namespace::name` (custom ops, ops/custom.h).
  std::string op_name() {
    std::string name = ident();
    while (t_.substr(i_, 2) == "::") {
      i_ += 2;
      name += "::" + ident();
    }
    return name;
  }
  unsigned char uchar() const { return (unsigned char)t_[i_]; }
  char peek() const { return i_ < t_.size() ? t_[i_] : '\0'; }
  void skip_ws() { while (i_ < t_.size() && t_[i_] == ' ') ++i_; }
  void expect(char c) {
    skip_ws();
    if (peek() != c) error(fmt::format("expected '{}'", c));
    ++i_;
  }
  [[noreturn]] void error(const std::string& what) {
    fail("schema '{}': column {}: {}", t_, i_ + 1, what);
  }
  std::string_view t_;
  size_t i_ = 0;
};

std::string arg_type_str(const ArgSpec& a) {
  static constexpr std::string_view names[] = {"Tensor", "Tensor[]", "Tensor?[]", "Scalar", "int",
                                               "float",  "bool",     "int[]",     "ScalarType", "str"};
  std::string s(names[int(a.type)]);
  if (a.mutated) s += "(a!)";
  if (a.optional) s += "?";
  return s;
}

}  // namespace

Schema parse_schema(std::string_view text) { return SchemaParser(text).parse(); }

std::string Schema::str() const {
  std::string s = name + "(";
  bool kw = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) s += ", ";
    if (args[i].kwarg_only && !kw) { s += "*, "; kw = true; }
    s += arg_type_str(args[i]) + " " + args[i].name;
    if (args[i].default_value) s += "=" + args[i].default_value->str();
  }
  s += ") -> ";
  s += num_returns > 1 ? "(Tensor, Tensor)" : returns_list ? "Tensor[]" : "Tensor";
  return s;
}

int Schema::arg_index(std::string_view n) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == n) return int(i);
  return -1;
}

// ---------------------------------------------------------------- the table
namespace {

std::vector<OpInfo>& table_storage() {
  static std::vector<OpInfo> table;
  return table;
}

OpKind kind_of(std::string_view k) {
  static constexpr std::string_view names[] = {"Pointwise", "Reduction", "View",      "Extern",  "Data",
                                               "Creation",  "Random",    "Composite", "InPlace", "Backward"};
  for (int i = 0; i < 10; ++i)
    if (names[i] == k) return OpKind(i);
  fail("ops.def: unknown kind {}", k);
}

void build_table() {
  auto& table = table_storage();
#define KILN_OP(ID, FAMILY, KIND, FLAGS, SCHEMA, ...)                                         \
  {                                                                                           \
    OpInfo info;                                                                              \
    info.id = OpId::ID;                                                                       \
    info.name = #ID;                                                                          \
    info.family = #FAMILY;                                                                    \
    info.kind = kind_of(#KIND);                                                               \
    info.differentiable = std::string_view(#FLAGS) == "D";                                    \
    info.schema = parse_schema(SCHEMA);                                                       \
    KILN_CHECK(info.schema.name == #ID, "ops.def: row {} has schema named {}", #ID, info.schema.name); \
    table.push_back(std::move(info));                                                         \
  }
#include "ops/ops.def"
#undef KILN_OP
  register_all_families();
}

const std::vector<OpInfo>& table() {
  static std::once_flag once;
  std::call_once(once, build_table);
  return table_storage();
}

}  // namespace

const std::vector<OpInfo>& all_ops() { return table(); }
const OpInfo& op_info(OpId id) {
  if (!is_custom_op(id)) return table()[size_t(id)];
  const OpInfo* custom = find_custom_op(id);
  KILN_ASSERT(custom, "op id {} is neither a built-in op nor a registered custom op", size_t(id));
  return *custom;
}
const OpInfo* find_op(std::string_view name) {
  // By name through a hash map (the .kir parser looks up every node's op); built once, after the table.
  static const std::unordered_map<std::string_view, const OpInfo*> by_name = [] {
    std::unordered_map<std::string_view, const OpInfo*> m;
    for (const OpInfo& o : table()) m.emplace(o.name, &o);
    return m;
  }();
  auto it = by_name.find(name);
  return it != by_name.end() ? it->second : find_custom_op(name);
}
// KILN_INJECT's op names are checked against this table (core/inject.h sits below it).
[[maybe_unused]] const bool kInjectChecksOps = (set_op_exists_check([](std::string_view name) { return find_op(name) != nullptr; }), true);

// Called only from register_all_families, while the table is being built (before call_once returns).
OpRegistration def(OpId id) { return OpRegistration{table_storage()[size_t(id)]}; }

std::string_view OpCall::name() const { return op->name; }

std::vector<Tensor> OpCall::flat_tensors() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < args.size(); ++i) {
    ArgType t = op->schema.args[i].type;
    if (t == ArgType::Tensor) out.push_back(args[i].is_none() ? Tensor() : args[i].tensor());
    else if (t == ArgType::TensorList || t == ArgType::OptTensorList)
      for (const Tensor& x : args[i].tensor_list()) out.push_back(x);
  }
  return out;
}

bool OpCall::any_meta() const {
  for (const Tensor& t : flat_tensors())
    if (t.defined() && t.is_meta()) return true;
  return false;
}

}  // namespace kiln
