// The backend registry: every way kiln runs a graph, by name, one entry each, and each entry says what it
// supports (training through AOT autograd, its device, whether it compiles before it runs); the compile modes a
// backend accepts follow from its device (compile_options.h, compile_mode_problem). kiln's own backends are the
// rungs of the ladder, defined by the pipeline (api/pipeline.h); tests and the minifier's self-test register
// deliberately broken ones. `kiln run --backend`, capture, repro files, the minifier, the bisector, the fuzzer
// and the gate all resolve backend names here, and every validity check of a backend, mode and device pair is
// check_backend_options.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "inductor/compile_options.h"

namespace kiln {

// A backend's compiled form of one graph, called once per run (capture compiles each captured graph once).
using GraphProgram = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// A run of a graph on a backend, compiling as it goes (a run-only backend's whole definition).
using BackendFn = std::function<std::vector<Tensor>(const graph::Graph&, const std::vector<Tensor>&)>;
// A backend's compile step: the program, compiled now (see BackendEntry::compiles_ahead).
using BackendCompileFn = std::function<GraphProgram(const graph::Graph&)>;

struct BackendEntry {
  std::string name;
  std::string device = "cpu";  // where its programs run: "cpu" or "cuda" (the modes it takes follow from it)
  // Compiles graphs whose inputs require grad into a forward and a compiled backward (AOT autograd), so capture
  // may put ops that need autograd into its graphs.
  bool trains = false;
  // compile() does all the compiling before the program first runs, and throws exactly the CompileError a run
  // would throw, nothing a run throws only later (a compiled program never throws a CompileError while running).
  // Tools that need only to know whether and how a graph fails to compile call it (the minifier, for a
  // compile_error target), and a tool that compiles then runs calls its program, so the graph compiles once.
  bool compiles_ahead = false;
  // The backend's program for `g` under `options` (options.backend is this entry's name; checked already).
  std::function<GraphProgram(const graph::Graph&, const CompileOptions&)> compile;
  // A run-only backend's run (register_backend(name, fn)): what find_backend returns, kept when a compile step
  // is added (whose program may call it); empty for kiln's backends, whose runs compile.
  BackendFn run;
};

void register_backend(BackendEntry entry);
// A run-only backend (tests' broken backends): `fn` runs the graph on every call; no training, device cpu.
void register_backend(const std::string& name, BackendFn fn);
// Gives backend `name` (registered) a compile step of its own: its programs come from `fn`, compiled ahead.
void register_backend_compiler(const std::string& name, BackendCompileFn fn);

std::vector<std::string> backend_names();
// The entry called `name`; kiln::Error naming the available ones when there is none.
BackendEntry backend_entry(const std::string& name);
// kiln::Error unless backend `name` exists and compiles in `options.mode` on its device (every backend has
// "default"; the other modes need the device compile_mode_problem names): "mode X ..., which needs backend
// inductor_cuda; backend inductor has only mode default".
void check_backend_options(const std::string& name, const CompileOptions& options);
// The same check for a backend that is not in the registry (capture's custom backend functions), called `label`.
void check_mode_on_device(const std::string& label, const std::string& device, const std::string& mode);

// The one route from a backend name to a program: checks the options, then the entry's compile (kiln's backends:
// the pipeline). `options.backend` and `options.device` are filled in from the entry.
GraphProgram compile_for_backend(const std::string& name, const graph::Graph& g, CompileOptions options = {});
// A forward run of backend `name`, as the tools run one beside the reference interpreter (autograd off: inputs
// marked `grad` get no training step, on every backend alike; training goes through compile_for_backend, as
// repro/training.h does): a run-only backend's own run, else one that compiles with default options on every
// call (the inductor's graph cache makes the repeats cheap). Checks the KILN_* settings first.
BackendFn find_backend(const std::string& name);
// The compile step of backend `name` (compile_for_backend with default options; its program runs forward as
// find_backend does), or nullopt when it has none (compiles_ahead false: then only a run tells).
std::optional<BackendCompileFn> find_backend_compiler(const std::string& name);
// Whether backend `name` trains (BackendEntry::trains); false for an unknown name.
bool backend_supports_autograd(const std::string& name);

}  // namespace kiln
