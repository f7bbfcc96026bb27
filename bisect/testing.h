// Generated graphs with one injected bug for the bisector's tests and benchmark (bisect/bisect.h): a chain of
// `nodes` op nodes over f32[16, 16] (sin, mul, tanh, neg, sigmoid, cos: values stay bounded; every 7th op adds the
// input back, so a long chain does not converge to a constant that no longer depends on it) with, at
// the middle, the site a KILN_INJECT kind breaks:
//   lowering       %tP = relu(...)                         KILN_INJECT=relu:accuracy   (relu computes x + 1)
//   decomposition  %tP = var(..., [1]) then broadcast back  KILN_INJECT=var:decomposition
//   fusion         sum(..., [1], True), flip over rows,     KILN_INJECT=fusion:accuracy (the consumer is fused
//                  %tP = add(..., flipped)                 into the reduction's kernel, reading unwritten rows)
// The value the bug makes wrong is an output too (else 500 contracting ops shrink it below any tolerance).
#pragma once
#include <string>
#include <vector>

namespace kiln::bisect {

struct InjectedGraph {
  std::string kir;          // the graph as .kir text
  std::string inject;       // the KILN_INJECT value
  std::string site;         // the should_run site the bug is behind ("inductor:lowering")
  std::string site_value;   // the value the first bad application's debug info names (without '%')
  std::string diverging;    // the first value the bisector should find diverging: the injected op's
};

// The injection kinds: "lowering", "decomposition", "fusion".
const std::vector<std::string>& injection_kinds();
// About `nodes` op nodes (at least 4), the injected site at the middle.
InjectedGraph injected_chain(const std::string& kind, int nodes);

// The same chain run for training (its input marked `grad`, judged on outputs and gradients) with a bug of the AOT
// rungs, which no site explains (they count none):
//   vjp        %tP = exp(...) at the middle, the only exp    KILN_INJECT=exp:vjp (its VJP adds 1): stage aot_eager
//   partition  the chain, %t3 an output too                 KILN_INJECT=partition:accuracy (min-cut recomputes its
//                                                           first recomputed value, %t0, + 1): aot_eager_decomp_partition
// `site` is empty, `site_value` the stage, `diverging` what the first diverging node's label contains: the
// injected node's source line ("(line 53:") for vjp, the recomputation the partitioner made wrong for partition.
const std::vector<std::string>& training_injection_kinds();
InjectedGraph injected_training_chain(const std::string& kind, int nodes);

}  // namespace kiln::bisect
