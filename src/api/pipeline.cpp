// The compiler's one pipeline (see pipeline.h): each rung of the ladder as its stages.
#include "api/pipeline.h"

#include <memory>

#include "graph/interpreter.h"
#include "inductor/compile.h"
#include "inductor/decompose.h"
#include "core/inject.h"

namespace kiln {

namespace {

// ---------------------------------------------------------------- the stages a rung is made of

// interpret: the reference interpreter, per call (threads may share the program).
GraphProgram interpret(const graph::Graph& g) {
  auto keep = std::make_shared<graph::Graph>(g);
  return [keep](const std::vector<Tensor>& in) { return graph::run_graph(*keep, in); };
}

// inductor: kiln::compile now (a graph that does not compile fails here), the compiled program per call.
GraphProgram compile_inductor(const graph::Graph& g, const CompileOptions& options) {
  std::shared_ptr<CompiledGraph> program = compile(g, options);
  return [program](const std::vector<Tensor>& in) { return (*program)(in); };
}

// aot: AOT autograd around the backend's compiler of each graph (aot/compiled.h).
GraphProgram train_with_aot(const std::string& backend, const graph::Graph& g, const CompileOptions& options) {
  return aot::aot_compile(g, aot_backend_config(backend, options));
}

BackendEntry rung(std::string name, std::string device, bool trains, bool compiles_ahead,
                  std::function<GraphProgram(const graph::Graph&, const CompileOptions&)> compile) {
  BackendEntry e;
  e.name = std::move(name);
  e.device = std::move(device);
  e.trains = trains;
  e.compiles_ahead = compiles_ahead;
  e.compile = std::move(compile);
  return e;
}

}  // namespace

std::vector<BackendEntry> pipeline_backends() {
  using Compile = std::function<GraphProgram(const graph::Graph&, const CompileOptions&)>;
  auto through_aot = [](const char* backend) -> Compile {
    return [backend](const graph::Graph& g, const CompileOptions& o) { return train_with_aot(backend, g, o); };
  };
  return {
      //   name                          device  trains compiles_ahead  stages
      rung("eager",                      "cpu",  false, false, [](const graph::Graph& g, const CompileOptions&) { return interpret(g); }),
      rung("aot_eager",                  "cpu",  true,  false, through_aot("aot_eager")),
      rung("aot_eager_decomp_partition", "cpu",  true,  false, through_aot("aot_eager_decomp_partition")),
      rung("inductor",                   "cpu",  true,  true,  through_aot("inductor")),
#ifdef KILN_HAVE_CUDA
      rung("inductor_cuda",              "cuda", false, true,  compile_inductor),  // docs/cuda.md; host tensors staged
#endif
  };
}

aot::AotConfig aot_backend_config(const std::string& name, const CompileOptions& options) {
  aot::AotConfig config;
  config.backend = name;
  const InjectSpec inject = options.injection();
  for (const InjectSpec::Entry& e : inject.entries)
    if (e.kind == InjectKind::Vjp) config.joint.wrong_vjp.push_back(find_op(e.target)->id);
  config.wrong_partition = inject.wants("partition", InjectKind::Accuracy);
  config.bisect = options.bisect;
  if (name == "inductor") {
    config.policy = aot::PartitionPolicy::MinCut;  // PyTorch's inductor partitions with min-cut rematerialisation
    CompileOptions halves = options;
    halves.repro_stage = "aot";  // KILN_REPRO_AFTER=aot: the forward and backward graphs
    config.compile = [options](const graph::Graph& g) -> aot::Program { return compile_inductor(g, options); };
    config.compile_halves = [halves](const graph::Graph& g) -> aot::Program { return compile_inductor(g, halves); };
    return config;
  }
  if (name == "aot_eager_decomp_partition") {
    config.policy = aot::PartitionPolicy::MinCut;  // as PyTorch's: the min-cut rematerialisation partitioner
    config.transform_joint = [inject](const graph::Graph& joint) {  // the inductor's decompose pass, injection too
      inductor::CompileContext ctx;
      ctx.inject = inject;
      return inductor::decompose_composites(joint, ctx);
    };
  }
  config.compile = [](const graph::Graph& g) -> aot::Program { return interpret(g); };
  return config;
}

}  // namespace kiln
