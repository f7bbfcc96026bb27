// max-autotune (CompileOptions::mode, docs/cuda.md): the launch shapes a kernel is timed at, the timing (CUDA
// events), the rule that picks one, and the choices' cache (memory, then disk beside the cubin cache, keyed by the
// candidates' CUDA C, the architecture, the GPU's name and the problem size, so a second process does not tune
// again). Every candidate computes the same values (codegen_cuda.h, LaunchChoice); the backend (backend.cpp) owns
// the buffers the candidates run on and their launches.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/codegen_cuda.h"

namespace kiln::cuda {

// Bumped when the candidates, the timing or the choice rule change meaning, so stale disk entries are never used.
inline constexpr int kAutotuneVersion = 1;
// A candidate is kept over the default only when it is at least this much faster (timing noise is a few %).
inline constexpr double kAutotuneMinGain = 0.03;

struct AutotuneCandidate {
  LaunchChoice choice;
  CudaKernel code;
  std::string label;  // "block 256", "persistent rows, 16 slots (block 512)", "rows, block 1024 (not persistent)"
};

// What max-autotune times for kernel `k`: the default shape first (`default_code`), then the other block sizes of a
// flat or rows kernel (128-1024; rows: half to four times the default within 32-1024), or for persistent rows
// 8 and 32 slots a thread and rows read from memory in each loop (not persistent). Duplicates of the same CUDA C
// are dropped. A kernel with nothing to launch has only the default.
std::vector<AutotuneCandidate> autotune_candidates(const inductor::Kernel& k, const inductor::LoweredGraph& lg,
                                                   const std::vector<int>& args, const CudaKernel& default_code);

// The key material of a kernel's tuning: the version, the architecture, the GPU's name, the problem size (the
// default's work) and every candidate's label and CUDA C.
std::string autotune_key_material(const std::vector<AutotuneCandidate>& candidates, const std::string& arch,
                                  const std::string& gpu);

struct AutotuneResult {
  int chosen = 0;                     // index into the candidates
  std::string from;                   // "measured", "memory cache" or "disk cache"
  std::vector<double> ms;             // per candidate when measured (negative: it could not run)
  std::string reason;                 // why this one
};

// Tunes one kernel (`what` names it in logs: "kernel k0 of graph g"): the cached choice for `key_material` when
// there is one, else each candidate run by `launch(i)` (asynchronously on the null stream; the first call of a
// candidate also loads it) and timed with CUDA events, the fastest kept (the default unless another is
// kAutotuneMinGain faster) and stored in both caches. Logs candidates, times and choice on KILN_LOGS=autotune.
// Needs a device (the driver). A candidate whose launch throws is skipped with its reason; the default never is.
AutotuneResult autotune_kernel(const std::string& what, const std::vector<AutotuneCandidate>& candidates,
                               const std::string& key_material, const std::function<void(int)>& launch);

// Pure: the candidate kept given their times (ms[i] < 0: could not run), and why.
AutotuneResult choose_candidate(const std::vector<AutotuneCandidate>& candidates, const std::vector<double>& ms);

struct AutotuneStats {
  int64_t measured = 0, memory_hits = 0, disk_hits = 0;
};
AutotuneStats autotune_stats();
// Drops the in-memory choices, so the next lookups go to the disk cache (tests: a second process).
void forget_memory_autotune_choices();
// The disk cache's lookups and stores without a device (tests): the label stored for `key_material`, if any.
std::string find_autotune_choice(const std::string& key_material, std::string* from = nullptr);
void store_autotune_choice(const std::string& key_material, const std::string& label);

}  // namespace kiln::cuda
