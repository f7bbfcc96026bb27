// The minifier's shrink and dtype moves (minifier/reducer.h, issue 37): a minimal repro is small in its sizes and
// types too. Every candidate the reducer makes verifies (a property over the fuzzer's generated graphs); a
// failure that needs a large size keeps it; f64 inputs become f32 only where the failure stays; a real minify
// ends in a smaller repro that `kiln repro run` reproduces, and --keep-shapes keeps the original's sizes.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <filesystem>

#include "cli_run.h"
#include "fuzz/rapidcheck_gen.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "minifier/inject_backend.h"
#include "minifier/minifier.h"
#include "minifier/reducer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using minify::Candidate;
using minify::FnOracle;
using minify::ReduceOptions;
using minify::ReduceStats;
using minify::Verdict;

const Verdict kFails{true, {FailureKind::RuntimeError, "the bug"}};
const Verdict kPasses{false, {FailureKind::None, ""}};

bool has_op(const graph::Graph& g, OpId op) {
  for (const graph::Node& n : g.nodes())
    if (n.kind == graph::NodeKind::Op && n.op == op) return true;
  return false;
}

const TensorMeta& input_meta(const graph::Graph& g, const std::string& name) {
  return g.value(*g.find_value(name)).meta;
}

// Every candidate any move makes is a valid graph, and the reduction keeps the failing op and ends smaller by
// the measure, for the fuzzer's graphs (every op family, broadcasts, views, reductions, several dtypes).
RC_GTEST_PROP(MinifyShapesProps, EveryCandidateVerifiesAndTheResultStillFails, ()) {
  fuzz::GenOptions gen;
  gen.max_nodes = 12;
  const fuzz::FuzzCase fc = *fuzz::fuzz_case_gen(gen);
  std::optional<OpId> bug;  // the "bug": the last op node's op
  for (const graph::Node& n : fc.graph.nodes())
    if (n.kind == graph::NodeKind::Op) bug = n.op;
  RC_PRE(bug.has_value());
  int candidates = 0;
  std::string invalid;
  FnOracle oracle([&](const graph::Graph& g) {
    ++candidates;
    try {
      graph::verify_graph(g);
    } catch (const Error& e) {
      if (invalid.empty()) invalid = std::string(e.what()) + "\n" + graph::print_graph(g);
    }
    return has_op(g, *bug) ? kFails : kPasses;
  });
  ReduceStats stats;
  Candidate out = minify::reduce({fc.graph, "original"}, oracle, ReduceOptions{}, stats);
  RC_ASSERT(invalid.empty());
  RC_ASSERT(candidates > 0);
  RC_ASSERT(has_op(out.graph, *bug));
  RC_ASSERT(minify::measure(out.graph) <= minify::measure(fc.graph));
}

TEST(MinifyShapes, AFailureThatNeedsALargeSizeKeepsIt) {
  // Fails while %x has at least 16 rows: 64 -> 1 and 32 -> 1 are not taken, 64 -> 32 and 32 -> 16 are, 16 -> 8
  // is not; the 8 columns go to 1 at once.
  graph::Graph g = graph::parse_graph(
      "graph g(%x: f32[64, 8]) {\n  %y = relu(%x) : f32[64, 8]\n  return %y\n}\n");
  FnOracle oracle([](const graph::Graph& c) {
    return has_op(c, OpId::relu) && c.find_value("x") && input_meta(c, "x").sizes[0] >= 16 ? kFails : kPasses;
  });
  ReduceStats stats;
  Candidate out = minify::reduce({g, "original"}, oracle, ReduceOptions{}, stats);
  EXPECT_EQ(input_meta(out.graph, "x").sizes, (std::vector<int64_t>{16, 1})) << graph::print_graph(out.graph);
  EXPECT_EQ(stats.accepted_moves["shrink"], 3);  // 64->32, 32->16, 8->1
  // The output's meta followed the input's.
  EXPECT_EQ(out.graph.value(out.graph.outputs()[0]).meta.sizes, (std::vector<int64_t>{16, 1}));
}

TEST(MinifyShapes, F64InputsBecomeF32OnlyWhereTheFailureStays) {
  graph::Graph g = graph::parse_graph(
      "graph g(%a: f64[4], %b: f64[4]) {\n  %y = add(%a, %b) : f64[4]\n  return %y\n}\n");
  ReduceOptions defaults;
  {
    FnOracle always([](const graph::Graph& c) { return has_op(c, OpId::add) ? kFails : kPasses; });
    ReduceStats stats;
    Candidate out = minify::reduce({g, "original"}, always, defaults, stats);
    EXPECT_EQ(input_meta(out.graph, "a").dtype, DType::F32) << graph::print_graph(out.graph);
    EXPECT_EQ(input_meta(out.graph, "b").dtype, DType::F32);
    EXPECT_EQ(out.graph.value(out.graph.outputs()[0]).meta.dtype, DType::F32);  // re-inferred
  }
  {
    // The bug needs %b in f64: %a alone becomes f32.
    FnOracle needs_f64_b([](const graph::Graph& c) {
      auto b = c.find_value("b");
      return has_op(c, OpId::add) && b && c.value(*b).meta.dtype == DType::F64 ? kFails : kPasses;
    });
    ReduceStats stats;
    Candidate out = minify::reduce({g, "original"}, needs_f64_b, defaults, stats);
    EXPECT_EQ(input_meta(out.graph, "a").dtype, DType::F32) << graph::print_graph(out.graph);
    EXPECT_EQ(input_meta(out.graph, "b").dtype, DType::F64);
  }
  {
    ReduceOptions off;
    off.shape_moves = false;
    FnOracle always([](const graph::Graph& c) { return has_op(c, OpId::add) ? kFails : kPasses; });
    ReduceStats stats;
    Candidate out = minify::reduce({g, "original"}, always, off, stats);
    EXPECT_EQ(input_meta(out.graph, "a").dtype, DType::F64);
    EXPECT_EQ(input_meta(out.graph, "a").sizes, (std::vector<int64_t>{4}));
  }
}

TEST(MinifyShapes, AViewWithFixedSizesIsNoCandidateForAShrink) {
  // reshape names 4x8: a shrunk %x cannot take it, so every shrink candidate is dropped before the oracle.
  graph::Graph g = graph::parse_graph(
      "graph g(%x: f32[32]) {\n  %r = reshape(%x, [4, 8]) : f32[4, 8]\n  %y = relu(%r) : f32[4, 8]\n  return %y\n}\n");
  int asked_with_a_shrunk_x = 0;
  FnOracle oracle([&](const graph::Graph& c) {
    auto x = c.find_value("x");
    if (x && c.value(*x).meta.sizes != std::vector<int64_t>{32}) ++asked_with_a_shrunk_x;
    return has_op(c, OpId::relu) ? kFails : kPasses;
  });
  ReduceStats stats;
  minify::reduce({g, "original"}, oracle, ReduceOptions{}, stats);
  EXPECT_EQ(asked_with_a_shrunk_x, 0);
}

class MinifyShapesCli : public cli_test::CliTest {};

TEST_F(MinifyShapesCli, AMinifiedReproIsSmallInItsSizesAndReproduces) {
  const std::string g = file("g.kir", "graph g(%x: f32[16, 8], %y: f32[16, 8]) {\n  %a = add(%x, %y) : f32[16, 8]\n"
                                      "  %t = tanh(%a) : f32[16, 8]\n  %e = exp(%t) : f32[16, 8]\n  return %e\n}\n");
  const std::string out = path("t.repro");
  cli_test::CliResult r = cli_test::kiln_cli("minify -q --backend inject_test " + g + " -o " + out,
                                             "KILN_INJECT=tanh:accuracy");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("moves: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("shrink "), std::string::npos) << r.output;
  ReproFile repro = load_repro(out);
  ASSERT_EQ(repro.graph.num_op_nodes(), 1) << graph::print_graph(repro.graph);
  const graph::Graph& m = repro.graph;
  int64_t elements = 0;
  for (graph::ValueId id : m.inputs()) elements += shape_numel(m.value(id).meta.sizes);
  EXPECT_LT(elements, 16 * 8) << graph::print_graph(m);
  // The written repro reproduces from its (shrunk) input files, in a clean process.
  cli_test::CliResult again = cli_test::kiln_cli("repro run " + out);
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("REPRODUCES"), std::string::npos) << again.output;
  // --keep-shapes: the original's sizes.
  cli_test::CliResult kept = cli_test::kiln_cli("minify -q --keep-shapes --backend inject_test " + g + " -o " +
                                                path("k.repro"), "KILN_INJECT=tanh:accuracy");
  ASSERT_EQ(kept.exit_code, 0) << kept.output;
  EXPECT_EQ(kept.output.find("shrink "), std::string::npos) << kept.output;
  ReproFile k = load_repro(path("k.repro"));
  for (graph::ValueId id : k.graph.inputs())
    EXPECT_EQ(k.graph.value(id).meta.sizes, (std::vector<int64_t>{16, 8})) << graph::print_graph(k.graph);
}

}  // namespace
}  // namespace kiln
