// The schema of KILN_TRACE's JSON lines (core/trace.h writes them; docs/observability.md lists them): per event
// name, the fields it must have and their JSON types. The report checks every line it reads against it, and the
// tests check every line kiln writes.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::trace {

enum class FieldType { Int, Number, Text, TextList, Object, Bool };

struct EventField {
  std::string_view name;
  FieldType type;
};

struct EventSchema {
  std::string_view event;
  std::vector<EventField> fields;  // required, beside `event`, `ts_us` (and `tid` for every event but process)
  std::string_view help;
};

// Every event kind, the process line first.
const std::vector<EventSchema>& trace_schema();

// What is wrong with one parsed line ("" when it matches the schema).
std::string schema_problem(const nlohmann::json& line);

}  // namespace kiln::trace
