// NVRTC compilation and the cubin cache (nvrtc.h).
#include "backends/cuda/nvrtc.h"

#include <nvrtc.h>

#include <chrono>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "inductor/kernel_disk_cache.h"

namespace kiln::cuda {

namespace {

struct CubinCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::string> memory;  // key -> cubin
  CubinStats stats;
};

CubinCache& cache() {
  static CubinCache c;
  return c;
}

const inductor::KernelDiskCache& disk_cache() {
  static const inductor::KernelDiskCache d(fmt::format("cuda-kernels-v{}", kCudaCodegenVersion), ".cubin");
  return d;
}

void check_nvrtc(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw CompileError(fmt::format("NVRTC: {}: {}", what, nvrtcGetErrorString(r)), "cuda/nvrtc");
}

std::string compile(const std::string& source, const std::string& arch) {
  nvrtcProgram prog = nullptr;
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), "kiln_kernel.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  const std::string arch_option = "--gpu-architecture=" + arch;
  // No fast math: kernels must match eager's IEEE results (division, sqrt and denormals as the CPU computes them).
  const char* options[] = {arch_option.c_str(), "--std=c++17", "-default-device"};
  const nvrtcResult r = nvrtcCompileProgram(prog, 3, options);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(prog, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    throw CompileError(fmt::format("NVRTC could not compile the generated CUDA C for {}: {}", arch, log), "cuda/nvrtc");
  }
  size_t n = 0;
  check_nvrtc(nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize");
  std::string cubin(n, '\0');
  check_nvrtc(nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::string cubin_for(const std::string& source, const std::string& arch) {
  CubinCache& c = cache();
  const std::string key_material =
      fmt::format("{}\n{}\nnvrtc {}\ncuda codegen v{}", source, arch, nvrtc_version(), kCudaCodegenVersion);
  const std::string key = sha256_hex(key_material);
  std::lock_guard lock(c.mutex);
  if (auto it = c.memory.find(key); it != c.memory.end()) {
    ++c.stats.memory_hits;
    return it->second;
  }
  if (std::optional<std::string> cubin = disk_cache().find(key, key_material)) {
    ++c.stats.disk_hits;
    return c.memory[key] = std::move(*cubin);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string cubin = compile(source, arch);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  KILN_LOG(LogChannel::Cache, "NVRTC compiled a kernel for {} in {:.1f} ms ({} bytes of cubin)", arch, ms, cubin.size());
  c.stats.compile_ms += ms;
  ++c.stats.compiles;
  disk_cache().store(key, key_material, cubin, "a CUDA kernel");
  return c.memory[key] = std::move(cubin);
}

CubinStats cubin_stats() {
  std::lock_guard lock(cache().mutex);
  return cache().stats;
}

void forget_memory_cubins() {
  std::lock_guard lock(cache().mutex);
  cache().memory.clear();
}

}  // namespace kiln::cuda
