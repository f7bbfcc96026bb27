// Node expansion into decompositions (expand.h).
#include "aot/expand.h"

#include "graph/interpreter.h"
#include "graph/meta_trace.h"
#include "graph/rewrite.h"
#include "ops/api.h"

namespace kiln::aot {

using graph::Graph;
using graph::Node;
using graph::ValueId;

namespace {

// Records `n`'s decomposition into the cloner's graph and maps n's outputs to its results.
void record_decomposition(const Graph& g, const Node& n, graph::GraphCloner& c) {
  const OpInfo& op = n.info();
  graph::MetaGraphRecorder rec(c.out(), g.value(n.outputs.at(0)).name);
  OpCall call = bind_args(op, graph::node_ivalues(n, [&](ValueId id) { return rec.bind(c[id]); }));
  std::vector<Tensor> results;
  {
    ScopedMetaCallRecorder on(&rec);
    results = op.decomp(call);
    for (size_t i = 0; i < results.size(); ++i)  // the op's own inference is the contract (as in the inductor)
      if (results[i].dtype() != g.value(n.outputs[i]).meta.dtype) results[i] = to(results[i], g.value(n.outputs[i]).meta.dtype);
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) c.map(n.outputs[i], rec.id_of(results.at(i)));
}

}  // namespace

Graph expand_nodes(const Graph& g, const NodePicker& picker, const char* why) {
  Graph cur = g;
  for (int round = 0; round < 16; ++round) {
    bool changed = false;
    const NodePick pick = picker(cur);
    Graph next = graph::clone_graph(cur, [&](const Node& n, graph::GraphCloner& c) {
      if (n.kind != graph::NodeKind::Op || !pick(n)) return false;
      KILN_CHECK(n.info().decomp, "aot: {}: {}, but the op has no decomposition", graph::node_label(cur, n), why);
      record_decomposition(cur, n, c);
      changed = true;
      return true;
    });
    cur = std::move(next);
    if (!changed) return cur;
  }
  fail("aot: expanding decompositions in {} did not terminate", g.name);
}

}  // namespace kiln::aot
