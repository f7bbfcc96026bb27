// The CPU JIT: one process-wide LLVM ORC LLJIT for the host CPU, and the kernel cache in front of it.
// A kernel is looked up by a key (the SHA-256 of its loop IR text, the target CPU and features, the optimisation
// level and the code generator's version): first in memory, then on disk (an object file per kernel under the
// cache directory with a .meta file recording its SHA-256 and the full key material, both written atomically
// so concurrent processes can share them, and verified before the object is linked: a truncated, corrupted or
// colliding entry is discarded and rebuilt, docs/inductor.md, Kernel cache); only on a miss is its LLVM
// IR built, optimised (the O2 pipeline with the host's vector units, so inner loops vectorise) and compiled.
// Generated code calls back into the runtime helpers declared here (exact eager semantics for rare ops).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "inductor/kernel_status.h"

namespace llvm {
class Module;
class LLVMContext;
}  // namespace llvm

namespace kiln::runtime {

// Every kernel: void k(char** buffers, int64_t begin, int64_t end, int32_t* status). [begin, end) is the
// slice of its parallel dimension to run; status is set non-zero when the kernel reports an error.
using KernelFn = void (*)(char** buffers, int64_t begin, int64_t end, int32_t* status);

// Runs the kernel `fn` on [begin, end): the one way C++ calls into code the JIT compiled. clang's
// -fsanitize=function (part of -fsanitize=undefined, on in ci/fuzz.sh's build) checks each indirect call by
// reading a type signature from the 8 bytes before the callee; JIT code has none, and a kernel that begins a
// page has nothing mapped before it, so the check itself crashed (fuzz/findings/graph-fuzzer-crash-launch.*).
// This call is exempt from that check.
void call_kernel(KernelFn fn, char** buffers, int64_t begin, int64_t end, int32_t* status);

// Bumped whenever the generated code changes meaning, so stale disk-cache entries are never used.
inline constexpr int kCodegenVersion = 26;

struct JitStats {
  int64_t memory_hits = 0, disk_hits = 0, compiles = 0;
  int64_t streaming_stores = 0;  // vector stores made non-temporal in the kernels compiled
  double compile_ms = 0;  // time spent building, optimising and compiling kernels
  // The same work as this thread's CPU time, by phase (a shared machine's load inflates wall time, not these):
  // building the module, LLVM's O2 pipeline and kiln's post-passes, object emission, linking.
  double build_cpu_ms = 0, optimise_cpu_ms = 0, emit_cpu_ms = 0, link_cpu_ms = 0;
};

class KernelJit {
 public:
  static KernelJit& instance();
  // The kernel for `key_text` compiled for `target` (the CompileContext's Target::description, which must be
  // this JIT's target_description()): cached, or built by `build` (which fills a module in the given context
  // with a function named `symbol`, and may throw kiln::CompileError). The cache key is derived from the two and
  // kCodegenVersion. `ir_out` (optional) receives the LLVM IR text when the kernel is built (for
  // KILN_LOGS=output_code and KILN_DEBUG_DIR).
  KernelFn get(const std::string& key_text, const std::string& target, const std::string& symbol_prefix,
               const std::function<void(llvm::Module&, const std::string& symbol)>& build, std::string* ir_out);
  // The target the kernels are compiled for ("x86_64-... skylake-avx512 O2"), with the code-generation options
  // not at their defaults (" own_exp=0 vector_width=1"): read at each call, as options may be overridden.
  std::string target_description() const;
  // Whether glibc's vector math library (libmvec) is loaded: then libm calls compute through its vector
  // variants (vector_math.h emit_libm_call), and code generation prefers plain libm calls over its inline polynomials (smaller code).
  bool vector_math() const;
  JitStats stats() const;
  void reset_stats();
  // Drops the in-memory index (not the code already loaded), so the next lookups go to the disk cache.
  void forget_memory_cache();

  KernelJit(const KernelJit&) = delete;
  KernelJit& operator=(const KernelJit&) = delete;

 private:
  KernelJit();
  ~KernelJit();
  struct Impl;
  struct Lookup;
  std::unique_ptr<Impl> impl_;
};

// Streaming stores: codegen tags the load of a streamed buffer's pointer with this metadata kind (and
// !align kStreamAlignment); after vectorisation the JIT makes the provably aligned vector stores through it
// non-temporal.
inline constexpr const char* kStreamMetadata = "kiln.stream";
inline constexpr int64_t kStreamAlignment = 64;

// The status word kernels report errors through: the backend-neutral codes of inductor/kernel_status.h.
using inductor::kStatusInjectedBase;
using inductor::kStatusOk;
using inductor::kStatusZeroDivision;

}  // namespace kiln::runtime
