// Capture's backends (see backend.h).
#include "capture/backend.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>

#include "core/debug_dir.h"
#include "core/escape.h"
#include "core/log.h"
#include "core/trace.h"
#include "core/options.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"

namespace kiln::capture {

namespace {
struct Settings {
  uint64_t generation = 0;  // options_generation() + 1 when read; 0: never
  bool verify = false;
  std::string backend;
};
const Settings& settings() {
  thread_local Settings s;
  uint64_t now = options_generation() + 1;
  if (s.generation != now) {
    s.verify = opt_bool(Opt::CaptureVerify);
    s.backend = opt_string(Opt::Backend);
    if (!s.backend.empty()) {
      const std::vector<std::string> names = backend_names();
      KILN_CHECK(std::find(names.begin(), names.end(), s.backend) != names.end(), "KILN_BACKEND={}: unknown backend "
                 "'{}'; expected one of: {} (or empty: inductor)", terminal_safe(s.backend), terminal_safe(s.backend),
                 fmt::join(names, ", "));
    }
    s.generation = now;
  }
  return s;
}
}  // namespace

std::string resolve_backend_name(const std::string& requested, bool has_custom) {
  if (has_custom) return "custom";
  if (!requested.empty()) return requested;
  const std::string& from_env = settings().backend;
  return from_env.empty() ? "inductor" : from_env;
}

bool capture_verify_enabled() { return settings().verify; }

void check_backend_setting() { settings(); }

namespace {

// KILN_DEBUG_DIR/capture/NNN_<graph>/graph.kir: every captured graph, with the values the trace gave its inputs
// in inputs/ beside it (one .npy per input), so `kiln run D/graph.kir --inputs D/inputs` replays the captured
// call, and `kiln minify` and the bisector take any of them.
void dump_segment(const Segment& segment) {
  const std::filesystem::path dir = claim_debug_dir("capture", segment.graph.name);
  if (dir.empty()) return;
  graph::save_graph(segment.graph, (dir / "graph.kir").string());
  if (segment.input_values.size() == segment.graph.inputs().size())
    graph::save_inputs(segment.graph, segment.input_values, (dir / "inputs").string());
}

}  // namespace

GraphProgram compile_segment(const BackendChoice& backend, const Segment& segment, const std::string& label) {
  if (log_enabled(LogChannel::GraphCode))
    log_line(LogChannel::GraphCode, fmt::format("{}:\n{}", label, graph::print_graph(segment.graph)));
  trace_artifact("captured " + segment.graph.name + ".kir", "kir", [&] { return graph::print_graph(segment.graph); });
  dump_segment(segment);
  try {
    if (backend.custom) return backend.custom(segment.graph, segment.example_inputs);
    return compile_for_backend(backend.name, segment.graph, CompileOptions{.repro_stage = "capture", .mode = backend.mode});
  } catch (const Error& e) {
    if (!backend.suppress_errors) throw;
    std::fprintf(stderr, "kiln: warning: backend '%s' failed on %s: %s; that graph runs eagerly (suppress_errors)\n",
                 backend.name.c_str(), label.c_str(), e.what());
    auto graph = std::make_shared<graph::Graph>(segment.graph);
    return [graph](const std::vector<Tensor>& in) { return graph::run_graph(*graph, in); };
  }
}

}  // namespace kiln::capture
