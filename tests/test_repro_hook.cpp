// The repro hook (KILN_REPRO_AFTER / KILN_REPRO_LEVEL) end to end through the C++ API: a program that calls
// kiln::compile with the hook installed gets, at each level of docs/minifier.md, the files that level writes,
// and `kiln repro run`'s code (reproduce) reproduces each. tests/test_cli_suite.cpp runs the same levels
// through `kiln run`.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <regex>

#include "core/options.h"
#include "graph/inputs.h"
#include "inductor/compile.h"
#include "minifier/hook.h"
#include "repro_hook_fixture.h"
#include "minifier/testing.h"
#include "repro/isolate.h"
#include "repro/reproduce.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class ReproHookApi : public ReproHookFixture {
 protected:
  // The one file matching `pattern`, read back and re-run as `kiln repro run` does: it must reproduce.
  ReproFile expect_one_reproducing(const std::string& pattern, FailureKind kind) {
    std::vector<fs::path> found = files(pattern);
    EXPECT_EQ(found.size(), 1u) << pattern;
    if (found.empty()) return {};
    ReproFile r = load_repro(found[0]);
    EXPECT_EQ(r.expected.kind, kind) << found[0];
    ReproOutcome o = reproduce(r, found[0], 60);
    EXPECT_TRUE(o.reproduces) << found[0] << ": observed " << o.observed.kind << ": " << o.observed.message;
    return r;
  }

  // Compiles the test graph (a relu in the middle of 12 ops) with the hook on at `level` and `inject`, and
  // runs it once; returns what the caller saw ("" when both succeeded).
  std::string compile_and_run(int level, const std::string& inject) {
    ScopedOption after(Opt::ReproAfter, "backend"), lv(Opt::ReproLevel, std::to_string(level)),
        inj(Opt::Inject, inject), debug(Opt::DebugDir, dir_.string());
    try {
      std::shared_ptr<CompiledGraph> program = compile(graph_.graph);
      (*program)(graph::seeded_inputs(graph_.graph, 0));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  minify::TestGraph graph_ = minify::relu_test_graph(12, 5);
};

TEST_F(ReproHookApi, Level1WritesTheCompileErrorsRepro) {
  EXPECT_NE(compile_and_run(1, "relu:compile_error"), "");  // the caller still sees its error
  ReproFile r = expect_one_reproducing(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.repro)", FailureKind::CompileError);
  EXPECT_EQ(r.graph.num_op_nodes(), 12);  // the whole graph as handed to the backend
  EXPECT_FALSE(r.stage.empty());
  EXPECT_TRUE(files(R"(.*\.min\.repro)").empty()) << "level 1 does not minify";
}

TEST_F(ReproHookApi, Level2AlsoMinifiesIt) {
  EXPECT_NE(compile_and_run(2, "relu:compile_error"), "");
  expect_one_reproducing(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.repro)", FailureKind::CompileError);
  ReproFile min = expect_one_reproducing(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)", FailureKind::CompileError);
  EXPECT_EQ(min.graph.num_op_nodes(), 1);
  // Level 2 leaves runtime errors alone.
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  EXPECT_NE(compile_and_run(2, "relu:runtime_error"), "");
  EXPECT_TRUE(files(R"(.*\.repro)").empty());
}

TEST_F(ReproHookApi, Level3WritesAndMinifiesRuntimeErrors) {
  EXPECT_NE(compile_and_run(3, "relu:runtime_error"), "");
  ReproFile min = expect_one_reproducing(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)", FailureKind::RuntimeError);
  EXPECT_EQ(min.graph.num_op_nodes(), 1);
  EXPECT_TRUE(files(R"(pending_.*)").empty()) << "the failure's repro replaces the pending one";
  // A good run leaves nothing behind.
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  EXPECT_EQ(compile_and_run(3, ""), "");
  EXPECT_TRUE(files(R"(.*\.repro)").empty());
}

TEST_F(ReproHookApi, Level3LeavesThePendingReproOfACrash) {
  IsolatedResult r = run_isolated([&] { return compile_and_run(3, "relu:crash"); }, 60, setup_limit_for(60));
  EXPECT_EQ(r.kind, FailureKind::Crash) << r.payload;
  expect_one_reproducing(R"(pending_[0-9a-f]{16}_[0-9]+\.repro)", FailureKind::Crash);
}

TEST_F(ReproHookApi, Level4MinifiesAccuracyFailures) {
  EXPECT_EQ(compile_and_run(4, "relu:accuracy"), "");  // the run itself succeeds
  ReproFile min = expect_one_reproducing(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)", FailureKind::Accuracy);
  EXPECT_EQ(min.graph.num_op_nodes(), 1);
}

}  // namespace
}  // namespace kiln
