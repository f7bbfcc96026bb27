// kiln::compile: the inductor pipeline as one flat list of named passes (compile_uncached, at the end), the
// graph-level cache and the repro hook in front of it, and the host program that runs a compiled graph (see
// compile.h).
#include "inductor/compile.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/bisect.h"
#include "core/files.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/options.h"
#include "eager/loops.h"
#include "graph/interpreter.h"
#include "graph/passes.h"
#include "graph/storage_model.h"
#include "graph/text.h"
#include "inductor/backend.h"
#include "inductor/lowering.h"
#include "inductor/verify_schedule.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln {

using namespace inductor;

std::shared_ptr<CompiledGraph> compile_uncached(const graph::Graph& g, const CompileOptions& options);
std::shared_ptr<CompiledGraph> compile_classifying_failures(const graph::Graph& g, const CompileOptions& options);

struct CompiledGraph::Impl {
  graph::Graph graph;  // the decomposed graph extern calls refer to
  LoweredGraph lowered;
  Schedule schedule;
  std::unique_ptr<CompiledKernels> kernels;  // the backend's code for Schedule::kernels
  std::vector<std::vector<Tensor>> extern_constants;  // per lowered node: constant tensor args by slot
  CompileStats stats;
  std::string loop_ir;
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

  // The steps of run(), in order.
  struct RunState;
  void bind_inputs(RunState& rs, const std::vector<Tensor>& inputs) const;
  void run_kernel(RunState& rs, int kernel) const;
  void run_extern(RunState& rs, int node) const;
  std::vector<IValue> extern_args(const RunState& rs, int node) const;
  void free_after(RunState& rs, const Step& st) const;
  std::vector<Tensor> collect_outputs(const RunState& rs) const;
};

namespace {

namespace fs = std::filesystem;

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

// The eager kernel's non-tensor argument `a` as an IValue.
IValue scalar_arg(const graph::Arg& a) {
  return std::visit([](const auto& v) -> IValue {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, std::monostate> || std::is_same_v<V, graph::TensorArg> ||
                  std::is_same_v<V, graph::TensorListArg>)
      return IValue();
    else
      return IValue(v);
  }, a);
}

}  // namespace

// What one run of the host program holds: a tensor per buffer (undefined until written) and the pool.
struct CompiledGraph::Impl::RunState {
  std::vector<Tensor> bufs;
  BufferPool pool;
};

// The inputs, each in the layout the kernels index (copied when its strides differ), and the constants.
void CompiledGraph::Impl::bind_inputs(RunState& rs, const std::vector<Tensor>& inputs) const {
  const LoweredGraph& lg = lowered;
  KILN_CHECK(int(inputs.size()) == lg.num_inputs, "compiled graph {}: expected {} inputs, got {}", graph.name,
             lg.num_inputs, inputs.size());
  rs.bufs.resize(lg.buffers.size());
  for (size_t b = 0; b < lg.buffers.size(); ++b) {
    const Buffer& buf = lg.buffers[b];
    if (buf.kind == Buffer::Kind::Constant) rs.bufs[b] = buf.constant;
    if (buf.kind != Buffer::Kind::Input) continue;
    const Tensor& t = inputs[size_t(buf.input_index)];
    KILN_CHECK(t.dtype() == buf.dtype && t.sizes() == buf.sizes, "compiled graph {}: input %{} must be {}{}, got {}",
               graph.name, buf.name, dtype_name(buf.dtype), shape_str(buf.sizes), t.str());
    if (t.strides() == buf.strides || t.numel() <= 1) {
      rs.bufs[b] = t;
    } else {  // the kernels index the compiled layout
      Tensor copy = Tensor::empty_strided(buf.sizes, buf.strides, buf.dtype);
      copy_into(copy, t);
      rs.bufs[b] = copy;
    }
  }
}

// A kernel over its buffers (intermediates allocated from the pool at their first write); its status word
// becomes eager's error (integer division by zero) or names the injected runtime error.
void CompiledGraph::Impl::run_kernel(RunState& rs, int kernel) const {
  const Kernel& k = schedule.kernels[size_t(kernel)];
  std::vector<char*> ptrs;
  for (int b : kernels->args(kernel)) {
    if (!rs.bufs[size_t(b)].defined()) {
      const Buffer& buf = lowered.buffers[size_t(b)];
      rs.bufs[size_t(b)] = tensor_on(rs.pool.take(buf.nbytes()), buf.dtype, buf.sizes, buf.strides, 0);
    }
    ptrs.push_back(static_cast<char*>(rs.bufs[size_t(b)].data_ptr()));
  }
  const int32_t status = kernels->launch(kernel, ptrs.data());
  if (status == kStatusZeroDivision)
    fail("compiled graph {}: ZeroDivisionError: integer division by zero in kernel {} (computing {})", graph.name,
         k.name, lowered.nodes[size_t(k.loops.back().node)].origin);
  if (status >= kStatusInjectedBase && size_t(status - kStatusInjectedBase) < inject.entries.size())
    fail("compiled graph {}: kernel {} reported an injected runtime error (KILN_INJECT={}:runtime_error)",
         graph.name, k.name, inject.entries[size_t(status - kStatusInjectedBase)].target);
  if (status != 0) fail("compiled graph {}: kernel {} reported runtime error code {}", graph.name, k.name, status);
}

// The arguments of extern node `node`'s eager kernel: views of its input buffers, constants, scalars.
std::vector<IValue> CompiledGraph::Impl::extern_args(const RunState& rs, int node) const {
  const LoopNode& n = lowered.nodes[size_t(node)];
  const graph::Node& gn = graph.nodes()[size_t(n.graph_node)];
  const std::vector<Tensor>& consts = extern_constants[size_t(node)];
  size_t slot = 0;
  auto view = [&]() -> Tensor {
    size_t i = slot++;
    if (consts[i].defined()) return consts[i];
    const BufferView& v = n.extern_inputs[i];
    if (v.buffer < 0) return Tensor();
    const Tensor& base = rs.bufs[size_t(v.buffer)];
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
      args.push_back(scalar_arg(a));
    }
  }
  return args;
}

// An extern node: its eager kernel, its errors named as the interpreter names the node; results that are not
// contiguous or not the buffer's dtype are copied into the buffer's layout.
void CompiledGraph::Impl::run_extern(RunState& rs, int node) const {
  const LoopNode& n = lowered.nodes[size_t(node)];
  const graph::Node& gn = graph.nodes()[size_t(n.graph_node)];
  std::vector<Tensor> outs;
  try {
    outs = dispatch(bind_args(gn.info(), extern_args(rs, node)));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", node_labels(gn), e.what()), e.internal());
  }
  for (size_t i = 0; i < n.extern_outputs.size(); ++i) {
    int b = n.extern_outputs[i];
    if (b < 0) continue;
    const Buffer& buf = lowered.buffers[size_t(b)];
    Tensor r = outs.at(i);
    if (!r.is_contiguous() || r.dtype() != buf.dtype) {
      Tensor c = Tensor::empty(buf.sizes, buf.dtype);
      copy_into(c, r);
      r = c;
    }
    rs.bufs[size_t(b)] = r;
  }
}

// The memory plan: buffers whose last use was this step go back to the pool.
void CompiledGraph::Impl::free_after(RunState& rs, const Step& st) const {
  for (int b : st.free_after) {
    rs.pool.give(rs.bufs[size_t(b)].storage(), lowered.buffers[size_t(b)].nbytes());
    rs.bufs[size_t(b)] = Tensor();
  }
}

std::vector<Tensor> CompiledGraph::Impl::collect_outputs(const RunState& rs) const {
  std::vector<Tensor> outs;
  for (const BufferView& v : lowered.outputs) {
    const Tensor& base = rs.bufs.at(size_t(v.buffer));
    if (v.sizes == base.sizes() && v.strides == base.strides() && v.offset == 0) outs.push_back(base);
    else outs.push_back(tensor_on(base.storage(), base.dtype(), v.sizes, v.strides, base.offset() + v.offset));
  }
  return outs;
}

// The host program: inputs bound, then each step (a kernel or an extern call) and the frees after it.
std::vector<Tensor> CompiledGraph::Impl::run(const std::vector<Tensor>& inputs) const {
  RunState rs;
  bind_inputs(rs, inputs);
  NoGradGuard no_grad;
  for (const Step& st : schedule.steps) {
    if (st.kind == Step::Kind::Kernel) run_kernel(rs, st.index);
    else run_extern(rs, st.index);
    free_after(rs, st);
  }
  return collect_outputs(rs);
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
const std::vector<std::string>& CompiledGraph::kernel_llvm_ir() const { return impl_->kernels->code(); }
const std::vector<std::string>& CompiledGraph::decisions() const { return impl_->decisions; }

namespace {

struct GraphCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<CompiledGraph>> programs;  // by graph_cache_key
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

// Whether this compilation must really happen (see CompileOptions): bisection, debug dumps, compiler logs and
// the repro hook must each see it.
bool must_compile_afresh(const CompileOptions& options) {
  return !options.use_graph_cache || !opt_string(Opt::ReproAfter).empty() || !opt_list(Opt::BisectLimit).empty() ||
         !opt_list(Opt::BisectDisable).empty() || !opt_string(Opt::DebugDir).empty() ||
         log_enabled(LogChannel::OutputCode) || log_enabled(LogChannel::Fusion) || log_enabled(LogChannel::Lowering) ||
         log_enabled(LogChannel::Bisect) || log_enabled(LogChannel::Graph) || log_enabled(LogChannel::Passes) ||
         log_enabled(LogChannel::Localise) || log_enabled(LogChannel::Stream) || log_enabled(LogChannel::Defer) ||
         log_enabled(LogChannel::MemoryPlan);
}

// The graph-level cache key: derived from everything the compile depends on, the graph's structure and the
// context (target, options, injection), never from a hand-kept list of settings.
std::string graph_cache_key(const graph::Graph& g, const CompileContext& ctx) {
  return sha256_hex(fmt::format("{:016x}\n{}", g.structural_hash(), ctx.key_material()));
}

// The context a compile of `g` runs its passes in: the backend's target, the options, KILN_INJECT.
CompileContext context_for(const graph::Graph& g, const CompileOptions& options, const Backend& backend) {
  CompileContext ctx;
  ctx.graph_name = g.name;
  ctx.target = backend.target();
  ctx.options = options;
  ctx.inject = InjectSpec::from_options();
  return ctx;
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
  if (must_compile_afresh(options)) return compile_classifying_failures(g, options);
  const std::string key = graph_cache_key(g, context_for(g, options, host_backend()));
  {
    std::lock_guard lock(graph_cache().mutex);
    auto it = graph_cache().programs.find(key);
    if (it != graph_cache().programs.end()) {
      KILN_LOG(LogChannel::Cache, "graph {}: compiled program reused (structurally equal graph, same options)", g.name);
      return it->second;
    }
  }
  std::shared_ptr<CompiledGraph> program = compile_classifying_failures(g, options);
  std::lock_guard lock(graph_cache().mutex);
  graph_cache().programs.emplace(key, program);
  return program;
}

// One compile: the state the passes share, and how each kind of pass is run (timed, logged under its name,
// dumped to KILN_DEBUG_DIR as NN_<pass>, its schedule verified).
class Pipeline {
 public:
  Pipeline(const graph::Graph& g, CompileContext ctx)
      : input_(g), ctx_(std::move(ctx)), impl_(std::make_unique<CompiledGraph::Impl>()), t0_(Clock::now()) {
    if (std::string root = opt_string(Opt::DebugDir); !root.empty())
      dump_dir_ = fs::path(root) / "inductor" / safe_file_stem(g.name);
    impl_->node_labels = user_node_labels(g, impl_->graph);
    dump("graph.kir", graph::print_graph(g));
    dump("context.txt", ctx_.key_material());
    KILN_LOG(LogChannel::Graph, "inductor: graph {} enters the inductor:\n{}", g.name, graph::print_graph(g));
  }

  // decompose: Composite ops -> the nodes of their decompositions; then eager's view and in-place checks on the
  // decomposed graph (before cleanup may drop an unused bad view), and the cleanup passes (DCE, CSE, constant
  // folding).
  void decompose() {
    impl_->graph = timed("decompose", "inductor/decompose", [&] { return decompose_composites(input_, ctx_, &unrounded_); });
    KILN_LOG(LogChannel::Graph, "inductor: graph {} after decomposition:\n{}", input_.name, graph::print_graph(impl_->graph));
    graph::StorageModel(impl_->graph).check(impl_->node_labels);
    timed("cleanup", "inductor/passes", [&] { return graph::run_pipeline(impl_->graph, graph::cleanup_pipeline(), "inductor"); });
    dump("decompose.kir", graph::print_graph(impl_->graph));
  }

  // lower: graph -> loop IR (one loop nest per realised node, extern calls for the rest).
  void lower() {
    impl_->lowered = timed("lower", "inductor/lowering", [&] {
      return lower_graph(impl_->graph, graph::StorageModel(impl_->graph), ctx_, unrounded_);
    });
    KILN_LOG(LogChannel::Graph, "inductor: graph {} lowered to loop IR:\n{}", input_.name, print_nodes(impl_->lowered));
    dump("lower.txt", print_nodes(impl_->lowered));
  }

  // fuse: loop nests -> kernels (schedule_passes.h); the first schedule.
  void fuse() {
    impl_->schedule = timed("fuse", "inductor/schedule", [&] { return inductor::fuse(impl_->lowered, ctx_); });
    after_schedule_pass("fuse", LogChannel::Fusion);
  }

  // A pass over the schedule (schedule_passes.h, or a backend's placement pass).
  void schedule(const SchedulePass& pass) {
    timed(pass.name, "inductor/schedule", [&] { return pass.run(impl_->schedule, impl_->lowered, ctx_), 0; });
    after_schedule_pass(pass.name, pass.channel);
  }

  // codegen: the backend compiles every kernel (through its kernel cache).
  void codegen(const Backend& backend) {
    impl_->loop_ir = print_schedule(impl_->schedule, impl_->lowered);
    KILN_LOG(LogChannel::Graph, "inductor: graph {} leaves the inductor as scheduled loop IR:\n{}", input_.name, impl_->loop_ir);
    impl_->kernels = timed("codegen", "inductor/codegen", [&] { return backend.compile(impl_->schedule, impl_->lowered, ctx_); });
    for (size_t i = 0; i < impl_->schedule.kernels.size(); ++i)
      dump_file(dump_dir_ / "kernels", impl_->schedule.kernels[i].name + ".ll", impl_->kernels->code()[i]);
  }

  std::shared_ptr<CompiledGraph> finish() {
    impl_->inject = ctx_.inject;
    impl_->extern_constants = extern_constants(impl_->lowered, impl_->graph);
    impl_->decisions = impl_->lowered.decisions;
    impl_->decisions.insert(impl_->decisions.end(), ctx_.decisions.all().begin(), ctx_.decisions.all().end());
    impl_->stats = stats(impl_->schedule, *impl_->kernels);
    impl_->stats.compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0_).count();
    return std::make_shared<CompiledGraph>(std::move(impl_));
  }

 private:
  using Clock = std::chrono::steady_clock;

  // Runs a pass; its time goes to the passes log, and a CompileError from it that names no stage gets `stage`.
  template <class F>
  auto timed(const char* pass, const char* stage, F&& run) -> decltype(run()) {
    const auto start = Clock::now();
    const size_t decisions = ctx_.decisions.size();
    try {
      if constexpr (std::is_void_v<decltype(run())>) {
        run();
        log_pass(pass, start, decisions);
      } else {
        auto result = run();
        log_pass(pass, start, decisions);
        return result;
      }
    } catch (const CompileError& e) {
      if (!e.stage().empty()) throw;
      throw CompileError(e.what(), stage, e.internal());
    }
  }
  void log_pass(const char* pass, Clock::time_point start, size_t decisions_before) const {
    KILN_LOG(LogChannel::Passes, "inductor: graph {}: pass {} ({:.2f} ms, {} decisions)", input_.name, pass,
             std::chrono::duration<double, std::milli>(Clock::now() - start).count(), ctx_.decisions.size() - decisions_before);
  }

  void after_schedule_pass(const char* pass, LogChannel channel) {
    KILN_LOG(channel, "graph {}: pass {} done ({} decisions so far)", input_.name, pass, ctx_.decisions.size());
    if (schedule_verifier_enabled()) verify_schedule(impl_->schedule, impl_->lowered, pass);
    dump(fmt::format("{}.txt", pass), print_schedule(impl_->schedule, impl_->lowered));
  }

  // KILN_DEBUG_DIR/inductor/<graph>/NN_<name>: numbered in pipeline order.
  void dump(const std::string& name, const std::string& text) {
    dump_file(dump_dir_, fmt::format("{:02}_{}", dumps_++, name), text);
  }
  void dump_file(const fs::path& dir, const std::string& file, const std::string& text) const {
    if (dump_dir_.empty()) return;
    create_output_directory(dir.string());
    write_file_atomic((dir / file).string(), text);
  }

  static std::function<std::string(const graph::Node&)> user_node_labels(const graph::Graph& g, const graph::Graph& decomposed);
  static std::vector<std::vector<Tensor>> extern_constants(const LoweredGraph& lg, const graph::Graph& g);
  static CompileStats stats(const Schedule& s, const CompiledKernels& kernels);

  const graph::Graph& input_;
  CompileContext ctx_;
  std::unique_ptr<CompiledGraph::Impl> impl_;
  Clock::time_point t0_;
  fs::path dump_dir_;
  int dumps_ = 0;
  std::vector<bool> unrounded_;  // by value id: internal to an op eager runs as one kernel (decompose_composites)
};

// Errors name a node of the decomposed graph as the interpreter names the node of the user's graph it comes from
// (a node a decomposition made comes from the composite node at its line), else by its own label.
std::function<std::string(const graph::Node&)> Pipeline::user_node_labels(const graph::Graph& g,
                                                                          const graph::Graph& decomposed) {
  std::map<std::pair<int, int>, std::string> label_at;
  for (const graph::Node& n : g.nodes())
    if (n.loc.known()) label_at.emplace(std::make_pair(n.loc.line, n.loc.col), graph::node_label(g, n));
  return [label_at, &decomposed](const graph::Node& n) {
    auto it = label_at.find({n.loc.line, n.loc.col});
    return it != label_at.end() ? it->second : graph::node_label(decomposed, n);
  };
}

// Per extern node: its constant tensor arguments by slot (undefined where the argument is a buffer).
std::vector<std::vector<Tensor>> Pipeline::extern_constants(const LoweredGraph& lg, const graph::Graph& g) {
  std::vector<std::vector<Tensor>> out(lg.nodes.size());
  for (size_t i = 0; i < lg.nodes.size(); ++i) {
    const LoopNode& n = lg.nodes[i];
    if (n.kind != LoopNode::Kind::Extern) continue;
    std::vector<Tensor>& consts = out[i];
    auto add = [&](graph::ValueId id) {
      const graph::ValueInfo& v = g.value(id);
      bool is_const = id != graph::kNoValue && v.producer >= 0 && g.nodes()[size_t(v.producer)].kind == graph::NodeKind::Constant;
      if (!is_const) return consts.push_back(Tensor());
      Tensor c = g.nodes()[size_t(v.producer)].constant;
      if (v.wrapped_number) c = Tensor::wrapped_number(c.item());  // keeps number promotion semantics
      consts.push_back(c);
    };
    for (const graph::Arg& a : g.nodes()[size_t(n.graph_node)].args) {
      if (auto* t = std::get_if<graph::TensorArg>(&a)) add(t->id);
      if (auto* l = std::get_if<graph::TensorListArg>(&a))
        for (graph::ValueId id : l->ids) id == graph::kNoValue ? consts.push_back(Tensor()) : add(id);
    }
  }
  return out;
}

CompileStats Pipeline::stats(const Schedule& s, const CompiledKernels& kernels) {
  CompileStats st;
  st.kernels = int(s.kernels.size());
  for (const Kernel& k : s.kernels) {
    bool copy = true;
    for (const KernelLoop& l : k.loops) copy &= l.value->op == SOp::Load;
    st.copy_kernels += copy;
  }
  for (const Step& step : s.steps) st.extern_calls += step.kind == Step::Kind::Extern;
  st.kernels_built = kernels.kernels_built();
  return st;
}

}  // namespace

// The inductor pipeline: one named pass after another (docs/inductor.md, "Pipeline").
std::shared_ptr<CompiledGraph> compile_uncached(const graph::Graph& g, const CompileOptions& options) {
  const Backend& backend = host_backend();
  Pipeline p(g, context_for(g, options, backend));
  p.decompose();   // composites -> primitive ops; eager's storage checks; DCE, CSE, constant folding
  p.lower();       // graph -> loop IR
  p.fuse();        // loop nests -> kernels
  p.schedule({"localise", LogChannel::Localise, localise});
  for (const SchedulePass& pass : backend.placement_passes()) p.schedule(pass);  // the CPU: stream, defer
  p.schedule({"plan_memory", LogChannel::MemoryPlan, plan_memory});
  p.codegen(backend);  // kernels -> code, through the backend's kernel cache
  return p.finish();
}

}  // namespace kiln
