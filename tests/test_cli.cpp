// The options table (src/core/options.h) and log channels, and end-to-end tests of the graph subcommands:
// they run the built `kiln` binary (KILN_CLI) on graphs written to a temporary directory, on examples/*.kir,
// and on malformed files, and check exit codes and output. Also checks docs/options.md is in sync.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/log.h"
#include "eager/npy.h"
#include "core/options.h"
#include "core/seed.h"
#include "backends/cpu/jit.h"
#include "cli_run.h"

using namespace kiln;
namespace fs = std::filesystem;
using namespace kiln::cli_test;

namespace {

class Cli : public CliTest {};

const char* kMlp = R"(graph mlp(%x: f32[2, 3], %w: f32[4, 3], %b: f32[4]) {
  %h = linear(%x, %w, %b) : f32[2, 4]
  %y = relu(%h) : f32[2, 4]
  %s = sum(%y) : f32[]
  return %y, %s
}
)";

}  // namespace

// ---------------------------------------------------------------- options table

TEST(Options, DefaultsOverridesAndRestore) {
  EXPECT_EQ(opt_string(Opt::ReproAfter), "");
  EXPECT_EQ(opt_int(Opt::CacheSizeLimit), int64_t(1) << 30);  // "1G"
  {
    ScopedOption a(Opt::Seed, "5");
    EXPECT_EQ(opt_seed(), 5u);
    {
      ScopedOption b(Opt::Seed, "6");
      EXPECT_EQ(opt_seed(), 6u);
    }
    EXPECT_EQ(opt_seed(), 5u);
  }
  ScopedOption size(Opt::CacheSizeLimit, "4K");
  EXPECT_EQ(opt_int(Opt::CacheSizeLimit), 4096);
  ScopedOption list(Opt::Inject, " relu:accuracy, ,exp:crash ");
  EXPECT_EQ(opt_list(Opt::Inject), (std::vector<std::string>{"relu:accuracy", "exp:crash"}));
  ScopedOption off(Opt::Verify, "off");
  EXPECT_FALSE(opt_bool(Opt::Verify));
}

TEST(Options, RejectsMalformedValuesWithTheVariableName) {
  try {
    set_option(Opt::Verify, "maybe");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KILN_VERIFY=maybe: expected a boolean"), std::string::npos) << e.what();
  }
  try {
    set_option(Opt::ReproAfter, "inductor");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected one of: capture,aot"), std::string::npos) << e.what();
  }
  EXPECT_THROW(set_option(Opt::Seed, "12x"), Error);
  EXPECT_THROW(opt_string(Opt::Seed), Error);  // wrong getter for the type
}

TEST(Options, UnknownVariablesGetTheClosestName) {
  std::vector<std::string> w =
      unknown_env_warnings({"KILN_LOG=graph", "KILN_SEED=1", "PATH=/bin", "KILN_DEBUGDIR=/tmp", "XKILN_A=1"});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("KILN_LOG; did you mean KILN_LOGS?"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("KILN_DEBUGDIR; did you mean KILN_DEBUG_DIR?"), std::string::npos) << w[1];
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
}

TEST(Options, TableRowsAreInEnumOrder) {
  ASSERT_EQ(option_table().size(), size_t(Opt::NumOptions));
  for (size_t i = 0; i < option_table().size(); ++i) {
    EXPECT_EQ(size_t(option_table()[i].id), i);
    EXPECT_EQ(option_table()[i].env.substr(0, 5), "KILN_");
    EXPECT_FALSE(option_table()[i].help.empty());
  }
}

TEST(Options, DocsAreGeneratedFromTheTable) {
  std::string doc = read_text(fs::path(KILN_SOURCE_DIR) / "docs" / "options.md");
  EXPECT_EQ(doc, options_markdown()) << "docs/options.md is stale: regenerate it with "
                                        "`kiln --help-options-md > docs/options.md`";
}

TEST(Log, ChannelsFollowKilnLogs) {
  {
    ScopedOption logs(Opt::Logs, "passes,fusion");
    EXPECT_TRUE(log_enabled(LogChannel::Passes));
    EXPECT_TRUE(log_enabled(LogChannel::Fusion));
    EXPECT_FALSE(log_enabled(LogChannel::Graph));
  }
  EXPECT_FALSE(log_enabled(LogChannel::Passes));
  ScopedOption all(Opt::Logs, "all");
  for (int i = 0; i < kNumLogChannels; ++i) EXPECT_TRUE(log_enabled(LogChannel(i)));
  EXPECT_EQ(find_log_channel("output_code"), LogChannel::OutputCode);
  EXPECT_EQ(find_log_channel("nope"), std::nullopt);
}

// ---------------------------------------------------------------- kiln --help-options

TEST_F(Cli, HelpOptionsListsEveryOptionAndChannel) {
  CliResult r = kiln_cli("--help-options");
  EXPECT_EQ(r.exit_code, 0);
  for (const OptionSpec& spec : option_table()) EXPECT_NE(r.output.find(spec.env), std::string::npos) << spec.env;
  for (int i = 0; i < kNumLogChannels; ++i)
    EXPECT_NE(r.output.find(log_channel_name(LogChannel(i))), std::string::npos);
  CliResult md = kiln_cli("--help-options-md");
  EXPECT_EQ(md.exit_code, 0);
  EXPECT_EQ(md.output, options_markdown());
}

// What a bug report needs about the build: version and commit, the BLAS and the JIT's target, one line each.
TEST_F(Cli, VersionNamesTheBlasAndTheJitTarget) {
  CliResult r = kiln_cli("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output.rfind("kiln ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("\nBLAS: OpenBLAS "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("USE_OPENMP"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nJIT: " + runtime::KernelJit::instance().target_description() + "\n"), std::string::npos)
      << r.output;
}

TEST_F(Cli, WarnsAboutUnknownKilnVariables) {
  std::string g = file("g.kir", kMlp);
  CliResult r = kiln_cli("verify " + g, "KILN_LOG=passes");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown environment variable KILN_LOG; did you mean KILN_LOGS?"), std::string::npos)
      << r.output;
}

// ---------------------------------------------------------------- kiln verify

TEST_F(Cli, VerifyPrintsNodeCount) {
  CliResult r = kiln_cli("verify " + file("g.kir", kMlp));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "ok: 3 nodes\n");
}

TEST_F(Cli, VerifyReportsLocatedErrorsWithExit2) {
  std::string bad = file("bad.kir", "graph g(%x: f32[3]) {\n  %a = lienar(%x)\n  return %a\n}\n");
  CliResult r = kiln_cli("verify " + bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bad.kir:2:8: unknown op 'lienar'"), std::string::npos) << r.output;

  std::string shape = file("shape.kir", "graph g(%x: f32[3], %y: f32[4]) {\n  %a = add(%x, %y)\n  return %a\n}\n");
  r = kiln_cli("verify " + shape);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("shape.kir:2:"), std::string::npos) << r.output;

  r = kiln_cli("verify " + (dir_ / "missing.kir").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("missing.kir"), std::string::npos) << r.output;

  std::string truncated = file("trunc.kir", std::string(kMlp).substr(0, 60));
  r = kiln_cli("verify " + truncated);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("trunc.kir:"), std::string::npos) << r.output;
}

TEST_F(Cli, ExamplesVerify) {
  fs::path examples = fs::path(KILN_SOURCE_DIR) / "examples";
  int seen = 0;
  if (fs::exists(examples))
    for (const auto& e : fs::directory_iterator(examples)) {
      if (e.path().extension() != ".kir") continue;
      ++seen;
      CliResult r = kiln_cli("verify '" + e.path().string() + "'");
      EXPECT_EQ(r.exit_code, 0) << e.path() << ": " << r.output;
      EXPECT_EQ(r.output.rfind("ok: ", 0), 0u) << r.output;
    }
  if (seen == 0) GTEST_SKIP() << "no examples/*.kir yet";
}

// ---------------------------------------------------------------- kiln fmt

TEST_F(Cli, FmtPrintsCanonicalFormAndRewritesInPlace) {
  std::string messy = "graph mlp(%x: f32[2, 3],%w: f32[4, 3], %b: f32[4]){\n"
                      "  %h = linear(%x,%w,%b)   # no result type\n"
                      "  %y = relu(%h)\n  %s = sum(%y)\n  return %y,%s }\n";
  std::string g = file("g.kir", messy);
  std::string canonical = kMlp;  // comments are kept (docs/cli.md)
  canonical.insert(canonical.find(" : f32[2, 4]\n") + 12, "  # no result type");
  CliResult r = kiln_cli("fmt " + g);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, canonical);
  EXPECT_EQ(read_text(g), messy);  // untouched without -i
  r = kiln_cli("fmt -i " + g);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "");
  EXPECT_EQ(read_text(g), canonical);
  EXPECT_EQ(kiln_cli("fmt " + file("bad.kir", "graph g( {")).exit_code, 2);
}

// ---------------------------------------------------------------- kiln run

TEST_F(Cli, RunSummarisesOutputsFromASeed) {
  std::string g = file("g.kir", kMlp);
  CliResult r = kiln_cli("run " + g + " --seed 3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(3 inputs from seed 3, backend inductor)"), std::string::npos) << r.output;  // the default
  EXPECT_NE(r.output.find("output 0 %y: f32[2, 4]  min "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("output 1 %s: f32[]  min "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nan 0  inf 0  values ["), std::string::npos) << r.output;
  EXPECT_EQ(kiln_cli("run " + g + " --seed 3").output, r.output);  // deterministic
  EXPECT_NE(kiln_cli("run " + g + " --seed 4").output, r.output);
  EXPECT_EQ(kiln_cli("run " + g, "KILN_SEED=3").output, r.output);
}

TEST_F(Cli, RunDumpsAndReadsInputs) {
  std::string g = file("g.kir", kMlp);
  std::string dump = (dir_ / "dump").string();
  CliResult first = kiln_cli("run " + g + " --seed 1 --dump " + dump);
  EXPECT_EQ(first.exit_code, 0) << first.output;
  for (const char* f : {"x.npy", "w.npy", "b.npy", "output_0.npy", "output_1.npy"})
    EXPECT_TRUE(fs::exists(fs::path(dump) / f)) << f;
  EXPECT_EQ(read_npy((fs::path(dump) / "output_0.npy").string()).sizes(), (Shape{2, 4}));
  CliResult again = kiln_cli("run " + g + " --inputs " + dump);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  auto outputs_part = [](const std::string& s) { return s.substr(s.find("output 0")); };
  EXPECT_EQ(outputs_part(again.output), outputs_part(first.output));

  fs::remove(fs::path(dump) / "w.npy");
  CliResult missing = kiln_cli("run " + g + " --inputs " + dump);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("w.npy is missing"), std::string::npos) << missing.output;
  EXPECT_NE(kiln_cli("run " + g + " --inputs " + dump + " --seed 1").exit_code, 0);  // mutually exclusive
}

TEST_F(Cli, RunCheckComparesWithTheFp64Reference) {
  CliResult ok = kiln_cli("run --check " + file("g.kir", kMlp));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("check against the fp64 reference: PASS"), std::string::npos) << ok.output;
  // f16 cancellation: (x + 1000) - 1000 loses x's low bits in f16 but not in the f64 reference. Eager in f16
  // loses them too, and the comparator judges against eager at the graph's dtypes (PyTorch's same()): it
  // passes; a backend that computes something else fails.
  std::string lossy = file("lossy.kir", R"(graph lossy(%x: f16[64]) {
  %a = add(%x, 1000) : f16[64]
  %b = sub(%a, 1000) : f16[64]
  return %b
}
)");
  CliResult same = kiln_cli("run --check " + lossy);
  EXPECT_EQ(same.exit_code, 0) << same.output;
  CliResult bad = kiln_cli("run --check --backend inductor " + lossy, "KILN_INJECT=sub:accuracy");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("FAIL"), std::string::npos) << bad.output;
}

TEST_F(Cli, RunRejectsUnknownBackends) {
  CliResult r = kiln_cli("run --backend inductr " + file("g.kir", kMlp));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown backend 'inductr' (available: aot_eager, aot_eager_decomp_partition, eager, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("inductor"), std::string::npos) << r.output;
}

TEST_F(Cli, RunReportsKernelErrorsWithTheNode) {
  std::string g = file("g.kir", R"(graph g(%x: f32[3, 2]) {
  %idx = constant i64[2] [0, 9]
  %p = index_select(%x, 0, %idx) : f32[2, 2]
  return %p
}
)");
  CliResult r = kiln_cli("run " + g);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("%p = index_select (line 3:3)"), std::string::npos) << r.output;
}

TEST_F(Cli, LogChannelsGoToStderr) {
  CliResult r = kiln_cli("run " + file("g.kir", kMlp) + " --backend eager", "KILN_LOGS=interpreter");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[kiln:interpreter] %y = relu (line 3:3) -> f32[2, 4]"), std::string::npos) << r.output;
}
