// The generic reducer (issue 5): shrinks a failing graph with a pluggable oracle until no move makes it
// smaller. Moves (PyTorch fx_minifier's strategies plus XLA hlo_bisect's constant substitution):
//   truncate   make node k's outputs the only outputs (k at odd multiples of the granularity G, shortest first)
//   window     turn the op nodes of a window of G nodes into graph inputs carrying their recorded values
//   outputs    remove a run of outputs
//   dce        drop dead nodes and unused inputs
//   constant   replace a small input (at most kConstantLimit elements) by a constant holding its value
//   shrink     smaller sizes: every input dimension made 1, then for each size S (largest first) every input
//              dimension of size S made 1, then ceil(S/2); the graph's metas re-inferred (C-Reduce's and
//              mlir-reduce's lesson: a small repro is small in its shapes too); a graph whose ops do not take
//              the new size (a view with fixed sizes, a constant of the old one) is no candidate
//   dtype      floating inputs that are not f32 (f64, f16, bf16) made f32, all at once, then each
//   simplify   op nodes given a simpler op of the same signature (simpler_op.h: sigmoid -> neg, div -> mul,
//              sub -> add, mean -> sum), all at once, then each
// Every candidate is normalised (dead nodes and unused inputs dropped) and is tried only when it is smaller
// by the measure (op nodes, outputs, inputs, constant elements, input elements, floating inputs not f32, op
// nodes with a simpler op),
// compared lexicographically, which every accepted move strictly decreases, so the reduction ends. The driver
// starts at G = 2^floor(log2(op nodes)) with every move, halves G (truncate, window, outputs) until one
// succeeds, and restarts at the top after each success; at G = 1 it also tries removing single outputs,
// constant substitution, then (unless ReduceOptions::shape_moves is off) shrink and dtype, then simplify, then
// stops: the
// result is 1-minimal with respect to these moves. A failure that needs a large size keeps it: a shrink is
// accepted only when the candidate still fails the same way. Every accepted candidate is re-verified (Oracle::confirm) before
// it replaces the current graph. Verdicts are cached by structural hash plus the names of the inputs (which
// say what values they carry), so a candidate reached twice costs one oracle call.
//
// Values keep the names they have in the original graph through every move, so an input of any candidate
// names the original value it carries.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "graph/graph.h"
#include "repro/repro.h"

namespace kiln::minify {

inline constexpr int64_t kConstantLimit = 64;  // the .kir printer's inline limit: constants stay readable

struct Candidate {
  graph::Graph graph;
  std::string move;  // what made it, e.g. "window G=64 at 128"
};

struct Verdict {
  bool fails = false;          // shows the target failure (Oracle's definition of "the same failure")
  FailureSignature observed;   // what happened (kind "invalid" when the candidate itself is not valid)
};

// What the reducer asks. Implementations: ForkOracle (oracle.h: each candidate in a forked child, on a
// backend) and FnOracle (an in-process predicate, for tests and library users).
class Oracle {
 public:
  virtual ~Oracle() = default;
  virtual Verdict test(const Candidate& c) = 0;
  // Verdicts for a batch, in order. The default runs them one by one and stops after the first failing one
  // (later entries stay empty); ForkOracle runs up to -j of them at once.
  virtual std::vector<std::optional<Verdict>> test_batch(const std::vector<const Candidate*>& batch);
  // Re-verification of a candidate about to be accepted, without shortcuts. Defaults to test().
  virtual Verdict confirm(const Candidate& c) { return test(c); }
  // How many candidates the reducer should hand to test_batch at once.
  virtual int parallelism() const { return 1; }
};

class FnOracle : public Oracle {
 public:
  explicit FnOracle(std::function<Verdict(const graph::Graph&)> fn) : fn_(std::move(fn)) {}
  Verdict test(const Candidate& c) override { return fn_(c.graph); }

 private:
  std::function<Verdict(const graph::Graph&)> fn_;
};

struct ReduceStats {
  int oracle_calls = 0;   // candidates evaluated (tests and confirmations)
  int cache_hits = 0;     // candidates answered from the verdict cache
  int accepted = 0;       // accepted steps
  int rejected_on_confirm = 0;  // candidates the quick test accepted but re-verification did not
  std::map<FailureKind, int> observed;  // verdict kinds seen (e.g. crash: 12), for the summary
  std::map<std::string, int> accepted_moves;  // accepted steps by move (window: 3, shrink: 8), for the summary
  int start_ops = 0, ops = 0;
  double seconds = 0;     // elapsed, including time before a resume
  std::string strategy;   // the move being tried
  int granularity = 0;
};

struct ReduceOptions {
  // The value a constant substitution gives input `id` of `g`, or nothing to leave that input alone.
  std::function<std::optional<Tensor>(const graph::Graph& g, graph::ValueId id)> constant_value;
  std::function<void(const Candidate&, const ReduceStats&)> on_accept;  // checkpoint hook
  std::function<void(const ReduceStats&)> on_progress;                  // after every oracle call
  int max_steps = -1;  // stop after this many accepted steps (an "interruption", for tests); -1 = none
  bool shape_moves = true;  // the shrink and dtype moves (off: the result keeps the original's sizes and dtypes)
};

// A candidate's identity for verdict caches: its structure plus the names of its inputs (which say what
// values they carry).
uint64_t candidate_key(const graph::Graph& g);

// The measure every accepted move decreases: (op nodes, outputs, inputs, constant elements, input elements,
// floating inputs that are not f32, op nodes that have a simpler op).
using Measure = std::tuple<int, int, int, int64_t, int64_t, int, int>;
Measure measure(const graph::Graph& g);

// A move on `cur`: op nodes to turn into inputs, the outputs to keep, inputs to turn into constants. The
// result drops dead nodes (keeping in-place nodes whose mutated value is read later, and random nodes
// followed by a live random node, whose removal would shift later draws) and unused inputs; inputs made from
// nodes get contiguous strides (their recorded values are contiguous) and, where that changes a stride,
// downstream metas are re-inferred.
struct Move {
  std::vector<char> to_input;              // by node index of cur (empty = none)
  std::vector<graph::ValueId> outputs;     // ids of cur
  std::vector<graph::ValueId> to_constant; // inputs of cur
  std::vector<Tensor> constants;           // their values
  // Inputs of cur given another meta (shrink, dtype: contiguous strides); every op's meta is then re-inferred,
  // and apply_move throws kiln::Error when an op does not take the new one.
  std::vector<std::pair<graph::ValueId, TensorMeta>> retype;
  // Op nodes of cur (by node index) given a simpler op of the same signature (simpler_op.h); metas are then
  // re-inferred, and apply_move throws kiln::Error when the new op does not take the node's inputs.
  std::vector<std::pair<size_t, OpId>> replace_op;
  std::string what;
};
graph::Graph apply_move(const graph::Graph& cur, const Move& m);

// Reduces `start`, which must fail (the caller checked it). Returns the smallest failing candidate.
Candidate reduce(Candidate start, Oracle& oracle, const ReduceOptions& opts, ReduceStats& stats);

}  // namespace kiln::minify
