// The trace schema's table (schema.h).
#include "trace/schema.h"

#include <fmt/format.h>

namespace kiln::trace {

namespace {
using T = FieldType;
}

const std::vector<EventSchema>& trace_schema() {
  static const std::vector<EventSchema> schema = {
      {"process", {{"schema", T::Int}, {"pid", T::Int}, {"unix_ms", T::Int}, {"version", T::Text}, {"git", T::Text},
                   {"build", T::Text}, {"host", T::Text}, {"argv", T::TextList}, {"config", T::Object}},
       "the first line of each file: the process, kiln's version and build, the command line, every KILN_* set"},
      {"compile_start", {{"compile_id", T::Text}, {"what", T::Text}, {"name", T::Text}},
       "a compile begins: `what` is graph, function, training or backward; `site` the user's line when known"},
      {"compile_end", {{"compile_id", T::Text}, {"name", T::Text}, {"outcome", T::Text}, {"wall_ms", T::Number}},
       "a compile ends: outcome ok or error"},
      {"compile_error", {{"compile_id", T::Text}, {"kind", T::Text}, {"message", T::Text}},
       "why a compile failed: kind is the failing stage (inductor/lowering, ...) or compile_error"},
      {"backend", {{"compile_id", T::Text}, {"backend", T::Text}, {"graph", T::Text}, {"nodes", T::Int}},
       "a graph handed to a backend of the ladder, with its op count"},
      {"span", {{"category", T::Text}, {"name", T::Text}, {"start_us", T::Int}, {"wall_ms", T::Number},
                {"cpu_ms", T::Number}},
       "a stage or pass (category capture, aot, inductor): its start, wall and CPU time"},
      {"artifact", {{"compile_id", T::Text}, {"name", T::Text}, {"kind", T::Text}, {"text", T::Text}},
       "a stage's graph (.kir), the loop IR and schedules (.txt), a kernel's code (.ll, .cu)"},
      {"log", {{"channel", T::Text}, {"message", T::Text}},
       "a KILN_LOGS line (recorded whatever KILN_LOGS says): fusion, lowering, partitioner decisions and more"},
      {"graph_break", {{"function", T::Text}, {"site", T::Text}, {"reason", T::Text}},
       "a graph break in a captured function, with the user's line"},
      {"guards", {{"function", T::Text}, {"guards", T::TextList}}, "the guards of a new trace"},
      {"guard_failure", {{"function", T::Text}, {"failures", T::TextList}},
       "a call missed every cached trace: the failed guard of each"},
      {"recompile", {{"function", T::Text}, {"reason", T::Text}, {"site", T::Text}, {"recompiles", T::Int},
                     {"limit", T::Int}},
       "a recompile, its reason, and the count against the recompile limit"},
      {"recompile_limit", {{"function", T::Text}, {"reason", T::Text}, {"site", T::Text}, {"limit", T::Int}},
       "the recompile limit was hit: the call runs eagerly"},
      {"graph_compiled", {{"compile_id", T::Text}, {"function", T::Text}, {"graph", T::Text}, {"number", T::Int},
                          {"nodes", T::Int}},
       "a captured graph was compiled"},
      {"cache", {{"cache", T::Text}, {"result", T::Text}}, "a cache lookup: graph (in memory) or disk, hit or miss"},
      {"kernel", {{"compile_id", T::Text}, {"graph", T::Text}, {"kernel", T::Text}, {"stores", T::TextList},
                  {"nodes", T::TextList}, {"ops", T::TextList}, {"lines", T::TextList}, {"stands_for", T::TextList}},
       "provenance: the graph nodes a kernel computes and the lines they came from"},
      {"extern", {{"compile_id", T::Text}, {"graph", T::Text}, {"reason", T::Text}, {"nodes", T::TextList},
                  {"ops", T::TextList}, {"lines", T::TextList}, {"stands_for", T::TextList}},
       "provenance: a node run by its eager kernel, and why"},
      {"call", {{"graph", T::Text}, {"start_us", T::Int}, {"wall_ms", T::Number}},
       "KILN_TRACE_RUNTIME: a call of a compiled program"},
      {"launch", {{"graph", T::Text}, {"kind", T::Text}, {"name", T::Text}, {"start_us", T::Int}, {"wall_us", T::Int}},
       "KILN_TRACE_RUNTIME: a kernel or extern call of a compiled CPU program"},
  };
  return schema;
}

namespace {
bool has_type(const nlohmann::json& v, FieldType t) {
  switch (t) {
    case T::Int: return v.is_number_integer();
    case T::Number: return v.is_number();
    case T::Text: return v.is_string();
    case T::Bool: return v.is_boolean();
    case T::Object: return v.is_object();
    case T::TextList:
      if (!v.is_array()) return false;
      for (const auto& x : v)
        if (!x.is_string()) return false;
      return true;
  }
  return false;
}
std::string_view type_name(FieldType t) {
  switch (t) {
    case T::Int: return "an integer";
    case T::Number: return "a number";
    case T::Text: return "a string";
    case T::Bool: return "a boolean";
    case T::Object: return "an object";
    case T::TextList: return "a list of strings";
  }
  return "?";
}
}  // namespace

std::string schema_problem(const nlohmann::json& line) {
  if (!line.is_object()) return "a line is not a JSON object";
  auto ev = line.find("event");
  if (ev == line.end() || !ev->is_string()) return "no \"event\" name";
  const std::string name = ev->get<std::string>();
  const EventSchema* schema = nullptr;
  for (const EventSchema& s : trace_schema())
    if (s.event == name) schema = &s;
  if (!schema) return fmt::format("unknown event \"{}\"", name);
  auto check = [&](std::string_view field, FieldType t) -> std::string {
    auto it = line.find(std::string(field));
    if (it == line.end()) return fmt::format("event {} has no field \"{}\"", name, field);
    if (!has_type(*it, t)) return fmt::format("event {}: field \"{}\" is not {}", name, field, type_name(t));
    return "";
  };
  if (std::string p = check("ts_us", T::Int); !p.empty()) return p;
  if (name != "process")
    if (std::string p = check("tid", T::Int); !p.empty()) return p;
  for (const EventField& f : schema->fields)
    if (std::string p = check(f.name, f.type); !p.empty()) return p;
  return "";
}

}  // namespace kiln::trace
