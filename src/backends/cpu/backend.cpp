// The CPU backend: its Target, its placement passes, and compiling and launching a schedule's kernels
// (backend.h).
#include "backends/cpu/backend.h"

#include <algorithm>
#include <mutex>

#include "backends/cpu/codegen_llvm.h"
#include "backends/cpu/host_caches.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/placement.h"
#include "core/error.h"
#include "core/log.h"
#include "core/options.h"
#include "core/trace.h"
#include "eager/loops.h"
#include "inductor/schedule_queries.h"

namespace kiln::cpu {

using namespace inductor;

namespace {

// The work of one kernel (elements times reduced elements over its loops), for the grain of its parallel split.
int64_t kernel_grain(const Kernel& k, const LoweredGraph& lg) {
  int64_t work = 0;
  for (const KernelLoop& l : k.loops) {
    const LoopNode& n = lg.nodes[size_t(l.node)];
    work += shape_numel(n.sizes) * std::max<int64_t>(1, shape_numel(n.rsizes));
  }
  return std::max<int64_t>(1, kParallelGrain * k.parallel_extent / std::max<int64_t>(work, 1));
}

class CpuKernels final : public CompiledKernels {
 public:
  struct Entry {
    runtime::KernelFn fn = nullptr;
    std::vector<int> args;
    std::vector<std::pair<int, std::string>> streamed_args;  // positions in args written with streaming stores, names
    int64_t grain = 1;
    int64_t parallel_extent = 1;
    std::string name;
  };
  std::vector<Entry> entries;
  std::vector<std::string> ir;
  int built = 0;

  const std::vector<int>& args(int kernel) const override { return entries[size_t(kernel)].args; }
  const std::vector<std::string>& code() const override { return ir; }
  int kernels_built() const override { return built; }

  int32_t launch(int kernel, char* const* buffers) const override {
    const Entry& e = entries[size_t(kernel)];
    for (const auto& [a, buffer] : e.streamed_args)  // codegen relies on it for streaming stores (codegen_llvm.cpp)
      KILN_ASSERT(reinterpret_cast<uintptr_t>(buffers[a]) % runtime::kStreamAlignment == 0,
                  "kernel {} streams into %{}, which is not {}-byte aligned", e.name, buffer, runtime::kStreamAlignment);
    int32_t status = 0;
    char** p = const_cast<char**>(buffers);
    parallel_for(e.parallel_extent, e.grain, [&](int64_t b, int64_t end) { runtime::call_kernel(e.fn, p, b, end, &status); });
    return status;
  }
};

}  // namespace

namespace {

Target host_target() {
  const runtime::KernelJit& jit = runtime::KernelJit::instance();
  Target t;
  t.backend = "cpu";
  t.description = jit.target_description();
  t.vector_bytes = t.description.find(" v512") != std::string::npos ? 64 : 32;
  t.streaming_threshold_bytes = runtime::streaming_threshold_bytes();
  t.streaming_threshold_source =
      opt_int(Opt::StreamMinBytes) > 0
          ? std::string("KILN_STREAM_MIN_BYTES")
          : fmt::format("half the cache this process can count on: {}", runtime::host_caches().str());
  t.streaming_alignment = runtime::kStreamAlignment;
  return t;
}

}  // namespace

// The host and KILN_STREAM_MIN_BYTES decide it: read again only when an option override changed (every compile
// asks, graph-cache hits included).
Target CpuCodeGenerator::target() const {
  static std::mutex mutex;
  static uint64_t generation = 0;  // options_generation() + 1 of `cached`; 0: not read yet
  static Target cached;
  std::lock_guard lock(mutex);
  if (generation != options_generation() + 1) {
    cached = host_target();
    generation = options_generation() + 1;
  }
  return cached;
}

std::vector<SchedulePass> CpuCodeGenerator::placement_passes() const {
  return {{"stream", LogChannel::Stream, stream}, {"defer", LogChannel::Defer, defer}};
}

std::unique_ptr<CompiledKernels> CpuCodeGenerator::compile(const Schedule& s, const LoweredGraph& lg,
                                                     CompileContext& ctx) const {
  runtime::KernelJit& jit = runtime::KernelJit::instance();
  const bool want_ir = log_enabled(LogChannel::OutputCode) || !opt_string(Opt::DebugDir).empty() || trace_enabled();
  const int64_t before = jit.stats().compiles;
  auto out = std::make_unique<CpuKernels>();
  for (const Kernel& k : s.kernels) {
    CpuKernels::Entry e;
    e.args = kernel_args(k, lg);
    const std::string text = print_kernel(k, lg);
    std::string ir;
    try {
      e.fn = jit.get(text, ctx.target.description, "kiln_k", [&](llvm::Module& m, const std::string& symbol) {
        emit_kernel_llvm(m, symbol, k, lg, e.args);
      }, want_ir ? &ir : nullptr);
    } catch (const Error& err) {
      // Code generation never judges the user's graph: a failure there is a compiler bug, unless injected.
      const bool injected = dynamic_cast<const CompileError*>(&err) && !ctx.inject.empty();
      throw CompileError(fmt::format("graph {}: kernel {} (ending with %{}): {}", ctx.graph_name, k.name,
                                     lg.nodes[size_t(k.loops.back().node)].origin, err.what()),
                         "inductor/codegen", !injected);
    }
    if (want_ir) KILN_LOG(LogChannel::OutputCode, "kernel {} of graph {}:\n{}\n{}", k.name, ctx.graph_name, text, ir);
    for (const KernelLoop& l : k.loops)
      if (l.stream) {
        const int b = lg.nodes[size_t(l.node)].buffer;
        auto at = std::find(e.args.begin(), e.args.end(), b);
        if (at != e.args.end()) e.streamed_args.emplace_back(int(at - e.args.begin()), lg.buffers[size_t(b)].name);
      }
    e.grain = kernel_grain(k, lg);
    e.parallel_extent = k.parallel_extent;
    e.name = k.name;
    out->entries.push_back(std::move(e));
    out->ir.push_back(std::move(ir));
  }
  out->built = int(jit.stats().compiles - before);
  return out;
}

}  // namespace kiln::cpu

namespace kiln::cpu {

const inductor::CodeGenerator& host_code_generator() {
  static const CpuCodeGenerator backend;
  return backend;
}

}  // namespace kiln::cpu

// Registered at static initialisation as device "cpu"; CMakeLists.txt keeps this file linked through the anchor.
extern "C" const int kiln_cpu_link_anchor = 0;

namespace {
const bool registered = [] {
  kiln::inductor::register_code_generator("cpu", &kiln::cpu::host_code_generator());
  return true;
}();
}  // namespace
