// kiln::compile: the inductor pipeline for the CPU, as one call. It reads as the pass list (compile.cpp,
// docs/inductor.md "Pipeline"):
//   decompose (+ cleanup: DCE, CSE, constant folding) -> lower -> fuse -> localise -> stream, defer (the CPU
//   backend's placement passes) -> plan_memory -> codegen (the CodeGenerator: LLVM IR per kernel, ORC JIT through
//   the kernel cache)
// and returns a callable that runs the host program: kernels and extern calls in order, intermediates
// allocated at first write and returned to a pool after their last use. KILN_DEBUG_DIR receives every stage's
// output (see docs/inductor.md); KILN_LOGS=output_code prints each kernel's LLVM IR, each pass logs its
// decisions on its own channel (fusion, localise, stream, defer, memory_plan), lowering the
// realise/inline/fallback decisions, cache the kernel cache's hits and misses.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "inductor/compile_options.h"

namespace kiln {

struct CompileStats {
  int kernels = 0;          // fused kernels in the host program
  int extern_calls = 0;     // nodes run by their eager kernel
  int kernels_built = 0;    // kernels compiled by LLVM in this compile (the rest came from the cache)
  int copy_kernels = 0;     // kernels whose every loop only copies (stores a plain load): fusion failures
  double compile_ms = 0;    // wall time of compile()
};

struct CompileOptions;
class CompiledGraph;
std::shared_ptr<CompiledGraph> compile(const graph::Graph& g, const CompileOptions& options);

class CompiledGraph {
 public:
  ~CompiledGraph();
  // Runs the program. Inputs must match the graph's inputs in number, dtype and shape; inputs whose strides
  // differ from the graph's are copied to the compiled layout first.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  const CompileStats& stats() const;
  // A buffer the program materialised: a kernel's output or an extern call's result (kernel-local rows are not
  // materialised), named as the value of the compiled (decomposed) graph it holds, with the step that wrote it.
  struct Materialised {
    std::string value;  // the value's name, without '%'
    std::string step;   // the kernel's name ("k3") or "extern"
    Tensor tensor;      // a copy taken right after the step
    graph::SourceLoc loc;  // the source line of the node that computes it (a decomposed node: its composite's)
  };
  // Runs the program like operator() and returns every materialised buffer in the order the steps wrote them
  // (the accuracy bisector compares them with the fp64 reference). Recording changes no compile decision.
  std::vector<Materialised> run_recording(const std::vector<Tensor>& inputs) const;
  // The scheduled loop IR (kernels and extern calls in order) and each kernel's LLVM IR (when it was built in
  // this process or KILN_LOGS=output_code / KILN_DEBUG_DIR asked for it).
  const std::string& loop_ir() const;
  const std::vector<std::string>& kernel_llvm_ir() const;
  // The decisions the compiler took, with reasons (lowering, fusion).
  const std::vector<std::string>& decisions() const;

  struct Impl;
  explicit CompiledGraph(std::unique_ptr<Impl> impl);
  // The program itself (inductor/program.h), for backends that run it their own way (cuda/device_program.h).
  const Impl* impl() const { return impl_.get(); }

 private:
  friend std::shared_ptr<CompiledGraph> compile(const graph::Graph& g, const CompileOptions& options);
  std::unique_ptr<Impl> impl_;
};

// Compiles `g` for the CPU. Throws kiln::CompileError when lowering or code generation fails. This is the one
// compile entry point (kiln run, the backends, later capture and AOT): it calls the repro hook below.
std::shared_ptr<CompiledGraph> compile(const graph::Graph& g, const CompileOptions& options = {});

// The repro hook kiln::compile calls (KILN_REPRO_AFTER / KILN_REPRO_LEVEL). kiln_minifier implements it
// (minifier/hook.h) and kiln::install_repro_hook() installs it; a program that sets KILN_REPRO_AFTER without
// installing it gets a warning, never silence. Hook calls never throw and never change the compile's result.
class CompileHook {
 public:
  virtual ~CompileHook() = default;
  // Whether the hook is on for a compile serving `stage` ("capture", "aot", "backend").
  virtual bool wants(const std::string& stage) = 0;
  // Whether it wants each run's outputs compared with the fp64 reference (level 4).
  virtual bool wants_accuracy() = 0;
  virtual void compile_started(const graph::Graph& g, const std::string& backend) = 0;
  // A compile error (inputs null: not known yet) or a runtime error of the compiled program.
  virtual void failed(const graph::Graph& g, const std::vector<Tensor>* inputs, const std::string& kind,
                      const std::string& message, const std::string& stage, const std::string& backend) = 0;
  virtual void first_run_succeeded(const graph::Graph& g) = 0;
  // Level 4: the compiled program returned `outputs` for `inputs` (copies taken before the run).
  virtual void check_accuracy(const graph::Graph& g, const std::vector<Tensor>& inputs,
                              const std::vector<Tensor>& outputs, const std::string& backend) = 0;
};
void set_compile_hook(CompileHook* hook);  // null uninstalls

}  // namespace kiln
