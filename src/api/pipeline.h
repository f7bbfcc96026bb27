// The compiler as one pipeline, from a graph to a runnable program, for every rung of the backend ladder
// (Halide's lower_impl is the model: the stages in order, one line each). A captured function reaches it through
// capture (trace -> graphs -> compile_for_backend), a graph file through the tools; from there:
//
//   eager                       interpret
//   aot_eager                   aot(save-needed partition)          -> interpret the inference, forward, backward
//   aot_eager_decomp_partition  aot(decompose the joint, min-cut)   -> interpret the inference, forward, backward
//   inductor                    aot(min-cut)                        -> inductor(cpu) for each of them
//   inductor_cuda               inductor(cuda)                      (inference only: no training on the GPU yet)
//
// aot(...) is AOT autograd's stages (aot/stages.h: expand, functionalize, rng, joint, transform, partition, each
// verified), taken when the call's inputs require grad; otherwise the inference graph compiles as it is.
// inductor(...) is the inductor's passes (inductor/compile.cpp: decompose, lower, fuse, the schedule passes,
// codegen, each verified). Every stage is timed on KILN_LOGS=passes and dumped under KILN_DEBUG_DIR the same way.
// The options (CompileOptions: backend, device, mode, repro stage) are passed down every stage, never global.
#pragma once
#include <string>
#include <vector>

#include "aot/compiled.h"
#include "api/backends.h"

namespace kiln {

// kiln's backends, the rungs above, as registry entries (backends.cpp registers them).
std::vector<BackendEntry> pipeline_backends();

// The AOT autograd configuration of backend `name` (aot_eager, aot_eager_decomp_partition, inductor; docs/aot.md):
// how each half is compiled (with `options`; the inductor's halves with repro stage "aot"), the joint graph's
// decompositions, KILN_INJECT's `<op>:vjp` bugs.
aot::AotConfig aot_backend_config(const std::string& name, const CompileOptions& options = {});

}  // namespace kiln
