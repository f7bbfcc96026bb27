// The CPU backend (inductor/code_generator.h): LLVM IR per kernel (codegen_llvm.h), compiled by the ORC JIT through the
// kernel cache (jit.h), run across threads with OpenMP; its Target comes from the host (the JIT's target
// machine, host_caches.h); its placement passes are the streaming stores and deferred row writes
// (placement.h).
#pragma once
#include "inductor/code_generator.h"

namespace kiln::cpu {

class CpuCodeGenerator final : public inductor::CodeGenerator {
 public:
  std::string name() const override { return "cpu"; }
  inductor::Target target() const override;
  std::vector<inductor::SchedulePass> placement_passes() const override;
  std::unique_ptr<inductor::CompiledKernels> compile(const inductor::Schedule& s, const inductor::LoweredGraph& lg,
                                                     inductor::CompileContext& ctx) const override;
};

// The CPU backend, which kiln::compile uses for device "cpu" (it registers itself: inductor/code_generator.h).
const inductor::CodeGenerator& host_code_generator();

}  // namespace kiln::cpu
