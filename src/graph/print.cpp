// The .kir printer: print_graph and save_graph, and the pieces the rest of the format quotes with (printer.h).
// The printer appends to one string (no temporary strings per argument or type), so printing is linear in the
// output size with few allocations; parse_graph(print_graph(g)) reproduces g exactly.
#include "graph/printer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/files.h"
#include "core/hash.h"
#include "eager/npy.h"
#include "graph/lexer.h"
#include "ops/api.h"

namespace kiln::graph {
namespace kir {
namespace {

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) fmt::format_to(std::back_inserter(out), "\\x{:02x}", c);
        else out += char(c);
    }
  }
  out += '"';
}

void append_name_ref(std::string& out, std::string_view name) {
  out += '%';
  if (!name.empty() && std::all_of(name.begin(), name.end(), is_name_char)) out += name;
  else append_quoted(out, name);
}

std::string graph_name_str(std::string_view name) {
  bool bare = !name.empty() && is_ident_start(name[0]) && std::all_of(name.begin(), name.end(), is_ident_char);
  return bare ? std::string(name) : quote(name);
}

void append_value_ref(std::string& out, const Graph& g, ValueId id) {
  if (id < 0 || id >= g.num_values()) fmt::format_to(std::back_inserter(out), "%<undefined value #{}>", id);
  else append_name_ref(out, g.value(id).name);
}

void append_int(std::string& out, int64_t v) {
  fmt::format_int f(v);
  out.append(f.data(), f.size());
}

void append_ints(std::string& out, const std::vector<int64_t>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    append_int(out, v[i]);
  }
}

// Whether `m` has the contiguous (row-major) strides of its sizes, which a type does not spell out. Computed
// without allocating, and without overflow for any sizes a graph in memory may hold.
bool has_contiguous_strides(const TensorMeta& m) {
  if (m.strides.size() != m.sizes.size()) return false;
  int64_t expected = 1;
  for (size_t i = m.sizes.size(); i-- > 0;) {
    if (m.strides[i] != expected) return false;
    if (i > 0 && __builtin_mul_overflow(expected, std::max<int64_t>(m.sizes[i], 1), &expected)) return false;
  }
  return true;
}

void append_type(std::string& out, const TensorMeta& m) {
  out += dtype_name(m.dtype);
  out += '[';
  append_ints(out, m.sizes);
  out += ']';
  if (!has_contiguous_strides(m)) {
    out += '{';
    append_ints(out, m.strides);
    out += '}';
  }
  if (!(m.device == Device{})) {
    out += '@';
    out += m.device.str();
  }
}

void append_markers(std::string& out, const ValueInfo& v) {
  if (v.requires_grad) out += " grad";
  if (v.wrapped_number) out += " wrapped";
}

// Shortest text that reads back as the same value; always marked as a float ("1.0", "1e+20").
std::string float_str(double v, bool single) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = single ? fmt::format("{}", float(v)) : fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string element_str(const Tensor& t, int64_t i) {
  const void* base = t.data_ptr();
  switch (t.dtype()) {
    case DType::Bool: return static_cast<const bool*>(base)[i] ? "True" : "False";
    case DType::U8: return std::to_string(static_cast<const uint8_t*>(base)[i]);
    case DType::I8: return std::to_string(static_cast<const int8_t*>(base)[i]);
    case DType::I16: return std::to_string(static_cast<const int16_t*>(base)[i]);
    case DType::I32: return std::to_string(static_cast<const int32_t*>(base)[i]);
    case DType::I64: return std::to_string(static_cast<const int64_t*>(base)[i]);
    case DType::F16: return float_str(float(static_cast<const Half*>(base)[i]), true);
    case DType::BF16: return float_str(float(static_cast<const BFloat16*>(base)[i]), true);
    case DType::F32: return float_str(static_cast<const float*>(base)[i], true);
    case DType::F64: return float_str(static_cast<const double*>(base)[i], false);
  }
  return "?";
}

// a == arg_from_default(d) (parse.cpp: the Arg a default stands for), without building the Arg.
bool is_default(const Arg& a, const IValue& d) {
  if (d.is_scalar()) return std::holds_alternative<Scalar>(a) && std::get<Scalar>(a) == d.scalar();
  if (d.is_int_list()) return std::holds_alternative<IntList>(a) && std::get<IntList>(a) == d.int_list();
  if (d.is_dtype()) return std::holds_alternative<DType>(a) && std::get<DType>(a) == d.dtype();
  if (d.is_string()) return std::holds_alternative<std::string>(a) && std::get<std::string>(a) == d.string();
  return std::holds_alternative<std::monostate>(a);
}

void append_arg(std::string& out, const Graph& g, const Arg& a) {
  std::visit([&](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, std::monostate>) out += "None";
    else if constexpr (std::is_same_v<V, TensorArg>) append_value_ref(out, g, v.id);
    else if constexpr (std::is_same_v<V, TensorListArg>) {
      out += '[';
      for (size_t i = 0; i < v.ids.size(); ++i) {
        if (i) out += ", ";
        if (v.ids[i] == kNoValue) out += "None";
        else append_value_ref(out, g, v.ids[i]);
      }
      out += ']';
    } else if constexpr (std::is_same_v<V, Scalar>) {
      if (v.is_int()) append_int(out, v.to_int());
      else out += v.str();
    } else if constexpr (std::is_same_v<V, IntList>) {
      out += '[';
      append_ints(out, v);
      out += ']';
    } else if constexpr (std::is_same_v<V, DType>) out += dtype_name(v);
    else append_quoted(out, v);
  }, a);
}

// "linear(%x, %w1)": positional arguments up to the first omitted default or kwarg-only one, then key=value.
void append_call(std::string& out, const Graph& g, const Node& n) {
  const Schema& s = n.info().schema;
  out += n.info().name;
  out += '(';
  bool keyword = false, first = true;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const ArgSpec* spec = i < s.args.size() ? &s.args[i] : nullptr;
    if (spec && spec->default_value && is_default(n.args[i], *spec->default_value)) {
      keyword = true;
      continue;
    }
    if (!first) out += ", ";
    first = false;
    if (spec) {
      keyword |= spec->kwarg_only;
      if (keyword) {
        out += spec->name;
        out += '=';
      }
    }
    append_arg(out, g, n.args[i]);
  }
  out += ')';
}

void append_results(std::string& out, const Graph& g, const Node& n) {
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (i) out += ", ";
    append_value_ref(out, g, n.outputs[i]);
  }
}

void append_npy_reference(std::string& out, const NpyReference& ref) {
  out += "npy(";
  append_quoted(out, ref.file);
  out += ") sha256=";
  append_quoted(out, ref.sha256);
}

// `ref`: the constant's reference in the source it was parsed from, printed again as it was (kiln fmt).
void append_constant(std::string& out, const Graph& g, const Node& n, const PrintOptions& opts,
                     const NpyReference* ref) {
  const Tensor& c = n.constant;
  ValueId id = n.outputs.empty() ? kNoValue : n.outputs[0];
  append_value_ref(out, g, id);
  out += " = constant ";
  append_type(out, c.meta());
  out += ' ';
  if (ref) {
    append_npy_reference(out, *ref);
  } else if (!opts.npy_dir.empty() && c.numel() > opts.inline_constant_limit) {
    std::string hash = tensor_sha256(c);
    std::string stem;
    for (char ch : g.name) stem += is_ident_char(ch) || ch == '-' ? ch : '_';
    std::string file = fmt::format("{}.{}.npy", stem.empty() ? "graph" : stem, hash.substr(0, 12));
    write_npy((std::filesystem::path(opts.npy_dir) / file).string(), c);
    append_npy_reference(out, {file, hash});
  } else if (c.dim() == 0) {
    out += element_str(c, 0);
  } else {
    Tensor cc = c.is_contiguous() ? c : contiguous(c);
    out += '[';
    for (int64_t i = 0; i < cc.numel(); ++i) {
      if (i) out += ", ";
      out += element_str(cc, i);
    }
    out += ']';
  }
  if (id >= 0 && id < g.num_values()) append_markers(out, g.value(id));
}

void append_op(std::string& out, const Graph& g, const Node& n) {
  append_results(out, g, n);
  out += " = ";
  append_call(out, g, n);
  out += " : ";
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (i) out += ", ";
    ValueId id = n.outputs[i];
    if (id < 0 || id >= g.num_values()) {
      out += '?';
      continue;
    }
    append_type(out, g.value(id).meta);
    append_markers(out, g.value(id));
  }
}

}  // namespace

std::string quote(std::string_view s) {
  std::string out;
  append_quoted(out, s);
  return out;
}

std::string name_ref(std::string_view name) {
  std::string out;
  append_name_ref(out, name);
  return out;
}

std::string value_ref(const Graph& g, ValueId id) {
  std::string out;
  append_value_ref(out, g, id);
  return out;
}

std::string type_str(const TensorMeta& m) {
  std::string out;
  append_type(out, m);
  return out;
}

std::string call_str(const Graph& g, const Node& n) {
  std::string out;
  append_call(out, g, n);
  return out;
}

std::string results_str(const Graph& g, const Node& n) {
  std::string out;
  append_results(out, g, n);
  return out;
}

std::string tensor_sha256(const Tensor& t) {
  Tensor c = t.is_contiguous() ? t : contiguous(t);
  return sha256_hex(c.data_ptr(), size_t(c.numel() * dtype_size(c.dtype())));
}

std::string print_graph_with(const Graph& g, const PrintOptions& opts,
                             const std::unordered_map<size_t, NpyReference>& refs) {
  std::vector<std::string> params;
  size_t params_size = 0;
  for (ValueId id : g.inputs()) {
    const ValueInfo& v = g.value(id);
    std::string p;
    append_name_ref(p, v.name);
    p += ": ";
    append_type(p, v.meta);
    append_markers(p, v);
    params_size += p.size() + 2;
    params.push_back(std::move(p));
  }
  std::string out = fmt::format("graph {}(", graph_name_str(g.name));
  out.reserve(64 * (g.nodes().size() + 1) + params_size);
  // Inputs on one line, or one per line when that would be longer than 100 characters.
  bool one_line = out.size() + params_size - std::min<size_t>(params_size, 2) <= 100 || params.empty();
  for (size_t i = 0; i < params.size(); ++i) {
    out += i == 0 ? (one_line ? "" : "\n    ") : (one_line ? ", " : ",\n    ");
    out += params[i];
  }
  out += ") {\n";
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    out += "  ";
    if (n.kind == NodeKind::Constant) {
      auto ref = refs.find(i);
      append_constant(out, g, n, opts, ref == refs.end() ? nullptr : &ref->second);
    } else {
      append_op(out, g, n);
    }
    if (n.loc.file && n.loc.known()) out += fmt::format("  # {}:{}", n.loc.file, n.loc.line);  // captured from C++
    out += '\n';
  }
  out += "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    out += i == 0 ? " " : ", ";
    append_value_ref(out, g, g.outputs()[i]);
  }
  out += "\n}\n";
  return out;
}

}  // namespace kir

std::string print_graph(const Graph& g, const PrintOptions& opts) { return kir::print_graph_with(g, opts, {}); }

void save_graph(const Graph& g, const std::string& path, const PrintOptions& opts) {
  write_file_atomic(path, print_graph(g, opts));
}

}  // namespace kiln::graph
