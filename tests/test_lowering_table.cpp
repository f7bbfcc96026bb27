// The inductor's lowering table (src/inductor/lowerings.def): every op of ops.def has a row, each row agrees
// with its op's kind and with what the compiler does with the op (the probe of inductor/lowering_probe.h), the
// conditional fallbacks a row names happen with their reasons, and `kiln ops` prints the table's column.
#include <gtest/gtest.h>

#include <regex>

#include "cli_run.h"
#include "graph/storage_model.h"
#include "graph/text.h"
#include "inductor/decompose.h"
#include "inductor/lowering.h"
#include "inductor/lowering_probe.h"
#include "inductor/lowering_table.h"

using namespace kiln;
using namespace kiln::cli_test;
using inductor::LoweringHow;

namespace {

// The lowering decisions of a graph written as .kir text (after decomposition).
std::vector<std::string> lowering_decisions(const std::string& kir) {
  graph::Graph g = graph::parse_graph(kir);
  const inductor::CompileContext none;  // no injection, the default target
  graph::Graph d = inductor::decompose_composites(g, none);
  return inductor::lower_graph(d, graph::StorageModel(d), none).decisions;
}

bool has_decision(const std::vector<std::string>& decisions, const std::string& text) {
  for (const std::string& d : decisions)
    if (d == text) return true;
  return false;
}

}  // namespace

TEST(LoweringTable, EveryOpHasARow) {
  std::string missing;
  for (const OpInfo& op : all_ops())
    if (!inductor::lowering_row(op.id)) missing += " " + std::string(op.name);
  EXPECT_EQ(missing, "") << "ops without a row in src/inductor/lowerings.def (add KILN_LOWERED, KILN_DECOMPOSED or "
                            "KILN_EXTERN with its reason)";
}

// Composite ops are decomposed and nothing else is; a pointwise lowering belongs to a pointwise op; an extern row
// says why; a lowered row names its rule.
TEST(LoweringTable, RowsAgreeWithTheOpKinds) {
  for (const OpInfo& op : all_ops()) {
    const inductor::LoweringRow* row = inductor::lowering_row(op.id);
    if (!row) continue;
    SCOPED_TRACE(std::string(op.name));
    EXPECT_EQ(op.kind == OpKind::Composite, row->how == LoweringHow::Decomposed);
    EXPECT_EQ(op.kind == OpKind::Pointwise, row->how == LoweringHow::Pointwise);
    if (op.kind == OpKind::Random || op.kind == OpKind::InPlace || op.kind == OpKind::Backward ||
        op.kind == OpKind::Extern)
      EXPECT_EQ(row->how, LoweringHow::Extern);
    if (row->how == LoweringHow::Extern) EXPECT_FALSE(row->text.empty());
    const int rules = (row->pointwise != nullptr) + (row->reduction != nullptr) + (row->view != nullptr) +
                      (row->creation != nullptr) + (row->data != nullptr);
    EXPECT_EQ(rules, row->lowered() ? 1 : 0);
  }
}

// What the compiler does with each op's probe call (a one-node graph) is what its row says: decomposed rows are
// decomposed, extern rows run extern with the row's reason, lowered rows are lowered (or fall back only where
// the row names when).
TEST(LoweringTable, RowsAgreeWithTheCompiler) {
  using K = inductor::OpLowering::Kind;
  int probed = 0;
  for (const OpInfo& op : all_ops()) {
    const inductor::LoweringRow* row = inductor::lowering_row(op.id);
    if (!row) continue;
    SCOPED_TRACE(std::string(op.name));
    inductor::OpLowering found = inductor::probe_lowering(op);
    if (found.kind == K::Unknown) {  // no probe call passes shape inference (the backward helpers)
      EXPECT_EQ(op.kind, OpKind::Backward) << found.reason;
      continue;
    }
    ++probed;
    switch (row->how) {
      case LoweringHow::Decomposed: EXPECT_EQ(found.kind, K::Decomposed) << found.str(); break;
      case LoweringHow::Extern:
        EXPECT_EQ(found.kind, K::Extern) << found.str();
        EXPECT_EQ(found.reason, row->text);
        break;
      default:
        if (found.kind == K::Extern) EXPECT_FALSE(row->text.empty()) << "falls back without the row saying when: " << found.str();
        else EXPECT_EQ(found.kind, K::Lowered) << found.str();
    }
  }
  EXPECT_GE(probed, 140);
}

// The fallbacks a lowered row names happen, each logged with its reason; the same ops lower otherwise.
TEST(LoweringTable, ConditionalFallbacksAreDecisionsWithTheirReasons) {
  std::vector<std::string> pow_number = lowering_decisions(
      "graph g(%x: f32[4]) {\n  %y = pow(%x, 2.0) : f32[4]\n  return %y\n}\n");
  EXPECT_TRUE(has_decision(pow_number, "extern %y = pow: pow with a number operand has eager special cases (exponent 0, "
                                       "1, 1/2, 2, ...) that are not lowered"));
  std::vector<std::string> pow_tensors = lowering_decisions(
      "graph g(%x: f32[4], %e: f32[4]) {\n  %y = pow(%x, %e) : f32[4]\n  return %y\n}\n");
  EXPECT_TRUE(has_decision(pow_tensors, "realize %y: graph output"));
  for (const std::string& d : pow_tensors) EXPECT_EQ(d.find("extern"), std::string::npos) << d;

  std::vector<std::string> argmax_empty = lowering_decisions(
      "graph g(%x: f32[0, 3]) {\n  %y = argmax(%x, 1) : i64[0]\n  return %y\n}\n");
  EXPECT_TRUE(has_decision(argmax_empty,
                           "extern %y = argmax: arg-reduction of an empty tensor (the eager kernel reports the error)"));
  std::vector<std::string> extern_row = lowering_decisions(
      "graph g(%x: f32[2, 3], %w: f32[3, 4]) {\n  %y = mm(%x, %w) : f32[2, 4]\n  return %y\n}\n");
  EXPECT_TRUE(has_decision(extern_row, "extern %y = mm: matrix product: runs BLAS (extern kernel)"));
}

// `kiln ops` prints the table's column: the lowered op with a conditional fallback says when it falls back.
TEST(LoweringTable, KilnOpsPrintsTheTablesColumn) {
  CliResult r = shell("kiln ops");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("\npow +pointwise [^\n]* lowered +[^\n]*\n"))) << r.output;
  EXPECT_NE(m.str().find("[extern for a number operand"), std::string::npos) << m.str();
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("\nlinspace +creation [^\n]* extern +[^\n]*\n"))) << r.output;
  EXPECT_NE(m.str().find("[no creation lowering for linspace]"), std::string::npos) << m.str();
  EXPECT_NE(r.output.find(", 0 unknown"), std::string::npos) << r.output;
}
