// NVRTC, in process: CUDA C source to a cubin for one architecture, and the CUDA backend's kernel cache in
// front of it (memory, then disk through inductor/kernel_disk_cache.h; the key is the SHA-256 of the source,
// the architecture, NVRTC's version and kCudaCodegenVersion). Needs no GPU.
#pragma once
#include <cstdint>
#include <string>

namespace kiln::cuda {

// Bumped whenever the generated CUDA C changes meaning, so stale disk-cache entries are never used.
inline constexpr int kCudaCodegenVersion = 2;

// "13.0": the NVRTC this process loaded.
std::string nvrtc_version();

struct CubinStats {
  int64_t memory_hits = 0, disk_hits = 0, compiles = 0;
  double compile_ms = 0;
};

// The cubin of `source` for `arch` ("sm_90"): from the memory or disk cache, else compiled. Throws
// kiln::CompileError with NVRTC's log when the source does not compile. Thread-safe.
std::string cubin_for(const std::string& source, const std::string& arch);
CubinStats cubin_stats();
// Drops the in-memory index, so the next lookups go to the disk cache (tests).
void forget_memory_cubins();

}  // namespace kiln::cuda
