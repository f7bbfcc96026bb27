// `kiln fuzz` end to end: with each KILN_INJECT bug on it finds the bug, minimizes it to the injected op alone,
// writes a repro that `kiln repro run` reproduces, and says so in its JSON summary; a graph is regenerated from
// (seed, index); bad options exit 2 with a message; a clean backend gives exit 0 and full coverage output.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <set>

#include "cli_run.h"
#include "graph/text.h"
#include "repro/repro.h"

namespace kiln::cli_test {
namespace {

class FuzzCli : public CliTest {
 protected:
  // The JSON summary is the last thing on stdout: from the last line that is just "{".
  static nlohmann::json summary(const std::string& output) {
    size_t start = output.rfind("\n{\n");
    EXPECT_NE(start, std::string::npos) << output;
    return nlohmann::json::parse(output.substr(start + 1));
  }
};

struct InjectCase {
  std::string inject, op, kind;
};

class FuzzFindsInjectedBugs : public FuzzCli, public ::testing::WithParamInterface<InjectCase> {};

TEST_P(FuzzFindsInjectedBugs, MinimizesToTheInjectedOpAlone) {
  const InjectCase& c = GetParam();
  std::string out = path("findings");
  CliResult r = kiln_cli("fuzz -q --seed 1 --runs 24 --max-nodes 4 --ops " + c.op + ",add,mul,neg --out " + out,
                         "KILN_INJECT=" + c.inject);
  ASSERT_EQ(r.exit_code, 1) << r.output;
  nlohmann::json s = summary(r.output);
  ASSERT_EQ(s["findings"].size(), 1u) << s.dump(2);
  const nlohmann::json& f = s["findings"][0];
  EXPECT_EQ(f["signature"], c.kind + ":" + c.op) << s.dump(2);
  EXPECT_TRUE(f["minimized"].get<bool>()) << f.dump(2);
  const std::string repro = f["repro"];
  ReproFile rf = load_repro(repro);
  ASSERT_EQ(rf.graph.num_op_nodes(), 1) << graph::print_graph(rf.graph);
  EXPECT_EQ(rf.graph.nodes().back().info().name, c.op);
  CliResult again = kiln_cli("repro run " + repro);
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("REPRODUCES"), std::string::npos) << again.output;
  EXPECT_TRUE(std::filesystem::exists(out + "/summary.json"));
  // The finding's (seed, index) regenerates the graph, which fails again.
  CliResult one = kiln_cli(fmt::format("fuzz -q --seed 1 --index {} --ops {},add,mul,neg --max-nodes 4 --out {}",
                                       f["index"].get<uint64_t>(), c.op, path("again")),
                           "KILN_INJECT=" + c.inject);
  EXPECT_EQ(one.exit_code, 1) << one.output;
  EXPECT_EQ(summary(one.output)["findings"][0]["signature"], c.kind + ":" + c.op) << one.output;
}

INSTANTIATE_TEST_SUITE_P(Kinds, FuzzFindsInjectedBugs,
                         ::testing::Values(InjectCase{"relu:compile_error", "relu", "compile_error"},
                                           InjectCase{"relu:runtime_error", "relu", "runtime_error"},
                                           InjectCase{"relu:crash", "relu", "crash"},
                                           InjectCase{"exp:accuracy", "exp", "accuracy"},
                                           InjectCase{"var:decomposition", "var", "accuracy"}),
                         [](const auto& info) { return info.param.op + "_" + info.param.kind; });

// One bug, one finding: KILN_INJECT=mul:crash crashes every op that decomposes into mul (mse_loss, lerp, addcmul),
// each minimizing to another graph, and all bisect to one root cause (the lowering of mul in the inductor); with
// a second bug injected (exp:accuracy) there are two buckets, one each. Each bucket keeps one repro and lists its
// other graphs.
TEST_F(FuzzCli, FindingsAreBucketedByRootCauseOneBucketPerBug) {
  const std::string args = "fuzz -q --seed 1 --runs 24 --max-nodes 2 --timeout 5 --ops mse_loss,lerp,addcmul,exp,neg -o ";
  CliResult one = kiln_cli(args + path("one"), "KILN_INJECT=mul:crash");
  ASSERT_EQ(one.exit_code, 1) << one.output;
  nlohmann::json s = summary(one.output);
  ASSERT_EQ(s["findings"].size(), 1u) << s.dump(2);
  EXPECT_EQ(s["distinct_bugs"], 1);
  const nlohmann::json& f = s["findings"][0];
  EXPECT_EQ(f["bucket"], "crash|inductor|inductor:lowering|mul") << f.dump(2);
  EXPECT_EQ(f["root_cause"]["op"], "mul");
  EXPECT_GE(f["other_graphs"].size(), 1u) << f.dump(2);  // the same bug, shown by another op's graph
  std::set<std::string> signatures{f["signature"].get<std::string>()};
  for (const nlohmann::json& o : f["other_graphs"]) signatures.insert(o["signature"].get<std::string>());
  EXPECT_EQ(signatures.size(), f["other_graphs"].size() + 1) << f.dump(2);
  EXPECT_NE(one.output.find("1 distinct bug in "), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("root cause: inductor:lowering of mul (stage inductor)"), std::string::npos) << one.output;
  int repros = 0;
  for (const auto& e : std::filesystem::directory_iterator(path("one"))) repros += e.path().extension() == ".repro";
  EXPECT_EQ(repros, 1);  // one repro per bug
  EXPECT_EQ(kiln_cli("repro run " + f["repro"].get<std::string>()).exit_code, 1);

  CliResult two = kiln_cli(args + path("two"), "KILN_INJECT=mul:crash,exp:accuracy");
  ASSERT_EQ(two.exit_code, 1) << two.output;
  nlohmann::json t = summary(two.output);
  std::set<std::string> buckets;
  for (const nlohmann::json& b : t["findings"]) buckets.insert(b["bucket"].get<std::string>());
  EXPECT_EQ(buckets, (std::set<std::string>{"crash|inductor|inductor:lowering|mul",
                                            "accuracy|inductor|inductor:lowering|exp"})) << t.dump(2);
  EXPECT_EQ(t["distinct_bugs"], 2);
  // Without -q, a progress line per minified finding as it is bucketed.
  CliResult loud = kiln_cli("fuzz --seed 1 --runs 24 --max-nodes 2 --timeout 5 --ops mse_loss,lerp,addcmul,neg -o " +
                            path("loud"), "KILN_INJECT=mul:crash");
  EXPECT_NE(loud.output.find(", root cause inductor:lowering of mul (stage inductor): a new bug"), std::string::npos)
      << loud.output;
  EXPECT_NE(loud.output.find(": the same bug as finding crash:"), std::string::npos) << loud.output;
}

// A hang (the inject_test backend: the interpreter with KILN_INJECT faults; the inductor takes no hang kind) is a
// finding too: the batch that hangs is rechecked graph by graph, and the hang is minimized to the relu.
TEST_F(FuzzCli, FindsAHangAndMinimizesIt) {
  CliResult r = kiln_cli("fuzz -q --backend inject_test --seed 1 --ops relu,add --runs 3 --max-nodes 2 --timeout 0.5 "
                         "--out " + path("found"), "KILN_INJECT=relu:hang");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  nlohmann::json s = summary(r.output);
  ASSERT_EQ(s["findings"].size(), 1u) << s.dump(2);
  EXPECT_EQ(s["findings"][0]["signature"], "hang:relu");
  ReproFile rf = load_repro(s["findings"][0]["repro"].get<std::string>());
  EXPECT_EQ(rf.graph.num_op_nodes(), 1) << graph::print_graph(rf.graph);
  EXPECT_EQ(rf.expected.kind, FailureKind::Hang);
}

TEST_F(FuzzCli, CleanBackendExitsZeroWithCoverageAndSummary) {
  CliResult r = kiln_cli("fuzz -q --backend eager --seed 3 --runs 40");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ops reached"), std::string::npos) << r.output;
  nlohmann::json s = summary(r.output);
  EXPECT_EQ(s["graphs"], 40);
  EXPECT_EQ(s["valid"], 40);
  EXPECT_TRUE(s["findings"].empty());
  EXPECT_GT(s["coverage"]["ops_reached"].get<int>(), 50);
}

// The domain guards keep log's argument positive; --allow-nan drops them, and NaN shows in the summary.
TEST_F(FuzzCli, AllowNanTurnsTheDomainGuardsOff) {
  nlohmann::json guarded = summary(kiln_cli("fuzz -q --backend eager --ops log,neg --runs 40 --seed 2").output);
  nlohmann::json unguarded = summary(kiln_cli("fuzz -q --backend eager --ops log,neg --runs 40 --seed 2 --allow-nan").output);
  EXPECT_EQ(guarded["nan_free"], guarded["valid"]) << guarded.dump(2);
  EXPECT_LT(unguarded["nan_free"].get<int>(), unguarded["valid"].get<int>()) << unguarded.dump(2);
  EXPECT_TRUE(guarded["coverage"]["nodes"].contains("abs")) << "the guard is abs + add";
}

TEST_F(FuzzCli, PrintRegeneratesTheSameGraph) {
  CliResult a = kiln_cli("fuzz -q --backend eager --seed 9 --index 17 --print");
  CliResult b = kiln_cli("fuzz -q --backend eager --seed 9 --index 17 --print");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  size_t end = a.output.find("\n}\n");
  ASSERT_NE(end, std::string::npos) << a.output;
  EXPECT_EQ(a.output.substr(0, end), b.output.substr(0, b.output.find("\n}\n")));
  EXPECT_EQ(a.output.rfind("# graph 17\n", 0), 0u) << a.output;
}

TEST_F(FuzzCli, BadOptionsExitTwoWithAMessage) {
  struct Bad {
    std::string args, message;
  };
  for (const Bad& b : {Bad{"--runs 0", "--runs"}, Bad{"--runs abc", "not an integer"}, Bad{"--time -1", "--time"},
                       Bad{"--max-nodes 0", "--max-nodes"}, Bad{"-j 0", "-j"}, Bad{"--ops relu,nosuchop --runs 1", "unknown op 'nosuchop'"},
                       Bad{"--backend nosuch --runs 1", "nosuch"}, Bad{"--index 3 --runs 2", "excludes"},
                       Bad{"--tol nan", "--tol"}, Bad{"--runs 1 --out " + file("plain", "x"), "is not a directory"}}) {
    CliResult r = kiln_cli("fuzz -q " + b.args);
    EXPECT_EQ(r.exit_code, 2) << b.args << "\n" << r.output;
    EXPECT_NE(r.output.find(b.message), std::string::npos) << b.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace kiln::cli_test
