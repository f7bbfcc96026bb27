// `kiln bisect` on a graph run for training (inputs marked `grad`: outputs and gradients judged) with the AOT
// injections, as a user runs it: a wrong VJP names aot_eager as the first bad rung, a wrong min-cut partition
// names aot_eager_decomp_partition, a decomposition bug the decomposition that makes it, a lowering bug the
// inductor's lowering; the first diverging node is in the AOT backward graph where the bug is; the printed
// reproducing command (`kiln run --check --grad`) fails and the rung below passes. Also `kiln run --grad` and the
// configuration flips of the subsystem search.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace kiln::cli_test {
namespace {

// x @ w, then pointwise ops the min-cut partitioner recomputes in the backward (the product it saves).
const char* const kTrainKir = R"(graph train(%x: f32[8, 16], %w: f32[16, 16] grad) {
  %h = mm(%x, %w) : f32[8, 16]
  %s = sigmoid(%h) : f32[8, 16]
  %t = tanh(%s) : f32[8, 16]
  %r = relu(%t) : f32[8, 16]
  %v = logsumexp(%r, [1]) : f32[8]
  %y = mul(%r, %s) : f32[8, 16]
  return %y, %v
}
)";

// Runs a printed command line ("NAME=VALUE kiln run ...") with the binary under test.
CliResult run_printed(const std::string& command, const std::string& env) {
  std::string cmd = command;
  cmd.replace(cmd.find("kiln run "), 4, "'" KILN_CLI "'");
  return shell(cmd, env);
}

class CliBisectTraining : public CliTest {
 protected:
  // `kiln bisect` under KILN_INJECT=inject: the JSON result, after checking exit 1 and the printed stage.
  nlohmann::json bisect(const std::string& inject, const std::string& stage) {
    kir_ = file("train.kir", kTrainKir);
    CliResult r = kiln_cli("bisect -q " + kir_ + " --seed 0 -o " + path("r.json"), "KILN_INJECT=" + inject);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("stage:       " + stage + "\n"), std::string::npos) << r.output;
    output_ = r.output;
    return nlohmann::json::parse(read_text(path("r.json")));
  }
  std::string kir_, output_;
};

TEST_F(CliBisectTraining, AWrongVjpFailsFirstOnAotEagerAndItsBackwardNodeDiverges) {
  nlohmann::json j = bisect("tanh:vjp", "aot_eager");
  EXPECT_EQ(j["stage"], "aot_eager") << j.dump(2);
  EXPECT_EQ(j["ladder"][0]["backend"], "eager");
  EXPECT_EQ(j["ladder"][0]["failure"], "none") << j.dump(2);
  EXPECT_NE(j["failure"]["message"].get<std::string>().find("the gradient of %w"), std::string::npos) << j.dump(2);
  EXPECT_EQ(j["divergence"]["step"], "the AOT backward graph") << j.dump(2);
  EXPECT_NE(output_.find("ladder:      eager passes, aot_eager FAILS (accuracy)"), std::string::npos) << output_;
  // The reproducing command checks the gradients: it fails on aot_eager and passes on eager.
  const std::string repro = j["repro_command"];
  EXPECT_NE(repro.find("--backend aot_eager --seed 0 --check --grad"), std::string::npos) << repro;
  EXPECT_EQ(run_printed(repro, "KILN_INJECT=tanh:vjp").exit_code, 1) << repro;
  CliResult eager = kiln_cli("run " + kir_ + " --seed 0 --backend eager --check --grad", "KILN_INJECT=tanh:vjp");
  EXPECT_EQ(eager.exit_code, 0) << eager.output;
}

TEST_F(CliBisectTraining, AWrongPartitionFailsFirstOnAotEagerDecompPartition) {
  nlohmann::json j = bisect("partition:accuracy", "aot_eager_decomp_partition");
  ASSERT_GE(j["ladder"].size(), 3u) << j.dump(2);
  EXPECT_EQ(j["ladder"][1]["backend"], "aot_eager");
  EXPECT_EQ(j["ladder"][1]["failure"], "none") << j.dump(2);
  EXPECT_EQ(j["divergence"]["step"], "the AOT backward graph") << j.dump(2);
  EXPECT_EQ(run_printed(j["repro_command"], "KILN_INJECT=partition:accuracy").exit_code, 1) << j["repro_command"];
  // A forward-only check cannot see it: the outputs are right.
  CliResult fwd = kiln_cli("run " + kir_ + " --seed 0 --backend aot_eager_decomp_partition --check",
                           "KILN_INJECT=partition:accuracy");
  EXPECT_EQ(fwd.exit_code, 0) << fwd.output;
}

TEST_F(CliBisectTraining, ADecompositionBugIsTheDecompositionOfTheDecomposingRung) {
  // logsumexp has a VJP, so the joint graph keeps it and the rung's decompositions reach it (var has none: AOT
  // differentiates through its decomposition, which is not the inductor's).
  nlohmann::json j = bisect("logsumexp:decomposition", "aot_eager_decomp_partition");
  EXPECT_EQ(j["outcome"], "bisected") << j.dump(2);
  EXPECT_EQ(j["culprit"]["site"], "inductor:decomposition") << j.dump(2);
  EXPECT_NE(j["culprit"]["location"].get<std::string>().find("%v = logsumexp (line "), std::string::npos) << j.dump(2);
  EXPECT_EQ(j["culprit"]["application"], 0) << j.dump(2);
}

TEST_F(CliBisectTraining, ALoweringBugIsTheInductorsLowering) {
  nlohmann::json j = bisect("relu:accuracy", "inductor");
  EXPECT_EQ(j["outcome"], "bisected") << j.dump(2);
  EXPECT_EQ(j["culprit"]["site"], "inductor:lowering") << j.dump(2);
  EXPECT_NE(j["culprit"]["location"].get<std::string>().find("%r = relu (line "), std::string::npos) << j.dump(2);
}

// KILN_INJECT=partition:accuracy changes the min-cut backward (one recomputed value + 1) and nothing else.
TEST_F(CliBisectTraining, ThePartitionInjectionChangesOnlyTheMinCutBackward) {
  const std::string kir = file("train.kir", kTrainKir);
  CliResult mincut = kiln_cli("aot " + kir + " --partition min-cut", "KILN_INJECT=partition:accuracy");
  EXPECT_EQ(mincut.exit_code, 0) << mincut.output;
  EXPECT_NE(mincut.output.find("_injected = add("), std::string::npos) << mincut.output;
  CliResult plain = kiln_cli("aot " + kir + " --partition min-cut");
  EXPECT_EQ(plain.output.find("_injected"), std::string::npos) << plain.output;
  CliResult def = kiln_cli("aot " + kir, "KILN_INJECT=partition:accuracy");
  EXPECT_EQ(def.exit_code, 0) << def.output;
  EXPECT_EQ(def.output.find("_injected"), std::string::npos) << def.output;
  CliResult bad = kiln_cli("aot " + kir, "KILN_INJECT=partition:crash");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("partition supports only the kind accuracy"), std::string::npos) << bad.output;
}

TEST_F(CliBisectTraining, RunGradNeedsAGradInputAndCheck) {
  const std::string kir = file("plain.kir", "graph g(%x: f32[4]) {\n  %y = sin(%x) : f32[4]\n  return %y\n}\n");
  CliResult r = kiln_cli("run " + kir + " --check --grad");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--grad needs inputs marked `grad`"), std::string::npos) << r.output;
  EXPECT_EQ(kiln_cli("run " + file("t.kir", kTrainKir) + " --grad").exit_code, 2);
}

// The flips come after the subsystem search: a command that fails unless the vector width is 1 is explained
// by no site and by that flip, and the report says so with the command that passes.
TEST_F(CliBisectTraining, AFailureOnlyAFlipExplainsNamesTheFlip) {
  CliResult r = kiln_cli("bisect -q --cmd 'test \"$KILN_VECTOR_WIDTH\" = 1' -o " + path("f.json"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the failure goes away with scalar code (vector width 1) (KILN_VECTOR_WIDTH=1)"),
            std::string::npos) << r.output;
  nlohmann::json j = nlohmann::json::parse(read_text(path("f.json")));
  EXPECT_EQ(j["culprit"]["is_flip"], true) << j.dump(2);
  EXPECT_NE(j["good_command"].get<std::string>().find("KILN_VECTOR_WIDTH=1 "), std::string::npos) << j.dump(2);
  EXPECT_NE(j["divergence_note"].get<std::string>().find("not visible to kiln"), std::string::npos) << j.dump(2);
}

}  // namespace
}  // namespace kiln::cli_test
