// The CLI suite (issue 23): every command and documented option exercised through the `kiln` binary as a user
// runs it, asserting what the user sees: exit codes, the files written and their content, the log lines. The
// repro hook (KILN_REPRO_AFTER / KILN_REPRO_LEVEL) end to end per level, bisection sites, every log channel,
// the op table's inductor column, one verdict for `run --check` and `minify`, `--emit torch` scripts run by
// PyTorch (where python3 has torch), and the README's demo (ci/demo.sh).
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "cli_run.h"
#include "graph/text.h"
#include "inductor/lowering_probe.h"
#include "ops/op_info.h"

using namespace kiln::cli_test;
namespace fs = std::filesystem;

namespace {

std::string example(const std::string& name) { return source_path("examples/" + name).string(); }

// Files in `dir` whose names match `pattern`.
std::vector<fs::path> files_matching(const fs::path& dir, const std::string& pattern) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  const std::regex re(pattern);
  for (const auto& e : fs::directory_iterator(dir))
    if (std::regex_match(e.path().filename().string(), re)) out.push_back(e.path());
  return out;
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The number of op nodes of the graph in a repro file (lines `%x = op(...)`).
int op_nodes_in(const std::string& repro) {
  int n = 0;
  std::istringstream in(repro.substr(repro.find("\ngraph ")));
  for (std::string line; std::getline(in, line);)
    n += std::regex_search(line, std::regex(R"(^\s+%[^=]+= [a-z_0-9]+\()")) && !contains(line, "= constant");
  return n;
}

}  // namespace

// ---------------------------------------------------------------- the repro hook, per level

class ReproHook : public CliTest {
 protected:
  // `kiln run examples/conv_block.kir --backend inductor` with the hook on at `level` and `inject`.
  CliResult run_with_hook(int level, const std::string& inject, const std::string& graph = "conv_block.kir") {
    return shell("kiln run " + example(graph) + " --backend inductor",
                 "KILN_REPRO_AFTER=backend KILN_REPRO_LEVEL=" + std::to_string(level) + " KILN_INJECT=" + inject +
                     " KILN_DEBUG_DIR=" + path("debug"));
  }
  fs::path debug() const { return dir_ / "debug"; }
};

TEST_F(ReproHook, Level1WritesTheRepro) {
  CliResult r = run_with_hook(1, "relu:compile_error");
  EXPECT_EQ(r.exit_code, 2) << r.output;  // the compile error is still the command's result
  auto repros = files_matching(debug(), R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.repro)");
  ASSERT_EQ(repros.size(), 1u) << r.output;
  EXPECT_TRUE(files_matching(debug(), R"(.*\.min\.repro)").empty()) << "level 1 does not minify";
  EXPECT_TRUE(contains(r.output, "kiln: wrote repro " + repros[0].string())) << r.output;
  std::string text = read_text(repros[0]);
  EXPECT_TRUE(contains(text, "\nfailure: compile_error\n")) << text;
  EXPECT_TRUE(contains(text, "\nstage: inductor/codegen\n")) << text;
  EXPECT_TRUE(contains(text, "\nconfig: KILN_INJECT=relu:compile_error\n")) << text;
  EXPECT_EQ(op_nodes_in(text), 5) << text;  // the whole graph as handed to the backend (with exp)
  CliResult check = shell("kiln repro run " + repros[0].string());
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_TRUE(contains(check.output, "REPRODUCES")) << check.output;
}

TEST_F(ReproHook, Level2MinifiesTheCompileError) {
  CliResult r = run_with_hook(2, "relu:compile_error");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  auto mins = files_matching(debug(), R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)");
  ASSERT_EQ(mins.size(), 1u) << r.output;
  EXPECT_TRUE(contains(r.output, "kiln: minified 5 -> 1 op nodes")) << r.output;
  std::string text = read_text(mins[0]);
  EXPECT_EQ(op_nodes_in(text), 1) << text;
  EXPECT_TRUE(contains(text, "= relu(")) << text;
  EXPECT_TRUE(contains(text, "\nstage: inductor/codegen\n")) << text;
  EXPECT_EQ(shell("kiln repro run " + mins[0].string()).exit_code, 1);
}

TEST_F(ReproHook, Level2IgnoresRuntimeErrors) {
  CliResult r = run_with_hook(2, "relu:runtime_error");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(files_matching(debug(), R"(repro_.*)").empty()) << r.output;
}

TEST_F(ReproHook, Level3WritesAndMinifiesRuntimeErrors) {
  CliResult r = run_with_hook(3, "relu:runtime_error");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  auto mins = files_matching(debug(), R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)");
  ASSERT_EQ(mins.size(), 1u) << r.output;
  std::string text = read_text(mins[0]);
  EXPECT_TRUE(contains(text, "\nfailure: runtime_error\n")) << text;
  EXPECT_EQ(op_nodes_in(text), 1) << text;
  EXPECT_TRUE(files_matching(debug(), R"(pending_.*\.repro)").empty()) << "the failure's repro replaces the pending one";
  EXPECT_EQ(shell("kiln repro run " + mins[0].string()).exit_code, 1);
}

// A crash ends the process: what is left is the graph saved before compiling, and it reproduces the crash.
TEST_F(ReproHook, Level3LeavesThePendingReproOfACrash) {
  CliResult r = run_with_hook(3, "relu:crash");
  if (KILN_SANITIZED) EXPECT_NE(r.exit_code, 0) << r.output;  // ASan reports the SIGSEGV and exits
  else EXPECT_NE(r.signal, 0) << r.exit_code << ": " << r.output;
  auto pending = files_matching(debug(), R"(pending_[0-9a-f]{16}_[0-9]+\.repro)");
  ASSERT_EQ(pending.size(), 1u) << r.output;
  CliResult check = shell("kiln repro run " + pending[0].string());
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_TRUE(contains(check.output, "REPRODUCES: crash")) << check.output;
}

TEST_F(ReproHook, Level3RemovesThePendingReproAfterAGoodRun) {
  CliResult r = run_with_hook(3, "");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(files_matching(debug(), R"(.*\.repro)").empty()) << r.output;
}

TEST_F(ReproHook, Level4MinifiesAccuracyFailures) {
  CliResult r = run_with_hook(4, "relu:accuracy");
  EXPECT_EQ(r.exit_code, 0) << r.output;  // without --check the run itself succeeds
  auto mins = files_matching(debug(), R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)");
  ASSERT_EQ(mins.size(), 1u) << r.output;
  std::string text = read_text(mins[0]);
  EXPECT_TRUE(contains(text, "\nfailure: accuracy\n")) << text;
  EXPECT_EQ(op_nodes_in(text), 1) << text;
  EXPECT_EQ(shell("kiln repro run " + mins[0].string()).exit_code, 1);
}

TEST_F(ReproHook, OffWritesNothing) {
  CliResult r = shell("kiln run " + example("conv_block.kir") + " --backend inductor",
                      "KILN_INJECT=relu:compile_error KILN_DEBUG_DIR=" + path("debug"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(files_matching(debug(), R"(.*\.repro)").empty());
}

// capture and AOT are not built: choosing them must not look like a working hook.
TEST_F(ReproHook, AStageNothingServesIsNamed) {
  CliResult r = shell("kiln run " + example("conv_block.kir") + " --backend inductor",
                      "KILN_REPRO_AFTER=aot KILN_INJECT=relu:compile_error KILN_DEBUG_DIR=" + path("debug"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "kiln: warning: KILN_REPRO_AFTER=aot: this compile serves stage backend")) << r.output;
  EXPECT_TRUE(files_matching(debug(), R"(.*\.repro)").empty());
}

// ---------------------------------------------------------------- bisection

const char* kTwice = R"(graph twice(%x: f32[8]) {
  %a = exp(%x) : f32[8]
  %b = exp(%x) : f32[8]
  %s = add(%a, %b) : f32[8]
  return %s
}
)";

TEST_F(CliTest, BisectDisablePassesStageSkipsThePass) {
  std::string g = file("g.kir", kTwice);
  CliResult on = shell("kiln run " + g + " --backend inductor", "KILN_LOGS=passes");
  EXPECT_EQ(on.exit_code, 0) << on.output;
  EXPECT_TRUE(contains(on.output, "[kiln:passes] inductor: cse changed the graph")) << on.output;
  CliResult off = shell("kiln run " + g + " --backend inductor", "KILN_LOGS=passes KILN_BISECT_DISABLE=passes:cse");
  EXPECT_EQ(off.exit_code, 0) << off.output;
  EXPECT_TRUE(contains(off.output, "[kiln:passes] inductor: cse skipped by the bisection hook")) << off.output;
  EXPECT_FALSE(contains(off.output, "cse changed the graph")) << off.output;
  CliResult limit = shell("kiln run " + g + " --backend inductor", "KILN_LOGS=bisect KILN_BISECT_LIMIT=passes=1");
  EXPECT_EQ(limit.exit_code, 0) << limit.output;
  EXPECT_TRUE(contains(limit.output, "[kiln:bisect] passes:cse #0 (stage #1): skip (KILN_BISECT_LIMIT passes=1)"))
      << limit.output;
}

TEST_F(CliTest, BisectRejectsNamesNoSiteHas) {
  std::string g = file("g.kir", kTwice);
  for (const char* bad : {"KILN_BISECT_DISABLE=passes:cs", "KILN_BISECT_DISABLE=pases", "KILN_BISECT_LIMIT=inductor:fuse=3"}) {
    CliResult r = shell("kiln run " + g + " --backend inductor", bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "no bisection site is called")) << bad << ": " << r.output;
  }
  CliResult r = shell("kiln run " + g + " --backend inductor", "KILN_BISECT_DISABLE=passes:cs");
  EXPECT_TRUE(contains(r.output, "did you mean 'passes:cse'?")) << r.output;
  CliResult empty = shell("kiln run " + g + " --backend inductor", "KILN_BISECT_DISABLE=inductor:");  // malformed
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_TRUE(contains(empty.output, "'' is not a subsystem name")) << empty.output;
}

TEST_F(CliTest, BisectWarnsWhenANamedSiteNeverAnswered) {
  std::string g = file("g.kir", kTwice);  // no softmax: the NaN-insensitive max site is never asked
  CliResult r = shell("kiln run " + g + " --backend inductor", "KILN_BISECT_DISABLE=inductor:nan_insensitive_max");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "kiln: warning: KILN_BISECT_DISABLE=inductor:nan_insensitive_max changed nothing "
                                 "in this run: that site was never asked"))
      << r.output;
  CliResult quiet = shell("kiln run " + g + " --backend inductor", "KILN_BISECT_DISABLE=passes:cse");
  EXPECT_FALSE(contains(quiet.output, "warning")) << quiet.output;
}

// The registry the settings are checked against lists every site in the sources, as the binary prints it.
TEST_F(CliTest, BisectSiteRegistryMatchesTheSources) {
  const std::string listed = shell("kiln --help-options-md").output;
  std::set<std::string> sites;
  for (const auto& e : fs::recursive_directory_iterator(source_path("src"))) {
    if (e.path().extension() != ".cpp") continue;
    const std::string text = read_text(e.path());
    std::regex call(R"re(should_run\("(\w+)", "(\w+)")re"), pass(R"re(return \{"(\w+)", )re");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it)
      sites.insert((*it)[1].str() + ":" + (*it)[2].str());
    if (e.path().filename() == "passes.cpp")
      for (auto it = std::sregex_iterator(text.begin(), text.end(), pass); it != std::sregex_iterator(); ++it)
        sites.insert("passes:" + (*it)[1].str());
  }
  EXPECT_GE(sites.size(), 11u);  // the regex finds the sites (11 since the accumulate pass went)
  for (const std::string& site : sites) {
    const std::string stage = site.substr(0, site.find(':')), subsystem = site.substr(site.find(':') + 1);
    EXPECT_TRUE(std::regex_search(listed, std::regex("- `" + stage + "`: [^\n]*`" + subsystem + "`"))) << site;
  }
}

// ---------------------------------------------------------------- log channels

// The command that makes each channel print; the channel list is the binary's own (`kiln --help-options`), so
// a channel added without a producer, or listed without printing, fails here.
TEST_F(CliTest, EveryLogChannelPrints) {
  CliResult help = shell("kiln --help-options");
  ASSERT_EQ(help.exit_code, 0);
  std::string listed = help.output.substr(help.output.find("Log channels"));
  std::set<std::string> channels;
  std::istringstream in(listed);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex(R"(^  ([a-z_]+) )"))) channels.insert(m[1]);
  }
  ASSERT_GE(channels.size(), 5u) << listed;
  const std::string cache = " KILN_CACHE_DIR=" + path("cache");
  const std::string capture_demo = "'" KILN_BINARY_DIR "/kiln-capture-demo' 2";  // kiln::compile's channels
  const std::map<std::string, std::string> producer = {
      {"interpreter", "kiln run " + example("softmax.kir") + " --backend eager"}, {"graph_breaks", capture_demo},
      {"recompiles", capture_demo}, {"recompiles_verbose", capture_demo}, {"guards", capture_demo},
      {"graph_code", capture_demo}, {"capture_ops", capture_demo},
      {"partitioner", "kiln aot --partition min-cut " + example("mlp.kir")},
      {"aot_joint_graph", "kiln aot " + example("mlp.kir")}, {"aot_graphs", "kiln aot " + example("mlp.kir")},
      // max-autotune times kernels on a GPU: CudaGpuAutotuneCli (test_cuda_autotune.cpp) checks it prints there.
      {"autotune", ""},
  };
  for (const std::string& c : channels) {
    auto it = producer.find(c);
    if (it != producer.end() && it->second.empty()) continue;
    std::string cmd = it != producer.end() ? it->second : "kiln run " + example("softmax.kir") + " --backend inductor";
    CliResult r = shell(cmd, "KILN_LOGS=" + c + cache);
    EXPECT_EQ(r.exit_code, 0) << c << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "[kiln:" + c + "] ")) << "KILN_LOGS=" << c << " printed nothing for: " << cmd;
  }
}

// KILN_LOGS=graph: every example's graph as it enters and leaves the inductor and its pass pipeline.
TEST_F(CliTest, GraphChannelPrintsEveryStageBoundaryForEveryExample) {
  for (const auto& e : fs::directory_iterator(source_path("examples"))) {
    if (e.path().extension() != ".kir") continue;
    CliResult r = shell("kiln run " + e.path().string() + " --backend inductor", "KILN_LOGS=graph");
    EXPECT_EQ(r.exit_code, 0) << e.path() << r.output;
    for (const char* boundary : {"enters the inductor:", "after decomposition:", "inductor: graph", "enters the passes:",
                                 "leaves the passes", "lowered to loop IR:", "leaves the inductor as scheduled loop IR:"})
      EXPECT_TRUE(contains(r.output, boundary)) << e.path() << ": no '" << boundary << "'";
  }
}

// ---------------------------------------------------------------- kiln ops

TEST_F(CliTest, OpsSaysWhatTheInductorDoesWithEachOp) {
  CliResult r = shell("kiln ops");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto row = [&](const std::string& op) {
    std::smatch m;
    std::regex re("\n" + op + " +[^\n]*");
    return std::regex_search(r.output, m, re) ? m.str().substr(1) : std::string();
  };
  EXPECT_TRUE(std::regex_search(row("relu"), std::regex(R"(relu +pointwise .* lowered  )"))) << row("relu");
  EXPECT_TRUE(contains(row("linear"), " decomposed ")) << row("linear");
  EXPECT_TRUE(contains(row("mm"), " extern ")) << row("mm");
  EXPECT_TRUE(contains(row("mm"), "[matrix product: runs BLAS (extern kernel)]")) << row("mm");
  EXPECT_TRUE(contains(row("bernoulli"), "[random op:")) << row("bernoulli");
  EXPECT_TRUE(contains(row("sum"), " lowered ")) << row("sum");
  EXPECT_TRUE(contains(row("permute"), " lowered ")) << row("permute");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(inductor: (\d+) lowered, (\d+) decomposed, (\d+) extern, (\d+) unknown)")))
      << r.output;
  EXPECT_GE(std::stoi(m[1]), 80) << m.str();
  // Only the backward helpers (whose int-list arguments must agree with their tensors) resist the probe.
  std::regex unknown_row(R"(\n([a-z_0-9]+) +([a-z]+) [^\n]* \? +[^\n]*)");
  int unknown = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), unknown_row); it != std::sregex_iterator(); ++it) {
    EXPECT_EQ((*it)[2].str(), "backward") << it->str();
    ++unknown;
  }
  EXPECT_EQ(unknown, std::stoi(m[4]));
  CliResult missing = shell("kiln ops --missing");
  EXPECT_EQ(missing.exit_code, 0);
  EXPECT_TRUE(contains(missing.output, " ops: ")) << missing.output;
}

// ---------------------------------------------------------------- one verdict

// An integer output off by one: `kiln run --check` and `kiln minify` (no --accuracy) give the same verdict.
TEST_F(CliTest, RunCheckAndMinifyAgreeOnIntegerMismatches) {
  std::string g = file("ints.kir", R"(graph ints(%a: i64[4], %b: i64[4]) {
  %s = add(%a, %b) : i64[4]
  %t = mul(%s, 3) : i64[4]
  return %t
}
)");
  const std::string env = "KILN_INJECT=add:accuracy KILN_CACHE_DIR=" + path("cache");
  CliResult check = shell("kiln run --check --backend inductor " + g, env);
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_TRUE(contains(check.output, "check against the fp64 reference: FAIL")) << check.output;
  CliResult min = shell("kiln minify -q --backend inductor " + g + " -o " + path("ints.repro"), env);
  EXPECT_EQ(min.exit_code, 0) << min.output;
  EXPECT_TRUE(contains(min.output, "failure: accuracy: FAIL")) << min.output;
  EXPECT_FALSE(contains(min.output, "matches the fp64 reference")) << min.output;
  CliResult acc = shell("kiln minify -q --accuracy --backend inductor " + g + " -o " + path("ints2.repro"), env);
  EXPECT_EQ(acc.exit_code, 2) << acc.output;  // --accuracy ignores integer outputs, and says so
}

// ---------------------------------------------------------------- kiln minify's options, as documented

class MinifyCli : public CliTest {
 protected:
  CliResult minify(const std::string& args, const std::string& inject = "relu:accuracy") {
    return shell("kiln minify -q --backend inductor " + args, "KILN_INJECT=" + inject + " KILN_CACHE_DIR=" + path("cache"));
  }
};

TEST_F(MinifyCli, StrictAccuracyComparesIntegerOutputs) {
  std::string g = file("ints.kir", "graph ints(%a: i64[4], %b: i64[4]) {\n  %s = add(%a, %b) : i64[4]\n"
                                   "  %t = mul(%s, 3) : i64[4]\n  return %t\n}\n");
  CliResult r = minify("--strict-accuracy " + g + " -o " + path("s.repro"), "add:accuracy");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "FAIL by exact")) << r.output;
  EXPECT_NE(shell("kiln minify --accuracy --strict-accuracy --backend inductor " + g).exit_code, 0);  // exclusive
}

TEST_F(MinifyCli, CheckStrSelectsTheError) {
  const std::string g = example("conv_block.kir");
  CliResult ok = minify(g + " -o " + path("c.repro") + " --check-str 'LLVM IR verification'", "relu:compile_error");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  CliResult other = minify(g + " -o " + path("c2.repro") + " --check-str nope", "relu:compile_error");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_TRUE(contains(other.output, "--check-str: the graph's failure (compile_error) does not contain \"nope\""))
      << other.output;
}

TEST_F(MinifyCli, TolIsTheComparatorTolerance) {
  CliResult loose = minify(example("conv_block.kir") + " -o " + path("t.repro") + " --tol 10");
  EXPECT_EQ(loose.exit_code, 2) << loose.output;
  EXPECT_TRUE(contains(loose.output, "within tolerance 10): nothing to minify")) << loose.output;
  CliResult r = minify(example("conv_block.kir") + " -o " + path("t2.repro") + " --tol 0.001");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(read_text(path("t2.repro")), "\ntolerance: 0.001\n")) << read_text(path("t2.repro"));
}

// -j, --budget/--spill-dir, --inputs and --seed change how, never what: each ends on the relu.
TEST_F(MinifyCli, JobsBudgetInputsAndSeedReachTheSameResult) {
  const std::string g = example("conv_block.kir");
  ASSERT_EQ(shell("kiln run " + g + " --seed 4 --dump " + path("in4")).exit_code, 0);
  for (const std::string& args : {std::string("-j 2"), "--budget 0 --spill-dir " + dir_.string(),
                                  "--inputs " + path("in4"), std::string("--seed 7")}) {
    CliResult r = minify(g + " -o " + path("m.repro") + " " + args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "minified 5 -> 1 op nodes")) << args << ": " << r.output;
    EXPECT_TRUE(contains(read_text(path("m.repro")), "= relu(")) << args;
  }
  CliResult missing = minify(g + " --budget 0 --spill-dir " + path("nonexistent/x"));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(contains(missing.output, "cannot create a temporary directory")) << missing.output;
}

TEST_F(MinifyCli, ResumeContinuesItsOwnRunOnly) {
  ASSERT_EQ(minify(example("conv_block.kir") + " -o " + path("r.repro")).exit_code, 0);
  CliResult again = minify(example("conv_block.kir") + " -o " + path("r.repro") + " --resume");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_TRUE(contains(again.output, "re-verified: kiln repro run: REPRODUCES")) << again.output;
  CliResult other = minify(example("mlp.kir") + " -o " + path("r.repro") + " --resume");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_TRUE(contains(other.output, "cannot resume")) << other.output;
}

TEST_F(MinifyCli, ReproRunTakesATimeout) {
  ASSERT_EQ(minify(example("conv_block.kir") + " -o " + path("r.repro"), "relu:crash").exit_code, 0);
  CliResult r = shell("kiln repro run " + path("r.repro") + " --timeout 30");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "REPRODUCES: crash")) << r.output;
}

// ---------------------------------------------------------------- repro files and the comparator's words

TEST_F(CliTest, MinifiedReproCarriesTheStage) {
  CliResult r = shell("kiln minify -q " + example("conv_block.kir") + " --backend inductor -o " + path("c.repro"),
                      "KILN_INJECT=relu:compile_error KILN_CACHE_DIR=" + path("cache"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(read_text(path("c.repro")), "\nstage: inductor/codegen\n")) << read_text(path("c.repro"));
}

TEST_F(CliTest, RmseVerdictShowsTheWholeAllowedBound) {
  std::string g = file("lossy.kir", R"(graph lossy(%x: f16[2000]) {
  %a = add(%x, 1000) : f16[2000]
  %b = sub(%a, 1000) : f16[2000]
  return %b
}
)");
  // Eager in f16 is the comparator's baseline (it loses x's low bits too): a backend that computes sub wrongly.
  CliResult r = shell("kiln run --check --backend inductor " + g, "KILN_INJECT=sub:accuracy");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(allowed \S+ = 3 x eager's \S+ \+ tol/10 1e-05\))"))) << r.output;
}

// The bundled demo graph gets meaningful inputs: no NaN from a negative running variance.
TEST_F(CliTest, ConvBlockExampleIsFinite) {
  CliResult r = shell("kiln run " + example("conv_block.kir") + " --seed 0 --check");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "nan 0  inf 0")) << r.output;
}

// ---------------------------------------------------------------- --emit torch, run by PyTorch

class EmitTorch : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    python_ = python_with_torch();
    if (python_.empty()) GTEST_SKIP() << "no python3 with torch and numpy (Debian: python3-torch)";
  }
  // `kiln run G --dump D --emit torch`, then the script (eager only; torch.compile where asked and present).
  CliResult run_script(const std::string& graph, const std::string& script_args = "none") {
    std::string d = path("dump_" + fs::path(graph).stem().string());
    CliResult r = shell("kiln run " + graph + " --seed 0 --dump " + d + " --emit torch");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::string script = d + "/" + fs::path(graph).stem().string() + ".py";
    EXPECT_TRUE(contains(r.output, "wrote " + script)) << r.output;
    return shell(python_ + " " + script + " " + script_args);
  }
  std::string python_;
};

// Every example, and the graphs of tests/emit_torch/ (the findings: names that sanitise alike, bf16 inputs,
// defaulted None arguments, cross_entropy and batch_norm): the script runs and PyTorch agrees with kiln.
// ci/emit_torch_check.sh runs the same scripts under torch.compile on a newer PyTorch.
TEST_F(EmitTorch, EveryExampleRunsInPyTorchAndMatchesKiln) {
  int graphs = 0;
  for (const char* dir : {"examples", "tests/emit_torch"}) {
    for (const auto& e : fs::directory_iterator(source_path(dir))) {
      if (e.path().extension() != ".kir") continue;
      ++graphs;
      CliResult r = run_script(e.path().string());
      EXPECT_EQ(r.exit_code, 0) << e.path() << ":\n" << r.output;
      EXPECT_TRUE(contains(r.output, "PyTorch eager vs kiln: output 0: ok")) << e.path() << ":\n" << r.output;
      EXPECT_FALSE(contains(r.output, "MISMATCH")) << e.path() << ":\n" << r.output;
    }
  }
  EXPECT_GE(graphs, 10);
}

// Every op of the table, called as `kiln ops` probes it (inductor/lowering_probe.h): kiln runs the one-node
// graph, and PyTorch runs the emitted script (all scripts in one python process) and must agree. Random ops
// run without kiln's outputs (PyTorch draws other numbers). Known gaps are listed with their reason.
TEST_F(EmitTorch, EveryOpsProbeCallRunsInPyTorchAndMatchesKiln) {
  const std::map<std::string, std::string> known = {
      {"rms_norm", "aten.rms_norm needs PyTorch 2.4"},
      {"philox_rand", "kiln's functional RNG op: PyTorch's rngprims.philox_rand is CUDA-only, with another schema"},
  };
  std::string list;
  int ops = 0;
  for (const kiln::OpInfo& op : kiln::all_ops()) {
    const kiln::inductor::ProbeGraph probe = kiln::inductor::one_node_graph(op);
    if (!probe.decision || known.count(std::string(op.name))) continue;
    const std::string name(op.name);
    std::string kir = file(name + ".kir", kiln::graph::print_graph(probe.graph));
    CliResult r = shell("kiln run " + kir + " --seed 0 --dump " + path("d_" + name) + " --emit torch");
    if (r.exit_code != 0) continue;  // kiln refuses the probe's values (e.g. a division by an integer zero)
    if (op.kind == kiln::OpKind::Random)
      for (const fs::path& f : files_matching(path("d_" + name), R"(output_\d+\.npy)")) fs::remove(f);
    list += "'" + path("d_" + name + "/" + name + ".py") + "',";
    ++ops;
  }
  EXPECT_GE(ops, 100);
  file("all.py", "import runpy, sys\nfor p in [" + list + "]:\n    sys.argv = [p, 'none']\n    try:\n"
                 "        runpy.run_path(p, run_name='__main__')\n        code = 0\n    except SystemExit as e:\n"
                 "        code = e.code\n    except Exception as e:\n        code = repr(e)\n"
                 "    print('RESULT', p.rsplit('/', 1)[1], code)\n");
  CliResult py = shell(python_ + " " + path("all.py"));
  std::regex result_re(R"(RESULT (\S+)\.py (.*))");
  int ran = 0;
  for (auto it = std::sregex_iterator(py.output.begin(), py.output.end(), result_re); it != std::sregex_iterator(); ++it) {
    ++ran;
    EXPECT_EQ((*it)[2].str(), "0") << (*it)[1] << ": the emitted script fails or disagrees with kiln";
  }
  EXPECT_EQ(ran, ops) << py.output;
}

// A random op draws other numbers in PyTorch: the script still runs (eager only, without kiln's outputs).
TEST_F(EmitTorch, RandomOpsRunWithoutKilnsOutputs) {
  std::string g = file("coin.kir", "graph coin(%x: f32[8]) {\n  %p = sigmoid(%x) : f32[8]\n"
                                   "  %b = bernoulli(%p) : f32[8]\n  return %b\n}\n");
  CliResult first = run_script(g);
  fs::remove(path("dump_coin/output_0.npy"));
  CliResult r = shell(python_ + " " + path("dump_coin/coin.py") + " none");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "torch.compile skipped")) << r.output;
}

TEST_F(EmitTorch, MinifiedReproScriptRuns) {
  CliResult r = shell("kiln minify -q " + example("mlp.kir") + " --backend inductor --emit torch -o " + path("m.repro"),
                      "KILN_INJECT=relu:accuracy KILN_CACHE_DIR=" + path("cache"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  CliResult py = shell(python_ + " " + path("m.py") + " none");
  // It compares: PyTorch agrees with kiln's reference interpreter, and the recorded accuracy failure shows as
  // kiln's backend outputs differing (exit 1), not as a script that compares nothing and exits 0.
  EXPECT_EQ(py.exit_code, 1) << py.output;
  EXPECT_TRUE(contains(py.output, "PyTorch eager vs kiln's reference interpreter: output 0: ok")) << py.output;
  EXPECT_TRUE(contains(py.output, "PyTorch eager vs kiln: output 0: MISMATCH")) << py.output;
}

// ---------------------------------------------------------------- the README's demo

// ci/demo.sh's kiln commands, as the README tells users to run them (build/kiln -> the binary under test).
TEST_F(CliTest, ReadmeDemoCommandsRun) {
  std::istringstream demo(read_text(source_path("ci/demo.sh")));
  int commands = 0;
  for (std::string line; std::getline(demo, line);) {
    size_t at = line.find("build/kiln ");
    if (at == std::string::npos || line.rfind("#", 0) == 0) continue;
    std::string env = line.substr(0, at);
    std::string cmd = line.substr(at + std::string("build/kiln ").size());
    cmd = cmd.substr(0, cmd.find(" ||"));
    cmd = std::regex_replace(cmd, std::regex(R"(\$out)"), dir_.string());
    cmd = std::regex_replace(cmd, std::regex(R"(examples/)"), source_path("examples").string() + "/");
    CliResult r = shell("kiln " + cmd, env + "KILN_CACHE_DIR=" + path("cache"));
    const int want = contains(cmd, "repro run") ? 1 : 0;  // the demo's repro still reproduces
    EXPECT_EQ(r.exit_code, want) << "kiln " << cmd << ":\n" << r.output;
    if (contains(cmd, "--check")) EXPECT_TRUE(contains(r.output, "PASS") && contains(r.output, "nan 0")) << r.output;
    ++commands;
  }
  EXPECT_GE(commands, 4);
}
