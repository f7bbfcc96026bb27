// Trustworthy verdicts and reproduce lines (issue 30): every (injected kind x tool x flag) combination of a small
// training graph gets the verdict and exit status a user must see (a tool asked about one failure kind that meets
// another says so and fails, never "passes"), and every command a tool prints to reproduce a result does so in a
// clean environment (`env -i`, only what the line sets) and fails the same way; a file named `$(touch PWNED).kir`
// stays a file name in every printed line; bisect takes repro files; injections and bisection settings that never
// fire say so once per run; a crash under KILN_REPRO_LEVEL=3 says what crashed and how to re-run it.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <set>
#include <regex>
#include <vector>

#include "cli_run.h"
#include "core/options.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "repro/command.h"

namespace kiln::cli_test {
namespace {

namespace fs = std::filesystem;

// tanh is the op every injection targets; %x is marked grad, so VJP bugs show in the gradients only.
const char* kSmall = R"(graph small(%x: f32[4, 8] grad) {
  %a = tanh(%x) : f32[4, 8]
  %b = mul(%a, 2.0) : f32[4, 8]
  return %b
}
)";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The commands a tool printed for a user to paste: `reproduce:`, `passes with:` and `check it with:` lines (text
// output) and `Reproduce:` / "check it with `...`" (doctor's Markdown), each with what it must do.
struct PrintedLine {
  std::string command;
  bool must_pass = false;  // a `passes with:` line
};

std::vector<PrintedLine> printed_lines(const std::string& output) {
  std::vector<PrintedLine> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    for (const char* marker : {"reproduce: ", "passes with: ", "check it with: ", "Reproduce: ", "check it with "}) {
      size_t at = line.find(marker);
      if (at == std::string::npos) continue;
      std::string rest = line.substr(at + std::strlen(marker));
      rest.erase(0, rest.find_first_not_of(' '));
      if (!rest.empty() && rest[0] == '`') {  // a Markdown code span: its fence, then the text to the closing one
        size_t fence = rest.find_first_not_of('`');
        std::string close(fence, '`');
        size_t end = rest.find(close, fence);
        rest = rest.substr(fence, end == std::string::npos ? std::string::npos : end - fence);
      }
      if (rest.rfind("kiln ", 0) == 0 || rest.find(" kiln ") != std::string::npos)
        out.push_back({rest, std::string(marker) == "passes with: "});
      break;
    }
  }
  return out;
}

// A printed line run as a user pastes it into a clean shell: only PATH (this build's kiln first) and what the line
// sets itself; the working directory `cwd`.
CliResult run_clean(const std::string& line, const fs::path& cwd) {
  const std::string bin = fs::path(KILN_CLI).parent_path().string();
  std::string quoted = "'";
  for (char c : line) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  return shell("cd '" + cwd.string() + "' && env -i PATH='" + bin + "':/usr/bin:/bin sh -c " + quoted);
}

// Whether `r` (a run of a reproduce line) failed the way a `kind` failure does.
::testing::AssertionResult fails_as(const CliResult& r, const std::string& kind) {
  bool ok = false;
  if (kind == "compile_error") ok = r.exit_code == 2 && contains(r.output, "kiln: error:");
  // A crash dies by SIGSEGV; in the sanitized tree ASan's handler, which kiln's crash line hands the signal on
  // to, reports it and exits non-zero instead.
  else if (kind == "crash")
    ok = r.signal == 11 || contains(r.output, "REPRODUCES: crash") ||
         (KILN_SANITIZED && r.exit_code != 0 && contains(r.output, "kiln: crashed: SIGSEGV"));
  else if (kind == "accuracy") ok = r.exit_code == 1 && (contains(r.output, "FAIL") || contains(r.output, "REPRODUCES"));
  else if (kind == "repro") ok = r.exit_code == 1 && contains(r.output, "REPRODUCES");
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected a " << kind << " failure, got exit " << r.exit_code << " signal "
                                       << r.signal << ":\n" << r.output;
}

struct Case {
  std::string name;
  std::string env;      // KILN_INJECT=...
  std::string args;     // after `kiln`
  int exit_code;
  std::string expect;   // printed
  std::string line_kind;  // how its reproduce lines fail ("" : it prints none)
};

class CliVerdicts : public CliTest {};

TEST_F(CliVerdicts, EveryKindToolAndFlagGetsTheRightVerdictAndReproducibleLines) {
  const std::string g = file("small.kir", kSmall);
  const std::string out = path("out");
  fs::create_directories(dir_ / "suite");  // gate's suite: the same graph
  write_file(dir_ / "suite" / "small.kir", kSmall);
  const std::string suite = path("suite");
  const std::vector<Case> cases = {
      // bisect: the wrong kind is a failure that says which kind it saw (it used to print "result: passes", exit 0).
      {"bisect --accuracy / compile_error", "KILN_INJECT=tanh:compile_error", "bisect -q --accuracy " + g, 1,
       "result:      FAILS with compile_error, not an accuracy failure (--accuracy)", "compile_error"},
      {"bisect --accuracy / crash", "KILN_INJECT=tanh:crash", "bisect -q --accuracy " + g, 1,
       "result:      FAILS with crash, not an accuracy failure (--accuracy)", "crash"},
      {"bisect --error / accuracy", "KILN_INJECT=tanh:accuracy", "bisect -q --error " + g, 1,
       "result:      FAILS with accuracy, not an error, crash or hang (--error)", "accuracy"},
      {"bisect --error / vjp", "KILN_INJECT=tanh:vjp", "bisect -q --error " + g, 1,
       "stage:       aot_eager", "accuracy"},
      {"bisect / accuracy", "KILN_INJECT=tanh:accuracy", "bisect -q " + g, 1, "subsystem:   inductor:lowering",
       "accuracy"},
      // doctor: its conclusion follows the ladder it printed (it used to say "nothing to repair", exit 0).
      {"doctor --accuracy / compile_error", "KILN_INJECT=tanh:compile_error",
       "doctor -q --accuracy " + g + " -o " + out + "1", 1, "FAILS with compile_error, not an accuracy failure",
       "compile_error"},
      {"doctor --error / accuracy", "KILN_INJECT=tanh:accuracy", "doctor -q --error " + g + " -o " + out + "2", 1,
       "FAILS with accuracy, not an error, crash or hang", "accuracy"},
      // minify: --accuracy refuses another kind (bad input); a gradient-only bug needs --grad and then minifies.
      {"minify --accuracy / compile_error", "KILN_INJECT=tanh:compile_error",
       "minify -q --accuracy --backend inductor " + g + " -o " + out + "3.repro", 2, "not an accuracy failure", ""},
      {"minify / vjp without --grad", "KILN_INJECT=tanh:vjp", "minify -q --backend aot_eager " + g + " -o " + out +
       "4.repro", 2, "add --grad", ""},
      {"minify --grad / vjp", "KILN_INJECT=tanh:vjp", "minify -q --grad --backend aot_eager " + g + " -o " + out +
       "5.repro", 0, "re-verified: kiln repro run: REPRODUCES", "repro"},
      // gate: --grad judges the gradients (without it a VJP bug passes every entry: forward outputs only).
      {"gate --grad / vjp", "KILN_INJECT=tanh:vjp", "gate --grad --repetitions 1 --backend aot_eager " + suite, 1,
       "REGRESSION", "accuracy"},
      {"gate / vjp", "KILN_INJECT=tanh:vjp", "gate --repetitions 1 --backend aot_eager " + suite, 0, "PASS", ""},
      {"gate / compile_error", "KILN_INJECT=tanh:compile_error", "gate --repetitions 1 " + suite, 1, "compile_error",
       "compile_error"},
  };
  const std::vector<Case>& all = cases;
  // Two at a time: each case forks its own children.
  std::vector<CliResult> results(all.size());
  for (size_t i = 0; i < all.size(); i += 2) {
    auto second = i + 1 < all.size() ? std::async(std::launch::async, [&, i] { return kiln_cli(all[i + 1].args, all[i + 1].env); })
                                     : std::future<CliResult>{};
    results[i] = kiln_cli(all[i].args, all[i].env);
    if (second.valid()) results[i + 1] = second.get();
  }
  int lines_run = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    const CliResult& r = results[i];
    SCOPED_TRACE(c.name);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.output;
    EXPECT_TRUE(contains(r.output, c.expect)) << "expected: " << c.expect << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, "result:      passes")) << r.output;
    if (c.line_kind.empty()) continue;
    std::vector<PrintedLine> lines = printed_lines(r.output);
    ASSERT_FALSE(lines.empty()) << "no reproduce line printed:\n" << r.output;
    for (const PrintedLine& l : lines) {
      SCOPED_TRACE(l.command);
      EXPECT_FALSE(contains(l.command, KILN_CLI)) << "lines name `kiln`, not the build's path";
      CliResult again = run_clean(l.command, dir_);
      ++lines_run;
      if (l.must_pass) EXPECT_EQ(again.exit_code, 0) << again.output;
      else EXPECT_TRUE(fails_as(again, contains(l.command, "repro run") ? "repro" : c.line_kind));
    }
  }
  EXPECT_GE(lines_run, 11);  // bisect 6 (the bisected one: reproduce and passes with), doctor 2, minify 1, gate 2
}

TEST_F(CliVerdicts, AGraphNamedLikeACommandStaysAFileNameInEveryPrintedLine) {
  fs::create_directories(dir_ / "s");
  const std::string name = "s/$(touch PWNED).kir";
  write_file(dir_ / name, kSmall);
  const std::string quoted = "'s/$(touch PWNED).kir'";
  const std::string in_dir = "cd '" + dir_.string() + "' && KILN_INJECT=tanh:accuracy '" KILN_CLI "' ";
  CliResult b = shell(in_dir + "bisect -q " + quoted);
  CliResult m = shell(in_dir + "minify -q --backend inductor " + quoted + " -o 's/$(touch PWNED).repro'");
  ASSERT_EQ(b.exit_code, 1) << b.output;
  ASSERT_EQ(m.exit_code, 0) << m.output;
  ASSERT_FALSE(fs::exists(dir_ / "PWNED"));
  std::vector<PrintedLine> lines = printed_lines(b.output + m.output);
  ASSERT_GE(lines.size(), 3u) << b.output << m.output;
  for (const PrintedLine& l : lines) {
    SCOPED_TRACE(l.command);
    CliResult again = run_clean(l.command, dir_);
    EXPECT_FALSE(fs::exists(dir_ / "PWNED")) << "the pasted line ran the file name as a command";
    if (l.must_pass) EXPECT_EQ(again.exit_code, 0) << again.output;
    else EXPECT_EQ(again.exit_code, 1) << again.output;
  }
}

TEST_F(CliVerdicts, BisectTakesTheReprosMinifyWritesAndItsLinesRunThem) {
  const std::string g = file("small.kir", kSmall);
  CliResult m = kiln_cli("minify -q --backend inductor " + g + " -o " + path("r.repro"), "KILN_INJECT=tanh:accuracy");
  ASSERT_EQ(m.exit_code, 0) << m.output;
  // No KILN_INJECT here: the repro's configuration carries it.
  CliResult b = kiln_cli("bisect -q " + path("r.repro"));
  ASSERT_EQ(b.exit_code, 1) << b.output;
  EXPECT_TRUE(contains(b.output, "subsystem:   inductor:lowering")) << b.output;
  std::vector<PrintedLine> lines = printed_lines(b.output);
  ASSERT_EQ(lines.size(), 2u) << b.output;
  for (const PrintedLine& l : lines) {
    SCOPED_TRACE(l.command);
    EXPECT_TRUE(contains(l.command, "KILN_INJECT=tanh:accuracy ")) << "the setting that makes the failure";
    CliResult again = run_clean(l.command, dir_);
    EXPECT_EQ(again.exit_code, l.must_pass ? 0 : 1) << again.output;
  }
}

TEST_F(CliVerdicts, RunTakesATolerance) {
  const std::string g = file("small.kir", kSmall);
  // The injected bug adds 1 to tanh: outside 1e-4, inside a tolerance of 10 (atol = rtol = 10).
  CliResult strict = kiln_cli("run " + g + " --backend inductor --check", "KILN_INJECT=tanh:accuracy");
  CliResult loose = kiln_cli("run " + g + " --backend inductor --check --tol 10", "KILN_INJECT=tanh:accuracy");
  EXPECT_EQ(strict.exit_code, 1) << strict.output;
  EXPECT_EQ(loose.exit_code, 0) << loose.output;
  CliResult bad = kiln_cli("run " + g + " --check --tol -1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

TEST_F(CliVerdicts, SettingsThatNeverFireSaySoOncePerRun) {
  const std::string g = file("small.kir", kSmall);  // no relu, no softmax
  CliResult inject = kiln_cli("bisect -q " + g, "KILN_INJECT=relu:accuracy");
  EXPECT_EQ(inject.exit_code, 0) << inject.output;
  EXPECT_EQ(count(inject.output, "KILN_INJECT=relu:accuracy never fired"), 1u) << inject.output;
  CliResult site = kiln_cli("bisect -q " + g, "KILN_BISECT_DISABLE=inductor:nan_insensitive_max");
  EXPECT_EQ(count(site.output, "KILN_BISECT_DISABLE=inductor:nan_insensitive_max changed nothing"), 1u) << site.output;
  CliResult fired = kiln_cli("run " + g + " --backend inductor --check", "KILN_INJECT=tanh:accuracy");
  EXPECT_FALSE(contains(fired.output, "never fired")) << fired.output;
  CliResult nothing_read = kiln_cli("verify " + g, "KILN_INJECT=relu:accuracy");
  EXPECT_FALSE(contains(nothing_read.output, "warning")) << nothing_read.output;
}

// docs/bisect.md, Training: a wrong min-cut partition is the aot_eager_decomp_partition rung's on the examples it can
// show on (mlp's first recomputed value alone vanishes from its gradients), and says it never fired on conv_block,
// whose min-cut partition recomputes nothing.
TEST_F(CliVerdicts, AWrongPartitionIsTheMinCutRungsOnTheExamples) {
  auto mlp = std::async(std::launch::async, [] {
    return kiln_cli("bisect -q " + source_path("examples/mlp.kir").string(), "KILN_INJECT=partition:accuracy");
  });
  CliResult conv = kiln_cli("bisect -q " + source_path("examples/conv_block.kir").string(), "KILN_INJECT=partition:accuracy");
  CliResult m = mlp.get();
  EXPECT_EQ(m.exit_code, 1) << m.output;
  EXPECT_TRUE(contains(m.output, "ladder:      eager passes, aot_eager passes, aot_eager_decomp_partition FAILS (accuracy)"))
      << m.output;
  EXPECT_EQ(conv.exit_code, 0) << conv.output;
  EXPECT_EQ(count(conv.output, "KILN_INJECT=partition:accuracy never fired in this run"), 1u) << conv.output;
}

TEST_F(CliVerdicts, ALadderRungThatRejectsTheInjectionIsBadInputNotTheCulprit) {
  const std::string g = file("small.kir", kSmall);
  CliResult r = kiln_cli("bisect -q --timeout 2 --backend inject_test " + g, "KILN_INJECT=tanh:hang");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "the ladder's rungs aot_eager, aot_eager_decomp_partition do not support it")) << r.output;
  EXPECT_FALSE(contains(r.output, "stage:")) << r.output;
}

TEST_F(CliVerdicts, ACrashUnderReproLevel3SaysWhatCrashedAndHowToRerunIt) {
  const std::string g = file("small.kir", kSmall);
  CliResult r = kiln_cli("run " + g + " --backend inductor", "KILN_REPRO_AFTER=backend KILN_REPRO_LEVEL=3 KILN_DEBUG_DIR=" +
                                                             path("dbg") + " KILN_INJECT=tanh:crash");
  if (KILN_SANITIZED) EXPECT_NE(r.exit_code, 0) << r.output;  // ASan reports the SIGSEGV and exits
  else EXPECT_EQ(r.signal, 11) << r.output;
  EXPECT_TRUE(contains(r.output, "kiln: crashed: SIGSEGV (signal 11) while compiling or first running graph small on "
                                 "backend inductor")) << r.output;
  std::vector<PrintedLine> lines = printed_lines(r.output);
  ASSERT_EQ(lines.size(), 1u) << r.output;
  EXPECT_TRUE(contains(lines[0].command, "/pending_")) << lines[0].command;
  EXPECT_TRUE(fails_as(run_clean(lines[0].command, dir_), "repro"));
}

TEST_F(CliVerdicts, TwoFailuresOfOneGraphAreTwoReproFiles) {
  const std::string g = file("small.kir", kSmall);
  const std::string env = "KILN_REPRO_AFTER=backend KILN_REPRO_LEVEL=3 KILN_DEBUG_DIR=" + path("dbg");
  kiln_cli("run " + g + " --backend inductor", env + " KILN_INJECT=tanh:compile_error");
  kiln_cli("run " + g + " --backend inductor", env + " KILN_INJECT=tanh:runtime_error");
  std::set<std::string> repros;
  for (const auto& e : fs::directory_iterator(path("dbg")))
    if (std::regex_match(e.path().filename().string(), std::regex(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.repro)")))
      repros.insert(e.path().filename().string());
  EXPECT_EQ(repros.size(), 2u) << "the second failure overwrote the first";
}

// The words `sh -c` reads from a reproduce line (with `kiln` swapped for a printf of its arguments) are exactly the
// file and directory the line names, whatever they hold: quotes, `$(...)`, backticks, spaces, newlines.
std::vector<std::string> words_of(const std::string& line) {
  const size_t at = line.find("kiln ");
  std::string cmd = line.substr(0, at) + "printf '%s\\0' " + line.substr(at + 5);
  std::string quoted = "'";
  for (char c : cmd) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  FILE* p = popen(("sh -c " + quoted + "'").c_str(), "r");
  std::string out;
  char buf[256];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  std::vector<std::string> words;
  for (size_t start = 0, end; (end = out.find('\0', start)) != std::string::npos; start = end + 1)
    words.push_back(out.substr(start, end - start));
  return words;
}

RC_GTEST_PROP(ReproduceCommand, ShellReadsBackTheFileAndInputsAsGiven, (std::string file, std::string dir)) {
  for (std::string* s : {&file, &dir}) s->erase(std::remove(s->begin(), s->end(), '\0'), s->end());
  RC_PRE(!file.empty() && !dir.empty());
  RunLine l;
  l.file = file;
  l.backend = "inductor";
  l.inputs_dir = dir;
  l.tolerance = 0.001;
  l.gradients = true;
  const std::vector<std::string> want = {"run", file, "--backend", "inductor", "--inputs", dir, "--tol", "0.001",
                                         "--check", "--grad"};
  RC_ASSERT(words_of(reproduce_command(l)) == want);
}

// KILN_BISECT_* keeps the in-process graph cache, keyed by the setting: a second compile under the same setting
// reuses the program (timings under a setting time calls, not recompiles); another setting compiles its own.
TEST(GraphCacheUnderBisection, ReusesTheProgramOfTheSameSetting) {
  graph::Graph g = graph::parse_graph(kSmall, "small.kir");
  ScopedOption disable(Opt::BisectDisable, "passes:cse");
  auto first = kiln::compile(g);
  auto second = kiln::compile(g);
  EXPECT_EQ(first.get(), second.get());
  ScopedOption other(Opt::BisectDisable, "passes:dce");
  auto third = kiln::compile(g);
  EXPECT_NE(first.get(), third.get());
}

}  // namespace
}  // namespace kiln::cli_test
