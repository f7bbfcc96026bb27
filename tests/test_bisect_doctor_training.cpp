// `kiln doctor` on a graph run for training (inputs marked `grad`), as a user runs it: a wrong VJP
// (KILN_INJECT=tanh:vjp) or a wrong min-cut partition (KILN_INJECT=partition:accuracy) changes only the gradients,
// so the ablation, the minifier's oracle and the written repro all judge the outputs then the gradients; the
// repro records `check: gradients` (format 2) and `kiln repro run` reproduces it; the report names the rung and
// the injected op. Also the repro format's rules for `check:`.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "bisect/testing.h"
#include "cli_run.h"

namespace kiln::cli_test {
namespace {

// x @ w, then pointwise ops the min-cut partitioner recomputes in the backward (the product it saves).
const char* const kTrainKir = R"(graph train(%x: f32[8, 16], %w: f32[16, 16] grad) {
  %h = mm(%x, %w) : f32[8, 16]
  %s = sigmoid(%h) : f32[8, 16]
  %t = tanh(%s) : f32[8, 16]
  %r = relu(%t) : f32[8, 16]
  %y = mul(%r, %s) : f32[8, 16]
  return %y
}
)";

class CliDoctorTraining : public CliTest {
 protected:
  // `kiln doctor` under KILN_INJECT=inject: exit 1, the report; the repro checks gradients and reproduces
  // without the variable in the environment (the repro records it).
  std::string doctor(const std::string& inject) {
    const std::string kir = file("train.kir", kTrainKir);
    CliResult r = kiln_cli("doctor -q " + kir + " --seed 0 -o " + path("out"), "KILN_INJECT=" + inject);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const std::string repro = read_text(path("out/repro.min.repro"));
    EXPECT_NE(repro.find("kiln-repro: 2\n"), std::string::npos) << repro;
    EXPECT_NE(repro.find("check: gradients\n"), std::string::npos) << repro;
    EXPECT_NE(repro.find(" grad"), std::string::npos) << "the minified graph keeps a `grad` input:\n" << repro;
    CliResult again = kiln_cli("repro run " + path("out/repro.min.repro"));
    EXPECT_EQ(again.exit_code, 1) << again.output;
    EXPECT_NE(again.output.find("REPRODUCES: accuracy"), std::string::npos) << again.output;
    return read_text(path("out/report.md"));
  }
};

TEST_F(CliDoctorTraining, AWrongVjpFailsOnAotEagerAndTheReproReproduces) {
  const std::string md = doctor("tanh:vjp");
  EXPECT_NE(md.find("| `eager` | passes |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `aot_eager` | FAILS: accuracy |"), std::string::npos) << md;
  EXPECT_NE(md.find("stage:       aot_eager\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- First failing stage: `aot_eager` (unexplained)."), std::string::npos) << md;
  EXPECT_NE(md.find("is the gradient of %w"), std::string::npos) << md;
  // The injected site: the gradient tanh's VJP returns (at tanh's line in minified.kir) is the first diverging node.
  EXPECT_NE(md.find("- First diverging node: `%t_bw"), std::string::npos) << md;
  const std::string minified = read_text(path("out/minified.kir"));
  const size_t tanh_at = minified.find("= tanh(");
  ASSERT_NE(tanh_at, std::string::npos) << minified;
  const long tanh_line = 1 + std::count(minified.begin(), minified.begin() + long(tanh_at), '\n');
  EXPECT_NE(md.find("(line " + std::to_string(tanh_line) + ":3) (computed as %t_bw"), std::string::npos) << md;
  EXPECT_NE(md.find("re-verified: it reproduces"), std::string::npos) << md;
  // The minified repro checks the gradients: forward only, it passes.
  EXPECT_EQ(kiln_cli("run " + path("out/minified.kir") + " --inputs " + path("out/repro.min.repro.inputs") +
                     " --backend aot_eager --check", "KILN_INJECT=tanh:vjp").exit_code, 0);
}

TEST_F(CliDoctorTraining, AWrongPartitionFailsOnAotEagerDecompPartitionAndTheReproReproduces) {
  const std::string md = doctor("partition:accuracy");
  EXPECT_NE(md.find("| `aot_eager` | passes |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `aot_eager_decomp_partition` | FAILS: accuracy |"), std::string::npos) << md;
  EXPECT_NE(md.find("stage:       aot_eager_decomp_partition\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- First failing stage: `aot_eager_decomp_partition` (unexplained)."), std::string::npos) << md;
  // The injected site: the value the min-cut backward recomputes wrongly.
  EXPECT_NE(md.find("_injected = add in the rung's graph)`."), std::string::npos) << md;
}

TEST_F(CliDoctorTraining, APassingTrainingGraphPassesEveryRung) {
  CliResult r = kiln_cli("doctor -q " + file("train.kir", kTrainKir) + " --seed 0 -o " + path("out"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string md = read_text(path("out/report.md"));
  EXPECT_NE(md.find("| `aot_eager_decomp_partition` | passes |"), std::string::npos) << md;
  EXPECT_NE(md.find("Every backend of the ladder passes"), std::string::npos) << md;
  EXPECT_FALSE(std::filesystem::exists(path("out/repro.min.repro")));
}

TEST_F(CliDoctorTraining, AForwardGraphStillWritesAFormatOneRepro) {
  const std::string kir = file("fwd.kir", "graph g(%x: f32[4, 8]) {\n  %y = relu(%x) : f32[4, 8]\n  return %y\n}\n");
  CliResult r = kiln_cli("doctor -q " + kir + " --seed 0 -o " + path("out"), "KILN_INJECT=relu:accuracy");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string repro = read_text(path("out/repro.min.repro"));
  EXPECT_NE(repro.find("kiln-repro: 1\n"), std::string::npos) << repro;
  EXPECT_EQ(repro.find("check:"), std::string::npos) << repro;
}

// `check: gradients` needs format 2 (a format-1 reader would not know it); other values are errors at their line.
TEST_F(CliDoctorTraining, TheCheckKeyIsValidatedAtItsLine) {
  const std::string graph = "\ngraph g(%w: f32[4] grad) {\n  %y = tanh(%w) : f32[4]\n  return %y\n}\n";
  const std::string head = "backend: aot_eager\ninputs: seed 0\nfailure: accuracy\nmessage: \"\"\n";
  const std::string v1 = file("v1.repro", "kiln-repro: 1\n" + head + "check: gradients\n" + graph);
  CliResult old = kiln_cli("repro run " + v1);
  EXPECT_EQ(old.exit_code, 2) << old.output;
  EXPECT_NE(old.output.find(v1 + ":6:1: 'check: gradients' needs repro format 2"), std::string::npos) << old.output;
  const std::string bad = file("bad.repro", "kiln-repro: 2\n" + head + "check: grads\n" + graph);
  CliResult b = kiln_cli("repro run " + bad);
  EXPECT_EQ(b.exit_code, 2) << b.output;
  EXPECT_NE(b.output.find(bad + ":6:1: check is 'outputs' or 'gradients'"), std::string::npos) << b.output;
  // A well-formed gradient repro of a wrong VJP: it reproduces under the injection, and not without it.
  const std::string ok = file("ok.repro", "kiln-repro: 2\nconfig: KILN_INJECT=tanh:vjp\n" + head +
                                              "check: gradients\n" + graph);
  CliResult yes = kiln_cli("repro run " + ok);
  EXPECT_EQ(yes.exit_code, 1) << yes.output;
  EXPECT_NE(yes.output.find("REPRODUCES: accuracy"), std::string::npos) << yes.output;
  const std::string fixed = file("fixed.repro", "kiln-repro: 2\n" + head + "check: gradients\n" + graph);
  EXPECT_EQ(kiln_cli("repro run " + fixed).exit_code, 0);
}

}  // namespace
}  // namespace kiln::cli_test

namespace kiln::cli_test {
namespace {

// The AOT node step matches a value a decomposition made with the composite it stands for (graph.h
// ValueInfo::stands_for), so a decomposition bug's first diverging node is the injected op itself, not the first
// consumer of its wrong value.
TEST_F(CliTest, AnAotDecompositionBugDivergesFirstAtTheDecomposedOp) {
  const std::string kir = file("lse.kir", R"(graph train(%x: f32[8, 16], %w: f32[16, 16] grad) {
  %h = mm(%x, %w) : f32[8, 16]
  %s = sigmoid(%h) : f32[8, 16]
  %v = logsumexp(%s, [1]) : f32[8]
  %u = mul(%v, 2.0) : f32[8]
  return %u
}
)");
  CliResult r = kiln_cli("bisect -q " + kir + " --seed 0 -o " + path("r.json"), "KILN_INJECT=logsumexp:decomposition");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  nlohmann::json j = nlohmann::json::parse(read_text(path("r.json")));
  EXPECT_EQ(j["stage"], "aot_eager_decomp_partition") << j.dump(2);
  EXPECT_EQ(j["culprit"]["site"], "inductor:decomposition") << j.dump(2);
  const std::string node = j["divergence"]["node"];
  EXPECT_EQ(node.rfind("%v = logsumexp (line 4:", 0), 0u) << j.dump(2);
  EXPECT_NE(node.find("(computed as %"), std::string::npos) << node;
  EXPECT_EQ(j["divergence"]["step"], "the AOT forward graph") << j.dump(2);
}

}  // namespace
}  // namespace kiln::cli_test

namespace kiln::cli_test {
namespace {

// `--cmd` on a training bug: a script checking the gradients (`kiln run --check --grad`) on the rung kiln names in
// KILN_BACKEND finds the graph's answer: a wrong VJP fails first on aot_eager, and no site explains it.
TEST_F(CliTest, CmdFindsTheSameAnswerForAWrongVjp) {
  const bisect::InjectedGraph ig = bisect::injected_training_chain("vjp", 10);
  const std::string kir = file("chain.kir", ig.kir);
  const std::string script = file("check.sh", "#!/bin/sh\nexec '" KILN_CLI "' run " + kir +
                                              " --backend \"${KILN_BACKEND:-inductor}\" --check --grad\n");
  CliResult viacmd = kiln_cli("bisect -q --cmd 'sh " + script + "' --backend inductor -o " + path("cmd.json"),
                              "KILN_INJECT=" + ig.inject);
  ASSERT_EQ(viacmd.exit_code, 1) << viacmd.output;
  CliResult viagraph = kiln_cli("bisect -q " + kir + " --seed 0 -o " + path("graph.json"), "KILN_INJECT=" + ig.inject);
  ASSERT_EQ(viagraph.exit_code, 1) << viagraph.output;
  nlohmann::json c = nlohmann::json::parse(read_text(path("cmd.json")));
  nlohmann::json g = nlohmann::json::parse(read_text(path("graph.json")));
  EXPECT_EQ(c["stage"], "aot_eager") << c.dump(2);
  EXPECT_EQ(c["stage"], g["stage"]) << g.dump(2);
  EXPECT_EQ(c["outcome"], "unexplained") << c.dump(2);
  EXPECT_EQ(c["outcome"], g["outcome"]) << g.dump(2);
}

}  // namespace
}  // namespace kiln::cli_test

namespace kiln::cli_test {
namespace {

// Regression: under KILN_BISECT_* the inductor bypasses its graph cache, and the oracle's child compiled the
// graph twice (its compile step, then the run): the `bisect` log asked the first lowering twice. Now the run
// calls the compile step's program.
TEST_F(CliTest, AnOracleChildCompilesOnceUnderABisectionLimit) {
  const std::string repro = file("one.repro", R"(kiln-repro: 1
backend: inductor
config: KILN_BISECT_LIMIT=inductor:lowering=100
inputs: seed 0
failure: none
message: ""

graph g(%x: f32[4, 8]) {
  %y = relu(%x) : f32[4, 8]
  return %y
}
)");
  CliResult r = kiln_cli("repro run " + repro, "KILN_LOGS=bisect");
  EXPECT_NE(r.exit_code, 2) << r.output;  // it ran (what it concludes about a recorded `none` is not the point)
  EXPECT_NE(r.output.find("PASSES: the repro records no failure"), std::string::npos) << r.output;  // it ran
  size_t asked = 0;
  for (size_t at = r.output.find("inductor:lowering #0"); at != std::string::npos;
       at = r.output.find("inductor:lowering #0", at + 1))
    ++asked;
  EXPECT_EQ(asked, 1u) << r.output;
}

}  // namespace
}  // namespace kiln::cli_test
