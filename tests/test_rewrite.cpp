// The graph rewrite helper (src/graph/rewrite.h): cloning through a value map keeps a graph as it is, a
// per-node callback replaces a node by new nodes, and the in-place form keeps value ids.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/rewrite.h"
#include "graph/text.h"
#include "minifier/testing.h"
#include "ops/api.h"

namespace kiln::graph {
namespace {

RC_GTEST_PROP(Rewrite, CloningWithoutACallbackKeepsTheGraph, ()) {
  const int nodes = *rc::gen::inRange(1, 60);
  minify::TestGraph t = minify::relu_test_graph(nodes, *rc::gen::arbitrary<uint32_t>(), 3, 5);
  Graph copy = clone_graph(t.graph);
  RC_ASSERT(print_graph(copy) == print_graph(t.graph));
  RC_ASSERT(copy.structural_hash() == t.graph.structural_hash());
}

TEST(Rewrite, ACallbackReplacesANodeByNewNodes) {
  Graph g = parse_graph("graph main(%x: f32[4]) {\n  %r = relu(%x)\n  %y = exp(%r)\n  return %y\n}\n");
  // relu(x) -> maximum(x, 0): the rewritten graph computes the same values.
  Graph out = clone_graph(g, [](const Node& n, GraphCloner& c) {
    if (n.kind != NodeKind::Op || n.op != OpId::relu) return false;
    const ValueId x = c[std::get<TensorArg>(n.args[0]).id];
    const ValueId zero = c.out().add_constant(c.out().fresh_name("zero"), Tensor::scalar(0.0, DType::F32));
    c.map(n.outputs[0], c.out().add_op1(OpId::maximum, {TensorArg{x}, TensorArg{zero}}, "r"));
    return true;
  });
  EXPECT_EQ(out.num_op_nodes(), 2);
  EXPECT_NE(print_graph(out).find("maximum"), std::string::npos) << print_graph(out);
  std::vector<Tensor> in = seeded_inputs(g, 3);
  CompareVerdict v = compare_outputs(run_graph(g, in), run_graph(out, in), run_graph(g, in), {});
  EXPECT_TRUE(v.ok) << v.str();
}

TEST(Rewrite, ClonesDropSourceLocationsWhenAsked) {
  Graph g = parse_graph("graph main(%x: f32[4]) {\n  %r = relu(%x)\n  return %r\n}\n", "g.kir");
  ASSERT_TRUE(g.nodes()[0].loc.known());
  EXPECT_TRUE(clone_graph(g).nodes()[0].loc.known());
  EXPECT_FALSE(clone_graph(g, {}, {.keep_locations = false, .infer_metas = false}).nodes()[0].loc.known());
}

TEST(Rewrite, ErasingNodesKeepsValueIds) {
  Graph g = parse_graph("graph main(%x: f32[4]) {\n  %a = exp(%x)\n  %b = relu(%x)\n  return %b\n}\n");
  const ValueId b = *g.find_value("b");
  erase_nodes(g, {true, false});
  EXPECT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.value(b).producer, 0);
  EXPECT_EQ(g.value(*g.find_value("a")).producer, -2);  // orphaned, id kept
  EXPECT_EQ(g.outputs(), std::vector<ValueId>{b});
}

}  // namespace
}  // namespace kiln::graph
