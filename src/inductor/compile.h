// kiln::compile: the inductor pipeline for the CPU, as one call. It reads as the stage list:
//   decompose composites -> cleanup passes (DCE, CSE, constant folding) -> lower to loop IR -> schedule
//   (fusion, memory plan) -> LLVM IR per kernel -> ORC JIT (through the kernel cache)
// and returns a callable that runs the host program: kernels and extern calls in order, intermediates
// allocated at first write and returned to a pool after their last use. KILN_DEBUG_DIR receives every stage's
// output (see docs/inductor.md); KILN_LOGS=output_code prints each kernel's LLVM IR, fusion the fusion
// decisions, lowering the realise/inline/fallback decisions, cache the kernel cache's hits and misses.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln {

struct CompileOptions {
  bool fuse = true;  // false: one kernel per node (for tests and ablation)
  // Return the already compiled program for a structurally equal graph compiled with the same options
  // (in memory, this process). Never used while bisection, debug dumps or compiler logs are on, since those
  // must see every compilation happen.
  bool use_graph_cache = true;
};

struct CompileStats {
  int kernels = 0;          // fused kernels in the host program
  int extern_calls = 0;     // nodes run by their eager kernel
  int kernels_built = 0;    // kernels compiled by LLVM in this compile (the rest came from the cache)
  int copy_kernels = 0;     // kernels whose every loop only copies (stores a plain load): fusion failures
  double compile_ms = 0;    // wall time of compile()
};

class CompiledGraph {
 public:
  ~CompiledGraph();
  // Runs the program. Inputs must match the graph's inputs in number, dtype and shape; inputs whose strides
  // differ from the graph's are copied to the compiled layout first.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  const CompileStats& stats() const;
  // The scheduled loop IR (kernels and extern calls in order) and each kernel's LLVM IR (when it was built in
  // this process or KILN_LOGS=output_code / KILN_DEBUG_DIR asked for it).
  const std::string& loop_ir() const;
  const std::vector<std::string>& kernel_llvm_ir() const;
  // The decisions the compiler took, with reasons (lowering, fusion).
  const std::vector<std::string>& decisions() const;

  struct Impl;
  explicit CompiledGraph(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Compiles `g` for the CPU. Throws kiln::CompileError when lowering or code generation fails.
std::shared_ptr<CompiledGraph> compile(const graph::Graph& g, const CompileOptions& options = {});

}  // namespace kiln
