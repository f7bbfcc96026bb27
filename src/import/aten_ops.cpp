// The ATen -> kiln table (aten_ops.h): AtenNode's argument conversion, then the rows: the one-to-one ones
// generated from ops.def's `aten` column, and by hand the ones that differ, one per ATen overload.
#include "import/aten_ops.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/error.h"

namespace kiln::importer {

using graph::Arg;
using graph::ValueId;
using json = nlohmann::json;

namespace {

std::optional<DType> dtype_of_scalar_type(int64_t t) {
  switch (t) {  // torch/_export/serde/schema.py, ScalarType
    case 1: return DType::U8;
    case 2: return DType::I8;
    case 3: return DType::I16;
    case 4: return DType::I32;
    case 5: return DType::I64;
    case 6: return DType::F16;
    case 7: return DType::F32;
    case 8: return DType::F64;
    case 12: return DType::Bool;
    case 13: return DType::BF16;
    default: return std::nullopt;
  }
}

// The one field of an Argument union and its value.
std::pair<std::string, const json*> union_field(const json& a) {
  if (!a.is_object() || a.size() != 1) return {"", nullptr};
  return {a.begin().key(), &a.begin().value()};
}

}  // namespace

std::optional<DType> dtype_from_serialized(int64_t scalar_type) { return dtype_of_scalar_type(scalar_type); }

double float_from_serialized(const json& v) {
  if (v.is_string()) {  // torch/_export/serde writes non-finite floats as these strings
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  return v.get<double>();  // any other string: json's type error, reported as a schema error
}

int64_t int_from_serialized(const json& v, const std::string& what) {
  if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
    return v.get<int64_t>();
  fail("{} is {}, not an integer that fits in 64 bits", what, v.dump());
}

int64_t sym_int_from_serialized(const json& s, const std::string& what) {
  if (s.is_object() && s.size() == 1 && s.contains("as_int")) return int_from_serialized(s.at("as_int"), what);
  if (s.is_object() && s.size() == 1 && (s.contains("as_expr") || s.contains("as_name")))  // SymInt, SymIntArgument
    fail("{} is a symbolic size ({}); kiln imports static shapes only: export without dynamic_shapes", what,
         s.dump());
  fail("{} is {}, not a size (expected {{\"as_int\": N}})", what, s.dump());
}

AtenNode::AtenNode(const json& node, std::string target, graph::Graph& g,
                   const std::function<ValueId(const std::string&)>& value_of, std::vector<std::string> output_names)
    : node_(node), target_(std::move(target)), g_(g), value_of_(value_of), output_names_(std::move(output_names)) {}

void AtenNode::unsupported(const std::string& why) const { fail("{}", why); }  // add_node names the node

bool AtenNode::has(std::string_view name) const {
  for (const json& in : node_.at("inputs"))
    if (in.at("name") == name) return union_field(in.at("arg")).first != "as_none";
  return false;
}

const json& AtenNode::arg(std::string_view name) const {
  for (const json& in : node_.at("inputs"))
    if (in.at("name") == name) return in.at("arg");
  unsupported(fmt::format("argument '{}' is missing", name));
}

Arg AtenNode::tensor(std::string_view name) const {
  auto [kind, v] = union_field(arg(name));
  if (kind != "as_tensor") unsupported(fmt::format("argument '{}' is {}, expected a tensor", name, kind));
  return graph::TensorArg{value_of_(v->at("name").get<std::string>())};
}

int64_t AtenNode::int_or(std::string_view name, int64_t fallback) const {
  if (!has(name)) return fallback;
  auto [kind, v] = union_field(arg(name));
  if (kind == "as_int") return int_from_serialized(*v, fmt::format("argument '{}'", name));
  if (kind == "as_sym_int") return sym_int_from_serialized(*v, fmt::format("argument '{}'", name));
  unsupported(fmt::format("argument '{}' is {}, expected an int", name, kind));
}

bool AtenNode::bool_or(std::string_view name, bool fallback) const {
  if (!has(name)) return fallback;
  auto [kind, v] = union_field(arg(name));
  if (kind != "as_bool") unsupported(fmt::format("argument '{}' is {}, expected a bool", name, kind));
  return v->get<bool>();
}

std::vector<int64_t> AtenNode::ints_or(std::string_view name, std::vector<int64_t> fallback) const {
  if (!has(name)) return fallback;
  const json& a = arg(name);
  ArgSpec spec;
  spec.type = ArgType::IntList;
  return std::get<IntList>(convert(name, a, spec));
}

Arg AtenNode::convert(std::string_view name, const json& a, const ArgSpec& spec) const {
  auto [kind, v] = union_field(a);
  auto bad = [&]() -> Arg {
    unsupported(fmt::format("argument '{}' is {} where kiln expects {}", name, kind.empty() ? a.dump() : kind,
                            spec.type == ArgType::IntList ? "int[]" : "another kind of value"));
  };
  const std::string what = fmt::format("argument '{}'", name);
  auto sym_int = [&](const json& s) { return sym_int_from_serialized(s, what); };
  if (kind == "as_none") return std::monostate{};
  if (kind == "as_tensor") return graph::TensorArg{value_of_(v->at("name").get<std::string>())};
  if (kind == "as_tensors" || kind == "as_optional_tensors") {
    graph::TensorListArg l;
    for (const json& t : *v) {
      if (t.contains("as_none")) l.ids.push_back(graph::kNoValue);
      else l.ids.push_back(value_of_((t.contains("as_tensor") ? t.at("as_tensor") : t).at("name").get<std::string>()));
    }
    return l;
  }
  if (kind == "as_int") return Scalar(int_from_serialized(*v, what));
  if (kind == "as_float") return Scalar(float_from_serialized(*v));
  if (kind == "as_bool") return Scalar(v->get<bool>());
  if (kind == "as_sym_int") return Scalar(sym_int(*v));
  if (kind == "as_string") return v->get<std::string>();
  if (kind == "as_ints" || kind == "as_sym_ints") {
    IntList l;
    for (const json& i : *v) l.push_back(i.is_number_integer() ? int_from_serialized(i, what) : sym_int(i));
    if (spec.type == ArgType::Int && l.size() == 1) return Scalar(l[0]);
    return l;
  }
  if (kind == "as_scalar_type") {
    std::optional<DType> dt = dtype_of_scalar_type(int_from_serialized(*v, what));
    if (!dt) unsupported(fmt::format("argument '{}' is ScalarType {}, which kiln has no dtype for", name, v->dump()));
    return *dt;
  }
  return bad();
}

std::vector<ValueId> AtenNode::emit(std::string_view op, const std::vector<std::pair<std::string, Arg>>& args) {
  const OpInfo* info = find_op(op);
  KILN_ASSERT(info, "kiln import: the ATen table names kiln op '{}', which does not exist", op);
  const Schema& s = info->schema;
  std::vector<Arg> bound(s.args.size());
  std::vector<bool> given(s.args.size(), false);
  for (const auto& [name, value] : args) {
    int i = s.arg_index(name);
    KILN_ASSERT(i >= 0, "kiln import: the ATen table passes '{}' to {}, whose schema is {}", name, op, s.str());
    bound[size_t(i)] = value;
    given[size_t(i)] = true;
  }
  for (size_t i = 0; i < s.args.size(); ++i) {
    if (given[i]) continue;
    if (!s.args[i].default_value) unsupported(fmt::format("kiln's {} needs argument '{}'", op, s.args[i].name));
    const IValue& d = *s.args[i].default_value;
    if (d.is_scalar()) bound[i] = d.scalar();
    else if (d.is_int_list()) bound[i] = d.int_list();
    else if (d.is_dtype()) bound[i] = d.dtype();
    else if (d.is_string()) bound[i] = d.string();
    else bound[i] = std::monostate{};
  }
  std::vector<std::string> names;
  for (int k = 0; k < info->schema.num_returns || (info->schema.returns_list && k < 64); ++k) {
    std::string name = next_name_ < output_names_.size() ? output_names_[next_name_++] : "";
    bool taken = g_.find_value(name) || std::find(names.begin(), names.end(), name) != names.end();
    names.push_back(taken ? "" : name);
  }
  return g_.add_op(info->id, std::move(bound), names);
}

std::vector<ValueId> AtenNode::forward(std::string_view op, const std::map<std::string, std::string>& renames,
                                       const std::vector<std::string>& ignored) {
  const OpInfo* info = find_op(op);
  KILN_ASSERT(info, "kiln import: the ATen table names kiln op '{}', which does not exist", op);
  std::vector<std::pair<std::string, Arg>> args;
  for (const json& in : node_.at("inputs")) {
    std::string name = in.at("name").get<std::string>();
    if (std::find(ignored.begin(), ignored.end(), name) != ignored.end()) continue;
    auto r = renames.find(name);
    std::string kiln_name = r == renames.end() ? name : r->second;
    int i = info->schema.arg_index(kiln_name);
    if (i < 0) unsupported(fmt::format("argument '{}' ({}) has no counterpart in kiln's {}", name,
                                       in.at("arg").dump(), info->schema.str()));
    args.emplace_back(kiln_name, convert(name, in.at("arg"), info->schema.args[size_t(i)]));
  }
  return emit(op, args);
}

namespace {

using Rows = std::map<std::string, AtenRow, std::less<>>;

AtenRow same(std::string op, std::map<std::string, std::string> renames = {}, std::vector<std::string> ignored = {}) {
  return {[=](AtenNode& n) { return n.forward(op, renames, ignored); }, false, op, renames, ignored};
}

// Arguments that only say how PyTorch lays out or places a result (kiln's values are contiguous CPU tensors).
const std::vector<std::string> kPlacement = {"layout", "device", "pin_memory", "memory_format", "non_blocking"};

void require(AtenNode& n, bool ok, const std::string& why) {
  if (!ok) n.unsupported(why);
}

std::vector<int64_t> last_dims(size_t k) {
  std::vector<int64_t> dims;
  for (size_t i = 0; i < k; ++i) dims.push_back(-int64_t(k - i));
  return dims;
}

// The one-to-one rows, generated from ops.def: each overload in a row's `aten` column maps onto that kiln op
// with every argument under its own name. The rows below them in this file are the ones that differ (another
// ATen name, renamed or dropped arguments, or code); an overload both generated and written by hand is a table
// error, so each row has one owner.
void add_one_to_one(Rows& r) {
  struct OpRow {
    std::string_view op, overloads;
  };
  static constexpr OpRow kOpRows[] = {
#define KILN_OP(id, family, kind, flags, schema, aten, ...) {#id, aten},
#include "ops/ops.def"
#undef KILN_OP
  };
  for (const OpRow& row : kOpRows) {
    for (std::string_view rest = row.overloads; !rest.empty();) {
      const size_t space = rest.find(' ');
      const std::string_view overload = rest.substr(0, space);
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
      if (overload.empty()) continue;
      const std::string key = fmt::format("{}.{}", row.op, overload);
      KILN_ASSERT(r.emplace(key, same(std::string(row.op))).second,
                  "kiln import: aten.{} is both in ops.def's aten column of {} and written by hand in aten_ops.cpp",
                  key, row.op);
    }
  }
}

void add_reductions(Rows& r) {
  for (const char* op : {"any", "all"}) {
    r[std::string(op) + ".dim"] = {[op](AtenNode& n) {
      return std::vector<ValueId>{n.emit1(op, {{"self", n.tensor("self")}, {"dim", IntList{n.int_or("dim", 0)}},
                                               {"keepdim", Scalar(n.bool_or("keepdim", false))}})};
    }};
  }
}

void add_shapes(Rows& r) {
  r["_unsafe_view.default"] = same("view");
  r["t.default"] = {[](AtenNode& n) {
    return std::vector<ValueId>{n.emit1("transpose", {{"self", n.tensor("self")}, {"dim0", Scalar(int64_t(0))},
                                                      {"dim1", Scalar(int64_t(-1))}})};
  }};
  r["expand.default"] = {[](AtenNode& n) {
    require(n, !n.bool_or("implicit", false), "implicit=True is not supported");
    return n.forward("expand", {}, {"implicit"});
  }};
  r["squeeze.dim"] = {[](AtenNode& n) {
    return std::vector<ValueId>{n.emit1("squeeze", {{"self", n.tensor("self")}, {"dim", IntList{n.int_or("dim", 0)}}})};
  }};
  r["split_with_sizes.default"] = {[](AtenNode& n) {
    std::vector<ValueId> out;
    int64_t start = 0, dim = n.int_or("dim", 0);
    for (int64_t size : n.ints_or("split_sizes", {})) {
      out.push_back(n.emit1("narrow", {{"self", n.tensor("self")}, {"dim", Scalar(dim)}, {"start", Scalar(start)},
                                       {"length", Scalar(size)}}));
      start += size;
    }
    return out;
  }, true};
  r["clone.default"] = same("clone", {}, {"memory_format"});
  r["contiguous.default"] = same("contiguous", {}, {"memory_format"});
  for (const char* op : {"alias.default", "detach.default", "lift_fresh_copy.default"})
    r[op] = {[](AtenNode& n) { return std::vector<ValueId>{std::get<graph::TensorArg>(n.tensor("self")).id}; }};
  r["_to_copy.default"] = {[](AtenNode& n) {
    if (!n.has("dtype")) return n.forward("clone", {}, kPlacement);
    return n.forward("to", {}, kPlacement);
  }};
  r["to.dtype"] = same("to", {}, {"non_blocking", "copy", "memory_format"});
  r["constant_pad_nd.default"] = {[](AtenNode& n) {
    std::vector<std::pair<std::string, Arg>> args = {{"self", n.tensor("self")}, {"pad", IntList(n.ints_or("pad", {}))},
                                                     {"mode", std::string("constant")}};
    if (n.has("value")) {
      ArgSpec spec;
      spec.type = ArgType::Float;
      args.emplace_back("value", n.convert("value", n.arg("value"), spec));
    }
    return std::vector<ValueId>{n.emit1("pad", args)};
  }};
}

void add_indexing_and_creation(Rows& r) {
  r["gather.default"] = same("gather", {}, {"sparse_grad"});
  r["embedding.default"] = {[](AtenNode& n) {
    require(n, !n.bool_or("sparse", false), "sparse=True is not supported");
    return n.forward("embedding", {}, {"scale_grad_by_freq", "sparse"});  // both only change the gradient
  }};
  for (const char* op : {"full", "zeros", "ones"}) r[std::string(op) + ".default"] = same(op, {}, kPlacement);
  for (const char* op : {"full_like", "zeros_like", "ones_like"})
    r[std::string(op) + ".default"] = same(op, {}, kPlacement);
  r["arange.start_step"] = same("arange", {}, kPlacement);
  r["arange.start"] = same("arange", {}, kPlacement);
  r["arange.default"] = {[](AtenNode& n) {
    std::vector<std::pair<std::string, Arg>> args = {{"start", Scalar(int64_t(0))}};
    ArgSpec scalar;
    scalar.type = ArgType::Scalar;
    args.emplace_back("end", n.convert("end", n.arg("end"), scalar));
    ArgSpec dtype;
    dtype.type = ArgType::DType;
    if (n.has("dtype")) args.emplace_back("dtype", n.convert("dtype", n.arg("dtype"), dtype));
    return std::vector<ValueId>{n.emit1("arange", args)};
  }};
}

void add_nn(Rows& r) {
  for (const char* op : {"_softmax", "_log_softmax"}) {
    r[std::string(op) + ".default"] = {[op](AtenNode& n) {
      require(n, !n.bool_or("half_to_float", false), "half_to_float=True is not supported");
      return n.forward(std::string(op).substr(1), {}, {"half_to_float"});
    }};
  }
  r["layer_norm.default"] = same("layer_norm", {}, {"cudnn_enable"});
  r["native_layer_norm.default"] = {[](AtenNode& n) {
    // (out, mean, rstd); the statistics over the normalized dims, kept as size-1 dims, as ATen returns them.
    std::vector<int64_t> normalized = n.ints_or("normalized_shape", {});
    double eps = n.has("eps") ? float_from_serialized(n.arg("eps").at("as_float")) : 1e-5;
    ValueId out = n.forward("layer_norm").at(0);
    IntList dims = last_dims(normalized.size());
    ValueId mean = n.emit1("mean", {{"self", n.tensor("input")}, {"dim", dims}, {"keepdim", Scalar(true)}});
    ValueId var = n.emit1("var", {{"self", n.tensor("input")}, {"dim", dims}, {"correction", Scalar(int64_t(0))},
                                  {"keepdim", Scalar(true)}});
    ValueId rstd = n.emit1("rsqrt", {{"self", graph::TensorArg{n.emit1("add", {{"self", graph::TensorArg{var}},
                                                                                {"other", Scalar(eps)}})}}});
    return std::vector<ValueId>{out, mean, rstd};
  }, true};
  r["batch_norm.default"] = same("batch_norm", {}, {"cudnn_enabled"});
  r["_native_batch_norm_legit_no_training.default"] = {[](AtenNode& n) {
    // (out, save_mean, save_invstd): in inference the two statistics are empty tensors nothing reads.
    ArgSpec number;
    number.type = ArgType::Float;
    ValueId out = n.emit1("batch_norm", {{"input", n.tensor("input")}, {"weight", n.tensor("weight")},
                                         {"bias", n.tensor("bias")}, {"running_mean", n.tensor("running_mean")},
                                         {"running_var", n.tensor("running_var")}, {"training", Scalar(false)},
                                         {"momentum", n.convert("momentum", n.arg("momentum"), number)},
                                         {"eps", n.convert("eps", n.arg("eps"), number)}});
    return std::vector<ValueId>{out, graph::kNoValue, graph::kNoValue};
  }};
  r["max_pool2d_with_indices.default"] = {[](AtenNode& n) {
    return std::vector<ValueId>{n.forward("max_pool2d").at(0), graph::kNoValue};  // the indices: not computed
  }};
}


graph::TensorArg as_arg(ValueId id) { return graph::TensorArg{id}; }
ValueId id_of(const Arg& a) { return std::get<graph::TensorArg>(a).id; }
Arg number(AtenNode& n, std::string_view name, double fallback) {
  if (!n.has(name)) return Scalar(fallback);
  ArgSpec spec;
  spec.type = ArgType::Scalar;
  return n.convert(name, n.arg(name), spec);
}

// A row of one result written with several kiln ops.
template <class F>
AtenRow composed(F f) {
  return AtenRow{[f](AtenNode& n) { return std::vector<ValueId>{f(n)}; }, true};
}

// Core ATen creation ops kiln has under other names or arguments.
void add_core_creation(Rows& r) {
  std::vector<std::string> random_ignored = kPlacement;
  random_ignored.push_back("generator");
  r["rand.default"] = same("rand", {}, random_ignored);
  r["randn.default"] = same("randn", {}, random_ignored);
  r["empty.memory_format"] = same("zeros", {}, kPlacement);  // any values are valid for empty: zeros
  r["empty_strided.default"] = same("zeros", {}, {"stride", "layout", "device", "pin_memory"});
  r["scalar_tensor.default"] = {[](AtenNode& n) {
    std::vector<std::pair<std::string, Arg>> args = {{"size", IntList{}}, {"fill_value", number(n, "s", 0)}};
    ArgSpec dtype;
    dtype.type = ArgType::DType;
    args.emplace_back("dtype", n.has("dtype") ? n.convert("dtype", n.arg("dtype"), dtype) : Arg(DType::F32));
    return std::vector<ValueId>{n.emit1("full", args)};
  }};
  r["fill.Scalar"] = same("full_like", {{"value", "fill_value"}});
}

// Pointwise Core ATen ops written with kiln's pointwise ops (`--decompose core`).
void add_core_pointwise(Rows& r) {
  r["hardtanh.default"] = composed([](AtenNode& n) {
    return n.emit1("clamp", {{"self", n.tensor("self")}, {"min", number(n, "min_val", -1)}, {"max", number(n, "max_val", 1)}});
  });
  r["hardtanh.default"].decomposes = false;
  r["var.dim"] = composed([](AtenNode& n) {
    return n.emit1("var", {{"self", n.tensor("self")}, {"dim", IntList(n.ints_or("dim", {}))},
                           {"correction", Scalar(int64_t(n.bool_or("unbiased", true) ? 1 : 0))},
                           {"keepdim", Scalar(n.bool_or("keepdim", false))}});
  });
  r["log10.default"] = composed([](AtenNode& n) {
    return n.emit1("div", {{"self", as_arg(n.emit1("log", {{"self", n.tensor("self")}}))}, {"other", Scalar(std::log(10.0))}});
  });
  r["leaky_relu.default"] = composed([](AtenNode& n) {  // where(x > 0, x, x * slope)
    Arg x = n.tensor("self");
    ValueId pos = n.emit1("gt", {{"self", x}, {"other", Scalar(0.0)}});
    ValueId neg = n.emit1("mul", {{"self", x}, {"other", number(n, "negative_slope", 0.01)}});
    return n.emit1("where", {{"condition", as_arg(pos)}, {"self", x}, {"other", as_arg(neg)}});
  });
  r["elu.default"] = composed([](AtenNode& n) {  // where(x > 0, x*scale, (exp(x*input_scale) - 1) * alpha*scale)
    Arg x = n.tensor("self");
    Arg alpha = number(n, "alpha", 1), scale = number(n, "scale", 1), input_scale = number(n, "input_scale", 1);
    ValueId pos = n.emit1("gt", {{"self", x}, {"other", Scalar(0.0)}});
    ValueId e = n.emit1("expm1", {{"self", as_arg(n.emit1("mul", {{"self", x}, {"other", input_scale}}))}});
    ValueId neg = n.emit1("mul", {{"self", as_arg(n.emit1("mul", {{"self", as_arg(e)}, {"other", alpha}}))}, {"other", scale}});
    ValueId p = n.emit1("mul", {{"self", x}, {"other", scale}});
    return n.emit1("where", {{"condition", as_arg(pos)}, {"self", as_arg(p)}, {"other", as_arg(neg)}});
  });
  auto via_log = [](const char* inner_op, double sign) {  // asinh: log(x + sqrt(x^2 + 1)), acosh: -1
    return composed([inner_op, sign](AtenNode& n) {
      Arg x = n.tensor("self");
      ValueId sq = n.emit1("add", {{"self", as_arg(n.emit1("mul", {{"self", x}, {"other", x}}))}, {"other", Scalar(sign)}});
      ValueId inner = n.emit1(inner_op, {{"self", x}, {"other", as_arg(n.emit1("sqrt", {{"self", as_arg(sq)}}))}});
      return n.emit1("log", {{"self", as_arg(inner)}});
    });
  };
  r["asinh.default"] = via_log("add", 1.0);
  r["acosh.default"] = via_log("add", -1.0);
  r["atanh.default"] = composed([](AtenNode& n) {  // 0.5 * (log1p(x) - log1p(-x))
    Arg x = n.tensor("self");
    ValueId a = n.emit1("log1p", {{"self", x}});
    ValueId b = n.emit1("log1p", {{"self", as_arg(n.emit1("neg", {{"self", x}}))}});
    return n.emit1("mul", {{"self", as_arg(n.emit1("sub", {{"self", as_arg(a)}, {"other", as_arg(b)}}))}, {"other", Scalar(0.5)}});
  });
  r["clamp.Tensor"] = composed([](AtenNode& n) {
    ValueId v = id_of(n.tensor("self"));
    if (n.has("min")) v = n.emit1("maximum", {{"self", as_arg(v)}, {"other", n.tensor("min")}});
    if (n.has("max")) v = n.emit1("minimum", {{"self", as_arg(v)}, {"other", n.tensor("max")}});
    return v;
  });
  r["bitwise_not.default"] = composed([](AtenNode& n) {
    Arg x = n.tensor("self");
    if (n.graph().value(id_of(x)).meta.dtype == DType::Bool) return n.emit1("logical_not", {{"self", x}});
    return n.emit1("bitwise_xor", {{"self", x}, {"other", Scalar(int64_t(-1))}});
  });
}

// Reductions with indices, dropout, padding and pooling rows written with kiln ops.
void add_core_structured(Rows& r) {
  for (const char* which : {"max", "min"}) {
    r[std::string(which) + ".dim"] = {[which](AtenNode& n) {  // (values, indices)
      std::vector<std::pair<std::string, Arg>> args = {{"self", n.tensor("self")}, {"dim", Scalar(n.int_or("dim", 0))},
                                                       {"keepdim", Scalar(n.bool_or("keepdim", false))}};
      ValueId indices = n.emit1(std::string("arg") + which, args);
      args[1].second = IntList{n.int_or("dim", 0)};
      ValueId values = n.emit1(std::string("a") + which, args);
      return std::vector<ValueId>{values, indices};
    }, true};
  }
  r["native_dropout.default"] = {[](AtenNode& n) {  // (output, mask): the mask is not computed
    bool train = n.has("train") && n.bool_or("train", false);
    ValueId out = n.emit1("dropout", {{"input", n.tensor("input")}, {"p", number(n, "p", 0.5)}, {"train", Scalar(train)}});
    return std::vector<ValueId>{out, graph::kNoValue};
  }};
  for (const char* op : {"reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad2d",
                         "replication_pad3d"}) {
    std::string mode = std::string(op).rfind("reflection", 0) == 0 ? "reflect" : "replicate";
    r[std::string(op) + ".default"] = {[mode](AtenNode& n) {
      return std::vector<ValueId>{n.emit1("pad", {{"self", n.tensor("self")}, {"pad", IntList(n.ints_or("padding", {}))},
                                                  {"mode", mode}})};
    }};
  }
  r["_adaptive_avg_pool2d.default"] = {[](AtenNode& n) {
    // An average pool with kernel = stride = input / output size, where the output size divides the input's.
    const Shape in = n.graph().value(id_of(n.tensor("self"))).meta.sizes;
    std::vector<int64_t> out = n.ints_or("output_size", {});
    require(n, in.size() >= 2 && out.size() == 2, "expects a 2-element output_size");
    IntList kernel;
    for (size_t d = 0; d < 2; ++d) {
      int64_t i = in[in.size() - 2 + d];
      require(n, out[d] > 0 && i % out[d] == 0, fmt::format("output size {} does not divide input size {} (kiln "
                                                            "maps adaptive pooling to avg_pool2d)", out[d], i));
      kernel.push_back(i / out[d]);
    }
    return std::vector<ValueId>{n.emit1("avg_pool2d", {{"self", n.tensor("self")}, {"kernel_size", kernel}, {"stride", kernel}})};
  }};
}


// The export IR's convolutions of one kind (conv1d, conv3d, conv_transpose*d) as kiln's general convolution.
void add_convolutions(Rows& r) {
  for (const char* op : {"conv1d.default", "conv3d.default"})
    r[op] = {[](AtenNode& n) {
      return std::vector<ValueId>{n.emit1("convolution", {
          {"input", n.tensor("input")}, {"weight", n.tensor("weight")}, {"bias", n.has("bias") ? n.tensor("bias") : Arg()},
          {"stride", IntList(n.ints_or("stride", {1}))}, {"padding", IntList(n.ints_or("padding", {0}))},
          {"dilation", IntList(n.ints_or("dilation", {1}))}, {"transposed", Scalar(false)},
          {"output_padding", IntList{0}}, {"groups", Scalar(n.int_or("groups", 1))}})};
    }};
  for (const char* op : {"conv_transpose1d.default", "conv_transpose2d.input", "conv_transpose3d.input"})
    r[op] = {[](AtenNode& n) {
      return std::vector<ValueId>{n.emit1("convolution", {
          {"input", n.tensor("input")}, {"weight", n.tensor("weight")}, {"bias", n.has("bias") ? n.tensor("bias") : Arg()},
          {"stride", IntList(n.ints_or("stride", {1}))}, {"padding", IntList(n.ints_or("padding", {0}))},
          {"dilation", IntList(n.ints_or("dilation", {1}))}, {"transposed", Scalar(true)},
          {"output_padding", IntList(n.ints_or("output_padding", {0}))}, {"groups", Scalar(n.int_or("groups", 1))}})};
    }};
}

// The `scale_factors` of an upsample .vec overload (None, or one factor per spatial dim).
std::optional<std::vector<double>> scale_factors(AtenNode& n) {
  if (!n.has("scale_factors")) return std::nullopt;
  const json& a = n.arg("scale_factors");
  require(n, a.contains("as_floats"), fmt::format("argument 'scale_factors' is {}, expected a list of floats", a.dump()));
  std::vector<double> factors;
  for (const json& f : a.at("as_floats")) factors.push_back(float_from_serialized(f));
  return factors;
}

// ATen's upsample_*2d.vec: the output size given, or each input size times its factor (truncated), and the
// factors passed on as scales_h / scales_w.
std::vector<std::pair<std::string, Arg>> upsample_args(AtenNode& n) {
  const Shape in = n.graph().value(id_of(n.tensor("input"))).meta.sizes;  // a copy: emit grows the graph
  const std::optional<std::vector<double>> factors = scale_factors(n);
  IntList size = n.ints_or("output_size", {});
  require(n, in.size() == 4, fmt::format("expects a 4-D input [N, C, H, W], got {}", shape_str(in)));
  require(n, !size.empty() || (factors && factors->size() == 2),
          "expects an output_size or two scale_factors, and got neither");
  if (size.empty())
    for (size_t d = 0; d < 2; ++d) size.push_back(int64_t(double(in[2 + d]) * (*factors)[d]));
  std::vector<std::pair<std::string, Arg>> args = {{"self", n.tensor("input")}, {"output_size", size}};
  if (factors && factors->size() == 2)
    args.insert(args.end(), {{"scales_h", Scalar((*factors)[0])}, {"scales_w", Scalar((*factors)[1])}});
  return args;
}

// sort, topk (values, indices) as argsort and gather; topk keeps the first k of the sorted order.
void add_sorts(Rows& r) {
  for (const char* op : {"sort.default", "sort.stable"})
    r[op] = {[](AtenNode& n) {
      const Arg self = n.tensor("self");
      const int64_t dim = n.int_or("dim", -1);
      ValueId indices = n.emit1("argsort", {{"self", self}, {"dim", Scalar(dim)},
                                            {"descending", Scalar(n.bool_or("descending", false))}});
      ValueId values = n.emit1("gather", {{"self", self}, {"dim", Scalar(dim)}, {"index", as_arg(indices)}});
      return std::vector<ValueId>{values, indices};
    }, true};
  r["topk.default"] = {[](AtenNode& n) {
    const Arg self = n.tensor("self");
    const Shape in = n.graph().value(id_of(self)).meta.sizes;
    const int64_t dim = n.int_or("dim", -1), k = n.int_or("k", 0);
    const int64_t d = dim < 0 ? dim + std::max<int64_t>(int64_t(in.size()), 1) : dim;
    const int64_t size = in.empty() ? 1 : (d >= 0 && d < int64_t(in.size()) ? in[size_t(d)] : -1);
    require(n, size >= 0, fmt::format("dim {} is out of range for an input of {} dims", dim, in.size()));
    require(n, k >= 0 && k <= size, fmt::format("k ({}) is out of range for dim {} of size {}", k, dim, size));
    ValueId order = n.emit1("argsort", {{"self", self}, {"dim", Scalar(dim)},
                                        {"descending", Scalar(n.bool_or("largest", true))}});
    ValueId indices = n.emit1("narrow", {{"self", as_arg(order)}, {"dim", Scalar(dim)}, {"start", Scalar(int64_t(0))},
                                         {"length", Scalar(k)}});
    ValueId values = n.emit1("gather", {{"self", self}, {"dim", Scalar(dim)}, {"index", as_arg(indices)}});
    return std::vector<ValueId>{values, indices};
  }, true};
  r["upsample_nearest2d.vec"] = {[](AtenNode& n) {
    return std::vector<ValueId>{n.emit1("upsample_nearest2d", upsample_args(n))};
  }};
  r["upsample_bilinear2d.vec"] = {[](AtenNode& n) {
    std::vector<std::pair<std::string, Arg>> args = upsample_args(n);
    args.emplace_back("align_corners", Scalar(n.bool_or("align_corners", false)));
    return std::vector<ValueId>{n.emit1("upsample_bilinear2d", args)};
  }};
}

// fmod, copy, scatter with a number and group norm, written with kiln ops.
void add_core_copies_and_norms(Rows& r) {
  for (const char* overload : {"fmod.Tensor", "fmod.Scalar"}) {
    r[overload] = {[](AtenNode& n) {  // self - trunc(self / other) * other, with C's sign rule (that of self)
      Arg x = n.tensor("self");
      ArgSpec any;
      any.type = ArgType::Tensor;
      Arg y = n.convert("other", n.arg("other"), any);
      ValueId q = n.emit1("div", {{"self", x}, {"other", y}, {"rounding_mode", std::string("trunc")}});
      ValueId qy = n.emit1("mul", {{"self", as_arg(q)}, {"other", y}});
      return std::vector<ValueId>{n.emit1("sub", {{"self", x}, {"other", as_arg(qy)}})};
    }, true};
  }
  r["copy.default"] = {[](AtenNode& n) {  // src in self's dtype, broadcast to self's shape
    const TensorMeta self = n.graph().value(id_of(n.tensor("self"))).meta;  // a copy: emit grows the graph
    ValueId v = n.emit1("to", {{"self", n.tensor("src")}, {"dtype", self.dtype}});
    return std::vector<ValueId>{n.emit1("expand", {{"self", as_arg(v)}, {"size", IntList(self.sizes)}})};
  }, true};
  r["scatter.value"] = {[](AtenNode& n) {
    const TensorMeta self = n.graph().value(id_of(n.tensor("self"))).meta;  // a copy: emit grows the graph
    const TensorMeta index = n.graph().value(id_of(n.tensor("index"))).meta;
    ValueId src = n.emit1("full", {{"size", IntList(index.sizes)}, {"fill_value", number(n, "value", 0)},
                                   {"dtype", self.dtype}});
    return std::vector<ValueId>{n.emit1("scatter", {{"self", n.tensor("self")}, {"dim", Scalar(n.int_or("dim", 0))},
                                                    {"index", n.tensor("index")}, {"src", as_arg(src)}})};
  }, true};
  r["_assert_tensor_metadata.default"] = {[](AtenNode& n) {
    // Export's runtime check of a value's dtype and sizes: kiln's types are static, so it is checked here.
    const TensorMeta m = n.graph().value(id_of(n.tensor("a"))).meta;
    if (n.has("dtype")) {
      ArgSpec spec;
      spec.type = ArgType::DType;
      DType want = std::get<DType>(n.convert("dtype", n.arg("dtype"), spec));
      require(n, want == m.dtype, fmt::format("the value is {} where the graph asserts {}", dtype_name(m.dtype),
                                              dtype_name(want)));
    }
    if (n.has("size")) {
      Shape want = n.ints_or("size", {});
      require(n, want == m.sizes, fmt::format("the value is {} where the graph asserts {}", shape_str(m.sizes),
                                              shape_str(want)));
    }
    return std::vector<ValueId>{};
  }};
  r["native_group_norm.default"] = {[](AtenNode& n) {
    // (out, mean [N, G], rstd [N, G]): layer_norm over each group's elements, then the per-channel affine.
    const Shape in = n.graph().value(id_of(n.tensor("input"))).meta.sizes;  // a copy: emit grows the graph
    const int64_t batch = n.int_or("N", 0), channels = n.int_or("C", 0), hw = n.int_or("HxW", 0);
    const int64_t groups = n.int_or("group", 1);
    require(n, groups > 0 && channels % groups == 0, "C must be a multiple of group");
    double eps = n.has("eps") ? float_from_serialized(n.arg("eps").at("as_float")) : 1e-5;
    ValueId x = n.emit1("reshape", {{"self", n.tensor("input")}, {"shape", IntList{batch, groups, channels / groups * hw}}});
    ValueId y = n.emit1("layer_norm", {{"input", as_arg(x)}, {"normalized_shape", IntList{channels / groups * hw}},
                                       {"eps", Scalar(eps)}});
    y = n.emit1("reshape", {{"self", as_arg(y)}, {"shape", IntList(in)}});
    IntList per_channel(in.size(), 1);
    per_channel[1] = channels;
    if (n.has("weight"))
      y = n.emit1("mul", {{"self", as_arg(y)}, {"other", as_arg(n.emit1("reshape", {{"self", n.tensor("weight")}, {"shape", per_channel}}))}});
    if (n.has("bias"))
      y = n.emit1("add", {{"self", as_arg(y)}, {"other", as_arg(n.emit1("reshape", {{"self", n.tensor("bias")}, {"shape", per_channel}}))}});
    ValueId mean = n.emit1("mean", {{"self", as_arg(x)}, {"dim", IntList{-1}}});
    ValueId var = n.emit1("var", {{"self", as_arg(x)}, {"dim", IntList{-1}}, {"correction", Scalar(int64_t(0))}});
    ValueId rstd = n.emit1("rsqrt", {{"self", as_arg(n.emit1("add", {{"self", as_arg(var)}, {"other", Scalar(eps)}}))}});
    return std::vector<ValueId>{y, mean, rstd};
  }, true};
}

}  // namespace

const std::map<std::string, AtenRow, std::less<>>& aten_rows() {
  static const Rows rows = [] {
    Rows r;
    add_reductions(r);
    add_shapes(r);
    add_indexing_and_creation(r);
    add_nn(r);
    add_core_creation(r);
    add_core_pointwise(r);
    add_core_structured(r);
    add_core_copies_and_norms(r);
    add_convolutions(r);
    add_sorts(r);
    add_core_aten_gaps(r);
    add_one_to_one(r);  // last: it refuses an overload that a hand row above already maps
    return r;
  }();
  return rows;
}

}  // namespace kiln::importer
