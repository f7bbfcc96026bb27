// The inductor pipeline and the host program that runs compiled graphs (see compile.h).
#include "inductor/compile.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/files.h"
#include "core/bisect.h"
#include "core/log.h"
#include "core/options.h"
#include "eager/loops.h"
#include "graph/interpreter.h"
#include "graph/passes.h"
#include "graph/text.h"
#include "backends/cpu/codegen_llvm.h"
#include "inductor/lowering.h"
#include "inductor/scheduler.h"
#include "graph/storage_model.h"
#include "ops/api.h"
#include "ops/dispatch.h"
#include "backends/cpu/host_caches.h"
#include "backends/cpu/jit.h"

namespace kiln {

using namespace inductor;

std::shared_ptr<CompiledGraph> compile_uncached(const graph::Graph& g, const CompileOptions& options);
std::shared_ptr<CompiledGraph> compile_classifying_failures(const graph::Graph& g, const CompileOptions& options);

struct CompiledGraph::Impl {
  graph::Graph graph;  // the decomposed graph extern calls refer to
  LoweredGraph lowered;
  Schedule schedule;
  std::vector<runtime::KernelFn> kernels;  // per Schedule::kernels
  std::vector<std::vector<int>> kernel_args;
  std::vector<int64_t> kernel_grain;
  std::vector<std::vector<Tensor>> extern_constants;  // per lowered node: constant tensor args by slot
  CompileStats stats;
  std::string loop_ir;
  std::vector<std::string> llvm_ir;
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

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  std::vector<Tensor> run_watched(const std::vector<Tensor>& inputs) const;
};

namespace {

namespace fs = std::filesystem;

void dump(const fs::path& dir, const std::string& file, const std::string& text) {
  create_output_directory(dir.string());
  write_file_atomic((dir / file).string(), text);
}

// A tensor over `storage` with the given view (offset in elements).
Tensor tensor_on(const std::shared_ptr<Storage>& storage, DType dt, const Shape& sizes, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage;
  impl->dtype = dt;
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  return Tensor(impl);
}

// Blocks returned after their last use, reused for later buffers of the same size (the memory plan's reuse).
class BufferPool {
 public:
  std::shared_ptr<Storage> take(int64_t nbytes) {
    auto it = free_.find(nbytes);
    if (it == free_.end()) return Storage::allocate(std::max<int64_t>(nbytes, 1));
    std::shared_ptr<Storage> s = std::move(it->second);
    free_.erase(it);
    return s;
  }
  void give(std::shared_ptr<Storage> s, int64_t nbytes) {
    if (s.use_count() == 1) free_.emplace(nbytes, std::move(s));  // not aliased by an output or extern result
  }

 private:
  std::multimap<int64_t, std::shared_ptr<Storage>> free_;
};

}  // namespace

std::vector<Tensor> CompiledGraph::Impl::run(const std::vector<Tensor>& inputs) const {
  const LoweredGraph& lg = lowered;
  KILN_CHECK(int(inputs.size()) == lg.num_inputs, "compiled graph {}: expected {} inputs, got {}", graph.name,
             lg.num_inputs, inputs.size());
  std::vector<Tensor> bufs(lg.buffers.size());
  for (size_t b = 0; b < lg.buffers.size(); ++b) {
    const Buffer& buf = lg.buffers[b];
    if (buf.kind == Buffer::Kind::Constant) bufs[b] = buf.constant;
    if (buf.kind != Buffer::Kind::Input) continue;
    const Tensor& t = inputs[size_t(buf.input_index)];
    KILN_CHECK(t.dtype() == buf.dtype && t.sizes() == buf.sizes, "compiled graph {}: input %{} must be {}{}, got {}",
               graph.name, buf.name, dtype_name(buf.dtype), shape_str(buf.sizes), t.str());
    if (t.strides() == buf.strides || t.numel() <= 1) {
      bufs[b] = t;
    } else {  // the kernels index the compiled layout
      Tensor copy = Tensor::empty_strided(buf.sizes, buf.strides, buf.dtype);
      copy_into(copy, t);
      bufs[b] = copy;
    }
  }
  BufferPool pool;
  auto ensure = [&](int b) {
    if (b < 0 || bufs[size_t(b)].defined()) return;
    const Buffer& buf = lg.buffers[size_t(b)];
    bufs[size_t(b)] = tensor_on(pool.take(buf.nbytes()), buf.dtype, buf.sizes, buf.strides, 0);
  };
  NoGradGuard no_grad;
  for (const Step& st : schedule.steps) {
    if (st.kind == Step::Kind::Kernel) {
      const Kernel& k = schedule.kernels[size_t(st.index)];
      const std::vector<int>& args = kernel_args[size_t(st.index)];
      std::vector<char*> ptrs;
      for (int b : args) {
        ensure(b);
        ptrs.push_back(static_cast<char*>(bufs[size_t(b)].data_ptr()));
      }
      for (const KernelLoop& l : k.loops) {  // codegen relies on it for streaming stores (codegen_llvm.cpp)
        int b = lg.nodes[size_t(l.node)].buffer;
        KILN_ASSERT(!l.stream || reinterpret_cast<uintptr_t>(bufs[size_t(b)].data_ptr()) % runtime::kStreamAlignment == 0,
                   "compiled graph {}: kernel {} streams into %{}, which is not {}-byte aligned",
                   graph.name, k.name, lg.buffers[size_t(b)].name, runtime::kStreamAlignment);
      }
      int32_t status = 0;
      runtime::KernelFn fn = kernels[size_t(st.index)];
      char** p = ptrs.data();
      parallel_for(k.parallel_extent, kernel_grain[size_t(st.index)], [&](int64_t b, int64_t e) { fn(p, b, e, &status); });
      if (status == runtime::kStatusZeroDivision)
        fail("compiled graph {}: ZeroDivisionError: integer division by zero in kernel {} (computing {})", graph.name,
             k.name, lg.nodes[size_t(k.loops.back().node)].origin);
      if (status >= runtime::kStatusInjectedBase && size_t(status - runtime::kStatusInjectedBase) < inject.entries.size())
        fail("compiled graph {}: kernel {} reported an injected runtime error (KILN_INJECT={}:runtime_error)",
             graph.name, k.name, inject.entries[size_t(status - runtime::kStatusInjectedBase)].target);
      if (status != 0) fail("compiled graph {}: kernel {} reported runtime error code {}", graph.name, k.name, status);
    } else {
      const LoopNode& n = lg.nodes[size_t(st.index)];
      const graph::Node& gn = graph.nodes()[size_t(n.graph_node)];
      size_t slot = 0;
      const std::vector<Tensor>& consts = extern_constants[size_t(st.index)];
      auto view = [&]() -> Tensor {
        size_t i = slot++;
        if (consts[i].defined()) return consts[i];
        const BufferView& v = n.extern_inputs[i];
        if (v.buffer < 0) return Tensor();
        const Tensor& base = bufs[size_t(v.buffer)];
        return tensor_on(base.storage(), base.dtype(), v.sizes, v.strides, base.offset() + v.offset);
      };
      std::vector<IValue> args;
      for (const graph::Arg& a : gn.args) {
        if (std::holds_alternative<graph::TensorArg>(a)) {
          args.emplace_back(view());
        } else if (auto* l = std::get_if<graph::TensorListArg>(&a)) {
          TensorList list;
          for (size_t j = 0; j < l->ids.size(); ++j) list.push_back(view());
          args.emplace_back(list);
        } else {
          args.push_back(std::visit([](const auto& v) -> IValue {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, std::monostate> || std::is_same_v<V, graph::TensorArg> ||
                          std::is_same_v<V, graph::TensorListArg>)
              return IValue();
            else
              return IValue(v);
          }, a));
        }
      }
      std::vector<Tensor> outs;
      try {
        outs = dispatch(bind_args(gn.info(), std::move(args)));
      } catch (const Error& e) {  // named as the interpreter names the node whose kernel failed
        throw Error(fmt::format("{}: {}", node_labels(gn), e.what()), e.internal());
      }
      for (size_t i = 0; i < n.extern_outputs.size(); ++i) {
        int b = n.extern_outputs[i];
        if (b < 0) continue;
        const Buffer& buf = lg.buffers[size_t(b)];
        Tensor r = outs.at(i);
        if (!r.is_contiguous() || r.dtype() != buf.dtype) {
          Tensor c = Tensor::empty(buf.sizes, buf.dtype);
          copy_into(c, r);
          r = c;
        }
        bufs[size_t(b)] = r;
      }
    }
    for (int b : st.free_after) {
      pool.give(bufs[size_t(b)].storage(), lg.buffers[size_t(b)].nbytes());
      bufs[size_t(b)] = Tensor();
    }
  }
  std::vector<Tensor> outs;
  for (const BufferView& v : lg.outputs) {
    const Tensor& base = bufs.at(size_t(v.buffer));
    if (v.sizes == base.sizes() && v.strides == base.strides() && v.offset == 0) outs.push_back(base);
    else outs.push_back(tensor_on(base.storage(), base.dtype(), v.sizes, v.strides, base.offset() + v.offset));
  }
  return outs;
}

// A run under the repro hook: a runtime error is reported with the inputs as they were before the run (an
// in-place node may change them), the first good run drops the hook's pending repro, and at level 4 the
// outputs are checked against the fp64 reference.
std::vector<Tensor> CompiledGraph::Impl::run_watched(const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> before;
  {
    NoGradGuard no_grad;
    for (const Tensor& t : inputs) before.push_back(clone(t).detach());
  }
  std::vector<Tensor> outputs;
  try {
    outputs = run(inputs);
  } catch (const Error& e) {
    watch->hook->failed(watch->source, &before, "runtime_error", e.what(), "inductor/run", watch->backend);
    throw;
  }
  if (!watch->ran_once.exchange(true)) watch->hook->first_run_succeeded(watch->source);
  if (watch->hook->wants_accuracy()) watch->hook->check_accuracy(watch->source, before, outputs, watch->backend);
  return outputs;
}

CompiledGraph::CompiledGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledGraph::~CompiledGraph() = default;
std::vector<Tensor> CompiledGraph::operator()(const std::vector<Tensor>& inputs) const {
  return impl_->watch ? impl_->run_watched(inputs) : impl_->run(inputs);
}
const CompileStats& CompiledGraph::stats() const { return impl_->stats; }
const std::string& CompiledGraph::loop_ir() const { return impl_->loop_ir; }
const std::vector<std::string>& CompiledGraph::kernel_llvm_ir() const { return impl_->llvm_ir; }
const std::vector<std::string>& CompiledGraph::decisions() const { return impl_->decisions; }

namespace {

struct GraphCache {
  std::mutex mutex;
  std::unordered_map<uint64_t, std::shared_ptr<CompiledGraph>> programs;
};
GraphCache& graph_cache() {
  static GraphCache c;
  return c;
}

std::atomic<CompileHook*> g_compile_hook{nullptr};

// The installed repro hook when it is on for `stage`; warns once when KILN_REPRO_AFTER is set in a program
// without one, so the setting is never silently ignored.
CompileHook* active_hook(const std::string& stage) {
  CompileHook* hook = g_compile_hook.load();
  const std::string after = opt_string(Opt::ReproAfter);
  if (hook && hook->wants(stage)) return hook;
  static std::atomic<bool> warned_stage{false};
  if (hook && !after.empty() && after != stage && !warned_stage.exchange(true))
    std::fprintf(stderr, "kiln: warning: KILN_REPRO_AFTER=%s: this compile serves stage %s, and nothing in kiln "
                         "serves %s yet (no capture or AOT); no repros will be written\n", after.c_str(),
                 stage.c_str(), after.c_str());
  if (hook) return nullptr;
  static std::atomic<bool> warned{false};
  if (!after.empty() && !warned.exchange(true))
    std::fprintf(stderr, "kiln: warning: KILN_REPRO_AFTER is set, but this program does not install the repro hook "
                         "(link kiln_minifier and call kiln::install_repro_hook()); no repros will be written\n");
  return nullptr;
}

// The graph-level cache key, or nullopt when this compilation must really happen (see CompileOptions).
std::optional<uint64_t> graph_cache_key(const graph::Graph& g, const CompileOptions& options) {
  if (!options.use_graph_cache || !opt_string(Opt::ReproAfter).empty() || !opt_list(Opt::BisectLimit).empty() ||
      !opt_list(Opt::BisectDisable).empty() || !opt_string(Opt::DebugDir).empty() || log_enabled(LogChannel::OutputCode) || log_enabled(LogChannel::Fusion) ||
      log_enabled(LogChannel::Lowering) || log_enabled(LogChannel::Bisect) || log_enabled(LogChannel::Graph))
    return std::nullopt;
  uint64_t h = g.structural_hash();
  for (char c : fmt::format("|fuse={}|inject={}|stream={}", options.fuse, fmt::join(opt_list(Opt::Inject), ","),
                            runtime::streaming_threshold_bytes()))
    h = (h ^ uint64_t(uint8_t(c))) * 1099511628211ull;
  return h;
}

}  // namespace

// compile_uncached, with every failure of the compiler itself reported as an internal CompileError: a broken
// invariant (an internal kiln::Error) or any other exception (std::bad_variant_access, std::out_of_range, ...).
// kiln::Errors about the graph (eager's checks, run at compile time) pass through unchanged, as eager raises them.
std::shared_ptr<CompiledGraph> compile_classifying_failures(const graph::Graph& g, const CompileOptions& options) {
  auto internal = [&](const char* what) {
    return CompileError(fmt::format("graph {}: internal compiler error: {}", g.name, what), "", true);
  };
  try {
    return compile_uncached(g, options);
  } catch (const CompileError&) {
    throw;
  } catch (const Error& e) {
    if (e.internal()) throw internal(e.what());
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw internal(e.what());
  }
}

void set_compile_hook(CompileHook* hook) { g_compile_hook.store(hook); }

namespace {

std::shared_ptr<CompiledGraph> compile_or_reuse(const graph::Graph& g, const CompileOptions& options);

}  // namespace

std::shared_ptr<CompiledGraph> compile(const graph::Graph& g, const CompileOptions& options) {
  check_options();  // the library entry point: an invalid KILN_* setting is an error, not a silent default
  check_bisect_settings();
  const auto asked_before = bisect_counts();
  CompileHook* hook = active_hook(options.repro_stage);
  if (hook) hook->compile_started(g, options.backend);
  std::shared_ptr<CompiledGraph> program;
  try {
    program = compile_or_reuse(g, options);
  } catch (const CompileError& e) {
    if (hook) hook->failed(g, nullptr, "compile_error", e.what(), e.stage(), options.backend);
    throw;
  }
  warn_unanswered_bisect_settings(asked_before, fmt::format("compiling graph {}", g.name));
  if (hook) {
    program->impl_->watch = std::make_unique<CompiledGraph::Impl::Watch>();
    program->impl_->watch->hook = hook;
    program->impl_->watch->source = g;
    program->impl_->watch->backend = options.backend;
  }
  return program;
}

namespace {

std::shared_ptr<CompiledGraph> compile_or_reuse(const graph::Graph& g, const CompileOptions& options) {
  const std::optional<uint64_t> cache_key = graph_cache_key(g, options);
  if (cache_key) {
    std::lock_guard lock(graph_cache().mutex);
    auto it = graph_cache().programs.find(*cache_key);
    if (it != graph_cache().programs.end()) {
      KILN_LOG(LogChannel::Cache, "graph {}: compiled program reused (structurally equal graph, same options)", g.name);
      return it->second;
    }
  }
  std::shared_ptr<CompiledGraph> program = compile_classifying_failures(g, options);
  if (cache_key) {
    std::lock_guard lock(graph_cache().mutex);
    graph_cache().programs.emplace(*cache_key, program);
  }
  return program;
}

// Runs one step of the pipeline; a CompileError from it that names no stage is given `stage`.
template <class F>
auto in_stage(const char* stage, F&& step) -> decltype(step()) {
  try {
    return step();
  } catch (const CompileError& e) {
    if (!e.stage().empty()) throw;
    throw CompileError(e.what(), stage, e.internal());
  }
}

}  // namespace

std::shared_ptr<CompiledGraph> compile_uncached(const graph::Graph& g, const CompileOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<CompiledGraph::Impl>();
  const InjectSpec inject = InjectSpec::from_options();
  const std::string debug_dir = opt_string(Opt::DebugDir);
  const fs::path dump_dir = debug_dir.empty() ? fs::path() : fs::path(debug_dir) / "inductor" / safe_file_stem(g.name);
  if (!debug_dir.empty()) dump(dump_dir, "00_graph.kir", graph::print_graph(g));

  std::map<std::pair<int, int>, std::string> label_at;
  for (const graph::Node& n : g.nodes())
    if (n.loc.known()) label_at.emplace(std::make_pair(n.loc.line, n.loc.col), graph::node_label(g, n));
  impl->node_labels = [label_at, &decomposed = impl->graph](const graph::Node& n) {
    auto it = label_at.find({n.loc.line, n.loc.col});
    return it != label_at.end() ? it->second : graph::node_label(decomposed, n);
  };
  // 1. decompositions, eager's view and in-place checks (before cleanup may drop an unused bad view), cleanup
  std::vector<bool> unrounded;
  KILN_LOG(LogChannel::Graph, "inductor: graph {} enters the inductor:\n{}", g.name, graph::print_graph(g));
  impl->graph = in_stage("inductor/decompose", [&] { return decompose_composites(g, inject, &unrounded); });
  KILN_LOG(LogChannel::Graph, "inductor: graph {} after decomposition:\n{}", g.name, graph::print_graph(impl->graph));
  graph::StorageModel(impl->graph).check(impl->node_labels);
  in_stage("inductor/passes", [&] { return graph::run_pipeline(impl->graph, graph::cleanup_pipeline(), "inductor"); });
  if (!debug_dir.empty()) dump(dump_dir, "01_decomposed.kir", graph::print_graph(impl->graph));

  // 2. lowering and scheduling
  impl->lowered = in_stage("inductor/lowering",
                           [&] { return lower_graph(impl->graph, graph::StorageModel(impl->graph), inject, unrounded); });
  KILN_LOG(LogChannel::Graph, "inductor: graph {} lowered to loop IR:\n{}", g.name, print_nodes(impl->lowered));
  if (!debug_dir.empty()) dump(dump_dir, "02_loop_ir_before_fusion.txt", print_nodes(impl->lowered));
  impl->schedule = in_stage("inductor/schedule", [&] { return schedule_graph(impl->lowered, options.fuse, inject); });
  impl->loop_ir = print_schedule(impl->schedule, impl->lowered);
  KILN_LOG(LogChannel::Graph, "inductor: graph {} leaves the inductor as scheduled loop IR:\n{}", g.name, impl->loop_ir);
  if (!debug_dir.empty()) dump(dump_dir, "03_loop_ir_after_fusion.txt", impl->loop_ir);
  impl->decisions = impl->lowered.decisions;
  impl->decisions.insert(impl->decisions.end(), impl->schedule.decisions.begin(), impl->schedule.decisions.end());

  // 3. code generation, through the kernel cache
  runtime::KernelJit& jit = runtime::KernelJit::instance();
  const bool want_ir = log_enabled(LogChannel::OutputCode) || !debug_dir.empty();
  const int64_t before = jit.stats().compiles;
  for (const Kernel& k : impl->schedule.kernels) {
    std::vector<int> args;
    std::string text = print_kernel(k, impl->lowered, &args);
    std::string ir;
    runtime::KernelFn fn;
    try {
      fn = jit.get(text, "kiln_k", [&](llvm::Module& m, const std::string& symbol) {
        emit_kernel_llvm(m, symbol, k, impl->lowered, args);
      }, want_ir ? &ir : nullptr);
    } catch (const Error& e) {
      // One value named whatever the kernel holds, so equal failures read equally modulo names and numbers.
      // Code generation never judges the user's graph: a failure there is a compiler bug, unless injected.
      bool injected = dynamic_cast<const CompileError*>(&e) && !inject.empty();
      throw CompileError(fmt::format("graph {}: kernel {} (ending with %{}): {}", g.name, k.name,
                                     impl->lowered.nodes[size_t(k.loops.back().node)].origin, e.what()),
                         "inductor/codegen", !injected);
    }
    if (want_ir) {
      KILN_LOG(LogChannel::OutputCode, "kernel {} of graph {}:\n{}\n{}", k.name, g.name, text, ir);
      if (!debug_dir.empty()) dump(dump_dir / "kernels", k.name + ".ll", ir);
    }
    impl->llvm_ir.push_back(std::move(ir));
    impl->kernels.push_back(fn);
    impl->kernel_args.push_back(args);
    int64_t work = 0;
    for (const KernelLoop& l : k.loops) {
      const LoopNode& n = impl->lowered.nodes[size_t(l.node)];
      work += shape_numel(n.sizes) * std::max<int64_t>(1, shape_numel(n.rsizes));
    }
    impl->kernel_grain.push_back(std::max<int64_t>(1, kParallelGrain * k.parallel_extent / std::max<int64_t>(work, 1)));
  }
  impl->inject = inject;
  impl->extern_constants.resize(impl->lowered.nodes.size());
  for (size_t i = 0; i < impl->lowered.nodes.size(); ++i) {
    const LoopNode& n = impl->lowered.nodes[i];
    if (n.kind != LoopNode::Kind::Extern) continue;
    const graph::Node& gn = impl->graph.nodes()[size_t(n.graph_node)];
    std::vector<Tensor>& consts = impl->extern_constants[i];
    auto add = [&](graph::ValueId id) {
      const graph::ValueInfo& v = impl->graph.value(id);
      bool is_const = id != graph::kNoValue && v.producer >= 0 &&
                      impl->graph.nodes()[size_t(v.producer)].kind == graph::NodeKind::Constant;
      if (!is_const) return consts.push_back(Tensor());
      Tensor c = impl->graph.nodes()[size_t(v.producer)].constant;
      if (v.wrapped_number) c = Tensor::wrapped_number(c.item());  // keeps number promotion semantics
      consts.push_back(c);
    };
    for (const graph::Arg& a : gn.args) {
      if (auto* t = std::get_if<graph::TensorArg>(&a)) add(t->id);
      if (auto* l = std::get_if<graph::TensorListArg>(&a))
        for (graph::ValueId id : l->ids) id == graph::kNoValue ? consts.push_back(Tensor()) : add(id);
    }
  }
  impl->stats.kernels = int(impl->schedule.kernels.size());
  for (const Kernel& k : impl->schedule.kernels) {
    bool copy = true;
    for (const KernelLoop& l : k.loops) copy &= l.value->op == SOp::Load;
    impl->stats.copy_kernels += copy;
  }
  for (const Step& s : impl->schedule.steps) impl->stats.extern_calls += s.kind == Step::Kind::Extern;
  impl->stats.kernels_built = int(jit.stats().compiles - before);
  impl->stats.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return std::make_shared<CompiledGraph>(std::move(impl));
}

}  // namespace kiln
