// A place in the user's source (file:line), taken with std::source_location at capture's API boundary, so
// graph breaks, guards and recompile messages name the user's line without anything from the user.
#pragma once
#include <source_location>
#include <string>

namespace kiln::capture {

struct SourceSite {
  std::string file;
  int line = 0;
  static SourceSite from(const std::source_location& where) { return {where.file_name(), int(where.line())}; }
  // "file:line"; recorded ops carry no line yet (the Tensor API takes no source_location), so an op's site
  // is unknown and says so.
  std::string str() const { return line > 0 ? file + ":" + std::to_string(line) : "<line unknown: " + file + ">"; }
  bool operator==(const SourceSite&) const = default;
};

}  // namespace kiln::capture
