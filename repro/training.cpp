// Training runs of a graph: outputs, then gradients through fixed tangents, on a backend or the reference
// interpreter (training.h).
#include "repro/training.h"

#include <fmt/format.h>

#include "api/backends.h"
#include "autograd/autograd.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "ops/api.h"

namespace kiln {
namespace {

constexpr uint64_t kTangentSeed = 0x6b696c6e;  // "kiln": the same tangents in every process

// Copies of `inputs`, those marked `grad` as leaves that require grad.
std::vector<Tensor> training_inputs(const std::vector<Tensor>& inputs, const TrainingRun& run) {
  std::vector<Tensor> out = graph::copy_inputs(inputs);
  for (size_t i : run.grad_inputs) {
    out[i] = out[i].detach();
    out[i].set_requires_grad(true);
  }
  return out;
}

// The outputs (detached) then the gradient of each of `wrt` (zeros where it gets none).
std::vector<Tensor> outputs_then_gradients(const std::vector<Tensor>& outs, const std::vector<Tensor>& wrt,
                                           const TrainingRun& run) {
  std::vector<Tensor> roots, tangents;
  for (size_t i = 0; i < outs.size() && i < run.tangents.size(); ++i)
    if (run.tangents[i].defined() && outs[i].defined() && outs[i].requires_grad())
      roots.push_back(outs[i]), tangents.push_back(to(run.tangents[i], outs[i].dtype()));
  std::vector<Tensor> grads = roots.empty() ? std::vector<Tensor>(wrt.size()) : kiln::grad(roots, wrt, tangents);
  std::vector<Tensor> result;
  for (const Tensor& o : outs) result.push_back(o.defined() ? o.detach() : o);
  for (size_t k = 0; k < wrt.size(); ++k) result.push_back(grads[k].defined() ? grads[k] : zeros_like(wrt[k]));
  return result;
}

}  // namespace

bool trains(const graph::Graph& g) {
  for (graph::ValueId in : g.inputs())
    if (g.value(in).requires_grad) return true;
  return false;
}

TrainingRun training_run(const graph::Graph& g) {
  TrainingRun run;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (g.value(g.inputs()[i]).requires_grad) run.grad_inputs.push_back(i);
  const GeneratorState saved = default_generator();
  manual_seed(kTangentSeed);
  for (graph::ValueId out : g.outputs()) {
    const TensorMeta& meta = g.value(out).meta;
    run.tangents.push_back(is_floating(meta.dtype) ? randn(meta.sizes, meta.dtype) : Tensor());
  }
  default_generator() = saved;
  return run;
}

std::vector<Tensor> run_training(const std::string& backend, const graph::Graph& g, const std::vector<Tensor>& inputs,
                                 const TrainingRun& run, const CompileOptions& options) {
  std::vector<Tensor> in = training_inputs(inputs, run);
  std::vector<Tensor> outs;
  if (backend == "eager" || backend == "fp64") {
    graph::InterpretOptions interpreter;
    interpreter.autograd = true;
    interpreter.fp64 = backend == "fp64";
    outs = graph::run_graph(g, in, interpreter);
  } else {
    outs = compile_for_backend(backend, g, options)(in);
  }
  std::vector<Tensor> wrt;
  for (size_t i : run.grad_inputs) wrt.push_back(in[i]);
  return outputs_then_gradients(outs, wrt, run);
}

ComparisonBaselines training_baselines(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                       const TrainingRun& run, std::optional<GeneratorState> random_state) {
  const GeneratorState start = random_state ? *random_state : default_generator();
  ComparisonBaselines b;
  default_generator() = start;
  b.eager = run_training("eager", g, inputs, run);
  b.fp64 = run_training("fp64", g, inputs, run);
  return b;
}

TrainingVerdict judge_training(const graph::Graph& g, const TrainingRun& run, const std::vector<Tensor>& got,
                               const ComparisonBaselines& ref, double tolerance) {
  if (got.size() != ref.fp64.size())
    return {false, fmt::format("the training run returned {} values, the graph's outputs and gradients are {}",
                               got.size(), ref.fp64.size())};
  CompareOptions co;
  co.tol = tolerance;
  CompareVerdict v = compare_to_baselines(ref, got, co);
  std::string text = v.str();
  const size_t n = g.outputs().size();
  for (size_t k = n; k < v.outputs.size(); ++k)
    if (!v.outputs[k].ok && k - n < run.grad_inputs.size())
      text += fmt::format("\n  output {} is the gradient of %{}", k, g.value(g.inputs()[run.grad_inputs[k - n]]).name);
  return {v.ok, text};
}

}  // namespace kiln
