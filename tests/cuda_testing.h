// What the CUDA test files share: the compile options of a program for the inductor_cuda backend.
#pragma once
#include <string>

#include "inductor/compile_options.h"

namespace kiln {

// A program compiled for the GPU in `mode`, outside the graph-level cache (each test compiles afresh).
inline CompileOptions cuda_compile_options(const std::string& mode = "default") {
  CompileOptions o;
  o.device = "cuda";
  o.backend = "inductor_cuda";
  o.mode = mode;
  o.use_graph_cache = false;
  return o;
}

}  // namespace kiln
