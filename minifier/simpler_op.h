// The minifier's op-simplification table: for an op, a simpler op of exactly the same signature (every argument's
// type, optionality and default in the same place, a keyword argument's name, the op kind and the returns), so
// the replacement is a valid node with the same args.
// The table is a short list of targets, one per signature (neg for one tensor in and out, add, mul, sum); every
// other op of the table with a target's signature maps to it. A minified repro whose failure survives the swap
// names the simpler op, so what is left is what the bug needs.
#pragma once
#include <optional>

#include "ops/op_info.h"

namespace kiln::minify {

// The target for `op`, or nullopt when the op is a target itself, has no target of its signature, or is not a
// plain computation (in-place, view or random ops keep their op: a swap would change aliasing or later draws).
std::optional<OpId> simpler_op(OpId op);

}  // namespace kiln::minify
