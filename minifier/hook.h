// The repro hook for programs that call kiln::compile (KILN_REPRO_AFTER / KILN_REPRO_LEVEL, the seeds'
// TORCHDYNAMO_REPRO_AFTER / TORCHDYNAMO_REPRO_LEVEL). The compile entry point calls these; they never throw
// and never change what the caller does next (the caller still reports its own error): a debug hook must not
// change the bug.
//
// kiln::compile calls these through its CompileHook interface (src/inductor/compile.h) once
// install_repro_hook() has installed it (the kiln CLI does at start-up); the functions below stay callable
// directly for other compile entry points.
//
// Contract for the caller (kiln::compile):
//   - Call repro_hook_wants(stage) to learn whether the hook is on for the graph at `stage`: "capture" (the
//     captured graph, before AOT), "aot" (forward/backward graphs after AOT, as handed to the inductor) or
//     "backend" (the graph exactly as handed to a backend's compile, e.g. `kiln run --backend`). It is on when
//     KILN_REPRO_AFTER equals `stage`, and never inside the minifier's own candidate runs.
//   - Level 3+: call on_compile_start(g, inputs, backend) before compiling. It saves the graph as
//     DIR/pending_<hash>_<pid>.repro (failure: crash), because a segfault in the compiler leaves no chance to call
//     anything afterwards (the crash report names it: install_crash_report); on_compile_done() removes it once
//     compile and the first run succeeded.
//   - On a failure (CompileError while compiling: kind compile_error; an error while running the compiled
//     code: runtime_error; a crash you detected out of process: crash), call on_compile_failure with the
//     graph, the inputs if known (nullptr: inputs are generated from seed 0 and the repro says so), the
//     failure and the backend name. By level:
//       1   compile errors: write DIR/repro_<hash>_<failure>.repro (graph, inputs, config, expected failure; <failure>
//           hashes the backend, kind and normalised message, so each failure of a graph has its own file)
//       2   (default) also minify it: DIR/repro_<hash>_<failure>.min.repro (plus .inputs/), in-process, forked
//       3   also runtime errors (and crashes) are written and minified
//       4   also accuracy: call check_accuracy_after_compile with the compiled outputs; it compares them
//           with the fp64 reference and, on a failure, writes and minifies the accuracy repro
//     DIR is KILN_DEBUG_DIR, or ./kiln_debug when that is empty. The paths written are printed on stderr.
//   - Returns the path of the (minified, when minified) repro written, or "" when nothing was written.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "repro/repro.h"

namespace kiln {

// Installs the hook into kiln::compile (idempotent).
void install_repro_hook();

bool repro_hook_wants(std::string_view stage);

std::string on_compile_failure(const graph::Graph& g, const std::vector<Tensor>* inputs,
                               const FailureSignature& failure, const std::string& backend);

void on_compile_start(const graph::Graph& g, const std::vector<Tensor>* inputs, const std::string& backend);
void on_compile_done(const graph::Graph& g);

// Level 4: `outputs` are what the compiled graph returned for `inputs`. Returns the comparator's verdict
// ({"none"} when it passes or the hook is off); on a failure the repro is written and minified (--accuracy).
FailureSignature check_accuracy_after_compile(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                              const std::vector<Tensor>& outputs, const std::string& backend);

// The crash report of a command (the kiln CLI installs it): a crash by SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT
// prints `kiln: crashed: SIGSEGV (signal 11) ...` on stderr, from an async-signal-safe handler, then dies by the
// same signal. While a compile watched at level 3+ runs, the line names the graph, the backend and the pending
// repro saved before compiling with the command that re-runs it (set_crash_note); otherwise it says how to get
// one. Forked children reset the handlers (repro/isolate.h): their crash is their parent's verdict.
void install_crash_report();
// The rest of the crash line while a compile runs ("" clears it); the hook sets it.
void set_crash_note(const std::string& note);

namespace minify {
// True while the minifier runs (and in its forked children): the hook stays off there.
bool& in_minifier();
}  // namespace minify

}  // namespace kiln
