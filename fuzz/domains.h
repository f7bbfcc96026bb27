// Argument domains of the fuzzer's generator: where an op is defined and finite (log and sqrt of positives,
// divisors away from zero, bounded exponent arguments, probabilities in [0, 1]), so NaN and Inf do not drown
// real mismatches. The op table does not record domains, so they live here, keyed by op and argument name;
// an op missing from the table is fuzzed over any values (and the fuzzer's input search, fuzz/fuzzer.h, keeps
// what stays finite). A domain is kept by construction: the generator puts a guard node (ops of the table:
// abs + add, tanh * 0.9, clamp, sigmoid) between the value and the argument.
//
// Discontinuous ops (floor, ceil, round, trunc, sign, division with a rounding mode, remainder, comparisons,
// casts to integers or bool, logical ops of floats) turn a difference of one ulp in an argument into a step
// of the result, and kiln's compiled math is allowed such ulps (docs/inductor.md, "Special values and
// accuracy"): a correct program then disagreed with eager (fuzz/findings/README.md, finding 10). No guard can
// keep a computed value off a step (a continuous guard's image of an interval that holds a step holds it too),
// so the fuzzer's input search keeps them off instead: steps_have_margin below, on the fp64 values of every
// node, and the search draws inputs again when a discontinuous node's argument lies within a few ulps of a step.
#pragma once
#include <string_view>
#include <vector>

#include "graph/graph.h"

namespace kiln::fuzz {

enum class Domain { Any, Positive, Unit, Probability, Bounded, SmallExponent };

// The domain of argument `arg` of `op` (Any for most).
Domain domain_of(const OpInfo& op, std::string_view arg);

// A value computed from `v` that lies in `d` (v itself for Any); appends the guard's nodes to `g`. The guard
// may change the dtype (a log of an integer computes in float anyway).
graph::ValueId guard_value(graph::Graph& g, graph::ValueId v, Domain d);

// Ulps (of the dtype the argument computes in: f32 for f16, bf16 and f32; f64) an argument of a discontinuous
// op keeps from its nearest step, relative to the argument's magnitude (at least 1).
inline constexpr double kStepMarginUlps = 16;

// Whether every discontinuous node of `g` has its floating arguments at least kStepMarginUlps from their steps,
// or exactly on one (an exact tie, such as eq(x, x), is computed alike by eager and compiled code), given
// `values`, every value of `g` in fp64 (graph::run_graph_all_values). Integer arguments are exact: no margin.
bool steps_have_margin(const graph::Graph& g, const std::vector<Tensor>& values);
// Whether `g` has a discontinuous node (one steps_have_margin judges).
bool has_steps(const graph::Graph& g);

}  // namespace kiln::fuzz
