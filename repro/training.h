// Judging a backend on training (docs/bisect.md, Training): a graph whose inputs are marked `grad` runs forward
// and then backward with fixed tangents, and what a user of its gradients sees, the outputs followed by one
// gradient per `grad` input, is compared with the same run of the reference interpreter with autograd on (eager
// at the graph's dtypes, and fp64) through the one comparator. A wrong VJP or a wrong partition changes only the
// gradients, so a forward-only check would pass it.
//
//   if (trains(g)) {
//     TrainingRun run = training_run(g, inputs);                  // tangents fixed by the graph's outputs
//     ComparisonBaselines ref = training_baselines(g, inputs, run, seed);
//     std::vector<Tensor> got = run_training("aot_eager", g, inputs, run);
//     TrainingVerdict v = judge_training(g, run, got, ref, 1e-4);  // outputs 0..n-1, then the gradients
//   }
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/graph.h"
#include "inductor/compile_options.h"

namespace kiln {

// Whether `g` is run for training: some input is marked `grad`.
bool trains(const graph::Graph& g);

// The fixed part of a training run: one tangent per floating output (normal values from a fixed seed, at the
// output's dtype; the random generator's state is left as it was) and the inputs that get gradients.
struct TrainingRun {
  std::vector<Tensor> tangents;    // by output; undefined for outputs that are not floating
  std::vector<size_t> grad_inputs;  // indices of the inputs marked `grad`
};
TrainingRun training_run(const graph::Graph& g);

// The outputs of `g` on `backend` (eager, or fp64 for the reference: the interpreter with autograd on; others:
// compile_for_backend with `options`, which builds a compiled backward where the backend has one), then the gradients of the outputs that require grad,
// weighted by the tangents, with respect to each `grad` input (zeros where an input gets none). Inputs are
// copied first; random ops start from the generator's state as it is.
std::vector<Tensor> run_training(const std::string& backend, const graph::Graph& g, const std::vector<Tensor>& inputs,
                                 const TrainingRun& run, const CompileOptions& options = {});

// The same in the reference interpreter: eager at the graph's dtypes and fp64 (every step in f64, the gradients
// rounded to the inputs' dtypes at the end), both from `random_state`.
ComparisonBaselines training_baselines(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                       const TrainingRun& run, std::optional<GeneratorState> random_state);

// The comparator's verdict on a training run's outputs then gradients against the baselines, in the printed
// form every tool uses, each failing entry named ("output 2 is the gradient of %w").
struct TrainingVerdict {
  bool ok = true;
  std::string text;
};
TrainingVerdict judge_training(const graph::Graph& g, const TrainingRun& run, const std::vector<Tensor>& got,
                               const ComparisonBaselines& ref, double tolerance);

}  // namespace kiln
