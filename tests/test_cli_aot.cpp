// `kiln aot` end to end (docs/cli.md): the three graphs written and readable by the other commands, printed
// without -o, located errors for bad files, the refusal of a graph without `grad` inputs, and KILN_INJECT's
// wrong VJP showing up in the joint graph's gradients.
#include <gtest/gtest.h>

#include "cli_run.h"

using namespace kiln::cli_test;

namespace {

const char* kLayer = R"(graph layer(%x: f32[4, 3], %w: f32[5, 3] grad, %b: f32[5] grad) {
  %h = linear(%x, %w, %b) : f32[4, 5]
  %a = relu(%h) : f32[4, 5]
  %s = sum(%a) : f32[]
  return %s
}
)";

class CliAot : public CliTest {};

TEST_F(CliAot, WritesJointForwardAndBackwardGraphs) {
  std::string g = file("layer.kir", kLayer);
  CliResult r = kiln_cli("aot " + g + " -o " + path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 primals, 1 tangents, 2 gradients"), std::string::npos) << r.output;
  for (const char* name : {"joint.kir", "forward.kir", "backward.kir"}) {
    CliResult v = kiln_cli("verify " + path("out/" + std::string(name)));
    EXPECT_EQ(v.exit_code, 0) << name << ": " << v.output;
  }
  std::string joint = read_text(dir_ / "out/joint.kir");
  EXPECT_NE(joint.find("%primals_1: f32[4, 3]"), std::string::npos) << joint;
  EXPECT_NE(joint.find("%tangents_1: f32[]"), std::string::npos) << joint;
  // The joint graph runs: its outputs are the loss and the two gradients.
  CliResult run = kiln_cli("run " + path("out/joint.kir") + " --seed 1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("output 2"), std::string::npos) << run.output;
}

TEST_F(CliAot, PrintsTheGraphsWithoutOut) {
  CliResult r = kiln_cli("aot " + file("layer.kir", kLayer));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"# joint.kir", "# forward.kir", "# backward.kir", "graph layer_backward("})
    EXPECT_NE(r.output.find(name), std::string::npos) << name << "\n" << r.output;
}

TEST_F(CliAot, MalformedFileExitsTwoWithItsLocation) {
  std::string g = file("bad.kir", "graph f(%x: f32[3] grad) {\n  %y = nosuchop(%x) : f32[3]\n  return %y\n}\n");
  CliResult r = kiln_cli("aot " + g);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.kir:2:"), std::string::npos) << r.output;
}

TEST_F(CliAot, GraphWithoutGradInputsExitsTwo) {
  std::string g = file("nograd.kir", "graph f(%x: f32[3]) {\n  %y = relu(%x) : f32[3]\n  return %y\n}\n");
  CliResult r = kiln_cli("aot " + g);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("requires grad"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("grad`"), std::string::npos) << r.output;
}

TEST_F(CliAot, InjectedWrongVjpChangesTheGradient) {
  std::string g = file("layer.kir", kLayer);
  ASSERT_EQ(kiln_cli("aot " + g + " -o " + path("good")).exit_code, 0);
  CliResult bad = kiln_cli("aot " + g + " -o " + path("bad"), "KILN_INJECT=relu:vjp");
  ASSERT_EQ(bad.exit_code, 0) << bad.output;
  CliResult a = kiln_cli("run " + path("good/joint.kir") + " --seed 3");
  CliResult b = kiln_cli("run " + path("bad/joint.kir") + " --seed 3");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto line = [](const std::string& out, const std::string& key) {
    size_t i = out.find(key);
    return i == std::string::npos ? std::string() : out.substr(i, out.find('\n', i) - i);
  };
  EXPECT_EQ(line(a.output, "output 0"), line(b.output, "output 0"));  // the loss is right
  EXPECT_NE(line(a.output, "output 1"), line(b.output, "output 1"));  // the gradient is not
}

TEST_F(CliAot, UnknownPartitionIsAUsageError) {
  CliResult r = kiln_cli("aot " + file("layer.kir", kLayer) + " --partition best");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
