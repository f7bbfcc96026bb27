// `kiln minify G --oracle torch` (minifier/torch_oracle.h, issue 37): PyTorch judges each candidate, as a user
// runs it. Planted compiler bugs (tests/torch_backends/standins.py: a wrong lowering of relu, a crash on tanh, a
// compile error on sigmoid) are each minified to the op alone; the result directory's candidate.py reproduces
// the bug with nothing but torch, and passes on an honest backend; one worker per -j slot serves every
// candidate, and a crashed one is restarted; bad input (no torch for that Python, a backend that does not
// load, a graph the backend compiles correctly) is exit 2 with what to do. Skipped without a python3 that has
// torch and numpy (ci/install-deps.sh installs Debian's python3-torch, PyTorch 1.13).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "cli_run.h"
#include "kir_ops_in.h"
#include "core/escape.h"
#include "graph/text.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using cli_test::CliResult;
using cli_test::CliTest;
using cli_test::kiln_cli;
using cli_test::read_text;
using cli_test::shell;

// One op of each planted bug, among ops the stand-ins compile correctly.
const char* kGraph = R"(graph chain(%x: f32[16, 8], %y: f32[16, 8]) {
  %a = add(%x, %y) : f32[16, 8]
  %b = mul(%a, 2.0) : f32[16, 8]
  %c = relu(%b) : f32[16, 8]
  %d = exp(%c) : f32[16, 8]
  %e = sub(%d, %x) : f32[16, 8]
  %t = tanh(%e) : f32[16, 8]
  %s = sigmoid(%t) : f32[16, 8]
  %f = abs(%s) : f32[16, 8]
  return %f
}
)";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The number in "workers: N PyTorch worker starts".
int worker_starts(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("workers: ([0-9]+) PyTorch worker starts"))) return -1;
  return std::stoi(m[1]);
}

class MinifyTorch : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    python_ = cli_test::python_with_torch();
    if (python_.empty()) GTEST_SKIP() << "no python3 with torch and numpy (Debian: python3-torch)";
    graph_ = file("chain.kir", kGraph);
  }
  std::string backend(const std::string& function) const {
    return cli_test::source_path("tests/torch_backends/standins.py").string() + ":" + function;
  }
  CliResult minify(const std::string& function, const std::string& out, const std::string& extra = "") {
    return kiln_cli("minify -q " + graph_ + " -o " + out + " --oracle torch --torch-python " + python_ +
                    " --torch-backend " + shell_quote(backend(function)) + " " + extra);
  }
  std::string python_, graph_;
};

TEST_F(MinifyTorch, AWrongLoweringShrinksToThatOpAndItsScriptReproducesInPyTorchAlone) {
  const std::string out = path("min");
  CliResult r = minify("wrong_relu", out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "failure: accuracy: the compiled outputs differ from eager by PyTorch's same() "
                                 "rule (fp64 reference) (in 3 of 3 runs of the original)")) << r.output;
  EXPECT_EQ(cli_test::op_names_in(fs::path(out) / "candidate.kir"), std::vector<std::string>{"relu"}) << r.output;
  EXPECT_TRUE(contains(r.output, "re-verified: PyTorch (backend ")) << r.output;
  // One worker served every candidate: PyTorch was imported once, not once per candidate.
  EXPECT_EQ(worker_starts(r.output), 1) << r.output;
  // The printed line reproduces in a clean shell: the script exits 1 under the planted bug...
  const size_t at = r.output.find("check it with: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at + 15, r.output.find('\n', at) - at - 15);
  EXPECT_TRUE(contains(line, "candidate.py")) << line;
  CliResult again = shell("env -i PATH=/usr/bin:/bin sh -c " + shell_quote(line));
  EXPECT_EQ(again.exit_code, 1) << line << "\n" << again.output;
  EXPECT_TRUE(contains(again.output, "FAILS: accuracy")) << again.output;
  // ...and 0 on an honest backend: the failure is the compiler's, not the script's.
  CliResult honest = shell("cd " + shell_quote(out) + " && " + python_ + " candidate.py " +
                           shell_quote(backend("honest")));
  EXPECT_EQ(honest.exit_code, 0) << honest.output;
}

TEST_F(MinifyTorch, ACrashingCompilerIsACrashAndEachCrashedWorkerIsReplaced) {
  const std::string out = path("min");
  CliResult r = minify("abort_on_tanh", out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "failure: crash: the PyTorch worker was killed by signal 6 (SIGABRT)")) << r.output;
  EXPECT_EQ(cli_test::op_names_in(fs::path(out) / "candidate.kir"), std::vector<std::string>{"tanh"}) << r.output;
  // Every failing candidate killed its worker: more starts than one, and fewer than the runs (passing candidates
  // reuse theirs).
  const int starts = worker_starts(r.output);
  EXPECT_GT(starts, 3) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("\\(([0-9]+) PyTorch runs"))) << r.output;
  EXPECT_LT(starts, std::stoi(m[1])) << r.output;
}

TEST_F(MinifyTorch, ACompileErrorShrinksToTheOpTheBackendRejectsWithParallelWorkers) {
  const std::string out = path("min");
  CliResult r = minify("reject_sigmoid", out, "-j 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "failure: compile_error: NotImplementedError: stand-in backend: no lowering for "
                                 "sigmoid")) << r.output;
  EXPECT_EQ(cli_test::op_names_in(fs::path(out) / "candidate.kir"), std::vector<std::string>{"sigmoid"}) << r.output;
  EXPECT_EQ(worker_starts(r.output), 2) << r.output;
  // --check-str pins the failure to PyTorch's output: a string it never prints leaves nothing to minify.
  CliResult pinned = minify("reject_sigmoid", path("pinned"), "--check-str 'no lowering for relu'");
  EXPECT_EQ(pinned.exit_code, 2) << pinned.output;
  EXPECT_TRUE(contains(pinned.output, "never contains \"no lowering for relu\"")) << pinned.output;
}

TEST_F(MinifyTorch, BadInputIsExit2WithWhatToDo) {
  CliResult honest = minify("honest", path("a"));
  EXPECT_EQ(honest.exit_code, 2) << honest.output;
  EXPECT_TRUE(contains(honest.output, "passes the original graph in 3 of 3 runs: nothing to minify")) << honest.output;

  CliResult missing = minify("no_such_function", path("b"));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(contains(missing.output, "defines no function no_such_function")) << missing.output;

  CliResult no_file = kiln_cli("minify -q " + graph_ + " --oracle torch --torch-backend nowhere.py:f");
  EXPECT_EQ(no_file.exit_code, 2) << no_file.output;
  EXPECT_TRUE(contains(no_file.output, "nowhere.py is not a file")) << no_file.output;

  CliResult no_python = kiln_cli("minify -q " + graph_ + " -o " + path("c") +
                                 " --oracle torch --torch-python /nonexistent/python3 --torch-backend " +
                                 shell_quote(backend("wrong_relu")));
  EXPECT_EQ(no_python.exit_code, 2) << no_python.output;
  EXPECT_TRUE(contains(no_python.output, "could not start the PyTorch worker")) << no_python.output;
  EXPECT_TRUE(contains(no_python.output, "--torch-python")) << no_python.output;

  CliResult exclusive = kiln_cli("minify -q " + graph_ + " --oracle torch --cmd true");
  EXPECT_EQ(exclusive.exit_code, 2) << exclusive.output;
  CliResult needs = kiln_cli("minify -q " + graph_ + " --torch-backend inductor");
  EXPECT_EQ(needs.exit_code, 2) << needs.output;
  CliResult reruns = kiln_cli("minify -q " + graph_ + " --reruns 2");
  EXPECT_EQ(reruns.exit_code, 2) << reruns.output;
  EXPECT_TRUE(contains(reruns.output, "--reruns applies to --cmd and --oracle torch")) << reruns.output;

  // A backend's name needs torch.compile (PyTorch 2.x); on 1.13 that is said, not run.
  if (shell(python_ + " -c 'import torch, sys; sys.exit(0 if hasattr(torch, \"compile\") else 1)'").exit_code != 0) {
    CliResult named = kiln_cli("minify -q " + graph_ + " -o " + path("d") + " --oracle torch --torch-python " +
                               python_ + " --torch-backend inductor");
    EXPECT_EQ(named.exit_code, 2) << named.output;
    EXPECT_TRUE(contains(named.output, "has no torch.compile: name the backend as FILE.py:FUNCTION")) << named.output;
  }
}

}  // namespace
}  // namespace kiln
