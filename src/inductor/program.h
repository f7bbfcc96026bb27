// CompiledGraph::Impl: what kiln::compile (compile.cpp) hands to the host program (program.cpp): the decomposed
// graph, the loop IR and schedule, the backend's compiled kernels, and the steps of one run. Private to the
// inductor.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/trace.h"
#include "inductor/code_generator.h"
#include "inductor/compile.h"

namespace kiln {

struct CompiledGraph::Impl {
  CompileId compile_id;  // the compile that made it (KILN_TRACE_RUNTIME's events name it)
  graph::Graph graph;  // the decomposed graph extern calls refer to
  inductor::LoweredGraph lowered;
  inductor::Schedule schedule;
  std::unique_ptr<inductor::CompiledKernels> kernels;  // the backend's code for Schedule::kernels
  std::vector<std::vector<Tensor>> extern_constants;  // per lowered node: constant tensor args by slot
  CompileStats stats;
  std::string loop_ir;
  std::vector<std::string> decisions;
  InjectSpec inject;  // what was injected when compiling (names the op of a reported runtime error)
  // How errors name a node of `graph`: as the interpreter names the node of the user's graph it comes from (a
  // node a decomposition made comes from the composite node at its line), else by its own label.
  std::function<std::string(const graph::Node&)> node_labels;

  // Set while the repro hook watches this program (compile() with KILN_REPRO_AFTER on): the graph as handed
  // to compile, for the repros of runtime errors and accuracy failures.
  struct Watch {
    CompileHook* hook = nullptr;
    graph::Graph source;
    std::string backend;
    mutable std::atomic<bool> ran_once{false};
  };
  std::unique_ptr<Watch> watch;

  // `record`, when given, receives a copy of every buffer each step materialised (run_recording).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs,
                          std::vector<CompiledGraph::Materialised>* record = nullptr) const;
  std::vector<Tensor> run_watched(const std::vector<Tensor>& inputs) const;

  // The steps of run(), in order.
  struct RunState;
  void bind_inputs(RunState& rs, const std::vector<Tensor>& inputs) const;
  void run_kernel(RunState& rs, int kernel) const;
  void run_extern(RunState& rs, int node) const;
  std::vector<IValue> extern_args(const std::vector<Tensor>& bufs, int node) const;
  // Extern node `node`'s eager kernel over `bufs` (a tensor per buffer of `lowered`, holding at least the node's
  // inputs): its results per extern output (undefined where the output is -1), each contiguous in its buffer's
  // dtype. The host program's extern step, and the CUDA device program's host fallback.
  std::vector<Tensor> call_extern(const std::vector<Tensor>& bufs, int node) const;
  void free_after(RunState& rs, const inductor::Step& st) const;
  void record_step(const RunState& rs, const inductor::Step& st, std::vector<CompiledGraph::Materialised>& out) const;
  std::vector<Tensor> collect_outputs(const RunState& rs) const;
};

}  // namespace kiln
