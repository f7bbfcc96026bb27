// The CUDA backend: its Target, compiling a schedule's kernels to cubins, and launching them (backend.h).
#include "backends/cuda/backend.h"
#include "eager/device_copy.h"

#include <algorithm>
#include <functional>
#include <mutex>

#include "backends/cuda/autotune.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/device_program.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/nvrtc.h"
#include "core/error.h"
#include "core/log.h"
#include "core/options.h"
#include "core/trace.h"
#include "inductor/program.h"
#include "inductor/schedule_queries.h"

namespace kiln::cuda {

using namespace inductor;

namespace {

// Blocks per multiprocessor a grid-stride launch keeps resident (more only adds loop overhead).
constexpr int64_t kBlocksPerSm = 16;
constexpr int64_t kDefaultSharedBytes = 48 << 10;

class Kernels final : public CudaKernels {
 public:
  struct Entry {
    std::vector<int> args;
    CudaKernel code;
    std::string cubin;
    std::string name;
    mutable CUfunction function = nullptr;  // loaded at first launch (needs a device)
    mutable std::unique_ptr<DeviceBlock> workspace;  // a split reduction's, allocated zeroed at first launch
    // max-autotune: the launch shapes timed at the first launch (the default first), their functions (loaded when
    // timed), and the one kept (-1: not tuned yet; under tune_mutex).
    std::vector<AutotuneCandidate> candidates;
    mutable std::vector<CUfunction> candidate_functions;
    mutable int chosen = -1;
  };
  std::vector<Entry> entries;
  std::vector<std::string> sources;
  int built = 0;
  bool reduce_overhead = false;  // CompileOptions::mode: every call replays one recording
  bool autotune = false;         // CompileOptions::mode max-autotune: each kernel tuned at its first launch
  std::string graph_name;
  mutable std::mutex tune_mutex;
  mutable std::mutex recording_mutex;
  mutable std::unique_ptr<DeviceProgram> recording;  // made at the first reduce-overhead call

  std::optional<std::vector<Tensor>> run_program(const CompiledGraph::Impl& program,
                                                 const std::vector<Tensor>& inputs) const override {
    if (reduce_overhead) {
      std::lock_guard lock(recording_mutex);  // one recording, one set of static buffers
      if (!recording) recording = std::make_unique<DeviceProgram>(program, DeviceProgram::Launches::CudaGraph);
      return run_recorded(*recording, inputs);
    }
    for (const Tensor& t : inputs)
      if (t.defined() && !t.is_meta() && is_cuda(t)) return run_on_device_tensors(program, inputs);
    return std::nullopt;
  }

  const std::vector<int>& args(int kernel) const override { return entries[size_t(kernel)].args; }
  const std::vector<std::string>& code() const override { return sources; }
  int kernels_built() const override { return built; }
  const CudaKernel& kernel(int kernel) const override { return entries[size_t(kernel)].code; }

  void launch_on_device(int kernel, const std::vector<CUdeviceptr>& buffers, CUdeviceptr status,
                        CUstream stream) const override {
    const Entry& e = entries[size_t(kernel)];
    if (e.code.work == 0) return;
    std::string why;
    const Driver* d = driver(&why);
    if (!d) fail("CUDA backend: cannot run kernel {}: {}", e.name, why);
    if (!autotune) {
      launch_code(e.code, function(e, *d), buffers, status, workspace(e, e.code, *d), stream, *d);
      return;
    }
    const int c = tuned(e, *d, &buffers);
    const CudaKernel& code = e.candidates[size_t(c)].code;
    launch_code(code, candidate_function(e, c, *d), buffers, status, workspace(e, code, *d), stream, *d);
  }

  // One launch of `code` (a kernel or one of its max-autotune candidates) through `f`.
  static void launch_code(const CudaKernel& code, CUfunction f, const std::vector<CUdeviceptr>& buffers,
                          CUdeviceptr status, CUdeviceptr workspace, CUstream stream, const Driver& d) {
    std::vector<void*> params;
    std::vector<CUdeviceptr> ptrs = buffers;
    ptrs.push_back(status);
    if (code.workspace_bytes > 0) ptrs.push_back(workspace);
    for (CUdeviceptr& p : ptrs) params.push_back(&p);
    const int64_t per_block = code.rows ? 1 : code.block;
    const int64_t grid = std::clamp<int64_t>((code.work + per_block - 1) / per_block, 1, d.sm_count * kBlocksPerSm);
    check(d.launch_kernel(f, unsigned(grid), 1, 1, unsigned(code.block), 1, 1, unsigned(code.shared_bytes), stream,
                          params.data(), nullptr),
          "cuLaunchKernel");
  }

  void load_on_device() const override {
    std::string why;
    const Driver* d = driver(&why);
    if (!d) fail("CUDA backend: cannot load kernels: {}", why);
    for (const Entry& e : entries)
      if (e.code.work != 0) {
        if (autotune) {  // a CUDA graph is recorded next: tune now, on scratch buffers of zeros
          const int c = tuned(e, *d, nullptr);
          candidate_function(e, c, *d);
          workspace(e, e.candidates[size_t(c)].code, *d);
          continue;
        }
        function(e, *d);
        workspace(e, e.code, *d);
      }
  }

  // Staging: each argument's span copied in, the kernel run, the written spans copied back.
  int32_t launch(int kernel, char* const* buffers) const override {
    const Entry& e = entries[size_t(kernel)];
    if (e.code.work == 0) return kStatusOk;
    std::string why;
    const Driver* d = driver(&why);
    if (!d) fail("CUDA backend: cannot run kernel {}: {}", e.name, why);
    const SpanBlocks staged = span_blocks(e, [&](size_t i, CUdeviceptr block, size_t offset, size_t bytes) {
      check(d->memcpy_htod(block, buffers[i] + offset, bytes), "cuMemcpyHtoD");
    });
    const std::vector<DeviceBlock>& blocks = staged.blocks;
    const std::vector<CUdeviceptr>& ptrs = staged.ptrs;
    DeviceBlock status(sizeof(int32_t));
    check(d->memset_d8(status.ptr, 0, sizeof(int32_t)), "cuMemsetD8");
    launch_on_device(kernel, ptrs, status.ptr, nullptr);
    check(d->ctx_synchronize(), "the kernel's run (cuCtxSynchronize)");
    size_t b = 0;
    for (size_t i = 0; i < e.args.size(); ++i) {
      const auto [first, last] = e.code.spans[i];
      if (first > last) continue;
      const int64_t esize = element_size(i, e);
      if (e.code.written[i])
        check(d->memcpy_dtoh(buffers[i] + first * esize, blocks[b].ptr, size_t(last - first + 1) * size_t(esize)),
              "cuMemcpyDtoH");
      ++b;
    }
    int32_t code = 0;
    check(d->memcpy_dtoh(&code, status.ptr, sizeof code), "cuMemcpyDtoH");
    return code;
  }

  std::vector<int64_t> element_sizes;  // per buffer of the lowered graph
  int64_t element_size(size_t arg, const Entry& e) const { return element_sizes[size_t(e.args[arg])]; }

  // A device block per argument of kernel `e` holding the span of it the kernel touches (none for an argument it
  // never touches), filled by `fill(arg, block, byte offset of the span, bytes)`, and the pointers the kernel
  // takes: each block's address moved back by its span's offset (0 for an untouched argument).
  struct SpanBlocks {
    std::vector<DeviceBlock> blocks;  // one per touched argument, in argument order
    std::vector<CUdeviceptr> ptrs;    // one per argument
  };
  SpanBlocks span_blocks(const Entry& e, const std::function<void(size_t, CUdeviceptr, size_t, size_t)>& fill) const {
    SpanBlocks out;
    for (size_t i = 0; i < e.args.size(); ++i) {
      const auto [first, last] = e.code.spans[i];
      if (first > last) {
        out.ptrs.push_back(0);
        continue;
      }
      const int64_t esize = element_size(i, e);
      const size_t offset = size_t(first * esize), bytes = size_t(last - first + 1) * size_t(esize);
      out.blocks.emplace_back(bytes);
      fill(i, out.blocks.back().ptr, offset, bytes);
      out.ptrs.push_back(out.blocks.back().ptr - CUdeviceptr(offset));
    }
    return out;
  }

 private:
  // One workspace a kernel: launches of a kernel on one stream (a program's) run in order, so they share it.
  // Zero when `code` (the kernel's or its chosen candidate's: the same size) needs none.
  static CUdeviceptr workspace(const Entry& e, const CudaKernel& code, const Driver& d) {
    if (code.workspace_bytes <= 0) return 0;
    static std::mutex mutex;
    std::lock_guard lock(mutex);
    if (!e.workspace) {
      e.workspace = std::make_unique<DeviceBlock>(size_t(code.workspace_bytes));
      check(d.memset_d8(e.workspace->ptr, 0, size_t(code.workspace_bytes)), "cuMemsetD8");
    }
    return e.workspace->ptr;
  }

  static CUfunction load(const std::string& cubin, const CudaKernel& code, const Driver& d) {
    CUmodule module = nullptr;
    CUfunction f = nullptr;
    check(d.module_load_data(&module, cubin.data()), "cuModuleLoadData");
    check(d.module_get_function(&f, module, code.entry.c_str()), "cuModuleGetFunction");
    if (code.shared_bytes > kDefaultSharedBytes)  // kernel-local rows past the 48 KB a block gets unasked
      check(d.func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(code.shared_bytes)),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    return f;
  }

  // Candidate `c`'s function: compiled (through the cubin cache) and loaded at first use; the default's is the
  // kernel's own.
  static CUfunction candidate_function(const Entry& e, int c, const Driver& d) {
    if (c == 0) return function(e, d);
    static std::mutex mutex;
    std::lock_guard lock(mutex);
    CUfunction& f = e.candidate_functions[size_t(c)];
    if (!f) f = load(cubin_for(e.candidates[size_t(c)].code.source, target_arch()), e.candidates[size_t(c)].code, d);
    return f;
  }

  // max-autotune: the candidate kept for kernel `e`, tuned at the first call (autotune.h) on scratch copies of the
  // kernel's arguments (`real`: the launch's device buffers; null: zeros), so the timed runs never touch the
  // program's buffers (a kernel may read what it writes).
  int tuned(const Entry& e, const Driver& d, const std::vector<CUdeviceptr>* real) const {
    std::lock_guard lock(tune_mutex);
    if (e.chosen >= 0) return e.chosen;
    check(d.ctx_synchronize(), "the work before max-autotune's timing (cuCtxSynchronize)");
    const SpanBlocks scratch = span_blocks(e, [&](size_t i, CUdeviceptr block, size_t offset, size_t bytes) {
      if (real) check(d.memcpy_dtod(block, (*real)[i] + CUdeviceptr(offset), bytes), "cuMemcpyDtoD");
      else check(d.memset_d8(block, 0, bytes), "cuMemsetD8");
    });
    const std::vector<CUdeviceptr>& ptrs = scratch.ptrs;
    DeviceBlock status(sizeof(int32_t));
    check(d.memset_d8(status.ptr, 0, sizeof(int32_t)), "cuMemsetD8");
    std::vector<std::unique_ptr<DeviceBlock>> workspaces(e.candidates.size());
    auto launch = [&](int c) {
      const CudaKernel& code = e.candidates[size_t(c)].code;
      if (code.workspace_bytes > 0 && !workspaces[size_t(c)]) {
        workspaces[size_t(c)] = std::make_unique<DeviceBlock>(size_t(code.workspace_bytes));
        check(d.memset_d8(workspaces[size_t(c)]->ptr, 0, size_t(code.workspace_bytes)), "cuMemsetD8");
      }
      launch_code(code, candidate_function(e, c, d), ptrs, status.ptr,
                  workspaces[size_t(c)] ? workspaces[size_t(c)]->ptr : 0, nullptr, d);
    };
    const AutotuneResult r = autotune_kernel(fmt::format("kernel {} of graph {}", e.name, graph_name), e.candidates,
                                             autotune_key_material(e.candidates, target_arch(), d.name), launch);
    check(d.ctx_synchronize(), "max-autotune's timing (cuCtxSynchronize)");
    e.chosen = r.chosen;
    return e.chosen;
  }

  static CUfunction function(const Entry& e, const Driver& d) {
    static std::mutex mutex;
    std::lock_guard lock(mutex);
    if (!e.function) e.function = load(e.cubin, e.code, d);
    return e.function;
  }
};

Target cuda_target() {
  Target t;
  t.backend = "cuda";
  t.description = fmt::format("{} nvrtc {} cuda-codegen v{}", target_arch(), nvrtc_version(), kCudaCodegenVersion);
  t.vector_bytes = 16;
  // Kernel-local rows live in registers (persistent rows) or else in a block's shared memory (227 KB on sm_90; a
  // row of 64 KB leaves room for two blocks of a kernel with two such rows on a multiprocessor).
  t.max_local_row_bytes = 64 << 10;
  t.max_local_bytes_per_kernel = 128 << 10;
  t.streaming_threshold_bytes = 0;
  t.streaming_threshold_source = "the CUDA backend has no streaming stores";
  return t;
}

// reduce-overhead records the program's launches into a CUDA graph: a host step cannot be recorded.
void refuse_uncapturable(const Schedule& s, const LoweredGraph& lg, const std::string& graph_name) {
  for (const Step& st : s.steps) {
    if (st.kind != Step::Kind::Extern) continue;
    const LoopNode& n = lg.nodes[size_t(st.index)];
    fail("graph {}: mode reduce-overhead cannot record this program into a CUDA graph: %{} is an extern call ({}), "
         "which runs through cuBLAS or on the host, outside the recording; use the default mode for this graph",
         graph_name, n.origin, n.reason);
  }
}

}  // namespace

Target CudaCodeGenerator::target() const {
  static const Target t = cuda_target();
  return t;
}

std::unique_ptr<CompiledKernels> CudaCodeGenerator::compile(const Schedule& s, const LoweredGraph& lg,
                                                      CompileContext& ctx) const {
  const bool want_code = log_enabled(LogChannel::OutputCode) || !opt_string(Opt::DebugDir).empty() || trace_enabled();
  const std::string arch = target_arch();
  const int64_t before = cubin_stats().compiles;
  auto out = std::make_unique<Kernels>();
  out->reduce_overhead = ctx.options.mode == "reduce-overhead";
  out->autotune = ctx.options.mode == "max-autotune";
  out->graph_name = ctx.graph_name;
  if (out->reduce_overhead) refuse_uncapturable(s, lg, ctx.graph_name);
  for (const Buffer& b : lg.buffers) out->element_sizes.push_back(dtype_size(b.dtype));
  for (const Kernel& k : s.kernels) {
    Kernels::Entry e;
    e.name = k.name;
    e.args = kernel_args(k, lg);
    try {
      e.code = emit_kernel_cuda(k, lg, e.args);
      e.cubin = cubin_for(e.code.source, arch);
      if (out->autotune) {  // the other candidates compile only when timed (a cached choice needs none of them)
        e.candidates = autotune_candidates(k, lg, e.args, e.code);
        e.candidate_functions.assign(e.candidates.size(), nullptr);
      }
    } catch (const Error& err) {
      // Code generation never judges the user's graph: a failure there is a compiler bug, unless injected.
      const bool injected = dynamic_cast<const CompileError*>(&err) && !ctx.inject.empty();
      throw CompileError(fmt::format("graph {}: kernel {} (ending with %{}): {}", ctx.graph_name, k.name,
                                     lg.nodes[size_t(k.loops.back().node)].origin, err.what()),
                         "inductor/codegen", !injected);
    }
    if (want_code) KILN_LOG(LogChannel::OutputCode, "kernel {} of graph {} (CUDA C for {}):\n{}", k.name, ctx.graph_name, arch, e.code.source);
    out->sources.push_back(want_code ? e.code.source : std::string());
    out->entries.push_back(std::move(e));
  }
  out->built = int(cubin_stats().compiles - before);
  return out;
}

}  // namespace kiln::cuda

// Registered at static initialisation; CMakeLists.txt keeps this file linked through the anchor.
extern "C" const int kiln_cuda_link_anchor = 0;

namespace {
const bool registered = [] {
  static const kiln::cuda::CudaCodeGenerator backend;
  kiln::inductor::register_code_generator("cuda", &backend);
  kiln::cuda::install_device_hooks();
  return true;
}();
}  // namespace
