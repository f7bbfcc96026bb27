// The one graph generator of kiln's fuzzing (`kiln fuzz`, the RapidCheck properties in tests/, the
// structure-aware libFuzzer target). It is type-directed by the op table: for each node it picks an op row,
// fills every schema argument by its type (Tensor, Tensor[], int, int[], Scalar, float, bool, dtype, str) with
// hints taken from the argument's name (a `dim` is a dim of `self`, a `size` a shape, an `index` tensor an
// integer input), and keeps the call only when the op's own shape inference (ops/op_info.h `infer`) accepts it,
// so every graph is valid by construction and a new op row is fuzzed without new fuzzer code. Values stay in
// each op's domain through guard nodes (fuzz/domains.h). Shapes include size 0 and 1, sizes off the vector
// width, broadcasting and non-contiguous graph inputs; dtypes include f16, bf16, f64, integers and bool.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/choices.h"
#include "graph/graph.h"

namespace kiln::fuzz {

struct GenOptions {
  int max_nodes = 10;             // op nodes per graph, guards included (at least 1)
  std::vector<OpId> ops;          // the ops nodes are drawn from; empty: every row of the table
  bool domains = true;            // guard nodes keep arguments inside each op's domain (--allow-nan: false)
  int64_t max_numel = 1 << 14;    // no value larger than this many elements
  int attempts_per_node = 24;     // argument draws tried before giving up on a node's op
};

// One generated graph and its inputs. The generator runs every node on these inputs as it adds it, so the
// graph runs (not only verifies) on them; integer inputs that index hold valid indices.
struct FuzzCase {
  graph::Graph graph;
  std::vector<Tensor> inputs;  // one per graph input
  uint64_t input_seed = 0;     // what the inputs were made from (input i: input_value(meta, input_seed + id))
  // Calls shape inference accepted but the eager kernel refused (taken back): "op: message". Each is a gap
  // between an op's infer function and its kernel (a graph that verifies but cannot run).
  std::vector<std::string> refused;
};

// The values of a graph input: floating standard normal, bool fair coins, integers in [0, 10), or in
// [0, index_bound) when index_bound > 0; laid out with the meta's strides. A pure function of its arguments.
Tensor input_value(const TensorMeta& meta, uint64_t seed, int64_t index_bound = 0);

// Generates one graph from `choices`. Never throws for valid options; the graph passes verify_graph.
FuzzCase generate(Choices& choices, const GenOptions& opts = {});
// One node per entry of `node_seeds` (at most opts.max_nodes), each drawn from its own stream seeded by its
// entry, so dropping an entry drops that node and keeps the others' draws (fuzz/rapidcheck_gen.h).
FuzzCase generate_from_node_seeds(uint64_t graph_seed, const std::vector<uint64_t>& node_seeds,
                                  const GenOptions& opts = {});
// Graph `index` of the run seeded `seed`: a pure function of (seed, index, opts).
FuzzCase generate_indexed(uint64_t seed, uint64_t index, const GenOptions& opts = {});

// The ops `kiln fuzz --ops LIST` names (comma-separated op names); kiln::Error naming an unknown one, or for an
// empty list (which would otherwise read as "every op").
std::vector<OpId> parse_op_list(const std::string& list);

// What coverage counts a node as: its op and the dtype it computes in (its first tensor argument's dtype, or
// its first output's for ops without a tensor argument).
struct CoverageKey {
  OpId op;
  DType dtype;
  bool operator<(const CoverageKey& o) const { return op != o.op ? op < o.op : dtype < o.dtype; }
};
std::vector<CoverageKey> coverage_keys(const graph::Graph& g);

}  // namespace kiln::fuzz
