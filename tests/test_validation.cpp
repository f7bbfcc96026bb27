// Everything a user types is validated (issue 22): every KILN_* option against its row of the options table
// (src/core/options.h), every numeric flag of every subcommand (tools/cli_checks.h), CLI usage errors exit 2;
// a child's time limit counts its run, not its compile step (repro/isolate.h); the minifier's children die
// with it; a failure of the minifier's own recorded values is reported as that. End-to-end tests run the
// built `kiln` binary (KILN_CLI).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "api/backends.h"
#include "core/options.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "minifier/inject_backend.h"
#include "minifier/minifier.h"
#include "minifier/oracle.h"
#include "minifier/values.h"
#include "ops/api.h"
#include "repro/isolate.h"
#include "repro/reproduce.h"
#include "oracle_testing.h"
#include "cli_run.h"

extern char** environ;

using namespace kiln;
namespace fs = std::filesystem;
using namespace kiln::cli_test;

namespace {

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("kiln_test_validation_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return (path_ / name).string();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A graph that runs and matches its reference on every backend.
const char* kPassing = R"(graph passing(%x: f32[4, 4]) {
  %y = relu(%x) : f32[4, 4]
  return %y
}
)";

// Values a row of the options table must reject: malformed for its type, out of its range, or with an
// entry of the wrong form. Empty for String rows (free text).
std::vector<std::string> invalid_values(const OptionSpec& spec) {
  switch (spec.type) {
    case OptType::Bool: return {"maybe", "2"};
    case OptType::Int: {
      std::vector<std::string> v = {"abc", "1.5", "4K", "99999999999999999999", ""};
      if (spec.min > INT64_MIN) v.push_back(std::to_string(spec.min - 1));
      if (spec.max < INT64_MAX) v.push_back(std::to_string(spec.max + 1));
      return v;
    }
    case OptType::Bytes: {
      std::vector<std::string> v = {"abc", "12x", "1.5K", "8589934592G", "9223372036854775808", "99999999999G"};
      if (spec.min > INT64_MIN) v.push_back(std::to_string(spec.min - 1));
      if (spec.max < INT64_MAX) v.push_back(std::to_string(spec.max + 1));
      return v;
    }
    case OptType::Choice: return {"no_such_choice"};
    case OptType::List: return spec.check_entry ? std::vector<std::string>{"?", "a b"} : std::vector<std::string>{};
    case OptType::String: return {};
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------- the options table (library)

TEST(OptionValidation, EveryRowRejectsInvalidValuesOfItsTypeNamingTheVariable) {
  int checked = 0;
  for (const OptionSpec& spec : option_table()) {
    EXPECT_EQ(option_problem(spec, spec.default_value), "") << spec.env << ": the default must be valid";
    for (const std::string& bad : invalid_values(spec)) {
      std::string p = option_problem(spec, bad);
      EXPECT_EQ(p.rfind(fmt::format("{}={}: ", spec.env, bad), 0), 0u) << spec.env << "=" << bad << ": " << p;
      EXPECT_NE(p.find("expected "), std::string::npos) << p;
      try {
        ScopedOption o(spec.id, bad);
        ADD_FAILURE() << spec.env << "=" << bad << " was accepted by set_option";
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), p);
      }
      ++checked;
    }
    // A row with a range or an entry form must have something to check (a new Int row without a range
    // would still reject garbage; a List row with an entry form needs its check).
    if (spec.type == OptType::List) {
      EXPECT_EQ(spec.entry_form.empty(), spec.check_entry == nullptr) << spec.env;
    }
  }
  EXPECT_GT(checked, 30);
}

TEST(OptionValidation, TheIssueExamplesSayWhatIsWrong) {
  auto problem = [](Opt id, const std::string& v) { return option_problem(option_spec(id), v); };
  EXPECT_EQ(problem(Opt::Seed, "-1"), "KILN_SEED=-1: below the minimum 0; expected a seed, an integer from 0 to "
                                      "18446744073709551615");
  EXPECT_EQ(problem(Opt::ReproLevel, "99"), "KILN_REPRO_LEVEL=99: above the maximum 4; expected an integer from 1 to 4");
  EXPECT_NE(problem(Opt::StreamMinBytes, "-5").find("KILN_STREAM_MIN_BYTES=-5: below the minimum 0; expected a byte "
                                                    "count >= 0"), std::string::npos);
  EXPECT_NE(problem(Opt::CacheSizeLimit, "8589934592G").find("KILN_CACHE_SIZE_LIMIT=8589934592G: too large (more "
                                                             "than 2^63-1 bytes)"), std::string::npos);
  EXPECT_EQ(problem(Opt::BisectLimit, "passes:cse=abc"),
            "KILN_BISECT_LIMIT=passes:cse=abc: entry 'passes:cse=abc': N = 'abc' is not a non-negative integer; "
            "expected comma-separated stage:subsystem=N or stage=N (N >= 0) entries");
  EXPECT_NE(problem(Opt::BisectLimit, "passes:cse").find("no '=N'"), std::string::npos);
  EXPECT_NE(problem(Opt::BisectDisable, "passes:").find("'' is not a subsystem name"), std::string::npos);
  EXPECT_NE(problem(Opt::Inject, "relu").find("entry 'relu': no ':kind'"), std::string::npos);
  EXPECT_NE(problem(Opt::Inject, "nosuchop:crash").find("unknown op 'nosuchop'"), std::string::npos);
  EXPECT_NE(problem(Opt::Inject, "relu:explode").find("unknown kind 'explode'"), std::string::npos);
  // Valid values stay valid.
  for (auto [id, v] : std::vector<std::pair<Opt, std::string>>{
           {Opt::BisectLimit, "passes:cse=0, inductor=12"}, {Opt::BisectDisable, "passes:cse,inductor"},
           {Opt::Inject, "relu:accuracy,fusion:accuracy,var:decomposition,exp:hang"}, {Opt::CacheSizeLimit, "8G"},
           {Opt::StreamMinBytes, "0"}, {Opt::Seed, "9223372036854775807"}, {Opt::ReproLevel, "1"}})
    EXPECT_EQ(problem(id, v), "") << v;
}

// A byte count is what its digits and suffix say, or nothing when that does not fit in int64_t; never a
// wrapped-around (negative) number.
RC_GTEST_PROP(OptionValidation, ByteCountsDetectOverflow, ()) {
  const uint64_t n = *rc::gen::oneOf(rc::gen::inRange<uint64_t>(0, 1u << 20),
                                     rc::gen::inRange<uint64_t>(0, uint64_t(INT64_MAX)));
  const int s = *rc::gen::inRange(0, 4);
  const char* suffix[] = {"", "K", "M", "G"};
  const __int128 scale = __int128(1) << (10 * s);
  const __int128 want = __int128(n) * scale;
  std::optional<int64_t> got = parse_byte_count(std::to_string(n) + suffix[s]);
  if (want > INT64_MAX) {
    RC_ASSERT(!got.has_value());
  } else {
    RC_ASSERT(got == std::optional<int64_t>(int64_t(want)));
  }
}

// ---------------------------------------------------------------- the CLI checks every set variable

TEST(OptionValidation, TheCliRejectsEveryInvalidSettingAtStartupWithExit2) {
  TempDir dir;
  const std::string g = dir.file("g.kir", kPassing);
  for (const OptionSpec& spec : option_table()) {
    for (const std::string& bad : invalid_values(spec)) {
      if (bad.find_first_of(" '") != std::string::npos) continue;  // keep the shell command simple
      CliResult r = kiln_cli("verify " + g, fmt::format("{}='{}'", spec.env, bad));
      EXPECT_EQ(r.exit_code, 2) << spec.env << "=" << bad << ": " << r.output;
      EXPECT_NE(r.output.find(fmt::format("kiln: error: {}={}: ", spec.env, bad)), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("ok: "), std::string::npos) << "the command ran: " << r.output;
    }
  }
}

TEST(OptionValidation, TheIssueExamplesFailWhicheverBackendRuns) {
  TempDir dir;
  const std::string g = dir.file("g.kir", kPassing);
  for (std::string env : {"KILN_BISECT_LIMIT=passes:cse=abc", "KILN_STREAM_MIN_BYTES=-5", "KILN_SEED=-1",
                                 "KILN_REPRO_LEVEL=99", "KILN_CACHE_SIZE_LIMIT=8589934592G",
                                 "KILN_INJECT=nosuchop:crash"}) {
    for (std::string backend : {"eager", "inductor"}) {
      CliResult r = kiln_cli("run " + g + " --backend " + backend, env);
      EXPECT_EQ(r.exit_code, 2) << env << " " << backend << ": " << r.output;
      EXPECT_NE(r.output.find("kiln: error: " + env + ": "), std::string::npos) << r.output;
    }
  }
  // Every bad one is reported, not just the first.
  CliResult both = kiln_cli("run " + g, "KILN_SEED=-1 KILN_REPRO_LEVEL=0");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.output.find("kiln: error: KILN_SEED=-1"), std::string::npos) << both.output;
  EXPECT_NE(both.output.find("kiln: error: KILN_REPRO_LEVEL=0"), std::string::npos) << both.output;
}

// ---------------------------------------------------------------- numeric flags and usage errors

namespace {

// The subcommands `kiln <path> --help` lists (CLI11's "Subcommands:" section), as paths ("repro run").
std::vector<std::string> subcommands(const std::string& path) {
  std::string help = kiln_cli(path + " --help").output;
  std::vector<std::string> out;
  size_t at = help.find("Subcommands:");
  if (at == std::string::npos) return out;
  std::istringstream lines(help.substr(at));
  std::string line;
  std::getline(lines, line);
  static const std::regex row(R"(^  ([a-z][a-z0-9_-]*)\s)");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) out.push_back((path.empty() ? "" : path + " ") + m[1].str());
  }
  return out;
}

// The numeric flags of a subcommand: options whose help shows a number type (INT, UINT, FLOAT, ...).
std::vector<std::string> numeric_flags(const std::string& path) {
  std::string help = kiln_cli(path + " --help").output;
  std::vector<std::string> out;
  static const std::regex flag(R"(^\s+(?:-[A-Za-z],)?(--[a-z][a-z0-9-]*)\s+(INT|UINT|FLOAT|DOUBLE|NUMBER|INT64)\b)");
  std::istringstream lines(help);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, flag)) out.push_back(m[1].str());
  }
  return out;
}

}  // namespace

TEST(FlagValidation, EveryNumericFlagOfEveryCommandRejectsBadNumbersWithExit2) {
  TempDir dir;
  const std::string g = dir.file("g.kir", kPassing);
  std::vector<std::string> commands, pending = subcommands("");
  while (!pending.empty()) {
    std::string c = pending.back();
    pending.pop_back();
    commands.push_back(c);
    for (const std::string& sub : subcommands(c)) pending.push_back(sub);
  }
  ASSERT_GE(commands.size(), 6u);
  std::set<std::string> seen;
  for (const std::string& c : commands) {
    for (const std::string& f : numeric_flags(c)) {
      seen.insert(c + " " + f);
      for (std::string bad : {"-1", "abc", "1e400", "99999999999999999999999", "nan", "inf", "-inf"}) {
        CliResult r = kiln_cli(fmt::format("{} {} {} -- {}", c, f, bad, g));
        EXPECT_EQ(r.exit_code, 2) << c << " " << f << " " << bad << ": " << r.output;
        EXPECT_NE(r.output.find("kiln: error: " + f + ": "), std::string::npos) << c << " " << f << " " << bad << ": "
                                                                               << r.output;
        EXPECT_NE(r.output.find("expected"), std::string::npos) << r.output;
      }
    }
  }
  // The flags the issue names were found (the help parsing works).
  for (std::string want : {"run --seed", "minify --jobs", "minify --timeout", "minify --seed", "minify --tol",
                                  "minify --budget", "repro run --timeout"})
    EXPECT_TRUE(seen.count(want)) << want << " not found among " << fmt::format("{}", fmt::join(seen, ", "));
}

TEST(FlagValidation, ZeroTimeoutsAndJobsAreRejectedReadably) {
  TempDir dir;
  const std::string g = dir.file("g.kir", kPassing);
  for (const std::string& args : {"minify " + g + " --backend eager --timeout 0",
                                  "minify " + g + " --backend eager --timeout -5",
                                  "minify " + g + " --backend eager --tol -1", "repro run " + g + " --timeout 0"}) {
    CliResult r = kiln_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_EQ(r.output.find("REPRODUCES"), std::string::npos) << args << ": " << r.output;
  }
  EXPECT_FALSE(fs::exists(dir.path() / "g.min.repro"));
  CliResult j = kiln_cli("minify " + g + " --backend eager -j 0");
  EXPECT_EQ(j.exit_code, 2);
  EXPECT_NE(j.output.find("kiln: error: --jobs: 0 is below the minimum 1; expected the number of child processes, an "
                          "integer from 1 to 256"), std::string::npos) << j.output;
  CliResult t = kiln_cli("repro run " + g + " --timeout 0");
  EXPECT_NE(t.output.find("kiln: error: --timeout: 0 is too small; expected seconds, a number > 0"), std::string::npos)
      << t.output;
}

TEST(FlagValidation, UsageErrorsExit2WithAMessage) {
  TempDir dir;
  const std::string g = dir.file("g.kir", kPassing);
  CliResult none = kiln_cli("");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("kiln: error: no command given"), std::string::npos) << none.output;
  EXPECT_NE(none.output.find("Subcommands:"), std::string::npos) << "usage printed: " << none.output;
  for (const std::string& args : std::vector<std::string>{
           "run " + g + " --no-such-flag", "run " + g + " --seed 1 --inputs " + dir.path().string(), "run",
           "no-such-command", "repro", "minify " + g + " --emit rust"}) {
    CliResult r = kiln_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_EQ(r.output.rfind("kiln: error: ", 0), 0u) << args << ": " << r.output;
  }
  EXPECT_EQ(kiln_cli("--help").exit_code, 0);
  EXPECT_EQ(kiln_cli("minify --help").exit_code, 0);
}

// ---------------------------------------------------------------- time limits count the run, not the compile

namespace {

graph::Graph relu_graph() { return graph::parse_graph(kPassing, "passing.kir"); }

// Backends whose compile step takes 3 s and whose run is instant (or, "_hang", never ends).
void register_slow_compile_backends() {
  // The compile step's program runs the graph as the backend does (api/backends.h): the backend's own run.
  auto slow_compile_of = [](std::string backend) {
    return [backend](const graph::Graph& g) -> GraphProgram {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      auto keep = std::make_shared<graph::Graph>(g);
      return [backend, keep](const std::vector<Tensor>& in) { return find_backend(backend)(*keep, in); };
    };
  };
  register_backend("test_slow_compile", [](const graph::Graph& g, const std::vector<Tensor>& in) {
    return graph::run_graph(g, in);
  });
  register_backend_compiler("test_slow_compile", slow_compile_of("test_slow_compile"));
  register_backend("test_slow_compile_hang", [](const graph::Graph&, const std::vector<Tensor>&) -> std::vector<Tensor> {
    for (;;) ::pause();
  });
  register_backend_compiler("test_slow_compile_hang", slow_compile_of("test_slow_compile_hang"));
}

}  // namespace

TEST(TimeLimits, TheSetupStepHasItsOwnLimit) {
  auto slow_setup = [] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    isolated_run_starts();
    return std::string("done");
  };
  IsolatedResult ok = run_isolated(slow_setup, 1, 60);
  EXPECT_EQ(ok.kind, FailureKind::None) << ok.payload;
  EXPECT_EQ(ok.payload, "done");
  EXPECT_LT(ok.run_seconds, ok.seconds);
  // Without a setup allowance the same body is a hang; a run past its limit after the setup is one too.
  EXPECT_EQ(run_isolated(slow_setup, 1).kind, FailureKind::Hang);
  IsolatedResult run_hang = run_isolated([]() -> std::string { isolated_run_starts(); for (;;) ::pause(); }, 1, 60);
  EXPECT_EQ(run_hang.kind, FailureKind::Hang);
  IsolatedResult setup_hang = run_isolated([]() -> std::string { for (;;) ::pause(); }, 60, 1);
  EXPECT_EQ(setup_hang.kind, FailureKind::Hang);
  EXPECT_NE(setup_hang.payload.find("setup step"), std::string::npos) << setup_hang.payload;
  // Limits must make sense.
  EXPECT_THROW(run_isolated([] { return std::string(); }, 0), Error);
  EXPECT_THROW(run_isolated([] { return std::string(); }, -5), Error);
  EXPECT_THROW(run_isolated([] { return std::string(); }, NAN), Error);
}

TEST(TimeLimits, AColdCompileLongerThanTheTimeoutIsNotAHang) {
  register_slow_compile_backends();
  graph::Graph g = relu_graph();
  std::vector<Tensor> in = graph::seeded_inputs(g, 0);
  // `kiln repro run`'s classification
  EXPECT_EQ(classify_on("test_slow_compile", g, in, 1).kind, FailureKind::None);
  EXPECT_EQ(classify_on("test_slow_compile_hang", g, in, 1).kind, FailureKind::Hang);
  // the minifier's oracle
  minify::ValueStore store(1 << 20);
  minify::record_reference(g, in, default_generator(), store);
  minify::InputSource src(g, in, store);
  minify::ForkOracleOptions o;
  o.backend = "test_slow_compile";
  o.timeout_s = 1;
  o.target.failure = {FailureKind::Accuracy, ""};
  EXPECT_EQ(minify::ForkOracle(src, o).classify(g).kind, FailureKind::None);
  o.backend = "test_slow_compile_hang";
  EXPECT_EQ(minify::ForkOracle(src, o).classify(g).kind, FailureKind::Hang);
}

// The library entry points reject the values the CLI rejects (a program calling them directly types them too).
TEST(TimeLimits, LibraryEntryPointsRejectBadLimits) {
  graph::Graph g = relu_graph();
  std::vector<Tensor> in = graph::seeded_inputs(g, 0);
  for (double bad : {0.0, -5.0, double(NAN), double(INFINITY)}) {
    EXPECT_THROW(classify_on("eager", g, in, bad), Error) << bad;
    if (bad != 0.0) {
      EXPECT_THROW(classify_on("eager", g, in, 30, bad), Error) << bad;
    }
  }
  minify::register_inject_test_backend();
  for (int which = 0; which < 4; ++which) {
    minify::MinifyOptions o;
    o.backend = "eager";
    if (which == 0) o.jobs = 0;
    if (which == 1) o.timeout_s = -5;
    if (which == 2) o.tolerance = -1;
    if (which == 3) o.memory_budget = -1;
    EXPECT_THROW(minify::minify(g, in, o), Error) << which;
  }
}

// ---------------------------------------------------------------- the minifier's own failures

TEST(MinifierFailures, AStoreFailureIsReportedAsItselfNotAsTheGraphs) {
  graph::Graph g = relu_graph();
  std::vector<Tensor> in = graph::seeded_inputs(g, 0);
  minify::ValueStore store(0, "/nonexistent/kiln/spill/dir");  // every value spills, to nowhere
  try {
    minify::record_reference(g, in, default_generator(), store);
    FAIL() << "recording into an impossible spill directory succeeded";
  } catch (const minify::ValueStoreError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create a spill file for recorded values in /nonexistent"),
              std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("fp64 reference"), std::string::npos) << e.what();
  }
  // A child that could not judge its candidate (here: reading values back failed) is an error of the run,
  // not a verdict ("invalid" used to be read as "the fp64 reference fails").
  minify::ValueStore ok(1 << 20);
  minify::record_reference(g, in, default_generator(), ok);
  minify::InputSource src(g, in, ok);
  minify::ForkOracleOptions o;
  o.backend = "eager";
  minify::ForkOracle oracle(src, o);
  IsolatedResult r;
  r.kind = FailureKind::RuntimeError;
  r.payload = "reading a recorded value back from the spill file failed: Input/output error";
  try {
    oracle.judge(r);
    FAIL() << "judged";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a minifier child could not judge its candidate: reading a recorded value"),
              std::string::npos) << e.what();
  }
}

TEST(MinifierFailures, ASpillThatCannotBeWrittenIsReportedAsSuch) {
  TempDir dir;
  const std::string g = dir.file("big.kir", R"(graph big(%x: f32[64, 64]) {
  %y = relu(%x) : f32[64, 64]
  %z = tanh(%y) : f32[64, 64]
  return %z
}
)");
  // Files this process writes may not exceed 1 KiB (SIGXFSZ ignored: the write fails with EFBIG instead).
  std::string cmd = fmt::format("sh -c \"trap '' XFSZ; ulimit -f 1; exec '{}' minify {} --backend inject_test "
                                "--budget 0 --spill-dir {} -o {}/out.repro\" 2>&1",
                                KILN_CLI, g, dir.path().string(), dir.path().string());
  FILE* p = popen(("KILN_INJECT=relu:accuracy " + cmd).c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2) << out;
  EXPECT_NE(out.find("kiln: error: writing recorded values to the spill file in " + dir.path().string() + " failed"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("fp64 reference"), std::string::npos) << out;
}

// ---------------------------------------------------------------- the minifier's children die with it

namespace {

// The processes whose parent is `pid` (from /proc/*/stat).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), {});
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state;
    pid_t ppid;
    if (rest >> state >> ppid && ppid == pid) out.push_back(pid_t(std::stol(name)));
  }
  return out;
}

bool alive(pid_t pid) {  // running or sleeping: not gone, not a zombie waiting for its new parent
  std::ifstream f(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(f)), {});
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

// Polls `done` every 50 ms for up to `seconds`: whether it became true (a bound on waiting, not a timing).
template <class F>
bool eventually(F done, double seconds) {
  for (auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
       std::chrono::steady_clock::now() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    if (done()) return true;
  return done();
}

}  // namespace

TEST(MinifierChildren, DieWhenTheMinifierIsKilled) {
  TempDir dir;
  const std::string g = dir.file("hang.kir", kPassing);
  const std::string out = (dir.path() / "hang.min.repro").string();
  for (int sig : {SIGKILL, SIGTERM, SIGINT}) {
    std::vector<std::string> args = {KILN_CLI, "minify", g, "--backend", "inject_test", "--timeout", "300", "-o", out, "-q"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = {"KILN_INJECT=relu:hang"};
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("KILN_", 0) != 0) env_strings.push_back(*e);
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    posix_spawnattr_setsigdefault(&attr, &defaults);  // even where this test runs with them ignored
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t minifier = 0;
    ASSERT_EQ(posix_spawn(&minifier, KILN_CLI, nullptr, &attr, argv.data(), envp.data()), 0);
    posix_spawnattr_destroy(&attr);
    std::vector<pid_t> children;
    ASSERT_TRUE(eventually([&] { return !(children = children_of(minifier)).empty(); }, 60))
        << "kiln minify of a hanging graph started no child";
    ::kill(minifier, sig);
    int status = 0;
    ::waitpid(minifier, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status)) << strsignal(sig);
    bool all_gone = eventually([&] {
      for (pid_t c : children)
        if (alive(c)) return false;
      return true;
    }, 30);
    EXPECT_TRUE(all_gone) << "a child of kiln minify outlived it after " << strsignal(sig);
    for (pid_t c : children)
      if (alive(c)) ::kill(c, SIGKILL);  // leave nothing behind either way
  }
}
