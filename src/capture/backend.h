// How capture compiles a captured graph: through the backend registry's compile_for_backend (a registry
// name: eager, aot_eager, inductor, ...: api/pipeline.h) or a user's backend function, with suppress_errors
// (a graph whose compile fails warns and runs eagerly), KILN_LOGS=graph_code and KILN_DEBUG_DIR dumps.
#pragma once
#include <functional>
#include <string>

#include "api/backends.h"
#include "capture/trace.h"

namespace kiln::capture {

// A user's backend: a captured graph and example inputs (the trace's tensors) -> the program to call.
using CustomBackend = std::function<GraphProgram(const graph::Graph&, const std::vector<Tensor>&)>;

struct BackendChoice {
  std::string name;  // resolved: the option, else KILN_BACKEND, else "inductor" ("custom" for a function)
  CustomBackend custom;
  bool suppress_errors = false;
  std::string mode = "default";  // CaptureOptions::mode, checked against the backend at kiln::compile, passed on
};

// The backend name a compiled function uses now: `requested`, else KILN_BACKEND, else "inductor".
std::string resolve_backend_name(const std::string& requested, bool has_custom);
// A kiln::Error when KILN_BACKEND is set to a name that is not a registered backend, listing them. kiln::compile
// calls it whatever backend it names, so a mistyped KILN_BACKEND is never silently ignored.
void check_backend_setting();
// KILN_CAPTURE_VERIFY now. Like resolve_backend_name, it reads the options table only when an option changed
// (a per-thread snapshot keyed by options_generation()), so a compiled call does not pay for it.
bool capture_verify_enabled();

// Compiles one captured graph (`label`: "graph 2 of fn (file:line)", for messages and dump names).
GraphProgram compile_segment(const BackendChoice& backend, const Segment& segment, const std::string& label);

}  // namespace kiln::capture
