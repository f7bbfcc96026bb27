// The backend registry (see backends.h).
#include "api/backends.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "api/pipeline.h"
#include "core/error.h"
#include "core/options.h"
#include "core/trace.h"

namespace kiln {

namespace {

std::mutex g_mutex;

// kiln's backends (the pipeline's rungs) and whatever was registered since, by name.
std::map<std::string, BackendEntry>& registry() {
  static std::map<std::string, BackendEntry> r = [] {
    std::map<std::string, BackendEntry> m;
    for (BackendEntry& e : pipeline_backends()) {
      std::string name = e.name;
      m.emplace(std::move(name), std::move(e));
    }
    return m;
  }();
  return r;
}

// The options a backend's programs compile with when the caller gives none but the backend's own.
CompileOptions options_for(const BackendEntry& e, CompileOptions options = {}) {
  options.backend = e.name;
  options.device = e.device;
  return options;
}

// The registered backends that compile for `device`, for the error that sends a user to one.
std::vector<std::string> backends_on(const std::string& device) {
  std::lock_guard lock(g_mutex);
  std::vector<std::string> names;
  for (const auto& [name, e] : registry())
    if (e.device == device) names.push_back(name);
  return names;
}

}  // namespace

void register_backend(BackendEntry entry) {
  std::lock_guard lock(g_mutex);
  std::string name = entry.name;
  registry()[name] = std::move(entry);
}

void register_backend(const std::string& name, BackendFn fn) {
  BackendEntry e;
  e.name = name;
  e.run = fn;
  e.compile = [fn = std::move(fn)](const graph::Graph& g, const CompileOptions&) -> GraphProgram {
    auto graph = std::make_shared<graph::Graph>(g);
    return [fn, graph](const std::vector<Tensor>& in) { return fn(*graph, in); };
  };
  register_backend(std::move(e));
}

void register_backend_compiler(const std::string& name, BackendCompileFn fn) {
  std::lock_guard lock(g_mutex);
  auto it = registry().find(name);
  KILN_ASSERT(it != registry().end(), "register_backend_compiler: no backend '{}' to give a compile step", name);
  it->second.compiles_ahead = true;
  it->second.compile = [fn = std::move(fn)](const graph::Graph& g, const CompileOptions&) { return fn(g); };
}

std::vector<std::string> backend_names() {
  std::lock_guard lock(g_mutex);
  std::vector<std::string> names;
  for (const auto& [name, e] : registry()) names.push_back(name);
  return names;
}

BackendEntry backend_entry(const std::string& name) {
  {
    std::lock_guard lock(g_mutex);
    auto it = registry().find(name);
    if (it != registry().end()) return it->second;
  }
  fail("unknown backend '{}' (available: {})", name, fmt::join(backend_names(), ", "));
}

void check_mode_on_device(const std::string& label, const std::string& device, const std::string& mode) {
  check_compile_mode(mode);
  const std::string problem = compile_mode_problem(mode, device);
  if (problem.empty()) return;
  std::vector<std::string> modes;
  for (const std::string& m : compile_modes())
    if (compile_mode_problem(m, device).empty()) modes.push_back(m);
  const std::vector<std::string> cuda = backends_on("cuda");
  const std::string needed = cuda.empty() ? "a CUDA backend (this build has none)"
                                          : fmt::format("backend {}", fmt::join(cuda, " or "));
  fail("{}, which needs {}; backend {} has only mode{} {}", problem, needed, label, modes.size() == 1 ? "" : "s",
       fmt::join(modes, ", "));
}

namespace {
// A backend's compile of `g` as one compile of the trace (core/trace.h): its own compile id, or the captured
// function's that is compiling it; an error is the compile's outcome.
GraphProgram traced_compile(const BackendEntry& e, const graph::Graph& g, const CompileOptions& options) {
  CompileScope traced("graph", g.name);
  trace_event("backend", {{"backend", e.name}, {"graph", g.name}, {"nodes", g.num_op_nodes()}});
  try {
    return e.compile(g, options);
  } catch (const std::exception& err) {
    traced.fail("compile_error", err.what());
    throw;
  }
}
}  // namespace

void check_backend_options(const std::string& name, const CompileOptions& options) {
  check_mode_on_device(name, backend_entry(name).device, options.mode);
}

GraphProgram compile_for_backend(const std::string& name, const graph::Graph& g, CompileOptions options) {
  check_options();  // every tool picks its backend here: no backend runs with an invalid KILN_* setting
  const BackendEntry e = backend_entry(name);
  check_mode_on_device(name, e.device, options.mode);
  return traced_compile(e, g, options_for(e, std::move(options)));
}

BackendFn find_backend(const std::string& name) {
  check_options();
  BackendEntry e = backend_entry(name);
  return [e = std::move(e)](const graph::Graph& g, const std::vector<Tensor>& in) {
    NoGradGuard forward_only;
    return e.run ? e.run(g, in) : traced_compile(e, g, options_for(e))(in);
  };
}

std::optional<BackendCompileFn> find_backend_compiler(const std::string& name) {
  std::lock_guard lock(g_mutex);
  auto it = registry().find(name);
  if (it == registry().end() || !it->second.compiles_ahead) return std::nullopt;
  return [e = it->second](const graph::Graph& g) -> GraphProgram {
    GraphProgram program = traced_compile(e, g, options_for(e));
    return [program](const std::vector<Tensor>& in) {
      NoGradGuard forward_only;
      return program(in);
    };
  };
}

bool backend_supports_autograd(const std::string& name) {
  std::lock_guard lock(g_mutex);
  auto it = registry().find(name);
  return it != registry().end() && it->second.trains;
}

}  // namespace kiln
