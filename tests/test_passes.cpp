// FileCheck-style before/after tests of the graph passes (src/graph/passes.h): parse a small .kir graph, run
// one pass, verify, and compare the printed result with the expected text. Also the pass manager (verifier
// between passes, debug dumps, the bisection hook), and a property: the cleanup pipeline never changes what
// a graph computes.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/bisect.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/interpreter.h"
#include "graph/passes.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "ops/api.h"

using namespace kiln;
using namespace kiln::graph;

namespace {

// Parses `before`, runs `pass`, checks that it reports `changed`, verifies the result and returns it printed.
std::string after_pass(std::string_view before, bool (*pass)(Graph&), bool changed = true) {
  Graph g = parse_graph(before, "before.kir");
  EXPECT_EQ(pass(g), changed);
  verify_graph(g, "after.kir");
  return print_graph(g);
}

TensorMeta f32_vector_meta(int64_t n) {
  TensorMeta m;
  m.sizes = {n};
  return m;
}

bool fold(Graph& g) { return fold_constants(g); }

std::filesystem::path temp_dir(const std::string& name) {
  std::filesystem::path p = std::filesystem::temp_directory_path() / ("kiln_test_passes_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

}  // namespace

// ---------------------------------------------------------------- dead-code elimination

TEST(PassDce, RemovesUnusedNodesTransitively) {
  EXPECT_EQ(after_pass(R"(graph g(%x: f32[3]) {
  %a = exp(%x) : f32[3]
  %b = neg(%a) : f32[3]
  %c = relu(%x) : f32[3]
  return %c
})", eliminate_dead_code),
            R"(graph g(%x: f32[3]) {
  %c = relu(%x) : f32[3]
  return %c
}
)");
}

TEST(PassDce, KeepsInPlaceNodesAndUnchangedGraphsReportNoChange) {
  const char* g = R"(graph g(%x: f32[3]) {
  %c = clone(%x) : f32[3]
  %d = add_(%c, 1.0) : f32[3]
  return %c
}
)";
  EXPECT_EQ(after_pass(g, eliminate_dead_code, false), g);
}

TEST(PassDce, RemovesUnusedRandomNodesOnlyWhenNoRandomNodeFollows) {
  // %r1 is unused but %r2 draws after it: removing %r1 would change %r2's numbers. %r3 is unused and last.
  EXPECT_EQ(after_pass(R"(graph g(%x: f32[3]) {
  %r1 = rand_like(%x) : f32[3]
  %r2 = rand_like(%x) : f32[3]
  %r3 = randn([3]) : f32[3]
  return %r2
})", eliminate_dead_code),
            R"(graph g(%x: f32[3]) {
  %r1 = rand_like(%x) : f32[3]
  %r2 = rand_like(%x) : f32[3]
  return %r2
}
)");
}

// ---------------------------------------------------------------- common-subexpression elimination

TEST(PassCse, MergesIdenticalNodesAndEqualConstants) {
  EXPECT_EQ(after_pass(R"(graph g(%x: f32[3]) {
  %c1 = constant f32[] 2.0
  %c2 = constant f32[] 2.0
  %a = mul(%x, %c1) : f32[3]
  %b = mul(%x, %c2) : f32[3]
  %e1 = exp(%a) : f32[3]
  %e2 = exp(%b) : f32[3]
  %s = add(%e1, %e2) : f32[3]
  return %s, %e2
})", eliminate_common_subexpressions),
            R"(graph g(%x: f32[3]) {
  %c1 = constant f32[] 2.0
  %a = mul(%x, %c1) : f32[3]
  %e1 = exp(%a) : f32[3]
  %s = add(%e1, %e1) : f32[3]
  return %s, %e1
}
)");
}

TEST(PassCse, DistinguishesArgumentsThatDiffer) {
  const char* g = R"(graph g(%x: f32[3]) {
  %a = add(%x, 2) : f32[3]
  %b = add(%x, 2.0) : f32[3]
  %c = add(%x, 2, alpha=3) : f32[3]
  %d = sum(%x, [0]) : f32[]
  %e = sum(%x, [0], True) : f32[1]
  return %a, %b, %c, %d, %e
}
)";
  EXPECT_EQ(after_pass(g, eliminate_common_subexpressions, false), g);
}

TEST(PassCse, NeverMergesRandomNodesOrAcrossInPlaceNodes) {
  const char* g = R"(graph g(%x: f32[3]) {
  %r1 = rand_like(%x) : f32[3]
  %r2 = rand_like(%x) : f32[3]
  %c = clone(%x) : f32[3]
  %e1 = exp(%c) : f32[3]
  %m = mul_(%c, 2) : f32[3]
  %e2 = exp(%c) : f32[3]
  return %r1, %r2, %e1, %e2
}
)";
  EXPECT_EQ(after_pass(g, eliminate_common_subexpressions, false), g);
}

// ---------------------------------------------------------------- constant folding

TEST(PassConstantFolding, FoldsChainsOfConstantNodes) {
  EXPECT_EQ(after_pass(R"(graph g(%x: f32[3]) {
  %a = constant f32[3] [1.0, 2.0, 3.0]
  %b = mul(%a, 2) : f32[3]
  %z = zeros([3]) : f32[3]
  %c = add(%b, %z) : f32[3]
  %y = add(%x, %c) : f32[3]
  return %y
})", fold),
            R"(graph g(%x: f32[3]) {
  %a = constant f32[3] [1.0, 2.0, 3.0]
  %b = constant f32[3] [2.0, 4.0, 6.0]
  %z = constant f32[3] [0.0, 0.0, 0.0]
  %c = constant f32[3] [2.0, 4.0, 6.0]
  %y = add(%x, %c) : f32[3]
  return %y
}
)");
}

TEST(PassConstantFolding, SkipsRandomInPlaceViewsLargeResultsAndFailingKernels) {
  const char* g = R"(graph g(%x: f32[3]) {
  %a = constant f32[2, 2] [1.0, 2.0, 3.0, 4.0]
  %r = rand([3]) : f32[3]
  %t = transpose(%a, 0, 1) : f32[2, 2]{1, 2}
  %big = zeros([4097]) : f32[4097]
  %c = clone(%a) : f32[2, 2]
  %m = mul_(%c, 2) : f32[2, 2]
  %idx = constant i64[1] [5]
  %bad = index_select(%a, 0, %idx) : f32[1, 2]
  return %r, %t, %big, %m, %bad
}
)";
  EXPECT_EQ(after_pass(g, fold, false), g);
  // The limit is a parameter: with a larger one, %big folds.
  Graph big = parse_graph(g);
  EXPECT_TRUE(fold_constants(big, 5000));
  EXPECT_EQ(big.nodes()[3].kind, NodeKind::Constant);
}

// ---------------------------------------------------------------- the pass manager

TEST(PassManager, RunsTheCleanupPipelineAndDumpsEachPass) {
  std::filesystem::path dir = temp_dir("dump");
  ScopedOption debug_dir(Opt::DebugDir, dir.string());
  ScopedOption verify(Opt::Verify, "1");
  Graph g = parse_graph(R"(graph g(%x: f32[3]) {
  %two = constant f32[] 2.0
  %four = mul(%two, %two) : f32[]
  %a = mul(%x, %four) : f32[3]
  %b = mul(%x, %four) : f32[3]
  %unused = exp(%a) : f32[3]
  %s = add(%a, %b) : f32[3]
  return %s
})");
  EXPECT_TRUE(run_pipeline(g, cleanup_pipeline(), "cleanup"));
  EXPECT_EQ(print_graph(g), R"(graph g(%x: f32[3]) {
  %four = constant f32[] 4.0
  %a = mul(%x, %four) : f32[3]
  %s = add(%a, %a) : f32[3]
  return %s
}
)");
  for (const char* f : {"00_input.kir", "01_constant_folding.kir", "02_cse.kir", "03_dce.kir"})
    EXPECT_TRUE(std::filesystem::exists(dir / "cleanup" / "000_g" / f)) << f;
  EXPECT_EQ(print_graph(load_graph((dir / "cleanup" / "000_g" / "03_dce.kir").string())), print_graph(g));
  std::filesystem::remove_all(dir);
}

TEST(PassManager, VerifierNamesThePassThatBrokeTheGraph) {
  ScopedOption verify(Opt::Verify, "1");
  Graph g = parse_graph("graph g(%x: f32[3]) {\n  %a = exp(%x) : f32[3]\n  return %a\n}\n");
  Pass breaks{"breaks_metas", [](Graph& gr) {
                gr.value(*gr.find_value("a")).meta.sizes = {4};
                return true;
              }};
  try {
    run_pipeline(g, {dce_pass(), breaks}, "test");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass breaks_metas (stage test) produced an invalid graph"), std::string::npos)
        << e.what();
  }
  ScopedOption no_verify(Opt::Verify, "0");
  Graph g2 = parse_graph("graph g(%x: f32[3]) {\n  %a = exp(%x) : f32[3]\n  return %a\n}\n");
  EXPECT_TRUE(run_pipeline(g2, {breaks}, "test"));  // unchecked when KILN_VERIFY is off
}

TEST(PassManager, BisectionHookSkipsPassApplications) {
  const char* text = R"(graph g(%x: f32[3]) {
  %a = exp(%x) : f32[3]
  %b = exp(%x) : f32[3]
  %s = add(%a, %b) : f32[3]
  return %s
})";
  reset_bisect_counts();
  {
    ScopedOption limit(Opt::BisectLimit, "passes:cse=1");  // every pipeline's passes ask under stage `passes`
    Graph first = parse_graph(text), second = parse_graph(text);
    EXPECT_TRUE(run_pipeline(first, {cse_pass()}, "opt"));    // application #0 runs
    EXPECT_FALSE(run_pipeline(second, {cse_pass()}, "opt"));  // application #1 is over the limit
    EXPECT_EQ(second.num_op_nodes(), 3);
  }
  {
    ScopedOption disable(Opt::BisectDisable, "passes");
    Graph g = parse_graph(text);
    EXPECT_FALSE(run_pipeline(g, {cse_pass(), dce_pass()}, "opt"));
  }
  auto counts = bisect_counts();
  EXPECT_EQ((counts[{"passes", "cse"}]), 3);
  EXPECT_EQ((counts[{"passes", "dce"}]), 1);
  EXPECT_THROW(ScopedOption bad(Opt::BisectLimit, "passes:cse=many"), Error);  // rejected when set (options.h)
}

TEST(Bisect, StageLimitsCountAcrossSubsystems) {
  reset_bisect_counts();
  ScopedOption limit(Opt::BisectLimit, "lower=2");
  EXPECT_TRUE(should_run("lower", "a", nullptr));
  EXPECT_TRUE(should_run("lower", "b", nullptr));
  EXPECT_FALSE(should_run("lower", "a", nullptr));
  EXPECT_TRUE(should_run("fuse", "a", nullptr));
  reset_bisect_counts();
  EXPECT_TRUE(should_run("lower", "a", nullptr));
}

// ---------------------------------------------------------------- property: passes keep results

// Random graphs over a few pointwise ops with deliberately repeated subexpressions, constants and dead
// nodes: the cleanup pipeline must leave every output bit-identical (folding runs the same kernels).
RC_GTEST_PROP(PassProperties, CleanupPipelineKeepsResults, ()) {
  Graph g;
  ValueId x = g.add_input("x", f32_vector_meta(4));
  std::vector<ValueId> pool = {x, g.add_constant("k", Tensor::from_vector<float>({0.5f, -1, 2, 3}, {4}))};
  int n = *rc::gen::inRange(1, 12);
  for (int i = 0; i < n; ++i) {
    ValueId a = pool[size_t(*rc::gen::inRange<size_t>(0, pool.size()))];
    ValueId b = pool[size_t(*rc::gen::inRange<size_t>(0, pool.size()))];
    switch (*rc::gen::inRange(0, 4)) {
      case 0: pool.push_back(g.add_op1(OpId::add, {TensorArg{a}, TensorArg{b}, Scalar(int64_t(1))})); break;
      case 1: pool.push_back(g.add_op1(OpId::mul, {TensorArg{a}, TensorArg{b}})); break;
      case 2: pool.push_back(g.add_op1(OpId::tanh, {TensorArg{a}})); break;
      default: pool.push_back(g.add_op1(OpId::sub, {TensorArg{a}, Scalar(1.5), Scalar(int64_t(1))})); break;
    }
  }
  g.set_outputs({pool.back(), pool[size_t(*rc::gen::inRange<size_t>(0, pool.size()))]});
  Tensor in = Tensor::from_vector<float>({0.1f, -0.7f, 1.3f, 2.0f}, {4});
  std::vector<Tensor> before = run_graph(g, {in});
  ScopedOption verify(Opt::Verify, "1");
  run_pipeline(g, cleanup_pipeline(), "property");
  std::vector<Tensor> after = run_graph(g, {in});
  RC_ASSERT(before.size() == after.size());
  for (size_t i = 0; i < before.size(); ++i) RC_ASSERT(before[i].to_double_vector() == after[i].to_double_vector());
}
