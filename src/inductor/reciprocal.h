// The reciprocal-divisor rule, which every backend's code generator follows: a floating division x / y whose
// divisor y the element loop being emitted does not vary (softmax's row sum) is emitted as x * (1 / y), so the
// loop computes the reciprocal once (LLVM's LICM hoists it; the CUDA C names it outside the per-element work).
// At most 1 ulp from the exact quotient while the reciprocal is a normal number. Only a divisor that reads memory
// or a register: a constant's rounded reciprocal makes x * (1 / c) differ from eager's x / c (round(x,
// decimals=-1) at ties), and there is nothing to hoist. The reciprocal is an exact division: the CPU backend sets
// no `arcp` anywhere, since that also lets LLVM replace 1 / sqrt(y) by its reciprocal-square-root estimate, which
// gives NaN for 0 and inf (rsqrt, and rms_norm's rows holding inf).
#pragma once
#include <vector>

#include "inductor/ir.h"

namespace kiln::inductor {

// Whether `division` (any node; true only for a floating Div) divides by its reciprocal inside an element loop
// over `element_vars` (the loop's variables; constant ones are ignored; none: not in an element loop).
bool divides_by_reciprocal(const SExpr& division, const std::vector<Index>& element_vars);

}  // namespace kiln::inductor
