// import_pt2 (pt2.h): the archive's layout (PyTorch >= 2.6, torch/export/pt2_archive), its ExportedProgram JSON
// (torch/_export/serde/schema.py), the payloads of parameters, buffers and constants, and the node-by-node
// conversion through the ATen table (aten_ops.h).
#include "import/pt2.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/size_math.h"
#include "graph/verify.h"
#include "import/aten_ops.h"
#include "import/zip_reader.h"
#include "ops/common.h"

namespace kiln::importer {

using graph::ValueId;
using json = nlohmann::json;

namespace {

constexpr int64_t kMaxJsonBytes = int64_t(256) << 20;  // models/model.json and the payload configs
constexpr int kSchemaMajor = 8;                         // the ExportedProgram schema version kiln reads
constexpr std::string_view kAtenPrefix = "torch.ops.aten.";
constexpr int64_t kMaxElements = int64_t(1) << 40;  // per tensor, so sizes times element sizes never overflow

// The archive's folder prefix ("mlp/"): the folder holding models/model.json.
std::string archive_prefix(const ZipReader& zip) {
  std::optional<std::string> found;
  for (const auto& [name, size] : zip.entries()) {
    const std::string suffix = "models/model.json";
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string prefix = name.substr(0, name.size() - suffix.size());
      if (prefix.empty() || prefix.find('/') == prefix.size() - 1) found = prefix;
    }
    KILN_CHECK(name.find("serialized_exported_program.json") == std::string::npos,
               "{}: an archive in the format of PyTorch < 2.6 (serialized_exported_program.json); re-save it with "
               "torch.export.save from PyTorch 2.6 or newer", zip.path());
  }
  KILN_CHECK(found, "{}: not a torch.export archive: it has no models/model.json; expected a .pt2 file written by "
                    "torch.export.save (tools/export_pt2.py writes one)", zip.path());
  return *found;
}

// Nesting deeper than this is refused while parsing: torch.export's JSON nests about a dozen levels, and
// printing or destroying a value nested hundreds of thousands deep (an error message's dump) would overflow
// the stack.
constexpr int kMaxJsonDepth = 256;

json parse_json_entry(const ZipReader& zip, const std::string& entry) {
  std::string text = zip.read(entry, kMaxJsonBytes);
  json j;
  try {
    j = json::parse(text, [&](int depth, json::parse_event_t, json&) {
      KILN_CHECK(depth <= kMaxJsonDepth, "{}: entry '{}' nests JSON deeper than {} levels; torch.export writes far "
                 "less: the entry is damaged or not from torch.export.save", zip.path(), entry, kMaxJsonDepth);
      return true;
    });
  } catch (const json::exception& e) {
    fail("{}: entry '{}' is not valid JSON: {}", zip.path(), entry, e.what());
  }
  KILN_CHECK(j.is_object(), "{}: entry '{}' is {}, not a JSON object; expected the object torch.export.save writes",
             zip.path(), entry, j.is_null() ? "null" : j.is_array() ? "an array" : "a " + std::string(j.type_name()));
  return j;
}

int64_t sym_int_value(const json& s, const std::string& what) { return sym_int_from_serialized(s, what); }

// obj[key], where `obj` must be an object holding `key`: else a kiln::Error naming the file and the field
// (`where` is "<file>: <path of obj>"), as json's own at() would throw a type_error naming neither.
const json& field(const json& obj, const char* key, const std::string& where) {
  KILN_CHECK(obj.is_object(), "{} is {}, not an object with field '{}'", where, obj.type_name(), key);
  auto it = obj.find(key);
  KILN_CHECK(it != obj.end(), "{} has no field '{}'", where, key);
  return *it;
}

// A list field: obj[key] must be an array.
const json& list_field(const json& obj, const char* key, const std::string& where) {
  const json& v = field(obj, key, where);
  KILN_CHECK(v.is_array(), "{}.{} is {}, not a list", where, key, v.type_name());
  return v;
}

// torch.export's TensorMeta as kiln's (contiguous: kiln values have their own layout).
TensorMeta tensor_meta(const json& m, const std::string& what) {
  int64_t scalar_type = int_from_serialized(field(m, "dtype", what), what + "'s dtype");
  std::optional<DType> dt = dtype_from_serialized(scalar_type);
  KILN_CHECK(dt, "{} has ScalarType {}, which kiln has no dtype for (kiln: bool, u8, i8, i16, i32, i64, f16, bf16, "
                 "f32, f64)", what, scalar_type);
  Shape sizes;
  int64_t numel = 1;
  for (const json& s : list_field(m, "sizes", what)) {
    sizes.push_back(sym_int_value(s, what + "'s size"));
    KILN_CHECK(sizes.back() >= 0, "{} has size {}", what, sizes.back());
    numel = checked_mul(numel, sizes.back(), "kiln import", what + "'s element count");
  }
  KILN_CHECK(numel <= kMaxElements, "{} has {} elements, more than kiln imports (2^40)", what, numel);
  return contiguous_meta(sizes, *dt);
}

// A parameter, buffer or constant: the payload entry named by its config, laid out by its tensor_meta.
class Payloads {
 public:
  Payloads(const ZipReader& zip, const std::string& prefix) : zip_(zip), prefix_(prefix) {
    for (const char* kind : {"weights", "constants"}) {
      std::string entry = fmt::format("{}data/{}/model_{}_config.json", prefix, kind, kind);
      if (!zip.contains(entry)) continue;
      json config = parse_json_entry(zip, entry);
      for (const auto& [fqn, meta] : config.at("config").items()) by_fqn_[fqn] = {kind, meta};
    }
  }

  Tensor load(const std::string& fqn) const {
    auto it = by_fqn_.find(fqn);
    KILN_CHECK(it != by_fqn_.end(), "{}: the archive has no payload for '{}' (data/weights or data/constants)",
               zip_.path(), fqn);
    const auto& [kind, meta] = it->second;
    KILN_CHECK(!meta.value("use_pickle", false), "{}: '{}' is stored pickled (a tensor subclass or custom object); "
                                                 "kiln reads plain tensors only", zip_.path(), fqn);
    std::string path_name = meta.at("path_name").get<std::string>();
    KILN_CHECK(unsafe_entry_name_reason(path_name).empty() && path_name.find('/') == std::string::npos,
               "{}: '{}' names payload '{}', which is not a plain file name", zip_.path(), fqn, path_name);
    const json& tm = meta.at("tensor_meta");
    TensorMeta m = tensor_meta(tm, fmt::format("{}: payload '{}'", zip_.path(), fqn));
    std::string entry = fmt::format("{}data/{}/{}", prefix_, kind, path_name);
    // The storage may be larger than the tensor (a view), but not without bound: a payload's entry may hold at
    // most 4x the bytes of its tensor (plus 1 MiB), so a forged size cannot make kiln inflate gigabytes.
    const int64_t tensor_bytes = shape_numel(m.sizes) * dtype_size(m.dtype);
    std::string bytes = zip_.read(entry, std::min(kMaxArchiveBytes, 4 * tensor_bytes + (int64_t(1) << 20)));
    return strided_copy(bytes, m, tm, fqn);
  }

 private:
  // The payload holds the tensor's storage; the tensor is `sizes` at `strides` from `storage_offset` in it.
  Tensor strided_copy(const std::string& bytes, const TensorMeta& m, const json& tm, const std::string& fqn) const {
    std::string what = fmt::format("{}: payload '{}'", zip_.path(), fqn);
    Shape strides;
    for (const json& s : list_field(tm, "strides", what)) strides.push_back(sym_int_value(s, what + "'s stride"));
    int64_t offset = sym_int_value(field(tm, "storage_offset", what), what + "'s storage offset");
    return tensor_from_storage(bytes, m.sizes, m.dtype, strides, offset, what);
  }

  const ZipReader& zip_;
  std::string prefix_;
  std::map<std::string, std::pair<std::string, json>> by_fqn_;
};

// The flat list of a node's output names ("" for an output the archive gives no name).
std::vector<std::string> output_names(const json& node) {
  std::vector<std::string> names;
  for (const json& out : node.at("outputs")) {
    if (out.contains("as_tensor")) names.push_back(out.at("as_tensor").at("name").get<std::string>());
    else if (out.contains("as_tensors"))
      for (const json& t : out.at("as_tensors")) names.push_back(t.at("name").get<std::string>());
    else names.push_back("");
  }
  return names;
}

// The node's name (schema 8.x records one; older archives do not): else its first output's, else "?".
std::string node_name(const json& node, const std::vector<std::string>& outputs) {
  if (node.contains("name") && node.at("name").is_string()) return node.at("name").get<std::string>();
  return outputs.empty() || outputs[0].empty() ? "?" : outputs[0];
}

std::string short_target(const std::string& target) {
  return target.rfind(kAtenPrefix, 0) == 0 ? "aten." + target.substr(kAtenPrefix.size()) : target;
}

// Every node whose target has no row (or, without decompose, only a decomposing one): one error naming them all.
void check_all_mappable(const json& nodes, const ImportOptions& options, const std::string& path) {
  std::map<std::string, std::vector<std::string>> missing;  // op -> the first output names of its nodes
  const auto& rows = aten_rows();
  for (const json& node : nodes) {
    std::string target = node.at("target").get<std::string>();
    bool aten = target.rfind(kAtenPrefix, 0) == 0;
    auto row = aten ? rows.find(std::string_view(target).substr(kAtenPrefix.size())) : rows.end();
    if (row != rows.end() && (options.decompose || !row->second.decomposes)) continue;
    std::vector<std::string> outs = output_names(node);
    missing[short_target(target) + (row != rows.end() ? " (needs --decompose core)" : "")].push_back(
        "%" + node_name(node, outs));
  }
  if (missing.empty()) return;
  std::string list;
  for (const auto& [op, where] : missing)
    list += fmt::format("\n  {} ({} node{}: {}{})", op, where.size(), where.size() == 1 ? "" : "s",
                        fmt::join(where.begin(), where.begin() + std::min<size_t>(where.size(), 5), ", "),
                        where.size() > 5 ? ", ..." : "");
  fail("{}: {} op{} kiln cannot import:{}\n(`kiln ops --coverage` lists the Core ATen ops kiln lacks; docs/import.md)",
       path, missing.size(), missing.size() == 1 ? "" : "s", list);
}

class Converter {
 public:
  Converter(const std::string& path, const ImportOptions& options) : path_(path), options_(options) {}

  ImportedModel run() {
    ZipReader zip(path_);
    std::string prefix = archive_prefix(zip);
    if (zip.contains(prefix + "byteorder"))
      KILN_CHECK(zip.read(prefix + "byteorder", 64) == "little", "{}: a big-endian archive; kiln reads little-endian "
                                                                 "ones", path_);
    json program = parse_json_entry(zip, prefix + "models/model.json");
    try {
      return convert(program, Payloads(zip, prefix));
    } catch (const json::exception& e) {
      fail("{}: models/model.json does not follow torch.export's schema ({}): {}", path_, schema_version(program),
           e.what());
    }
  }

 private:
  // "schema 8.1" as the program says (never throws: it is also part of the message for a malformed program).
  static std::string schema_version(const json& program) {
    auto part = [&](const char* key) {
      const json* v = program.is_object() && program.contains("schema_version") ? &program["schema_version"] : nullptr;
      return v && v->is_object() && v->contains(key) ? (*v)[key].dump() : std::string("?");
    };
    return fmt::format("schema {}.{}", part("major"), part("minor"));
  }

  ImportedModel convert(const json& program, const Payloads& payloads) {
    const std::string file = path_ + ": models/model.json";
    const json& version = field(program, "schema_version", file);
    int64_t major = int_from_serialized(field(version, "major", file + ": schema_version"), file +
                                        ": schema_version.major");
    KILN_CHECK(major == kSchemaMajor, "{}: ExportedProgram {}; kiln reads schema {}.x (PyTorch 2.6 to 2.11)", path_,
               schema_version(program), kSchemaMajor);
    const json& gm = field(program, "graph_module", file);
    const json& g = field(gm, "graph", file + ": graph_module");
    tensor_values_ = &field(g, "tensor_values", file + ": graph_module.graph");
    KILN_CHECK(tensor_values_->is_object(), "{}: graph_module.graph.tensor_values is {}, not an object", file,
               tensor_values_->type_name());
    const json& nodes = list_field(g, "nodes", file + ": graph_module.graph");
    for (size_t i = 0; i < nodes.size(); ++i) {
      const std::string where = fmt::format("{}: graph_module.graph.nodes[{}]", file, i);
      KILN_CHECK(field(nodes[i], "target", where).is_string(), "{}.target is not a string", where);
      list_field(nodes[i], "inputs", where);
      list_field(nodes[i], "outputs", where);
    }
    check_all_mappable(nodes, options_, path_);
    ImportedModel model;
    model.graph.reserve(nodes.size() * 2, nodes.size() * 3);
    const json& signature = field(gm, "signature", file + ": graph_module");
    add_inputs(list_field(signature, "input_specs", file + ": graph_module.signature"), payloads, model);
    for (const json& node : nodes) add_node(node, model.graph);
    std::vector<ValueId> outs;
    for (const json& spec : list_field(signature, "output_specs", file + ": graph_module.signature")) {
      KILN_CHECK(spec.contains("user_output"), "{}: output spec {} is not a user output (a buffer or input "
                                               "mutation, or a training graph); kiln imports inference graphs",
                 path_, spec.dump());
      const json& arg = spec.at("user_output").at("arg");
      KILN_CHECK(arg.contains("as_tensor"), "{}: output {} is not a tensor; kiln graphs return tensors", path_,
                 arg.dump());
      outs.push_back(value_of(arg.at("as_tensor").at("name").get<std::string>()));
    }
    model.graph.set_outputs(outs);
    graph::verify_graph(model.graph, path_);
    return model;
  }

  void add_inputs(const json& specs, const Payloads& payloads, ImportedModel& model) {
    for (const json& spec : specs) {
      KILN_CHECK(spec.is_object() && spec.size() == 1, "{}: input spec {} is not a one-field union", path_,
                 spec.dump());
      const std::string kind = spec.begin().key();
      const json& body = spec.begin().value();
      if (kind == "user_input") {
        const json& arg = body.at("arg");
        KILN_CHECK(arg.contains("as_tensor"), "{}: user input {} is not a tensor; kiln graphs take tensors", path_,
                   arg.dump());
        std::string name = arg.at("as_tensor").at("name").get<std::string>();
        bind(name, model.graph.add_input(name, recorded_meta(name)));
        model.user_inputs.push_back(name);
        continue;
      }
      static const std::map<std::string, std::string> fqn_key = {
          {"parameter", "parameter_name"}, {"buffer", "buffer_name"}, {"tensor_constant", "tensor_constant_name"}};
      auto key = fqn_key.find(kind);
      KILN_CHECK(key != fqn_key.end(), "{}: input spec '{}' ({}) is not supported; kiln imports tensor inputs, "
                                       "parameters, buffers and tensor constants", path_, kind, body.dump());
      std::string name = body.at("arg").at("name").get<std::string>();
      Tensor value = payloads.load(body.at(key->second).get<std::string>());
      const TensorMeta& m = recorded_meta(name);
      KILN_CHECK(value.sizes() == m.sizes && value.dtype() == m.dtype, "{}: input %{} is {}{} in the graph but its "
                 "payload is {}{}", path_, name, dtype_name(m.dtype), shape_str(m.sizes), dtype_name(value.dtype()),
                 shape_str(value.sizes()));
      bind(name, model.graph.add_input(name, m));
      model.weights.emplace_back(name, value);
    }
  }

  void add_node(const json& node, graph::Graph& g) {
    std::string target = node.at("target").get<std::string>();
    std::vector<std::string> names = output_names(node);
    std::string where = fmt::format("{}: node %{} ({})", path_, node_name(node, names), short_target(target));
    std::vector<ValueId> values;
    try {
      AtenNode n(node, short_target(target), g, value_of_fn_, names);
      values = aten_rows().find(std::string_view(target).substr(kAtenPrefix.size()))->second.map(n);
    } catch (const Error& e) {
      if (e.internal()) throw;
      fail("{}: {}", where, e.what());
    } catch (const json::exception& e) {
      fail("{}: the node does not follow torch.export's schema: {}", where, e.what());
    }
    KILN_CHECK(values.size() == names.size(), "{}: the archive lists {} output{} where {} has {}; the node is "
               "malformed", where, names.size(), names.size() == 1 ? "" : "s", short_target(target), values.size());
    for (size_t k = 0; k < names.size(); ++k) {
      if (names[k].empty()) continue;
      if (values[k] == graph::kNoValue) {
        unavailable_[names[k]] = where;
        continue;
      }
      const TensorMeta& want = recorded_meta(names[k]);
      const TensorMeta& got = g.value(values[k]).meta;
      KILN_CHECK(got.sizes == want.sizes && got.dtype == want.dtype, "{}: kiln infers {}{} for output %{} where the "
                 "archive records {}{}", where, dtype_name(got.dtype), shape_str(got.sizes), names[k],
                 dtype_name(want.dtype), shape_str(want.sizes));
      bind(names[k], values[k]);
    }
  }

  const TensorMeta& recorded_meta(const std::string& name) {
    auto it = metas_.find(name);
    if (it != metas_.end()) return it->second;
    KILN_CHECK(tensor_values_->contains(name), "{}: value %{} has no entry in the graph's tensor_values", path_, name);
    return metas_.emplace(name, tensor_meta(tensor_values_->at(name), fmt::format("{}: value %{}", path_, name)))
        .first->second;
  }

  void bind(const std::string& name, ValueId id) {
    KILN_CHECK(ids_.emplace(name, id).second, "{}: value %{} is defined twice", path_, name);
  }

  ValueId value_of(const std::string& name) const {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    auto u = unavailable_.find(name);
    KILN_CHECK(u == unavailable_.end(), "value %{} (made by {}) is used, but kiln does not compute that output",
               name, u == unavailable_.end() ? "" : u->second);
    fail("value %{} is used before it is defined", name);
  }

  std::string path_;
  ImportOptions options_;
  const json* tensor_values_ = nullptr;
  std::unordered_map<std::string, ValueId> ids_;
  std::unordered_map<std::string, TensorMeta> metas_;
  std::unordered_map<std::string, std::string> unavailable_;
  std::function<ValueId(const std::string&)> value_of_fn_ = [this](const std::string& n) { return value_of(n); };
};

}  // namespace

Tensor tensor_from_storage(std::string_view storage, const Shape& sizes, DType dtype, const Shape& strides,
                           int64_t offset, const std::string& what) {
  KILN_CHECK(strides.size() == sizes.size(), "{}: strides {} do not fit sizes {}", what, shape_str(strides),
             shape_str(sizes));
  KILN_CHECK(offset >= 0, "{}: negative storage offset {}", what, offset);
  const int64_t elem = dtype_size(dtype);
  int64_t numel = 1;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, "{}: negative size {}", what, s);
    numel = checked_mul(numel, s, "kiln import", what + "'s element count");
  }
  for (int64_t st : strides) KILN_CHECK(st >= 0, "{}: negative stride {}", what, st);
  // The last element's index: offset + sum (size - 1) * stride, then its end in bytes; both checked, since a
  // wrapped sum would pass the bound below and read before the storage. An empty tensor reads nothing.
  if (numel > 0) {
    int64_t last = offset;
    for (size_t d = 0; d < strides.size(); ++d)
      last = checked_add(last, checked_mul(sizes[d] - 1, strides[d], "kiln import", what + "'s extent"), "kiln import",
                         what + "'s extent");
    const int64_t need = checked_mul(checked_add(last, 1, "kiln import", what + "'s extent"), elem, "kiln import",
                                     what + "'s extent in bytes");
    KILN_CHECK(need <= int64_t(storage.size()),
               "{}: {} bytes of storage where sizes {}, strides {} and offset {} need {} (a truncated payload)", what,
               storage.size(), shape_str(sizes), shape_str(strides), offset, need);
  }
  Tensor t = Tensor::empty(sizes, dtype);
  char* out = static_cast<char*>(t.data_ptr());
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t i = 0; i < numel; ++i) {
    int64_t src = offset;  // <= last: no overflow
    for (size_t d = 0; d < index.size(); ++d) src += index[d] * strides[d];
    std::memcpy(out + i * elem, storage.data() + src * elem, size_t(elem));
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
  return t;
}

ImportedModel import_pt2(const std::string& path, const ImportOptions& options) {
  return Converter(path, options).run();
}

}  // namespace kiln::importer
