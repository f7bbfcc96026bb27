// kiln::compile: the inductor pipeline as one flat list of named passes (compile_uncached, at the end), and the
// graph-level cache and the repro hook in front of it (see compile.h). The program it returns runs in
// program.cpp.
#include "inductor/compile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/debug_dir.h"
#include "core/bisect.h"
#include "core/files.h"
#include "core/log.h"
#include "core/options.h"
#include "core/trace.h"
#include "eager/loops.h"
#include "graph/interpreter.h"
#include "graph/passes.h"
#include "graph/storage_model.h"
#include "graph/text.h"
#include "inductor/code_generator.h"
#include "inductor/decompose.h"
#include "inductor/lowering.h"
#include "inductor/program.h"
#include "inductor/verify_schedule.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln {

using namespace inductor;

std::shared_ptr<CompiledGraph> compile_uncached(const graph::Graph& g, const CompileOptions& options);
std::shared_ptr<CompiledGraph> compile_classifying_failures(const graph::Graph& g, const CompileOptions& options);

namespace {

namespace fs = std::filesystem;

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
    std::fprintf(stderr, "kiln: warning: KILN_REPRO_AFTER=%s: this compile serves stage %s, not %s, so it is not "
                         "watched (the hook watches only compiles of stage %s)\n", after.c_str(), stage.c_str(),
                 after.c_str(), after.c_str());
  if (hook) return nullptr;
  static std::atomic<bool> warned{false};
  if (!after.empty() && !warned.exchange(true))
    std::fprintf(stderr, "kiln: warning: KILN_REPRO_AFTER is set, but this program does not install the repro hook "
                         "(link kiln_minifier and call kiln::install_repro_hook()); no repros will be written\n");
  return nullptr;
}

// Whether this compilation must really happen (see CompileOptions): debug dumps, the log channels printed while
// compiling (compile_logs_enabled: the channel table in core/log.cpp marks them) and the repro hook must each see
// it. KILN_BISECT_* settings do not: they are part of the cache key (graph_cache_key), so a program compiled
// under one is reused under the same one, and timings under a bisection setting time calls, not recompiles.
bool must_compile_afresh(const CompileOptions& options) {
  return !options.use_graph_cache || !opt_string(Opt::ReproAfter).empty() || !opt_string(Opt::DebugDir).empty() ||
         compile_logs_enabled();
}

// The graph-level cache key: derived from everything the compile depends on, the graph's structure and the
// context (target, options, injection), never from a hand-kept list of settings, and the bisection settings
// (which sites may run). KILN_BISECT_LIMIT counts applications per process, so the program cached under a limit
// is the one its first compile made: a later compile of the same graph under the same limit gets that program,
// not one with every application past the count skipped. In memory only, so the text itself is the key (no
// digest to compute on every cache hit).
std::string graph_cache_key(const graph::Graph& g, const CompileContext& ctx) {
  return fmt::format("{:016x}\n{}\nbisect {}", g.structural_hash(), ctx.key_material(), current_bisect_settings().str());
}

// The context a compile of `g` runs its passes in: the code generator's target, the options, their injection.
CompileContext context_for(const graph::Graph& g, const CompileOptions& options, const CodeGenerator& backend) {
  CompileContext ctx;
  ctx.graph_name = g.name;
  ctx.target = backend.target();
  ctx.options = options;
  ctx.inject = options.injection();
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

const std::vector<std::string>& compile_modes() {
  static const std::vector<std::string> modes = {"default", "reduce-overhead", "max-autotune"};
  return modes;
}

void check_compile_mode(const std::string& mode, const std::string& where) {
  const auto& modes = compile_modes();
  KILN_CHECK(std::find(modes.begin(), modes.end(), mode) != modes.end(), "{}unknown compile mode '{}'; the modes are {}",
             where, mode, fmt::join(modes, ", "));
}

std::string compile_mode_needs_cuda(const std::string& mode) {
  if (mode == "reduce-overhead") return "mode reduce-overhead replays the compiled program as a CUDA graph";
  if (mode == "max-autotune")
    return "mode max-autotune times the CUDA backend's kernels at several launch shapes (the CPU backend has no such "
           "choices yet)";
  return "";
}

std::string compile_mode_problem(const std::string& mode, const std::string& device) {
  return mode == "default" || device == "cuda" ? "" : compile_mode_needs_cuda(mode);
}

namespace {
// kiln::Error unless `options`' mode is known and compiles for its device.
void check_mode(const CompileOptions& options) {
  check_compile_mode(options.mode);
  const std::string problem = compile_mode_problem(options.mode, options.device);
  KILN_CHECK(problem.empty(), "{}, which needs the CUDA backend (--backend inductor_cuda; CompileOptions::device = "
             "\"cuda\"), not device '{}'", problem, options.device);
}
}  // namespace

std::shared_ptr<CompiledGraph> compile(const graph::Graph& g, const CompileOptions& options) {
  check_options();  // the library entry point: an invalid KILN_* setting is an error, not a silent default
  check_mode(options);
  check_bisect_settings();
  BisectScope bisection(options.bisect);  // every should_run site of this compile obeys the compile's settings
  CompileScope traced("graph", g.name);  // a compile id of its own unless inside another compile
  CompileHook* hook = active_hook(options.repro_stage);
  if (hook) hook->compile_started(g, options.backend);
  std::shared_ptr<CompiledGraph> program;
  try {
    program = compile_or_reuse(g, options);
  } catch (const CompileError& e) {
    traced.fail(e.stage().empty() ? "compile_error" : e.stage(), e.what());
    if (hook) hook->failed(g, nullptr, "compile_error", e.what(), e.stage(), options.backend);
    throw;
  } catch (const std::exception& e) {
    traced.fail("error", e.what());
    throw;
  }
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
  const std::string key = graph_cache_key(g, context_for(g, options, code_generator_for(options.device)));
  {
    std::lock_guard lock(graph_cache().mutex);
    auto it = graph_cache().programs.find(key);
    if (it != graph_cache().programs.end()) {
      KILN_LOG(LogChannel::Cache, "graph {}: compiled program reused (structurally equal graph, same options)", g.name);
      trace_event("cache", {{"cache", "graph"}, {"result", "hit"}, {"graph", g.name}});
      return it->second;
    }
  }
  trace_event("cache", {{"cache", "graph"}, {"result", "miss"}, {"graph", g.name}});
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
    dump_dir_ = claim_debug_dir("inductor", g.name);  // KILN_DEBUG_DIR/inductor/NNN_<graph>/, empty when unset
    impl_->node_labels = user_node_labels(g, impl_->graph);
    dump("graph.kir", [&] { return graph::print_graph(g); });
    dump("context.txt", [&] { return ctx_.key_material(); });
    KILN_LOG(LogChannel::Graph, "inductor: graph {} enters the inductor:\n{}", g.name, graph::print_graph(g));
  }

  // decompose: Composite ops -> the nodes of their decompositions; then eager's view and in-place checks on the
  // decomposed graph (before cleanup may drop an unused bad view), and the cleanup passes (DCE, CSE, constant
  // folding).
  void decompose() {
    impl_->graph = timed("decompose", "inductor/decompose", [&] { return decompose_composites(input_, ctx_, &unrounded_); });
    KILN_LOG(LogChannel::Graph, "inductor: graph {} after decomposition:\n{}", input_.name, graph::print_graph(impl_->graph));
    graph::StorageModel(impl_->graph).check(impl_->node_labels);
    timed("cleanup", "inductor/passes", [&] { return graph::run_pipeline(impl_->graph, graph::cleanup_pipeline(&unrounded_), "inductor",
                                                                           dump_dir_.empty() ? dump_dir_ : dump_dir_ / "cleanup"); });
    dump("decompose.kir", [&] { return graph::print_graph(impl_->graph); });
  }

  // lower: graph -> loop IR (one loop nest per realised node, extern calls for the rest).
  void lower() {
    impl_->lowered = timed("lower", "inductor/lowering", [&] {
      return lower_graph(impl_->graph, graph::StorageModel(impl_->graph), ctx_, unrounded_);
    });
    KILN_LOG(LogChannel::Graph, "inductor: graph {} lowered to loop IR:\n{}", input_.name, print_nodes(impl_->lowered));
    dump("lower.txt", [&] { return print_nodes(impl_->lowered); });
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
  void codegen(const CodeGenerator& backend) {
    impl_->loop_ir = print_schedule(impl_->schedule, impl_->lowered);
    KILN_LOG(LogChannel::Graph, "inductor: graph {} leaves the inductor as scheduled loop IR:\n{}", input_.name, impl_->loop_ir);
    impl_->kernels = timed("codegen", "inductor/codegen", [&] { return backend.compile(impl_->schedule, impl_->lowered, ctx_); });
    for (size_t i = 0; i < impl_->schedule.kernels.size(); ++i) {
      const std::string& code = impl_->kernels->code()[i];
      dump_file(dump_dir_ / "kernels", impl_->schedule.kernels[i].name + backend.code_extension(), code);
      trace_artifact("kernel " + impl_->schedule.kernels[i].name, backend.code_extension(), [&] { return code; });
    }
    if (trace_enabled()) trace_provenance();
  }

  std::shared_ptr<CompiledGraph> finish() {
    impl_->compile_id = current_compile_id();
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
    TraceSpan span("inductor", pass);
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
    dump(fmt::format("{}.txt", pass), [&] { return print_schedule(impl_->schedule, impl_->lowered); });
  }

  // KILN_DEBUG_DIR/inductor/<graph>/NN_<name>: numbered in pipeline order.
  // `text` is only computed when KILN_DEBUG_DIR is set.
  // The same text is the trace's artifact `name` (KILN_TRACE).
  template <class Text>
  void dump(const std::string& name, Text&& text) {
    const bool tracing = trace_enabled();
    if (dump_dir_.empty() && !tracing) return;
    const std::string t = text();
    if (!dump_dir_.empty()) dump_file(dump_dir_, fmt::format("{:02}_{}", dumps_++, name), t);
    if (tracing) trace_artifact(name, name.substr(name.rfind('.') + 1), [&] { return t; });
  }

  // KILN_TRACE's provenance: per kernel, the graph nodes it computes (the loops it stores and every pending value
  // inlined into them: the producers between the kernel's loads and its stores) with the lines they came from;
  // per extern call, its node.
  void trace_provenance() const;
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

// Where a value of the compiled graph came from: "file:line" for a captured program's line, "line L:C" of the
// .kir file it was read from, "" when unknown.
std::string source_of(const graph::SourceLoc& loc) {
  if (!loc.known()) return "";
  return loc.file ? fmt::format("{}:{}", loc.file, loc.line) : fmt::format("line {}:{}", loc.line, loc.col);
}

void Pipeline::trace_provenance() const {
  const graph::Graph& g = impl_->graph;
  const LoweredGraph& lg = impl_->lowered;
  // Values stored in a buffer (a loop's result, an extern's output) or read from one (inputs, constants): a kernel's
  // nodes stop at them.
  std::vector<bool> stored(size_t(g.num_values()), false);
  for (graph::ValueId v : g.inputs()) stored[size_t(v)] = true;
  for (const graph::Node& n : g.nodes())
    if (n.kind == graph::NodeKind::Constant)
      for (graph::ValueId v : n.outputs) stored[size_t(v)] = true;
  for (const LoopNode& n : lg.nodes) {
    if (n.kind == LoopNode::Kind::Extern) {
      for (graph::ValueId v : g.nodes()[size_t(n.graph_node)].outputs) stored[size_t(v)] = true;
    } else if (auto v = g.find_value(n.origin)) {
      stored[size_t(*v)] = true;
    }
  }
  auto node_fields = [&](const std::vector<graph::ValueId>& values, std::vector<TraceField>& fields) {
    std::vector<std::string> names, ops, lines, stands_for;
    for (graph::ValueId v : values) {
      const graph::ValueInfo& info = g.value(v);
      names.push_back(info.name);
      ops.push_back(info.producer >= 0 ? std::string(g.nodes()[size_t(info.producer)].info().name) : "input");
      const graph::SourceLoc loc = info.producer >= 0 ? g.nodes()[size_t(info.producer)].loc : info.loc;
      lines.push_back(source_of(loc));
      stands_for.push_back(info.stands_for.empty() ? info.name : info.stands_for);
    }
    fields.emplace_back("nodes", std::move(names));
    fields.emplace_back("ops", std::move(ops));
    fields.emplace_back("lines", std::move(lines));
    fields.emplace_back("stands_for", std::move(stands_for));
  };
  for (const Kernel& k : impl_->schedule.kernels) {
    std::vector<graph::ValueId> values;
    std::vector<bool> seen(size_t(g.num_values()), false);
    std::vector<std::string> stores;
    for (const KernelLoop& loop : k.loops) {
      const std::optional<graph::ValueId> origin = g.find_value(lg.nodes[size_t(loop.node)].origin);
      if (!origin) continue;
      stores.push_back(g.value(*origin).name);
      std::vector<graph::ValueId> todo{*origin};
      while (!todo.empty()) {
        const graph::ValueId v = todo.back();
        todo.pop_back();
        if (seen[size_t(v)]) continue;
        seen[size_t(v)] = true;
        values.push_back(v);
        const int producer = g.value(v).producer;
        if (producer < 0) continue;
        for (graph::ValueId in : graph::Graph::node_inputs(g.nodes()[size_t(producer)]))
          if (!stored[size_t(in)]) todo.push_back(in);
      }
    }
    std::sort(values.begin(), values.end());
    std::vector<TraceField> fields{{"graph", input_.name}, {"kernel", k.name}, {"stores", std::move(stores)}};
    node_fields(values, fields);
    trace_event("kernel", std::move(fields));
  }
  for (const Step& step : impl_->schedule.steps) {
    if (step.kind != Step::Kind::Extern) continue;
    const LoopNode& n = lg.nodes[size_t(step.index)];
    std::vector<TraceField> fields{{"graph", input_.name}, {"reason", n.reason}};
    node_fields(g.nodes()[size_t(n.graph_node)].outputs, fields);
    trace_event("extern", std::move(fields));
  }
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
  const CodeGenerator& backend = code_generator_for(options.device);
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
