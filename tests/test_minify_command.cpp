// `kiln minify G --cmd CMD` (minifier/command_oracle.h, issue 37): a user's shell command as the minifier's
// oracle, run as a user runs it. The result is the op the command fails on, alone; a command's exit status and
// --check-str decide what "the same failure" is; the candidate's inputs are beside it so `kiln run` reads them;
// a flaky command is detected and reported instead of minified into nonsense; the printed line reproduces in a
// clean shell. And the oracle itself: a confirmation that disagrees with the first run is counted as a flip.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_run.h"
#include "kir_ops_in.h"
#include "core/escape.h"
#include "core/seed.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "minifier/command_oracle.h"
#include "minifier/values.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using cli_test::CliResult;
using cli_test::CliTest;
using cli_test::kiln_cli;
using cli_test::read_text;
using cli_test::shell;

const char* kChain = R"(graph chain(%x: f32[16, 8], %y: f32[16, 8]) {
  %a = add(%x, %y) : f32[16, 8]
  %b = mul(%a, 2.0) : f32[16, 8]
  %c = relu(%b) : f32[16, 8]
  %d = tanh(%c) : f32[16, 8]
  %e = sub(%d, %x) : f32[16, 8]
  %f = exp(%e) : f32[16, 8]
  return %f
}
)";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class MinifyCommand : public CliTest {};

TEST_F(MinifyCommand, AShellOracleThatFailsOnAnOpShrinksTheGraphToThatOpAlone) {
  const std::string g = file("chain.kir", kChain);
  const std::string out = path("min");
  // --keep-shapes: the input stays too large to become a constant, so it is a file beside the candidate.
  CliResult r = kiln_cli("minify -q --keep-shapes " + g + " -o " + out +
                         " --cmd 'grep -q \"= tanh(\" \"$KILN_CANDIDATE\" && exit 1; exit 0'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "failure: the command exited with status 1 (in 3 of 3 runs of the original)"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "re-verified: the command failed the same way on the result in 3 of 3 runs"))
      << r.output;
  EXPECT_EQ(cli_test::op_names_in(fs::path(out) / "candidate.kir"), std::vector<std::string>{"tanh"});
  // Its one input is beside it, as the command saw it.
  graph::Graph m = graph::parse_graph(read_text(fs::path(out) / "candidate.kir"));
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_TRUE(fs::exists(fs::path(out) / graph::input_file_name(m.value(m.inputs()[0]).name)));
  // The printed line reproduces in a clean shell (no KILN_* and another working directory): exit 1.
  const size_t at = r.output.find("check it with: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at + 15, r.output.find('\n', at) - at - 15);
  CliResult again = shell("cd / && env -i PATH=/usr/bin:/bin /bin/sh -c " + shell_quote(line));
  EXPECT_EQ(again.exit_code, 1) << line << "\n" << again.output;
}

TEST_F(MinifyCommand, AnOpTheFailureDoesNotNeedBecomesTheSimplestOpOfItsSignature) {
  // Fails while a relu reads %d computed by an op (any op: the command does not name it): the maximum computing
  // it stays as the simplest op of its signature, a mul, and the summary counts the move.
  const std::string g = file("m.kir", R"(graph m(%x: f32[16, 16], %y: f32[16, 16]) {
  %a = sigmoid(%x) : f32[16, 16]
  %d = maximum(%a, %y) : f32[16, 16]
  %b = relu(%d) : f32[16, 16]
  %c = tanh(%b) : f32[16, 16]
  return %c
}
)");
  const std::string out = path("min");
  CliResult r = kiln_cli("minify " + g + " -o " + out + " --reruns 1 --cmd '! { grep -q \"= relu(%d)\" "
                         "\"$KILN_CANDIDATE\" && ! grep -q \"%d: \" \"$KILN_CANDIDATE\"; }'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cli_test::op_names_in(fs::path(out) / "candidate.kir"), (std::vector<std::string>{"mul", "relu"}))
      << r.output;
  EXPECT_TRUE(contains(r.output, "simplify 1")) << r.output;
}

TEST_F(MinifyCommand, TheSameFailureIsTheSameExitStatus) {
  // Every candidate fails, but only those with tanh exit 1; the others exit 2 (say, a graph the command cannot
  // use). Those are another failure, so the result keeps tanh.
  const std::string g = file("chain.kir", kChain);
  CliResult r = kiln_cli("minify -q " + g + " -o " + path("min") +
                         " --cmd 'grep -q \"= tanh(\" \"$KILN_CANDIDATE\" && exit 1; exit 2'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cli_test::op_names_in(dir_ / "min" / "candidate.kir"), std::vector<std::string>{"tanh"});
}

TEST_F(MinifyCommand, CheckStrPinsTheFailureToTheCommandsOutput) {
  // The command always fails; it prints BUG only when exp is present.
  const std::string g = file("chain.kir", kChain);
  CliResult r = kiln_cli("minify -q " + g + " -o " + path("min") + " --check-str BUG" +
                         " --cmd 'grep -q \"= exp(\" \"$KILN_CANDIDATE\" && echo BUG; exit 1'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cli_test::op_names_in(dir_ / "min" / "candidate.kir"), std::vector<std::string>{"exp"});
  CliResult never = kiln_cli("minify -q " + g + " -o " + path("min2") + " --check-str NEVER --cmd 'exit 1'");
  EXPECT_EQ(never.exit_code, 2) << never.output;
  EXPECT_TRUE(contains(never.output, "never contains \"NEVER\"")) << never.output;
}

TEST_F(MinifyCommand, KilnAsTheCommandReadsTheCandidatesInputsAndTheReproduceLineCarriesTheSettings) {
  // An injected accuracy bug in tanh's lowering, found by `kiln run --check` as the command: the candidate's
  // inputs must be where `--inputs "$KILN_CANDIDATE_DIR"` reads them, and KILN_INJECT must reach the command.
  const std::string g = file("chain.kir", kChain);
  const std::string out = path("min");
  const std::string cmd = "'" KILN_CLI "' run \"$KILN_CANDIDATE\" --inputs \"$KILN_CANDIDATE_DIR\" --backend inductor --check";
  CliResult r = kiln_cli("minify -q " + g + " -o " + out + " --cmd " + shell_quote(cmd), "KILN_INJECT=tanh:accuracy");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cli_test::op_names_in(fs::path(out) / "candidate.kir"), std::vector<std::string>{"tanh"});
  const size_t at = r.output.find("check it with: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at + 15, r.output.find('\n', at) - at - 15);
  EXPECT_TRUE(contains(line, "KILN_INJECT=tanh:accuracy")) << line;
  CliResult again = shell("cd / && env -i PATH=/usr/bin:/bin HOME=" + shell_quote(dir_.string()) + " /bin/sh -c " +
                          shell_quote(line));
  EXPECT_EQ(again.exit_code, 1) << line << "\n" << again.output;
  // Without the injection the same command passes on the result: the repro is the bug, not the graph.
  CliResult clean = shell("cd " + shell_quote(out) + " && KILN_CANDIDATE=candidate.kir KILN_CANDIDATE_DIR=. /bin/sh -c " +
                          shell_quote(cmd));
  EXPECT_EQ(clean.exit_code, 0) << clean.output;
}

TEST_F(MinifyCommand, AFlakyCommandIsDetectedAndReportedNotMinified) {
  // Fails on every third run (a counter outside the candidate's directory): 1 of 3 runs of the original.
  const std::string g = file("chain.kir", kChain);
  const std::string counter = path("counter");
  const std::string cmd = "n=$(cat " + counter + " 2>/dev/null || echo 0); n=$((n + 1)); echo $n > " + counter +
                          "; [ $((n % 3)) -ne 0 ]";
  CliResult r = kiln_cli("minify -q " + g + " -o " + path("min") + " --cmd " + shell_quote(cmd));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "the command is nondeterministic on the original graph: 1 of 3 runs showed \"the "
                                 "command exited with status 1\", another ended with exit 0")) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "min" / "candidate.kir"));  // nothing minified
  EXPECT_EQ(read_text(counter), "3\n");  // exactly --reruns runs, one after another
}

TEST_F(MinifyCommand, ACommandThatPassesOrOptionsThatDoNotApplyAreBadInput) {
  const std::string g = file("chain.kir", kChain);
  CliResult pass = kiln_cli("minify -q " + g + " -o " + path("min") + " --cmd 'echo fine; exit 0'");
  EXPECT_EQ(pass.exit_code, 2) << pass.output;
  EXPECT_TRUE(contains(pass.output, "exits 0 on the original graph in 3 of 3 runs: nothing to minify")) << pass.output;
  EXPECT_TRUE(contains(pass.output, "fine")) << pass.output;
  for (const std::string flag : {"--backend inductor", "--accuracy", "--tol 1e-3", "--resume", "--emit torch"}) {
    CliResult r = kiln_cli("minify -q " + g + " " + flag + " --cmd 'exit 1'");
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "excludes")) << flag << ": " << r.output;
  }
  CliResult reruns = kiln_cli("minify -q " + g + " --reruns 2");
  EXPECT_EQ(reruns.exit_code, 2) << reruns.output;
  // An existing directory with a user's files in it is not overwritten.
  fs::create_directories(dir_ / "mine");
  cli_test::write_file(dir_ / "mine" / "notes.npy", "keep");
  CliResult mine = kiln_cli("minify -q " + g + " -o " + path("mine") + " --cmd 'exit 1'");
  EXPECT_EQ(mine.exit_code, 2) << mine.output;
  EXPECT_EQ(read_text(dir_ / "mine" / "notes.npy"), "keep");
}

TEST_F(MinifyCommand, ParallelCandidatesGiveTheSameResult) {
  const std::string g = file("chain.kir", kChain);
  const std::string cmd = "'grep -q \"= relu(\" \"$KILN_CANDIDATE\" && exit 1; exit 0'";
  CliResult one = kiln_cli("minify -q " + g + " -o " + path("one") + " --cmd " + cmd);
  CliResult two = kiln_cli("minify -q -j 2 " + g + " -o " + path("two") + " --cmd " + cmd);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(read_text(dir_ / "one" / "candidate.kir"), read_text(dir_ / "two" / "candidate.kir"));
  EXPECT_EQ(cli_test::op_names_in(dir_ / "two" / "candidate.kir"), std::vector<std::string>{"relu"});
}

// The oracle in-process: a command that alternates between failing and passing. Its first run of a candidate
// fails, the confirmation passes: one confirmation, one flip.
TEST_F(MinifyCommand, AConfirmationThatDisagreesWithTheFirstRunIsAFlip) {
  graph::Graph g = graph::parse_graph(kChain);
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  minify::ValueStore store(int64_t(1) << 20, "");
  minify::record_reference(g, inputs, default_generator(), store);
  minify::InputSource src(g, inputs, store);
  const std::string counter = path("counter");
  minify::CommandOracleOptions o;
  o.command = "n=$(cat " + counter + " 2>/dev/null || echo 0); n=$((n + 1)); echo $n > " + counter +
              "; [ $((n % 2)) -eq 0 ]";
  o.work_dir = path("work");
  fs::create_directories(o.work_dir);
  o.timeout_s = 30;
  minify::CommandOracle oracle(src, o);
  oracle.set_target({FailureKind::RuntimeError, "the command exited with status 1"});
  minify::Candidate c{g, "original"};
  EXPECT_TRUE(oracle.test(c).fails);       // run 1: exit 1
  EXPECT_FALSE(oracle.confirm(c).fails);   // run 2: exit 0
  EXPECT_EQ(oracle.confirmations(), 1);
  EXPECT_EQ(oracle.flips(), 1);
  EXPECT_TRUE(oracle.test(c).fails);       // run 3
  EXPECT_TRUE(oracle.confirm(c).observed.kind == FailureKind::None);
  EXPECT_EQ(oracle.flips(), 2);
  // Each candidate's directory is removed once judged.
  EXPECT_TRUE(fs::is_empty(o.work_dir));
}

}  // namespace
}  // namespace kiln
