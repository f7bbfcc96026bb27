// The CodeGenerator interface: what the target-neutral inductor asks of a device's code generator. One describes its
// Target, adds the placement passes only it wants (the CPU's streaming stores and deferred row writes), and
// compiles a scheduled program's kernels into launchable code. The CPU backend (src/backends/cpu/backend.cpp)
// implements it with LLVM and ORC; the CUDA backend (src/backends/cuda/backend.cpp) with CUDA C and NVRTC.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inductor/compile.h"
#include "inductor/kernel_status.h"
#include "inductor/schedule_passes.h"

namespace kiln::inductor {

// A schedule's kernels, compiled by a backend.
class CompiledKernels {
 public:
  virtual ~CompiledKernels() = default;
  // The buffers kernel `kernel` (an index into Schedule::kernels) takes, in argument order.
  virtual const std::vector<int>& args(int kernel) const = 0;
  // Runs kernel `kernel` to completion over `buffers` (the data of args(kernel), in order); returns its status
  // (KernelStatus).
  virtual int32_t launch(int kernel, char* const* buffers) const = 0;
  // Each kernel's generated code (empty unless KILN_LOGS=output_code or KILN_DEBUG_DIR asked for it, or the
  // kernel was built in this compile).
  virtual const std::vector<std::string>& code() const = 0;
  // How many kernels this compile built (the rest came from the backend's cache).
  virtual int kernels_built() const = 0;
  // Runs the whole program where the kernels run, when the host program cannot serve the call: inputs already
  // on the backend's device (CUDA tensors: no staging through the host), or a mode that replays a recording
  // (reduce-overhead). nullopt: the host program runs the call.
  virtual std::optional<std::vector<Tensor>> run_program(const CompiledGraph::Impl& program,
                                                         const std::vector<Tensor>& inputs) const {
    (void)program, (void)inputs;
    return std::nullopt;
  }
};

class CodeGenerator {
 public:
  virtual ~CodeGenerator() = default;
  virtual std::string name() const = 0;
  // The target this backend compiles for (read once; the passes' budgets and the cache key come from it).
  virtual Target target() const = 0;
  // Schedule passes only this backend wants, in order; the pipeline runs them after localise.
  virtual std::vector<SchedulePass> placement_passes() const = 0;
  // The file extension of the generated code (KILN_DEBUG_DIR's kernels/<name><ext>): ".ll", ".cu".
  virtual std::string code_extension() const { return ".ll"; }
  // Compiles every kernel of `s`. Throws CompileError naming the kernel when code generation fails.
  virtual std::unique_ptr<CompiledKernels> compile(const Schedule& s, const LoweredGraph& lg,
                                                   CompileContext& ctx) const = 0;
};

// Backends register themselves by device name at static initialisation (the CPU backend: "cpu",
// src/backends/cpu/backend.cpp; the CUDA backend: "cuda", src/backends/cuda/backend.cpp), so the inductor
// includes no backend header. A device without a backend in this build is a kiln::Error naming the ones there are.
void register_code_generator(const std::string& device, const CodeGenerator* backend);
const CodeGenerator& code_generator_for(const std::string& device);

}  // namespace kiln::inductor
