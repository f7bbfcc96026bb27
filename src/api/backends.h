// The backend registry: every way kiln can run a graph, by name. "eager" is the reference interpreter and
// "inductor" compiles with kiln::compile (cached per graph object call); tests register deliberately broken
// backends. `kiln run --backend`, repro files and the minifier all resolve backend names here.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "aot/compiled.h"
#include "graph/graph.h"

namespace kiln {

using BackendFn = std::function<std::vector<Tensor>(const graph::Graph&, const std::vector<Tensor>&)>;
void register_backend(const std::string& name, BackendFn fn);
std::vector<std::string> backend_names();
// The backend called `name`; kiln::Error naming the available ones when there is none.
const BackendFn& find_backend(const std::string& name);

// A backend's compiled form of one graph, called once per run (capture compiles each captured graph once).
// "inductor" compiles with kiln::compile (repro stage `repro_stage`); any other backend's program runs its
// BackendFn on every call, so a backend registered by name later (aot_eager, ...) plugs in unchanged.
using GraphProgram = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// `mode` (CompileOptions::mode): "default", or "reduce-overhead" / "max-autotune" for inductor_cuda (check_backend_mode).
GraphProgram compile_for_backend(const std::string& name, const graph::Graph& g, const std::string& repro_stage,
                                 const std::string& mode = "default");
// kiln::Error unless backend `name` compiles in `mode`: every backend has "default"; the other modes
// (compile_modes(): a CUDA graph replay, kernel autotuning) only inductor_cuda, as kiln::compile's own check says
// for CompileOptions.
void check_backend_mode(const std::string& name, const std::string& mode);

// The compile step of a backend that compiles before it runs (inductor: kiln::compile). It must throw exactly
// the CompileError the backend's run would throw for `g`, and nothing a run would throw only later (a
// compiled program never throws a CompileError while running). It never runs the graph; it returns the compiled
// program, which runs `g` as the backend would: a tool that compiles and then runs calls that program, so the
// graph is compiled once even where the backend bypasses its graph cache (under compiler logs). Tools that need
// only to know whether and how a graph fails to compile call it instead of the backend (the minifier, for a
// compile_error target: running the program cannot change that verdict and costs as much as compiling).
using BackendCompileFn = std::function<GraphProgram(const graph::Graph&)>;
void register_backend_compiler(const std::string& name, BackendCompileFn fn);
// The compile step of backend `name`, or null when it has none (then only a run tells).
const BackendCompileFn* find_backend_compiler(const std::string& name);

// Whether backend `name` compiles graphs whose inputs require grad into a forward and a compiled backward
// (the AOT backends and inductor), so capture may put ops that need autograd into its graphs.
bool backend_supports_autograd(const std::string& name);

// The AOT autograd configuration of backend `name` (aot_eager, aot_eager_decomp_partition, inductor; docs/aot.md):
// how each half is compiled, the joint graph's decompositions, KILN_INJECT's `<op>:vjp` bugs.
aot::AotConfig aot_backend_config(const std::string& name, const std::string& repro_stage);

}  // namespace kiln
