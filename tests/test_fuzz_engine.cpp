// `kiln fuzz import-crash`: an input a fuzzing engine reported for graph-fuzzer (generator choices) or kir-fuzzer
// (.kir text) becomes the graph it encodes and, when it fails here, a repro minimized to the failing op that
// `kiln repro run` reproduces; an input that passes writes nothing (exit 0); a repro-fuzzer input, an unparsable
// .kir and an unknown target are clear errors that say how to reproduce them.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cli_run.h"
#include "fuzz/engine_input.h"
#include "repro/repro.h"

namespace kiln::cli_test {
namespace {

// Random byte strings until one decodes (as graph-fuzzer decodes it) to a graph with an `op` node whose value is
// an output (a wrong `op` then shows, whatever reads it: a comparison or a sign would hide it).
std::string bytes_with_op(const std::string& op) {
  std::mt19937_64 rng(1);
  for (int attempt = 0; attempt < 5000; ++attempt) {
    std::string bytes(96, '\0');
    for (char& c : bytes) c = char(rng());
    fuzz::EngineCase c = fuzz::decode_engine_input("graph", bytes, "input");
    const std::vector<graph::ValueId>& outs = c.graph.outputs();
    for (const graph::Node& n : c.graph.nodes())
      if (n.kind == graph::NodeKind::Op && n.info().name == op &&
          std::find(outs.begin(), outs.end(), n.outputs[0]) != outs.end() &&
          is_floating(c.graph.value(n.outputs[0]).meta.dtype) && shape_numel(c.graph.value(n.outputs[0]).meta.sizes) > 0)
        return bytes;
  }
  ADD_FAILURE() << "no input of 5000 decodes to a graph with " << op;
  return "";
}

TEST_F(CliTest, ImportCrashTurnsAGraphFuzzerInputIntoAMinimizedRepro) {
  write_file(dir_ / "crash-graph", bytes_with_op("exp"));
  const std::string env = "KILN_INJECT=exp:accuracy";
  CliResult r = kiln_cli("fuzz import-crash graph " + path("crash-graph") + " -o " + path("r.repro"), env);
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("accuracy on backend inductor"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("minimized to 1 op node:"), std::string::npos) << r.output;
  ReproFile rf = load_repro(path("r.repro"));
  ASSERT_EQ(rf.graph.num_op_nodes(), 1);
  EXPECT_EQ(rf.graph.nodes().back().info().name, "exp");
  CliResult again = kiln_cli("repro run " + path("r.repro"), env);
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("REPRODUCES"), std::string::npos) << again.output;
  // Without the bug it passes: nothing is written.
  CliResult clean = kiln_cli("fuzz import-crash graph " + path("crash-graph") + " -o " + path("none.repro"));
  EXPECT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_NE(clean.output.find("passes on backend inductor"), std::string::npos) << clean.output;
  EXPECT_FALSE(std::filesystem::exists(path("none.repro")));
}

TEST_F(CliTest, ImportCrashTakesKirInputsAndRefusesWhatIsNoGraph) {
  write_file(dir_ / "crash-kir", "graph g(%x: f32[4, 8]) {\n  %y = neg(%x) : f32[4, 8]\n  %z = relu(%y) : f32[4, 8]\n"
                                 "  %w = add(%z, %x) : f32[4, 8]\n  return %w\n}\n");
  CliResult r = kiln_cli("fuzz import-crash kir " + path("crash-kir") + " -o " + path("k.repro") + " --backend inject_test",
                         "KILN_INJECT=relu:crash");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("crash on backend inject_test"), std::string::npos) << r.output;
  EXPECT_EQ(load_repro(path("k.repro")).graph.num_op_nodes(), 1);
  write_file(dir_ / "bad-kir", "graph g(%x: f32[4]) {\n  return %nope\n}\n");
  CliResult bad = kiln_cli("fuzz import-crash kir " + path("bad-kir") + " -o " + path("b.repro"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("kiln verify"), std::string::npos) << bad.output;
  CliResult repro = kiln_cli("fuzz import-crash repro " + path("bad-kir") + " -o " + path("b.repro"));
  EXPECT_EQ(repro.exit_code, 2) << repro.output;
  EXPECT_NE(repro.output.find("kiln repro run"), std::string::npos) << repro.output;
  CliResult unknown = kiln_cli("fuzz import-crash parser " + path("bad-kir") + " -o " + path("b.repro"));
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("known: graph, kir, repro"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace kiln::cli_test
