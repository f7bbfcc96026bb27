// The inductor's pass list (src/inductor/compile.cpp): every pass dumps its result to KILN_DEBUG_DIR in order and
// logs under its own name; the compile cache key is derived from the CompileContext; the CPU is a CodeGenerator.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <regex>

#include "cli_run.h"
#include "core/options.h"
#include "graph/text.h"
#include "backends/cpu/backend.h"
#include "inductor/code_generator.h"
#include "inductor/compile.h"
#include "inductor/compile_options.h"

namespace kiln::cli_test {
namespace {

namespace fs = std::filesystem;

const char* kSoftmax = "graph s(%x: f32[4, 16]) {\n  %y = softmax(%x, -1) : f32[4, 16]\n  return %y\n}\n";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The names of the regular files directly in `dir`, sorted.
std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(CliTest, EveryPassDumpsItsResultToTheDebugDirInPipelineOrder) {
  ScopedOption dir(Opt::DebugDir, path("debug"));
  ScopedOption stream(Opt::StreamMinBytes, "1");
  std::shared_ptr<CompiledGraph> c = compile(graph::parse_graph(kSoftmax, "s.kir"));
  const fs::path graph_dir = dir_ / "debug" / "inductor" / "000_s";
  EXPECT_EQ(files_in(graph_dir),
            (std::vector<std::string>{"00_graph.kir", "01_context.txt", "02_decompose.kir", "03_lower.txt", "04_fuse.txt",
                                      "05_localise.txt", "06_stream.txt", "07_defer.txt", "08_plan_memory.txt"}));
  EXPECT_EQ(files_in(graph_dir / "kernels"), (std::vector<std::string>{"k0.ll"}));
  // Each dump shows what its pass added: the scratch row, the streamed and deferred loop, the frees; the last
  // one is the loop IR the program reports.
  EXPECT_NE(read_text(graph_dir / "05_localise.txt").find("kernel-local"), std::string::npos);
  EXPECT_EQ(read_text(graph_dir / "04_fuse.txt").find("kernel-local"), std::string::npos);
  EXPECT_NE(read_text(graph_dir / "06_stream.txt").find(" stream"), std::string::npos);
  EXPECT_NE(read_text(graph_dir / "07_defer.txt").find("deferred into loop"), std::string::npos);
  EXPECT_EQ(read_text(graph_dir / "06_stream.txt").find("deferred into loop"), std::string::npos);
  EXPECT_EQ(read_text(graph_dir / "08_plan_memory.txt"), c->loop_ir());
  EXPECT_NE(read_text(graph_dir / "01_context.txt").find("streaming_threshold_bytes 1\n"), std::string::npos);
}

// KILN_DEBUG_DIR never overwrites one dump with another: a recompile of the same graph, a second graph of the
// same name and another process each get a directory of their own, and index.tsv lists every one with its
// graph and the process that wrote it.
TEST_F(CliTest, DebugDumpsOfEqualNamesAndOfSeveralProcessesNeverOverwriteEachOther) {
  const std::string debug = path("debug");
  ScopedOption dir(Opt::DebugDir, debug);
  compile(graph::parse_graph(kSoftmax, "s.kir"), CompileOptions{});
  compile(graph::parse_graph("graph s(%x: f32[4, 16]) {\n  %y = exp(%x) : f32[4, 16]\n  return %y\n}\n", "s2.kir"),
          CompileOptions{});
  CliResult r = shell("kiln run " + file("s.kir", kSoftmax) + " --backend inductor",
                      "KILN_DEBUG_DIR=" + debug + " KILN_CACHE_DIR=" + path("cache"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(dir_ / "debug" / "inductor")) dirs.push_back(e.path().filename().string());
  std::sort(dirs.begin(), dirs.end());
  EXPECT_EQ(dirs, (std::vector<std::string>{"000_s", "001_s", "002_s"}));
  EXPECT_TRUE(contains(read_text(dir_ / "debug" / "inductor" / "000_s" / "00_graph.kir"), "softmax("));
  EXPECT_TRUE(contains(read_text(dir_ / "debug" / "inductor" / "001_s" / "00_graph.kir"), "exp("));
  EXPECT_TRUE(contains(read_text(dir_ / "debug" / "inductor" / "002_s" / "00_graph.kir"), "softmax("));
  // The index: one line per directory claimed (the inductor's and its pass pipelines'), this process's and the
  // CLI's, each with the graph's name and the pid.
  const std::string index = read_text(dir_ / "debug" / "index.tsv");
  const std::string mine = "\t" + std::to_string(::getpid()) + "\t";
  for (const char* d : {"inductor/000_s\ts", "inductor/001_s\ts", "inductor/002_s\ts"})
    EXPECT_TRUE(contains(index, std::string(d) + "\t")) << d << " not in\n" << index;
  EXPECT_TRUE(contains(index, "inductor/000_s\ts" + mine)) << index;
  EXPECT_FALSE(contains(index, "inductor/002_s\ts" + mine)) << "the CLI's compile is another process's:\n" << index;
  EXPECT_TRUE(contains(index, " run ")) << "each line ends with the command line that wrote it:\n" << index;
}

TEST_F(CliTest, EveryPassLogsUnderItsOwnName) {
  CliResult r = shell("kiln run " + file("s.kir", kSoftmax) + " --backend inductor",
                      "KILN_LOGS=passes,localise,stream,defer,memory_plan KILN_STREAM_MIN_BYTES=1 "
                      "KILN_CACHE_DIR=" + path("cache"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* pass : {"decompose", "cleanup", "lower", "fuse", "localise", "stream", "defer", "plan_memory",
                           "codegen"})
    EXPECT_TRUE(std::regex_search(r.output, std::regex(std::string(R"(\[kiln:passes\] inductor: graph s: pass )") + pass +
                                                       " \\(")))
        << pass << "\n" << r.output;
  EXPECT_TRUE(contains(r.output, "[kiln:localise] k0: ")) << r.output;
  EXPECT_TRUE(contains(r.output, "[kiln:stream] k0: stream the stores of")) << r.output;
  EXPECT_TRUE(contains(r.output, "[kiln:defer] k0: write ")) << r.output;
  EXPECT_TRUE(contains(r.output, "[kiln:memory_plan] ")) << r.output;
  // The fusion channel is the fuse pass's alone now.
  CliResult fusion = shell("kiln run " + file("s.kir", kSoftmax) + " --backend inductor",
                           "KILN_LOGS=fusion KILN_STREAM_MIN_BYTES=1 KILN_CACHE_DIR=" + path("cache"));
  EXPECT_TRUE(contains(fusion.output, "[kiln:fusion] fuse ")) << fusion.output;
  EXPECT_FALSE(contains(fusion.output, "stream the stores")) << fusion.output;
}

// The key is derived from the context: every field of the target is part of it.
TEST(CompileContext, EveryTargetFieldIsPartOfTheKey) {
  inductor::CompileContext base;
  base.target = kiln::cpu::host_code_generator().target();
  const std::string key = base.key_material();
  std::vector<std::function<void(inductor::Target&)>> changes = {
      [](inductor::Target& t) { t.backend += "x"; },
      [](inductor::Target& t) { t.description += "x"; },
      [](inductor::Target& t) { t.vector_bytes *= 2; },
      [](inductor::Target& t) { t.max_local_row_bytes += 1; },
      [](inductor::Target& t) { t.max_local_bytes_per_kernel += 1; },
      [](inductor::Target& t) { t.streaming_threshold_bytes += 1; },
      [](inductor::Target& t) { t.streaming_alignment *= 2; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    inductor::CompileContext changed = base;
    changes[i](changed.target);
    EXPECT_NE(changed.key_material(), key) << "change " << i;
  }
  inductor::CompileContext unfused = base;
  unfused.options.fuse = false;
  EXPECT_NE(unfused.key_material(), key);
  inductor::CompileContext injected = base;
  injected.inject.entries.push_back({"relu", InjectKind::Accuracy});
  EXPECT_NE(injected.key_material(), key);
}

// A structurally equal graph is reused only under the same context: a different streaming threshold (a field
// of the target) compiles afresh.
TEST(CompileContext, TheGraphCacheKeyFollowsTheTarget) {
  const graph::Graph g = graph::parse_graph(kSoftmax, "s.kir");
  std::shared_ptr<CompiledGraph> first, again, other;
  {
    ScopedOption stream(Opt::StreamMinBytes, "1");
    first = compile(g);
    again = compile(g);
  }
  {
    ScopedOption stream(Opt::StreamMinBytes, "1G");
    other = compile(g);
  }
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  EXPECT_NE(first->loop_ir(), other->loop_ir());
}

TEST(CodeGenerator, TheHostCodeGeneratorIsTheCpuWithItsPlacementPasses) {
  const inductor::CodeGenerator& b = kiln::cpu::host_code_generator();
  EXPECT_EQ(b.name(), "cpu");
  std::vector<std::string> passes;
  for (const inductor::SchedulePass& p : b.placement_passes()) passes.push_back(p.name);
  EXPECT_EQ(passes, (std::vector<std::string>{"stream", "defer"}));
  EXPECT_EQ(b.target().backend, "cpu");
  EXPECT_GT(b.target().streaming_threshold_bytes, 0);
}

}  // namespace
}  // namespace kiln::cli_test
