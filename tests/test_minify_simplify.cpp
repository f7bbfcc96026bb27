// The minifier's simplify move (minifier/simpler_op.h, issue 37): an op whose failure survives a simpler op of
// the same signature ends as that op (sigmoid -> neg, maximum -> mul, sub -> add, mean -> sum), so a repro names
// only what the bug needs; every value keeps its meta; a simplified candidate is never judged against the
// original's recorded values.
#include <gtest/gtest.h>

#include "graph/text.h"
#include "minifier/oracle.h"
#include "minifier/reducer.h"
#include "minifier/simpler_op.h"
#include "minifier/values.h"

namespace kiln {
namespace {

using minify::Candidate;
using minify::FnOracle;
using minify::ReduceOptions;
using minify::ReduceStats;
using minify::Verdict;
using minify::simpler_op;

const Verdict kFails{true, {FailureKind::RuntimeError, "the bug"}};
const Verdict kPasses{false, {FailureKind::None, ""}};

std::string simpler_name(std::string_view op) {
  const OpInfo* info = find_op(op);
  if (!info) return "(no op " + std::string(op) + ")";
  std::optional<OpId> to = simpler_op(info->id);
  return to ? std::string(op_info(*to).name) : "";
}

std::vector<std::string> op_names(const graph::Graph& g) {
  std::vector<std::string> ops;
  for (const graph::Node& n : g.nodes())
    if (n.kind == graph::NodeKind::Op) ops.push_back(std::string(n.info().name));
  return ops;
}

TEST(MinifySimplify, AnOpMapsToTheSimplestOpOfItsSignature) {
  EXPECT_EQ(simpler_name("sigmoid"), "neg");
  EXPECT_EQ(simpler_name("tanh"), "neg");
  EXPECT_EQ(simpler_name("exp"), "neg");
  EXPECT_EQ(simpler_name("maximum"), "mul");
  EXPECT_EQ(simpler_name("pow"), "mul");  // positional: pow's `exponent` is mul's `other`
  EXPECT_EQ(simpler_name("sub"), "add");
  EXPECT_EQ(simpler_name("mean"), "sum");
  // The targets stay; so do ops of another signature (div's rounding_mode), views and random ops.
  for (const char* op : {"neg", "add", "mul", "sum", "div", "transpose", "rand"}) EXPECT_EQ(simpler_name(op), "") << op;
  // Every mapping is to a target of the same kind, never from an in-place op, a view or a random op.
  for (const OpInfo& op : all_ops()) {
    std::optional<OpId> to = simpler_op(op.id);
    if (!to) continue;
    EXPECT_FALSE(op.is_inplace() || op.is_view() || op.family == "random") << op.name;
    EXPECT_EQ(op_info(*to).kind, op.kind) << op.name;
    EXPECT_FALSE(simpler_op(*to).has_value()) << op.name << " -> " << op_info(*to).name;
  }
}

TEST(MinifySimplify, AFailureThatNeedsTwoOpsEndsWithTheSimplestOnes) {
  // Fails while a relu reads a value an op computes: the maximum feeding it becomes a mul, the rest goes.
  graph::Graph g = graph::parse_graph(
      "graph g(%x: f32[4], %y: f32[4]) {\n  %a = sigmoid(%x) : f32[4]\n  %d = maximum(%a, %y) : f32[4]\n"
      "  %b = relu(%d) : f32[4]\n  %c = tanh(%b) : f32[4]\n  return %c\n}\n");
  FnOracle oracle([](const graph::Graph& c) {
    for (const graph::Node& n : c.nodes())
      if (n.kind == graph::NodeKind::Op && n.op == OpId::relu) {
        const int producer = c.value(graph::Graph::node_inputs(n)[0]).producer;
        if (producer >= 0 && c.nodes()[size_t(producer)].kind == graph::NodeKind::Op) return kFails;
      }
    return kPasses;
  });
  ReduceStats stats;
  Candidate out = minify::reduce({g, "original"}, oracle, ReduceOptions{}, stats);
  EXPECT_EQ(op_names(out.graph), (std::vector<std::string>{"mul", "relu"})) << graph::print_graph(out.graph);
  EXPECT_EQ(stats.accepted_moves["simplify"], 1);
  // Where the failure needs the op itself, it stays.
  FnOracle needs_maximum([](const graph::Graph& c) {
    for (const graph::Node& n : c.nodes())
      if (n.kind == graph::NodeKind::Op && n.op == OpId::maximum) return kFails;
    return kPasses;
  });
  ReduceStats stats2;
  out = minify::reduce({g, "original"}, needs_maximum, ReduceOptions{}, stats2);
  EXPECT_EQ(op_names(out.graph), (std::vector<std::string>{"maximum"}));
  EXPECT_EQ(stats2.accepted_moves.count("simplify"), 0u);
}

TEST(MinifySimplify, ASwapThatChangesAValuesDtypeIsNoCandidate) {
  // eq and mul share a signature, but eq's bool result would become f32: the swap would change a value's meta
  // (a checkpoint of it could not be resumed against the original), so apply_move refuses it.
  graph::Graph g = graph::parse_graph(
      "graph g(%x: f32[4], %y: f32[4]) {\n  %e = eq(%x, %y) : bool[4]\n  return %e\n}\n");
  if (!simpler_op(OpId::eq)) GTEST_SKIP() << "eq has no simpler op";
  minify::Move m;
  m.outputs = g.outputs();
  m.replace_op = {{0, *simpler_op(OpId::eq)}};
  EXPECT_THROW(minify::apply_move(g, m), Error);
}

TEST(MinifySimplify, ASimplifiedCandidateRunsItsOwnReference) {
  // The recorded values are the original's: a candidate that computes a value with another op must not be
  // judged against them (an accuracy target would then "fail" on every swap).
  graph::Graph g = graph::parse_graph(
      "graph g(%x: f32[4]) {\n  %a = sigmoid(%x) : f32[4]\n  %b = relu(%a) : f32[4]\n  return %b\n}\n");
  minify::ValueStore store(1 << 20);
  std::vector<Tensor> inputs;
  minify::InputSource src(g, inputs, store);
  minify::Move same;
  same.outputs = g.outputs();
  EXPECT_FALSE(src.recomputes_differently(minify::apply_move(g, same)));
  minify::Move swap = same;
  swap.replace_op = {{0, OpId::neg}};
  graph::Graph swapped = minify::apply_move(g, swap);
  EXPECT_EQ(op_names(swapped), (std::vector<std::string>{"neg", "relu"}));
  EXPECT_TRUE(src.recomputes_differently(swapped));
}

}  // namespace
}  // namespace kiln
