// The inject_test backend: KILN_INJECT read per call (so tests can change it; core/inject.h parses it), faults
// applied through the interpreter's on_value callback, which sees each node's result right after the node ran.
#include "minifier/inject_backend.h"

#include <signal.h>
#include <unistd.h>

#include <map>

#include "api/backends.h"
#include "core/fired.h"
#include "core/inject.h"
#include "graph/interpreter.h"
#include "ops/api.h"
#include "repro/reproduce.h"

namespace kiln::minify {

namespace {

// The kinds this backend makes (inject_backend.h); the others are the compiler's.
bool makes(InjectKind k) {
  return k == InjectKind::CompileError || k == InjectKind::RuntimeError || k == InjectKind::Crash ||
         k == InjectKind::Accuracy || k == InjectKind::Hang;
}

std::map<OpId, InjectKind> injected() {
  std::map<OpId, InjectKind> out;
  for (const InjectSpec::Entry& e : InjectSpec::from_options().entries)
    if (const OpInfo* op = find_op(e.target); op && makes(e.kind)) out[op->id] = e.kind;
  return out;
}

// The backend's "compilation": a compile_error fault fires here, before anything runs.
void compile_injected(const graph::Graph& g, const std::map<OpId, InjectKind>& faults) {
  for (const graph::Node& n : g.nodes()) {
    if (n.kind != graph::NodeKind::Op) continue;
    auto it = faults.find(n.op);
    if (it != faults.end() && it->second == InjectKind::CompileError) {
      note_injection_fired(n.info().name, "compile_error");
      throw CompileError(fmt::format("{}: injected compile error: the lowering of %{} emits invalid IR "
                                     "(KILN_INJECT={}:compile_error)", n.info().name, g.value(n.outputs[0]).name,
                                     n.info().name));
    }
  }
}

std::vector<Tensor> run_injected(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  std::map<OpId, InjectKind> faults = injected();
  if (faults.empty()) return graph::run_graph(g, inputs);
  compile_injected(g, faults);
  graph::InterpretOptions o;
  o.on_value = [&](graph::ValueId id, const Tensor& t) {
    int p = g.value(id).producer;
    if (p < 0) return;
    const graph::Node& n = g.nodes()[size_t(p)];
    if (n.kind != graph::NodeKind::Op) return;
    auto it = faults.find(n.op);
    if (it == faults.end()) return;
    note_injection_fired(n.info().name, inject_kind_name(it->second));
    if (it->second == InjectKind::RuntimeError)
      fail("{}: injected runtime error in the kernel of %{} (KILN_INJECT={}:runtime_error)", n.info().name,
           g.value(id).name, n.info().name);
    if (it->second == InjectKind::Crash) ::raise(SIGSEGV);
    if (it->second == InjectKind::Hang)
      for (;;) ::pause();  // until a signal ends the process (the minifier's time limit, or its death)
    if (it->second == InjectKind::Accuracy && is_floating(t.dtype())) add_(t, 1.0);
  };
  return graph::run_graph(g, inputs, o);
}

}  // namespace

void register_inject_test_backend() {
  register_backend(kInjectTestBackend, run_injected);
  register_backend_compiler(kInjectTestBackend, [](const graph::Graph& g) -> GraphProgram {
    compile_injected(g, injected());
    auto keep = std::make_shared<graph::Graph>(g);
    return [keep](const std::vector<Tensor>& in) { return run_injected(*keep, in); };
  });
}

}  // namespace kiln::minify
