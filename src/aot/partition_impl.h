// The partitioners' shared machinery (docs/partitioners.md): which joint values are forward, backward or
// neither, how the op table classes each op for recomputation, and how a chosen set of saved values becomes
// the forward and backward graphs. The two partitioners (partition_save_needed.cpp, partition_mincut.cpp)
// differ only in how they choose the saved values; partition_joint (partition.cpp) dispatches between them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "aot/partition.h"

namespace kiln::aot {

// Where a joint value lives (functorch's classify_nodes).
enum class JointRegion : uint8_t {
  Primal,     // a graph input before the tangents
  Tangent,    // a graph input from num_primals on
  Constant,   // a constant node: copied into whichever graph reads it, never saved
  Forward,    // needed by a forward output (depends only on primals and constants)
  Unclaimed,  // depends only on primals and constants, but only the backward reads it
  Backward,   // depends on a tangent (or is a gradient output that is not a forward value)
};
std::string_view joint_region_name(JointRegion r);

struct JointRegions {
  std::vector<JointRegion> of_value;  // by value id
  std::vector<int> def_order;         // by value id: inputs in order, then node values by node index
  bool forward_side(graph::ValueId id) const {
    JointRegion r = of_value[size_t(id)];
    return r == JointRegion::Primal || r == JointRegion::Forward || r == JointRegion::Unclaimed;
  }
};
// Checks the layout against the joint graph (kiln::Error naming what does not fit) and classifies its values.
JointRegions classify_joint(const graph::Graph& joint, const JointLayout& layout);

// How an op may be treated by the partitioners: the one classification, read from the op table's kind and
// family (ops.def) and graph::is_random_node.
enum class RecomputeClass : uint8_t {
  View,       // shares its input's storage: free to recompute, never banned
  Pointwise,  // elementwise (and dtype conversions): recomputable, fusible
  Reduction,  // sums, means, norms, softmax: recomputable, fusible (the 4x rule may ban one)
  Copy,       // data movement (cat, gather, index, pad, clone): recomputable, fusible
  Creation,   // full, zeros, arange: recomputable from nothing
  Random,     // draws from the global generator: never recomputed (the backward would draw different numbers)
  FunctionalRandom,  // philox_rand: a pure function of (seed, offset); recomputable, redraws the same numbers
  Extern,     // matrix products, convolutions, pooling, their backward helpers: never recomputed
  Mutation,   // in-place ops (absent after functionalization): never recomputed
};
RecomputeClass recompute_class(const graph::Node& n);
std::string_view recompute_class_name(RecomputeClass c);
// Recomputable at all (not Random, Extern or Mutation).
bool recomputable(RecomputeClass c);
// Whether a producer of class `a` fuses into consumer node `b` (functorch's is_fusible: both recomputable
// or random, or `b` is a cat, which can take its inputs by memory fusion).
bool fusible(RecomputeClass a, const graph::Node& b);

// Bytes of one value (its elements times the element size; views count in full, as in functorch).
int64_t value_bytes(const graph::Graph& g, graph::ValueId id);

// Why a value is saved or recomputed (one partitioner's reasons).
using DecisionReason = std::function<std::string(graph::ValueId)>;

// Which joint values the gradients need, stopping at the saved values (`is_saved`, by value id) and the
// tangents.
std::vector<char> needed_by_gradients(const graph::Graph& joint, const JointLayout& layout,
                                      const std::vector<char>& is_saved);
// The bytes a partition saving `saved` really saves: build_partition drops saved values the backward never
// reads, so only those the backward reads count.
int64_t bytes_the_backward_reads(const graph::Graph& joint, const JointLayout& layout,
                                 const std::vector<graph::ValueId>& saved);

// Builds the forward and backward graphs for `saved` (forward-side values; any order, duplicates ignored):
// the forward computes the forward outputs and the saved values, the backward recomputes from the saved
// values and tangents whatever else the gradients need. Records one decision per saved value
// (`saved_reason`) and per forward-side value the backward recomputes (`recompute_reason`), in definition
// order, and logs them. Throws an internal error when `saved` does not cut the backward off from the primals.
Partition build_partition(const graph::Graph& joint, const JointLayout& layout, const JointRegions& regions,
                          std::vector<graph::ValueId> saved, const DecisionReason& saved_reason,
                          const DecisionReason& recompute_reason, std::string_view partitioner,
                          bool wrong_recompute = false);

// The default partitioner: the forward computes what the forward outputs need; every such value (and every
// primal) that the backward reads is saved; everything else the backward needs is computed there.
Partition partition_save_needed(const graph::Graph& joint, const JointLayout& layout);
// The values partition_save_needed saves (in definition order), and why.
std::vector<graph::ValueId> save_needed_values(const graph::Graph& joint, const JointLayout& layout,
                                               const JointRegions& regions);

// Knobs of the min-cut partitioner, as in functorch's config; the defaults are PyTorch's.
struct MinCutOptions {
  // A forward node more than this many forward steps from its nearest backward use is never recomputed
  // (functorch's max_dist_from_bw; 1000 turns the rule off in practice, as in PyTorch today).
  int max_dist_from_bw = 1000;
  // A forward node whose output is over 4x smaller than its tensor inputs (a reduction) is never recomputed.
  bool ban_small_outputs = true;
  // A forward node some backward user cannot fuse with is never recomputed (its recomputation would not be
  // free: it would be materialised in the backward).
  bool ban_materialized_in_backward = true;
  // KILN_INJECT=partition:accuracy (the wrong partition of the tools' tests): the backward computes each floating
  // value it recomputes as value + 1 (each: a single wrong value can vanish from the gradients, as a log-softmax's
  // row max does by the softmax's shift invariance).
  bool wrong_recompute = false;
};
Partition partition_min_cut(const graph::Graph& joint, const JointLayout& layout, const MinCutOptions& options = {});

}  // namespace kiln::aot
