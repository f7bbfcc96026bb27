// The table from ATen operator overloads (`aten.addmm.default`, as torch.export names node targets) to kiln
// ops: what `kiln import` can map, and what `kiln ops --coverage` compares with the Core ATen op list.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/graph.h"

namespace kiln::importer {

// One serialized node being mapped: its named arguments (torch.export's NamedArgument list) and the graph
// being built. Rows read arguments by their ATen names and emit kiln ops by their kiln schema names.
class AtenNode {
 public:
  // `output_names`: the archive's names of the node's outputs, given in turn to the values `emit` makes while
  // they are free (the others get fresh names).
  AtenNode(const nlohmann::json& node, std::string target, graph::Graph& g,
           const std::function<graph::ValueId(const std::string&)>& value_of, std::vector<std::string> output_names);
  const std::string& target() const { return target_; }
  bool has(std::string_view name) const;  // given and not None
  const nlohmann::json& arg(std::string_view name) const;  // the Argument union of `name`; throws when absent
  graph::Arg tensor(std::string_view name) const;
  int64_t int_or(std::string_view name, int64_t fallback) const;
  bool bool_or(std::string_view name, bool fallback) const;
  std::vector<int64_t> ints_or(std::string_view name, std::vector<int64_t> fallback) const;
  // Converts an Argument union to the kiln argument of type `spec`, or throws naming the node and argument.
  graph::Arg convert(std::string_view name, const nlohmann::json& a, const ArgSpec& spec) const;
  // Appends kiln op `op` with arguments by kiln schema name (the others take their defaults); output metas
  // come from kiln's shape inference.
  std::vector<graph::ValueId> emit(std::string_view op, const std::vector<std::pair<std::string, graph::Arg>>& args);
  graph::ValueId emit1(std::string_view op, const std::vector<std::pair<std::string, graph::Arg>>& args) {
    return emit(op, args).at(0);
  }
  // Passes every given ATen argument to kiln op `op` under its own name or `renames[name]`; arguments in
  // `ignored` are dropped (the row has checked them).
  std::vector<graph::ValueId> forward(std::string_view op, const std::map<std::string, std::string>& renames = {},
                                      const std::vector<std::string>& ignored = {});
  graph::Graph& graph() { return g_; }
  [[noreturn]] void unsupported(const std::string& why) const;

 private:
  const nlohmann::json& node_;
  std::string target_;
  graph::Graph& g_;
  const std::function<graph::ValueId(const std::string&)>& value_of_;
  std::vector<std::string> output_names_;
  size_t next_name_ = 0;
};

// A row: maps one node to kiln values, one per ATen output (graph::kNoValue for an output it does not
// compute; using such an output is an error). `decomposes`: it needs several kiln ops (`--decompose core`).
// A row that passes every argument on to one kiln op (AtenNode::forward) says so in `forwards_to`, with the
// arguments it renames or drops; for a row written as code it is empty. Tests read these.
struct AtenRow {
  std::function<std::vector<graph::ValueId>(AtenNode&)> map;
  bool decomposes = false;
  std::string forwards_to{};
  std::map<std::string, std::string> renames{};
  std::vector<std::string> ignored{};
};
// kiln's dtype for torch.export's ScalarType number (schema.py), if kiln has one.
std::optional<DType> dtype_from_serialized(int64_t scalar_type);
// A float of the program: a JSON number, or "Infinity", "-Infinity", "NaN" (how torch.export writes those).
double float_from_serialized(const nlohmann::json& v);
// An integer of the program that fits int64_t: a JSON integer, never a float (32.5 or 1e23 would be truncated
// or wrap), a string or a bool; else a kiln::Error saying `what` is not an integer.
int64_t int_from_serialized(const nlohmann::json& v, const std::string& what);
// A SymInt or SymIntArgument union ({"as_int": N}; for a dynamic size {"as_expr": ...} or {"as_name": "s0"}) as
// its static value; a symbolic size
// is refused as such, anything else as not being a size.
int64_t sym_int_from_serialized(const nlohmann::json& s, const std::string& what);

// Keyed by "addmm.default" (the target without "torch.ops.aten.").
const std::map<std::string, AtenRow, std::less<>>& aten_rows();
// The rows of aten_core_gaps.cpp: Core ATen ops real models export that kiln writes with several of its ops.
void add_core_aten_gaps(std::map<std::string, AtenRow, std::less<>>& rows);

}  // namespace kiln::importer
