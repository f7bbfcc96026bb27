// The schedule passes' refusals reach the decision log with their reasons (each an inductor::Decision, not an
// out-parameter string), and the lowering probe's one-node graph comes with its Decision.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/passes.h"
#include "graph/storage_model.h"
#include "graph/text.h"
#include "backends/cpu/backend.h"
#include "inductor/code_generator.h"
#include "inductor/decompose.h"
#include "inductor/lowering.h"
#include "inductor/lowering_probe.h"
#include "inductor/schedule_passes.h"
#include "ops/op_info.h"

namespace kiln::inductor {
namespace {

// The decisions fuse and localise record for a graph written as .kir text.
std::vector<std::string> schedule_decisions(const std::string& text, CompileContext ctx) {
  ctx.target = kiln::cpu::host_code_generator().target();
  std::vector<bool> unrounded;
  graph::Graph g = decompose_composites(graph::parse_graph(text, "d.kir"), ctx, &unrounded);
  graph::run_pipeline(g, graph::cleanup_pipeline(), "inductor");
  LoweredGraph lowered = lower_graph(g, graph::StorageModel(g), ctx, unrounded);
  Schedule s = fuse(lowered, ctx);
  localise(s, lowered, ctx);
  return ctx.decisions.all();
}

std::string decision_containing(const std::vector<std::string>& decisions, const std::string& text) {
  for (const std::string& d : decisions)
    if (d.find(text) != std::string::npos) return d;
  return "";
}

std::string all(const std::vector<std::string>& decisions) {
  std::string s;
  for (const std::string& d : decisions) s += d + "\n";
  return s;
}

// A column sum of a row-wise op's result (an output too, so realised): its kept dims [8] are not the first
// kernel's outer loop [4].
const char* kColumnSum =
    "graph c(%x: f32[4, 8]) {\n  %r = relu(%x) : f32[4, 8]\n  %s = sum(%r, [0]) : f32[8]\n  return %r, %s\n}\n";

TEST(ScheduleDecisions, AFusionRefusalSaysWhatStoodInTheWay) {
  const auto decisions = schedule_decisions(kColumnSum, CompileContext{});
  const std::string d = decision_containing(decisions, "do not fuse");
  EXPECT_NE(d.find("reduction over kept dims [8] does not match the kernel's outer loop [4]"), std::string::npos)
      << all(decisions);
}

TEST(ScheduleDecisions, FusionTurnedOffIsTheReasonGiven) {
  CompileContext ctx;
  ctx.options.fuse = false;
  const auto decisions = schedule_decisions(
      "graph o(%x: f32[4, 8]) {\n  %a = relu(%x) : f32[4, 8]\n  %b = neg(%a) : f32[4, 8]\n  return %a, %b\n}\n", ctx);
  EXPECT_NE(decision_containing(decisions, "do not fuse").find(": fusion is off"), std::string::npos) << all(decisions);
  for (const std::string& d : decisions) EXPECT_NE(d.rfind("fuse ", 0), 0u) << d;
}

TEST(ScheduleDecisions, ALocaliseRefusalSaysWhichLimitARowExceeds) {
  CompileContext ctx;
  ctx.target = kiln::cpu::host_code_generator().target();
  const int64_t cols = ctx.target.max_local_row_bytes / 4 + 16;  // one f32 row just over the limit
  const std::string softmax = "graph s(%x: f32[4, " + std::to_string(cols) + "]) {\n  %y = softmax(%x, -1) : f32[4, " +
                              std::to_string(cols) + "]\n  return %y\n}\n";
  const auto decisions = schedule_decisions(softmax, ctx);
  const std::string d = decision_containing(decisions, "keep ");
  EXPECT_NE(d.find("in memory: read only inside k0, but a row is " + std::to_string(cols * 4) + " bytes (> " +
                   std::to_string(ctx.target.max_local_row_bytes) + ")"),
            std::string::npos)
      << all(decisions);
}

// The probe's Decision and its graph agree: a yes comes with the op's one-node graph, a no with its reason.
TEST(ScheduleDecisions, TheProbeGraphComesWithItsDecision) {
  int probed = 0;
  for (const OpInfo& op : all_ops()) {
    const ProbeGraph probe = one_node_graph(op);
    if (!probe.decision) {
      EXPECT_FALSE(probe.decision.reason().empty()) << op.name;
      EXPECT_TRUE(probe.graph.nodes().empty()) << op.name;
      continue;
    }
    ++probed;
    ASSERT_EQ(probe.graph.nodes().size(), 1u) << op.name;
    EXPECT_EQ(probe.graph.nodes()[0].op, op.id) << op.name;
  }
  EXPECT_GE(probed, 100);
}

}  // namespace
}  // namespace kiln::inductor
