// Sample calls for every op of the table, as RapidCheck generators: random shapes (ranks 0-3, sizes 0-4,
// broadcasting, non-contiguous leaves), valid attributes, and f64 values inside each op's smooth domain.
// The op-table-wide property tests (gradcheck, shape inference) draw their cases from here.
#pragma once
#include <rapidcheck.h>

#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/ivalue.h"
#include "ops/op_info.h"

namespace kiln {

// One call of an op, as given to call_op_named(name, args, kwargs). Floating tensors are f64 leaves; the
// ones that require grad are those gradcheck differentiates.
struct OpSample {
  std::vector<IValue> args;
  std::map<std::string, IValue> kwargs;
  // The output shape depends on tensor values (index with a bool mask): shape inference must refuse.
  bool shape_depends_on_data = false;
  // In-place ops: write into a view of a fresh base (select of a clone) instead of into a plain clone, so
  // autograd must rewrite the base's history; the base is then an output too.
  bool write_through_view = false;

  // Every tensor of the call (positional, then keyword; Tensor[] flattened; None entries skipped).
  std::vector<Tensor> flat_tensors() const;
};

// RapidCheck prints a failing case with this: each argument, tensors with dtype, sizes, strides, values and
// whether they require grad.
void showValue(const OpSample& sample, std::ostream& os);
void showValue(DType dtype, std::ostream& os);

// Samples for every row of ops.def flagged D (differentiable), keyed by op name. Values stay away from kinks,
// poles and ties, so finite differences are meaningful.
std::map<std::string, rc::Gen<OpSample>> differentiable_op_samples();

// Samples for the rows flagged N (comparisons, logical and bitwise ops, arg-reductions, creation, random,
// backward helpers), for the shape-inference property.
std::map<std::string, rc::Gen<OpSample>> non_differentiable_op_samples();

// A one-node graph calling `op` as `sample` does, floating tensors cast to `dt`: tensor arguments become graph
// inputs with the sample's strides (wrapped numbers constants), and those inputs. `number_in_slot`, when given,
// is asked for each tensor in a plain Tensor slot and may put a number there instead (`lerp(%x, %y, 0.3)`).
// Throws kiln::Error when shape inference refuses the call.
std::pair<graph::Graph, std::vector<Tensor>> one_node_graph(
    const OpInfo& op, const OpSample& sample, DType dt,
    const std::function<std::optional<Scalar>(const Tensor&)>& number_in_slot = {});

// Runs `property` with RapidCheck (`max_success` cases unless RC_PARAMS sets max_success); fails the current
// GoogleTest with RapidCheck's report (the minimal failing sample and how to reproduce it).
void check_property(const std::string& id, const std::function<void()>& property, int max_success = 25);

}  // namespace kiln
