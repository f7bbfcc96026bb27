// The options of one kiln::compile call (compile.h), in a header of their own so the inductor's passes can
// see them through CompileContext (context.h) without the public compile API.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/bisect.h"
#include "core/inject.h"

namespace kiln {

struct CompileOptions {
  // For the repro hook (compile.h): the stage this compile serves (KILN_REPRO_AFTER's `backend`: the graph as
  // handed to a backend; AOT's forward and backward compiles pass `aot`) and the backend name recorded in a repro.
  std::string repro_stage = "backend";
  std::string backend = "inductor";
  // The device the program's kernels are generated for: "cpu" (the host backend) or "cuda" (docs/cuda.md).
  std::string device = "cpu";
  bool fuse = true;  // false: one kernel per node (for tests and ablation)
  // "default"; "reduce-overhead": the CUDA backend records the whole program's launches into a CUDA graph at
  // the first call and replays it (inputs copied into static buffers; docs/cuda.md). Needs device "cuda" and a
  // program without host steps (a kiln::Error at compile time names the step that cannot be captured);
  // "max-autotune": the CUDA backend times each kernel at a few launch shapes at its first launch and keeps the
  // fastest (cached on disk; docs/cuda.md). Both need device "cuda" (compile_mode_problem). Passed, never
  // global: `kiln run --mode` and CaptureOptions::mode set it on the options they compile with.
  std::string mode = "default";
  // Return the already compiled program for a structurally equal graph compiled with the same options
  // (in memory, this process; KILN_BISECT_* settings are part of the key). Never used while debug dumps,
  // compiler logs or the repro hook are on, since those must see every compilation happen.
  bool use_graph_cache = true;
  // The bugs to inject (core/inject.h; e.g. InjectSpec::parse("relu:accuracy")); nullopt: KILN_INJECT's. Every
  // stage that injects asks injection(): the inductor's decompose and lowering passes, AOT's joint (vjp) and the
  // min-cut partitioner (partition:accuracy).
  std::optional<InjectSpec> inject;
  // The bisection settings every should_run site of this compile obeys (core/bisect.h); nullopt:
  // KILN_BISECT_DISABLE's and KILN_BISECT_LIMIT's.
  std::optional<BisectSettings> bisect;

  // `inject`, or KILN_INJECT's, checked for the compiler (InjectSpec::checked_for_compiler).
  InjectSpec injection() const { return inject ? inject->checked_for_compiler() : InjectSpec::for_compiler(); }
};

// The compile modes, in one place: "default", "reduce-overhead", "max-autotune" (docs/cuda.md).
const std::vector<std::string>& compile_modes();
// kiln::Error "unknown compile mode 'X'; the modes are ..." unless `mode` is one; `where` prefixes the message.
void check_compile_mode(const std::string& mode, const std::string& where = "");
// Why `mode` needs the CUDA backend (inductor_cuda), for the errors that refuse it elsewhere; "" for "default".
std::string compile_mode_needs_cuda(const std::string& mode);
// The one rule of which device a compile mode runs on: "" when `mode` (a known one: check_compile_mode) compiles
// for `device`, else what the mode does that needs device "cuda". kiln::compile and the backend registry
// (check_backend_options) both ask here and word the answer for their callers.
std::string compile_mode_problem(const std::string& mode, const std::string& device);

}  // namespace kiln
