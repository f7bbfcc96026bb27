// Argument domains of the fuzzer's generator: where an op is defined and finite (log and sqrt of positives,
// divisors away from zero, bounded exponent arguments, probabilities in [0, 1]), so NaN and Inf do not drown
// real mismatches. The op table does not record domains, so they live here, keyed by op and argument name;
// an op missing from the table is fuzzed over any values (and the fuzzer's input search, fuzz/fuzzer.h, keeps
// what stays finite). A domain is kept by construction: the generator puts a guard node (ops of the table:
// abs + add, tanh * 0.9, clamp, sigmoid) between the value and the argument.
#pragma once
#include <string_view>

#include "graph/graph.h"

namespace kiln::fuzz {

enum class Domain { Any, Positive, Unit, Probability, Bounded, SmallExponent };

// The domain of argument `arg` of `op` (Any for most).
Domain domain_of(const OpInfo& op, std::string_view arg);

// A value computed from `v` that lies in `d` (v itself for Any); appends the guard's nodes to `g`. The guard
// may change the dtype (a log of an integer computes in float anyway).
graph::ValueId guard_value(graph::Graph& g, graph::ValueId v, Domain d);

}  // namespace kiln::fuzz
