// The backend registry (see backends.h).
#include "api/backends.h"

#include <map>
#include <mutex>

#include "aot/compiled.h"
#include "core/error.h"
#include "core/inject.h"
#include "core/options.h"
#include "graph/interpreter.h"
#include "inductor/compile.h"
#include "inductor/decompose.h"

namespace kiln {

namespace {

std::mutex g_mutex;

CompileOptions cuda_options() {
  CompileOptions options;
  options.backend = "inductor_cuda";
  options.device = "cuda";
  return options;
}

// The AOT autograd backends (docs/aot.md): aot_eager runs both halves in the interpreter,
// aot_eager_decomp_partition decomposes the joint graph to the primitive set first (the inductor's decompose
// pass, KILN_INJECT decomposition bugs included) and partitions it with min-cut, inductor compiles both halves.
}  // namespace

bool backend_supports_autograd(const std::string& name) {
  return name == "aot_eager" || name == "aot_eager_decomp_partition" || name == "inductor";
}

aot::AotConfig aot_backend_config(const std::string& name, const std::string& repro_stage) {
  aot::AotConfig config;
  config.backend = name;
  for (const InjectSpec::Entry& e : InjectSpec::for_compiler().entries)
    if (e.kind == InjectKind::Vjp) config.joint.wrong_vjp.push_back(find_op(e.target)->id);
  if (name == "inductor") {
    // PyTorch's inductor partitions with min-cut rematerialisation too.
    config.policy = aot::PartitionPolicy::MinCut;
    auto compiler = [](const std::string& stage) {
      return [stage](const graph::Graph& g) -> aot::Program {
        CompileOptions options;
        options.repro_stage = stage;
        std::shared_ptr<CompiledGraph> program = compile(g, options);
        return [program](const std::vector<Tensor>& in) { return (*program)(in); };
      };
    };
    config.compile = compiler(repro_stage);
    config.compile_halves = compiler("aot");  // KILN_REPRO_AFTER=aot: the forward and backward graphs
    return config;
  }
  if (name == "aot_eager_decomp_partition") {
    config.policy = aot::PartitionPolicy::MinCut;  // as PyTorch's: the min-cut rematerialisation partitioner
    config.transform_joint = [](const graph::Graph& joint) {
      inductor::CompileContext ctx;
      ctx.inject = InjectSpec::for_compiler();
      return inductor::decompose_composites(joint, ctx);
    };
  }
  config.compile = [](const graph::Graph& g) -> aot::Program {  // run_graph per call: threads may share it
    auto keep = std::make_shared<graph::Graph>(g);
    return [keep](const std::vector<Tensor>& in) { return graph::run_graph(*keep, in); };
  };
  return config;
}

namespace {

aot::Program aot_program(const std::string& name, const graph::Graph& g, const std::string& repro_stage) {
  return aot::aot_compile(g, aot_backend_config(name, repro_stage));
}

std::map<std::string, BackendFn>& backends() {
  static std::map<std::string, BackendFn> b = {
      {"eager", [](const graph::Graph& g, const std::vector<Tensor>& in) { return graph::run_graph(g, in); }},
      {"inductor", [](const graph::Graph& g, const std::vector<Tensor>& in) { return (*compile(g))(in); }},
#ifdef KILN_HAVE_CUDA
      // The CUDA backend (docs/cuda.md): kernels generated as CUDA C and run on the GPU, host tensors staged.
      {"inductor_cuda", [](const graph::Graph& g, const std::vector<Tensor>& in) { return (*compile(g, cuda_options()))(in); }},
#endif
      {"aot_eager", [](const graph::Graph& g, const std::vector<Tensor>& in) { return aot_program("aot_eager", g, "backend")(in); }},
      {"aot_eager_decomp_partition", [](const graph::Graph& g, const std::vector<Tensor>& in) {
         return aot_program("aot_eager_decomp_partition", g, "backend")(in);
       }},
  };
  return b;
}

GraphProgram program_of(std::shared_ptr<CompiledGraph> compiled) {
  return [compiled](const std::vector<Tensor>& in) { return (*compiled)(in); };
}

std::map<std::string, BackendCompileFn>& compilers() {
  static std::map<std::string, BackendCompileFn> c = {
      {"inductor", [](const graph::Graph& g) { return program_of(compile(g)); }},
#ifdef KILN_HAVE_CUDA
      {"inductor_cuda", [](const graph::Graph& g) { return program_of(compile(g, cuda_options())); }},
#endif
  };
  return c;
}

}  // namespace

void register_backend(const std::string& name, BackendFn fn) {
  std::lock_guard lock(g_mutex);
  backends()[name] = std::move(fn);
}

void register_backend_compiler(const std::string& name, BackendCompileFn fn) {
  std::lock_guard lock(g_mutex);
  compilers()[name] = std::move(fn);
}

const BackendCompileFn* find_backend_compiler(const std::string& name) {
  std::lock_guard lock(g_mutex);
  auto it = compilers().find(name);
  return it == compilers().end() ? nullptr : &it->second;
}

std::vector<std::string> backend_names() {
  std::lock_guard lock(g_mutex);
  std::vector<std::string> names;
  for (const auto& [name, fn] : backends()) names.push_back(name);
  return names;
}

const BackendFn& find_backend(const std::string& name) {
  check_options();  // every tool picks its backend here: no backend runs with an invalid KILN_* setting
  {
    std::lock_guard lock(g_mutex);
    auto it = backends().find(name);
    if (it != backends().end()) return it->second;
  }
  fail("unknown backend '{}' (available: {})", name, fmt::join(backend_names(), ", "));
}

void check_backend_mode(const std::string& name, const std::string& mode) {
  check_compile_mode(mode);
  KILN_CHECK(mode == "default" || name == "inductor_cuda", "{}, which needs backend inductor_cuda; backend {} has only "
             "mode default", compile_mode_needs_cuda(mode), name);
}

GraphProgram compile_for_backend(const std::string& name, const graph::Graph& g, const std::string& repro_stage,
                                 const std::string& mode) {
  check_backend_mode(name, mode);
#ifdef KILN_HAVE_CUDA
  if (mode != "default") {
    CompileOptions options = cuda_options();
    options.repro_stage = repro_stage;
    options.mode = mode;
    return program_of(compile(g, options));
  }
#endif
  if (backend_supports_autograd(name)) return aot_program(name, g, repro_stage);
  BackendFn run = find_backend(name);
  auto graph = std::make_shared<graph::Graph>(g);
  return [run, graph](const std::vector<Tensor>& in) { return run(*graph, in); };
}

}  // namespace kiln
