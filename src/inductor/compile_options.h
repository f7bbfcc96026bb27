// The options of one kiln::compile call (compile.h), in a header of their own so the inductor's passes can
// see them through CompileContext (context.h) without the public compile API.
#pragma once
#include <string>

namespace kiln {

struct CompileOptions {
  // For the repro hook (compile.h): the stage this compile serves (KILN_REPRO_AFTER's `backend`: the graph as
  // handed to a backend; AOT will pass `aot`) and the backend name recorded in a repro.
  std::string repro_stage = "backend";
  std::string backend = "inductor";
  // The device the program's kernels are generated for: "cpu" (the host backend) or "cuda" (docs/cuda.md).
  std::string device = "cpu";
  bool fuse = true;  // false: one kernel per node (for tests and ablation)
  // "default", or "reduce-overhead": the CUDA backend records the whole program's launches into a CUDA graph at
  // the first call and replays it (inputs copied into static buffers; docs/cuda.md). Needs device "cuda" and a
  // program without host steps (a kiln::Error at compile time names the step that cannot be captured).
  // Empty: default_compile_mode().
  std::string mode;
  // Return the already compiled program for a structurally equal graph compiled with the same options
  // (in memory, this process). Never used while bisection, debug dumps, compiler logs or the repro hook are
  // on, since those must see every compilation happen.
  bool use_graph_cache = true;
};

// The mode of compiles that name none: "default" unless set (`kiln run --mode` sets it for the process).
void set_default_compile_mode(std::string mode);
std::string default_compile_mode();

}  // namespace kiln
