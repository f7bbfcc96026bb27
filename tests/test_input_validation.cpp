// Values a user gives that kiln once took silently or read two ways: seeds (KILN_SEED refused what --seed
// took: one parser now, checked as a property), KILN_BACKEND naming no backend (ignored by a kiln::compile that
// names its own), `kiln fuzz --ops ""` (read as every op), and repro headers (a second `backend:` line won
// silently, `failure: none` "reproduced" with exit 1, CRLF line ends gave a version error). Each is now a clear
// error at its source, accepted the same everywhere, or defined (`failure: none`: the graph must keep passing).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "capture/capture.h"
#include "cli_run.h"
#include "core/error.h"
#include "core/options.h"
#include "core/seed.h"
#include "graph/text.h"
#include "ops/api.h"
#include "repro/repro.h"
#include "tools/cli_checks.h"

using namespace kiln;
using kiln::cli_test::CliResult;
using kiln::cli_test::kiln_cli;

namespace {

const char* kRelu = "graph g(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n";

std::string example(const std::string& name) { return "'" + cli_test::source_path("examples/" + name).string() + "'"; }

// ---------------------------------------------------------------- seeds

TEST(Seeds, KilnSeedTakesEverySeedThatDashDashSeedTakes) {
  for (const std::string seed : {"0", "18446744073709551615", "9223372036854775808"}) {
    SCOPED_TRACE(seed);
    CliResult env = kiln_cli("run " + example("softmax.kir"), "KILN_SEED=" + seed);
    CliResult flag = kiln_cli("run " + example("softmax.kir") + " --seed " + seed);
    EXPECT_EQ(env.exit_code, 0) << env.output;
    EXPECT_EQ(flag.exit_code, 0) << flag.output;
    EXPECT_NE(env.output.find("from seed " + seed + ","), std::string::npos) << env.output;
    EXPECT_EQ(env.output, flag.output);  // the same inputs: the same summary
  }
  for (const std::string seed : {"18446744073709551616", "-1", "1e3", "0x10", "+5", ""}) {
    SCOPED_TRACE(seed);
    CliResult env = kiln_cli("run " + example("softmax.kir"), "KILN_SEED='" + seed + "'");
    CliResult flag = kiln_cli("run " + example("softmax.kir") + " --seed '" + seed + "'");
    EXPECT_EQ(env.exit_code, 2) << env.output;
    EXPECT_EQ(flag.exit_code, 2) << flag.output;
    EXPECT_NE(env.output.find("expected a seed, an integer from 0 to 18446744073709551615"), std::string::npos)
        << env.output;
    EXPECT_NE(flag.output.find("expected a seed, an integer from 0 to 18446744073709551615"), std::string::npos)
        << flag.output;
  }
}

// The three readers of a seed (the CLI's flag, KILN_SEED, a repro's `inputs: seed N`) accept exactly what
// parse_seed accepts, and parse_seed reads back every uint64_t.
RC_GTEST_PROP(Seeds, EveryReaderAgreesWithParseSeed, ()) {
  const uint64_t n = *rc::gen::arbitrary<uint64_t>();
  RC_ASSERT(parse_seed(std::to_string(n)) == std::optional<uint64_t>(n));
  const std::string text = *rc::gen::oneOf(
      rc::gen::container<std::string>(rc::gen::elementOf(std::string("0123456789-+ xe."))),
      rc::gen::map(rc::gen::arbitrary<uint64_t>(), [](uint64_t v) { return std::to_string(v) + "0"; }),
      rc::gen::map(rc::gen::arbitrary<uint64_t>(), [](uint64_t v) { return std::to_string(v); }));
  const bool ok = parse_seed(text).has_value();
  RC_ASSERT(seed_problem(text).empty() == ok);
  RC_ASSERT(option_problem(option_spec(Opt::Seed), text).empty() == ok);
  std::string flag = text;
  RC_ASSERT(cli::seed_check()(flag).empty() == ok);
  const std::string repro = "kiln-repro: 1\nbackend: eager\ninputs: seed " + text + "\nfailure: accuracy\n\n" + kRelu;
  bool parsed = true;
  try {
    RC_ASSERT(parse_repro(repro, "r.repro").input_seed == parse_seed(text));
  } catch (const Error&) {
    parsed = false;
  }
  RC_ASSERT(parsed == ok);
}

// ---------------------------------------------------------------- KILN_BACKEND

TEST(KilnBackend, ANameThatIsNoBackendIsAnErrorAtEveryCompileListingTheBackends) {
  ScopedOption backend(Opt::Backend, "nosuch");
  for (const std::string named : {"", "eager"}) {
    SCOPED_TRACE(named);
    try {
      auto f = compile([](const Tensor& x) { return relu(x); }, {.backend = named});
      ADD_FAILURE() << "KILN_BACKEND=nosuch was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("KILN_BACKEND=nosuch: unknown backend 'nosuch'; expected one of: "), std::string::npos) << what;
      EXPECT_NE(what.find("inductor"), std::string::npos) << what;
      EXPECT_NE(what.find("kiln::compile at "), std::string::npos) << what;
    }
  }
  ScopedOption eager(Opt::Backend, "eager");
  EXPECT_NO_THROW(compile([](const Tensor& x) { return relu(x); }, {.backend = "inductor"}));
}

TEST(KilnBackend, TheCaptureDemoRefusesAnUnknownOneAndRunsOnANamedOne) {
  const std::string demo = "'" KILN_BINARY_DIR "/kiln-capture-demo' 2";
  CliResult bad = cli_test::shell(demo, "KILN_BACKEND=nosuch");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("KILN_BACKEND=nosuch: unknown backend 'nosuch'"), std::string::npos) << bad.output;
  CliResult eager = cli_test::shell(demo, "KILN_BACKEND=eager");
  EXPECT_EQ(eager.exit_code, 0) << eager.output;
}

// ---------------------------------------------------------------- kiln fuzz --ops

TEST(FuzzOps, AnEmptyListIsAnErrorNotEveryOp) {
  CliResult r = kiln_cli("fuzz --runs 1 --ops '' -q");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--ops: the list is empty"), std::string::npos) << r.output;
  CliResult typo = kiln_cli("fuzz --runs 1 --ops 'relu,' -q");
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_NE(typo.output.find("unknown op ''"), std::string::npos) << typo.output;
}

// ---------------------------------------------------------------- repro headers

std::string repro(const std::string& header) {
  return "kiln-repro: 1\n" + header + "inputs: seed 0\nmessage: \"\"\n\n" + kRelu;
}

::testing::AssertionResult refused(const std::string& text, const std::string& expected) {
  try {
    parse_repro(text, "r.repro");
    return ::testing::AssertionFailure() << "accepted:\n" << text;
  } catch (const Error& e) {
    if (e.internal()) return ::testing::AssertionFailure() << "internal error: " << e.what();
    if (std::string(e.what()).find(expected) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << expected << "' not in: " << e.what();
    return ::testing::AssertionSuccess();
  }
}

TEST(ReproHeader, ASecondLineForAKeyIsRefusedNamingBothLines) {
  EXPECT_TRUE(refused(repro("backend: eager\nfailure: accuracy\nbackend: inductor\n"),
                      "r.repro:4:1: a second 'backend' line (the first is line 2)"));
  EXPECT_TRUE(refused(repro("backend: eager\nfailure: accuracy\ntolerance: 0.1\ntolerance: 0.5\n"),
                      "r.repro:5:1: a second 'tolerance' line (the first is line 4)"));
  EXPECT_TRUE(refused(repro("backend: eager\nfailure: accuracy\nconfig: KILN_INJECT=relu:accuracy\n"
                            "config: KILN_INJECT=exp:accuracy\n"),
                      "r.repro:5:1: a second 'config: KILN_INJECT=...' line (the first is line 4)"));
  EXPECT_TRUE(refused("kiln-repro: 1\nbackend: eager\nfailure: accuracy\nfailure: crash\n\n" + std::string(kRelu),
                      "r.repro:4:1: a second 'failure' line"));
  // Several config lines for different options are one each.
  ReproFile r = parse_repro(repro("backend: eager\nfailure: accuracy\nconfig: KILN_INJECT=relu:accuracy\n"
                                  "config: KILN_VERIFY=1\n"), "r.repro");
  EXPECT_EQ(r.config.size(), 2u);
  EXPECT_EQ(r.backend, "eager");
}

// `failure: none` records a graph that passed: `kiln repro run` says it still passes (exit 0) or that it fails
// now (exit 1), never "REPRODUCES: none".
TEST(ReproHeader, FailureNoneMeansTheGraphMustKeepPassing) {
  const std::string dir = ::testing::TempDir();
  const std::string passing = dir + "/none_passing.repro", failing = dir + "/none_failing.repro";
  cli_test::write_file(passing, repro("backend: eager\nfailure: none\n"));
  cli_test::write_file(failing, repro("backend: inductor\nconfig: KILN_INJECT=relu:accuracy\nfailure: none\n"));
  CliResult ok = kiln_cli("repro run '" + passing + "'");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("PASSES: the repro records no failure (failure: none)"), std::string::npos) << ok.output;
  EXPECT_EQ(ok.output.find("REPRODUCES"), std::string::npos) << ok.output;
  CliResult bad = kiln_cli("repro run '" + failing + "'");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("FAILS: accuracy (the repro records no failure: failure: none)"), std::string::npos)
      << bad.output;
  EXPECT_EQ(bad.output.find("REPRODUCES"), std::string::npos) << bad.output;
}

TEST(ReproHeader, CrlfLineEndsReadAsLf) {
  std::string text = repro("backend: eager\nfailure: accuracy\n");
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  ReproFile lf = parse_repro(text, "r.repro");
  ReproFile dos = parse_repro(crlf, "r.repro");
  EXPECT_EQ(dos.format_version, 1);
  EXPECT_EQ(dos.backend, "eager");
  EXPECT_EQ(dos.expected.kind, FailureKind::Accuracy);
  EXPECT_EQ(dos.input_seed, lf.input_seed);
  EXPECT_EQ(graph::print_graph(dos.graph), graph::print_graph(lf.graph));
}

}  // namespace
