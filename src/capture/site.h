// A place in the user's source (file:line), taken with std::source_location at capture's API boundary, so
// graph breaks, guards and recompile messages name the user's line without anything from the user.
#pragma once
#include <source_location>
#include <string>

#include "ops/op_info.h"

namespace kiln::capture {

struct SourceSite {
  std::string file;
  int line = 0;
  static SourceSite from(const std::source_location& where) { return {where.file_name(), int(where.line())}; }
  // An op call's site: the user's line the Tensor API (or a custom op's handle) passed in OpCall::where; a
  // call that came another way (call_op_named, no CallSite) has none and is named by its op.
  static SourceSite of_call(const OpCall& call) {
    if (call.where.line() > 0) return from(call.where);
    return {"op " + std::string(call.name()), 0};
  }
  // "file:line", or "<line unknown: op X>" for a call that carried no site.
  std::string str() const { return line > 0 ? file + ":" + std::to_string(line) : "<line unknown: " + file + ">"; }
  bool operator==(const SourceSite&) const = default;
};

}  // namespace kiln::capture
