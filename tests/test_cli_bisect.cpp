// `kiln bisect` end to end, as a user runs it: for each injected bug kind the JSON result names the site and the
// application the compiler's own `bisect` log gives the injected op, and the printed reproducing command fails
// while the one without that application passes; a passing graph exits 0; `--cmd` finds the same answer
// through a script; bad input exits 2.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>

#include "bisect/testing.h"
#include "cli_run.h"

namespace kiln::cli_test {
namespace {

using bisect::InjectedGraph;
using bisect::injected_chain;

// The application number the compiler's `bisect` log gives the injected site in one plain compile of `kir`:
// the line of `site` whose debug info starts with the value the bug acts on (for fusion: the first fusion
// after the injection's own log line names it).
int64_t logged_application(const std::string& kir, const InjectedGraph& ig) {
  CliResult r = kiln_cli("run " + kir + " --backend inductor", "KILN_LOGS=bisect,fusion KILN_INJECT=" + ig.inject);
  std::string value = ig.site_value;
  if (ig.site == "inductor:fusion") {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.output, m, std::regex("inject accuracy: fuse (\\S+) although"))) << r.output;
    value = m[1];
  }
  std::regex line("\\[kiln:bisect\\] " + ig.site + " #(\\d+) \\(stage #\\d+\\): run: %?" + value + "[ =]");
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  return m.empty() ? -1 : std::stoll(m[1]);
}

// Runs a printed command line ("NAME=VALUE kiln run ...") with the binary under test.
CliResult run_printed(const std::string& command, const std::string& env) {
  std::string cmd = command;
  size_t at = cmd.find("kiln run ");
  cmd.replace(at, 4, "'" KILN_CLI "'");
  return shell(cmd, env);
}

class CliBisect : public CliTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(CliBisect, NamesTheInjectedApplicationAndItsCommandsReproduceIt) {
  const InjectedGraph ig = injected_chain(GetParam(), 10);
  const std::string kir = file("chain.kir", ig.kir);
  CliResult r = kiln_cli("bisect -q " + kir + " -o " + path("r.json"), "KILN_INJECT=" + ig.inject);
  ASSERT_EQ(r.exit_code, 1) << r.output;
  nlohmann::json j = nlohmann::json::parse(read_text(path("r.json")));
  EXPECT_EQ(j["outcome"], "bisected") << j.dump(2);
  EXPECT_EQ(j["stage"], "inductor");
  EXPECT_EQ(j["culprit"]["site"], ig.site);
  EXPECT_EQ(j["culprit"]["application"].get<int64_t>(), logged_application(kir, ig)) << j.dump(2);
  EXPECT_EQ(j["divergence"]["value"], ig.diverging) << j.dump(2);
  EXPECT_NE(r.output.find("first diverging node: %" + ig.diverging + " = "), std::string::npos) << r.output;
  CliResult bad = run_printed(j["repro_command"], "KILN_INJECT=" + ig.inject);
  EXPECT_EQ(bad.exit_code, 1) << j["repro_command"] << bad.output;
  CliResult good = run_printed(j["good_command"], "KILN_INJECT=" + ig.inject);
  EXPECT_EQ(good.exit_code, 0) << j["good_command"] << good.output;
}

// `git bisect run` style: the script honours KILN_BACKEND for the ladder; kiln sets KILN_BISECT_* for it. Every
// injected kind: the same stage, site, application and site info as the graph's bisection.
TEST_P(CliBisect, CmdFindsTheSameAnswerThroughAScript) {
  const InjectedGraph ig = injected_chain(GetParam(), 10);
  const std::string kir = file("chain.kir", ig.kir);
  const std::string script = file("check.sh", "#!/bin/sh\nexec '" KILN_CLI "' run " + kir +
                                              " --backend \"${KILN_BACKEND:-inductor}\" --check\n");
  CliResult viacmd = kiln_cli("bisect -q --cmd 'sh " + script + "' --backend inductor -o " + path("cmd.json"),
                              "KILN_INJECT=" + ig.inject);
  ASSERT_EQ(viacmd.exit_code, 1) << viacmd.output;
  CliResult viagraph = kiln_cli("bisect -q " + kir + " -o " + path("graph.json"), "KILN_INJECT=" + ig.inject);
  ASSERT_EQ(viagraph.exit_code, 1) << viagraph.output;
  nlohmann::json c = nlohmann::json::parse(read_text(path("cmd.json")));
  nlohmann::json g = nlohmann::json::parse(read_text(path("graph.json")));
  EXPECT_EQ(c["stage"], "inductor") << c.dump(2);
  EXPECT_EQ(c["culprit"]["site"], ig.site) << c.dump(2);
  EXPECT_EQ(c["culprit"]["site"], g["culprit"]["site"]);
  EXPECT_EQ(c["culprit"]["application"], g["culprit"]["application"]);
  EXPECT_EQ(c["culprit"]["site_info"], g["culprit"]["site_info"]);
  EXPECT_NE(c["repro_command"].get<std::string>().find("KILN_BISECT_LIMIT="), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CliBisect, ::testing::Values("lowering", "decomposition", "fusion"));

TEST_F(CliBisect, APassingGraphExitsZeroAndNamesNoCulprit) {
  const std::string kir = file("chain.kir", injected_chain("lowering", 10).kir);
  CliResult r = kiln_cli("bisect -q " + kir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("result:      passes"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("subsystem:"), std::string::npos) << r.output;
}

TEST_F(CliBisect, BadInputExitsTwo) {
  const std::string kir = file("chain.kir", injected_chain("lowering", 10).kir);
  for (const std::string& args : {std::string("bisect ") + path("missing.kir"), std::string("bisect"),
                                  "bisect " + kir + " --cmd true", std::string("bisect --cmd true --accuracy"),
                                  "bisect " + kir + " --backend nosuch", "bisect " + kir + " --tol -1",
                                  "bisect " + kir + " --accuracy --error"}) {
    CliResult r = kiln_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("kiln: error:"), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace kiln::cli_test
