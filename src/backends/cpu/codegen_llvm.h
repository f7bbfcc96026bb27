// CPU code generation: one LLVM IR function per fused kernel, with the runtime::KernelFn ABI
// (char** buffers, int64 begin, int64 end, int32* status). The outer loop nest runs [begin, end) of the
// parallel dimension; each loop of the kernel is a loop nest whose innermost loop LLVM's loop vectoriser
// turns into vector code with a scalar tail (buffers are passed as noalias pointers; float reductions are
// marked reassociable so they vectorise too). Transcendental functions call libm (vectorised through libmvec
// when the JIT found it); without libmvec, exp and tanh on f32 are inline polynomials so they still vectorise.
#pragma once
#include <string>
#include <vector>

#include "inductor/scheduler.h"

namespace llvm {
class Module;
}

namespace kiln::inductor {

// Emits kernel `k` as function `symbol` into `m`. `args` are the kernel's buffers in argument order
// (kernel_args, inductor/schedule_queries.h).
void emit_kernel_llvm(llvm::Module& m, const std::string& symbol, const Kernel& k, const LoweredGraph& lg,
                      const std::vector<int>& args);

}  // namespace kiln::inductor
