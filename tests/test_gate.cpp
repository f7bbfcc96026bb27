// `kiln gate` end to end (the built binary on suites written to a temporary directory): a clean suite passes;
// an injected accuracy bug, a compile error and a crash, and a fixed repro that fails again, are each that
// entry's regression (exit 1, JUnit failure, reproduce command); baselines round-trip, known failures and
// fixes are told apart, slowdowns and memory growth against a same-machine baseline are flagged; corrupt or
// foreign baselines and malformed manifests are clear errors (exit 2). Also the rank test itself.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "gate/judge.h"
#include "gate/rank_test.h"
#include "cli_run.h"

using namespace kiln;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace kiln::cli_test;

namespace {

const char* kReluGraph = R"(graph g(%x: f32[4, 8]) {
  %y = relu(%x) : f32[4, 8]
  %z = mul(%y, %x) : f32[4, 8]
  return %z
}
)";

const char* kTanhGraph = R"(graph h(%x: f32[128, 256]) {
  %y = tanh(%x) : f32[128, 256]
  %s = sum(%y) : f32[]
  return %y, %s
}
)";

// A repro of a relu accuracy bug that is fixed (nothing injects it now).
const char* kFixedRepro = R"(kiln-repro: 1
backend: inductor
inputs: seed 0
tolerance: 0.0001
failure: accuracy
message: "output 0 differs"

graph g(%x: f32[4, 8]) {
  %y = relu(%x) : f32[4, 8]
  return %y
}
)";

class Gate : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    fs::create_directories(dir_ / "suite");
    write_file(dir_ / "suite" / "relu.kir", kReluGraph);
    write_file(dir_ / "suite" / "tanh.kir", kTanhGraph);
  }
  std::string suite() const { return (dir_ / "suite").string(); }
  CliResult gate(const std::string& args, const std::string& env = "") {
    return kiln_cli("gate '" + suite() + "' --repetitions 2 " + args, env);
  }
};

TEST_F(Gate, ACleanSuitePassesAndWritesEveryReport) {
  CliResult r = gate("--junit '" + path("j.xml") + "' --json '" + path("r.json") + "' --markdown '" +
                         path("m.md") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS          relu.kir  call "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PASS          tanh.kir"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 entries: 2 passed, 0 regressed"), std::string::npos) << r.output;
  std::string junit = read_text(path("j.xml"));
  EXPECT_NE(junit.find("tests=\"2\" failures=\"0\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("<testcase classname=\"kiln.gate.inductor\" name=\"relu.kir\""), std::string::npos) << junit;
  json report = json::parse(read_text(path("r.json")));
  ASSERT_EQ(report["entries"].size(), 2u);
  EXPECT_EQ(report["regressions"], 0);
  for (const json& e : report["entries"]) {
    EXPECT_EQ(e["verdict"], "PASS");
    EXPECT_EQ(e["result"]["run_ms"].size(), 2u);  // --repetitions 2
    ASSERT_EQ(e["result"]["compile_ms"].size(), 2u);  // a cold compile per repetition
    EXPECT_GT(e["result"]["compile_ms"][0].get<double>(), 0);
    EXPECT_GT(e["result"]["peak_bytes"].get<int64_t>(), 0);  // the outputs at least
  }
  EXPECT_NE(read_text(path("m.md")).find("### kiln gate: no regressions (inductor)"), std::string::npos);
}

TEST_F(Gate, EachInjectedFailureIsThatEntrysRegression) {
  for (const char* kind : {"accuracy", "compile_error", "crash"}) {
    SCOPED_TRACE(kind);
    std::string env = std::string("KILN_INJECT=relu:") + kind;
    CliResult r = gate("--junit '" + path("j.xml") + "'", env);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("REGRESSION    relu.kir  " + std::string(kind)), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("PASS          tanh.kir"), std::string::npos) << r.output;  // only relu's entry fails
    EXPECT_NE(r.output.find("(expected pass)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("reproduce: " + env + " kiln run " + path("suite/relu.kir") +
                            " --backend inductor --seed 0 --check"), std::string::npos) << r.output;
    std::string junit = read_text(path("j.xml"));
    EXPECT_NE(junit.find("failures=\"1\""), std::string::npos) << junit;
    size_t relu_case = junit.find("name=\"relu.kir\"");
    size_t failure = junit.find("<failure type=\"regression\"");
    ASSERT_NE(failure, std::string::npos) << junit;
    EXPECT_LT(relu_case, failure);
    EXPECT_GT(junit.find("name=\"tanh.kir\""), failure);  // the failure belongs to relu's test case
  }
}

TEST_F(Gate, AFixedReproStaysFixedAndFailingAgainIsARegression) {
  write_file(dir_ / "suite" / "relu_accuracy.repro", kFixedRepro);
  CliResult fixed = gate("");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
  EXPECT_NE(fixed.output.find("PASS          relu_accuracy.repro"), std::string::npos) << fixed.output;

  CliResult again = gate("", "KILN_INJECT=relu:accuracy");
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("REGRESSION    relu_accuracy.repro  accuracy: the recorded failure reproduces"),
            std::string::npos) << again.output;
  EXPECT_NE(again.output.find("reproduce: KILN_INJECT=relu:accuracy kiln repro run"), std::string::npos)
      << again.output;
}

TEST_F(Gate, BaselinesRoundTripAndTellKnownFailuresFromFixes) {
  std::string baseline = path("baseline.json");
  CliResult update = gate("--baseline '" + baseline + "' --update-baseline", "KILN_INJECT=relu:accuracy");
  ASSERT_EQ(update.exit_code, 0) << update.output;
  EXPECT_NE(update.output.find("baseline written to " + baseline + " (2 entries)"), std::string::npos);
  json b = json::parse(read_text(baseline));
  EXPECT_EQ(b["entries"]["relu.kir"]["status"], "accuracy");
  EXPECT_EQ(b["entries"]["tanh.kir"]["status"], "pass");

  CliResult known = gate("--baseline '" + baseline + "'", "KILN_INJECT=relu:accuracy");
  EXPECT_EQ(known.exit_code, 0) << known.output;
  EXPECT_NE(known.output.find("KNOWN FAILURE relu.kir  accuracy"), std::string::npos) << known.output;

  CliResult fixed = gate("--baseline '" + baseline + "'");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
  EXPECT_NE(fixed.output.find("FIXED         relu.kir"), std::string::npos) << fixed.output;
  EXPECT_NE(fixed.output.find("accept with --update-baseline"), std::string::npos) << fixed.output;

  CliResult other = gate("--baseline '" + baseline + "'", "KILN_INJECT=relu:compile_error");
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_NE(other.output.find("compile_error (expected accuracy)"), std::string::npos) << other.output;
}

// Rewrites the baseline's tanh.kir entry as if it had been measured faster / smaller on `machine`.
void doctor_baseline(const std::string& file, const gate::Machine& machine, double run_ms, int64_t peak) {
  json b = json::parse(read_text(file));
  b["machine"] = {{"cpu", machine.cpu}, {"threads", machine.threads}};
  json& e = b["entries"]["tanh.kir"];
  e["run_ms"] = std::vector<double>(5, run_ms);
  for (size_t i = 0; i < 5; ++i) e["run_ms"][i] = run_ms * (1 + 0.01 * double(i));
  e["compile_ms"] = e["run_ms"];
  e["peak_bytes"] = peak;
  write_file(file, b.dump(2));
}

TEST_F(Gate, SlowerCallsAndMorePeakMemoryThanTheBaselineAreRegressions) {
  std::string baseline = path("baseline.json");
  ASSERT_EQ(gate("--baseline '" + baseline + "' --update-baseline").exit_code, 0);
  CliResult same = gate("--baseline '" + baseline + "'");
  EXPECT_EQ(same.exit_code, 0) << same.output;  // its own baseline, moments later: no memory change

  doctor_baseline(baseline, gate::this_machine(), 1e-6, 8);  // a baseline a million times faster and smaller
  CliResult slow = kiln_cli("gate '" + suite() + "' --repetitions 5 --baseline '" + baseline + "' --json '" +
                                path("r.json") + "'");
  EXPECT_EQ(slow.exit_code, 1) << slow.output;
  EXPECT_NE(slow.output.find("regressed: call time"), std::string::npos) << slow.output;
  EXPECT_NE(slow.output.find("regressed: cold compile"), std::string::npos) << slow.output;
  EXPECT_NE(slow.output.find("regressed: peak memory"), std::string::npos) << slow.output;
  json report = json::parse(read_text(path("r.json")));
  for (const json& e : report["entries"]) {
    if (e["name"] == "tanh.kir") EXPECT_LT(e["time_test"]["p_value"].get<double>(), 0.05);
  }

  doctor_baseline(baseline, {"another CPU", 3}, 1e-6, 1 << 30);  // same figures from another machine
  CliResult elsewhere = gate("--baseline '" + baseline + "'");
  EXPECT_EQ(elsewhere.exit_code, 0) << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("times not compared: the baseline was measured on another CPU (3 threads)"),
            std::string::npos) << elsewhere.output;
}

TEST_F(Gate, BadSuitesBaselinesAndOptionsAreClearErrors) {
  std::string baseline = path("baseline.json");
  write_file(baseline, "{ not json");
  CliResult corrupt = gate("--baseline '" + baseline + "'");
  EXPECT_EQ(corrupt.exit_code, 2) << corrupt.output;
  EXPECT_NE(corrupt.output.find("the baseline is not valid JSON"), std::string::npos) << corrupt.output;

  write_file(baseline, R"({"benchmarks": []})");
  CliResult foreign = gate("--baseline '" + baseline + "'");
  EXPECT_EQ(foreign.exit_code, 2) << foreign.output;
  EXPECT_NE(foreign.output.find("not a kiln gate baseline"), std::string::npos) << foreign.output;

  CliResult missing = kiln_cli("gate '" + path("nowhere") + "'");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("no such suite"), std::string::npos) << missing.output;

  fs::create_directories(dir_ / "empty");
  CliResult empty = kiln_cli("gate '" + path("empty") + "'");
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_NE(empty.output.find("the suite has no entries"), std::string::npos) << empty.output;

  write_file(dir_ / "suite" / "gate.json", R"({"entries": [{"path": "relu.kir", "sead": 3}]})");
  CliResult typo = gate("");
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_NE(typo.output.find("unknown key 'sead' in entry relu.kir"), std::string::npos) << typo.output;

  write_file(dir_ / "suite" / "gate.json", R"({"entries": [{"path": "../outside.kir"}]})");
  write_file(dir_ / "outside.kir", kReluGraph);
  CliResult outside = gate("");
  EXPECT_EQ(outside.exit_code, 2) << outside.output;
  EXPECT_NE(outside.output.find("lies outside the suite directory"), std::string::npos) << outside.output;

  CliResult backend = gate("--backend nosuch");
  EXPECT_EQ(backend.exit_code, 2) << backend.output;
  EXPECT_NE(backend.output.find("unknown backend 'nosuch'"), std::string::npos) << backend.output;
}

// Every figure a baseline entry gives is checked before anything runs: a status gate does not know would count
// as a failure that is now FIXED, a negative peak or a passing graph without call times would silently compare
// nothing. Each is bad input naming the file, the entry and the field.
TEST_F(Gate, EveryBaselineFieldIsValidatedWithTheFileEntryAndField) {
  const std::string baseline = path("baseline.json");
  const json good = {{"kiln_gate_baseline", 1}, {"backend", "inductor"},
                     {"machine", {{"cpu", "some CPU"}, {"threads", 2}}},
                     {"entries", {{"relu.kir", {{"status", "pass"}, {"message", ""}, {"compile_ms", {3.0, 3.1}},
                                                {"run_ms", {0.5, 0.6}}, {"peak_bytes", 1024}, {"seconds", 0.4}}}}}};
  struct Case {
    std::string field;
    json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"status", "bogus", "entry relu.kir: \"status\" is \"bogus\"; expected one of pass, skipped, compile_error"},
      {"status", "none", "\"status\" is \"none\""},
      {"peak_bytes", -5, "entry relu.kir: \"peak_bytes\" is -5; expected a byte count, an integer >= 0"},
      {"peak_bytes", 1.5, "\"peak_bytes\" is 1.5"},
      {"run_ms", json::array(), "entry relu.kir: \"run_ms\" is empty for a graph entry that passed"},
      {"run_ms", {0.5, -1.0}, "entry relu.kir: \"run_ms\" holds -1.0; expected milliseconds, numbers >= 0"},
      {"compile_ms", {"fast"}, "\"compile_ms\" holds \"fast\""},
      {"run_ms", 3, "\"run_ms\" is number; expected a list of milliseconds"},
      {"seconds", -1, "\"seconds\" is -1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field + " = " + c.value.dump());
    json b = good;
    b["entries"]["relu.kir"][c.field] = c.value;
    write_file(baseline, b.dump());
    CliResult r = gate("--baseline '" + baseline + "'");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(baseline + ": entry relu.kir: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("PASS"), std::string::npos) << "the suite ran:\n" << r.output;
  }
  json b = good;
  b["entries"] = json::array();
  write_file(baseline, b.dump());
  CliResult list = gate("--baseline '" + baseline + "'");
  EXPECT_EQ(list.exit_code, 2) << list.output;
  EXPECT_NE(list.output.find("\"entries\" is array; expected an object of entries by name"), std::string::npos)
      << list.output;
  // A repro entry passes with no times at all.
  b = good;
  b["entries"] = {{"fixed.repro", {{"status", "pass"}, {"message", ""}, {"compile_ms", json::array()},
                                   {"run_ms", json::array()}, {"seconds", 0.2}}}};
  write_file(baseline, b.dump());
  EXPECT_NO_THROW(gate::load_baseline(baseline));
}

// A CI job killed at its timeout keeps what the run did: a progress line per entry as it finishes (stderr), and the
// JSON, JUnit and Markdown reports rewritten after every entry, marked incomplete. Here the second entry hangs (the
// inject_test backend's relu) under a 60 s limit and the run is killed after 15 s.
TEST_F(Gate, ProgressLinesAndReportsStayWhenTheRunIsKilled) {
  fs::create_directories(dir_ / "slow");
  write_file(dir_ / "slow" / "a.kir", "graph a(%x: f32[4]) {\n  %y = neg(%x) : f32[4]\n  return %y\n}\n");
  write_file(dir_ / "slow" / "b.kir", "graph b(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n");
  CliResult r = shell("timeout -s KILL 15 '" KILN_CLI "' gate '" + path("slow") + "' --backend inject_test --repetitions 2 "
                      "--timeout 60 --json '" + path("r.json") + "' --junit '" + path("j.xml") + "' --markdown '" +
                      path("m.md") + "'", "KILN_INJECT=relu:hang");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln gate: [1/2] a.kir: PASS"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[2/2]"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(path("r.json"))) << r.output;
  json report = json::parse(read_text(path("r.json")));
  EXPECT_EQ(report["complete"], false);
  EXPECT_EQ(report["entries_total"], 2);
  ASSERT_EQ(report["entries"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["entries"][0]["name"], "a.kir");
  EXPECT_NE(read_text(path("j.xml")).find("name=\"a.kir\""), std::string::npos);
  EXPECT_NE(read_text(path("m.md")).find("incomplete: 1 of 2 entries"), std::string::npos) << read_text(path("m.md"));

  fs::remove(dir_ / "slow" / "b.kir");
  CliResult quiet = kiln_cli("gate '" + path("slow") + "' --backend inject_test --repetitions 2 -q --json '" +
                             path("r.json") + "'");
  EXPECT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("kiln gate: ["), std::string::npos) << quiet.output;
  EXPECT_EQ(json::parse(read_text(path("r.json")))["complete"], true);
}

TEST_F(Gate, AManifestSetsSeedsAndSkipsEntriesAndAListedSuiteRunsOnlyItsEntries) {
  write_file(dir_ / "suite" / "gate.json",
             R"({"entries": [{"path": "relu.kir", "seed": 7}, {"path": "tanh.kir", "skip": "flaky on ARM"}]})");
  CliResult r = gate("", "KILN_INJECT=relu:accuracy");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--seed 7 --check"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("SKIPPED       tanh.kir  (flaky on ARM)"), std::string::npos) << r.output;

  write_file(dir_ / "listed.json", R"({"entries": [{"path": "suite/tanh.kir"}]})");
  CliResult listed = kiln_cli("gate '" + path("listed.json") + "' --repetitions 1");
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("PASS          suite/tanh.kir"), std::string::npos) << listed.output;
  EXPECT_EQ(listed.output.find("relu.kir"), std::string::npos) << listed.output;
}

// --seed is the seed of every graph entry the manifest gives none (as KILN_SEED is); the reproduce command names it.
TEST_F(Gate, SeedSetsTheInputsOfEntriesWithoutOne) {
  write_file(dir_ / "suite" / "gate.json", R"({"entries": [{"path": "tanh.kir", "seed": 7}]})");
  CliResult r = gate("--seed 11", "KILN_INJECT=relu:accuracy");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("relu.kir --backend inductor --seed 11 --check"), std::string::npos) << r.output;
  CliResult env = gate("", "KILN_SEED=12 KILN_INJECT=relu:accuracy");
  EXPECT_NE(env.output.find("relu.kir --backend inductor --seed 12 --check"), std::string::npos) << env.output;
  write_file(dir_ / "suite" / "gate.json", R"({"entries": [{"path": "relu.kir", "seed": 7}]})");
  CliResult manifest = gate("--seed 11", "KILN_INJECT=relu:accuracy");
  EXPECT_NE(manifest.output.find("relu.kir --backend inductor --seed 7 --check"), std::string::npos) << manifest.output;
}

TEST_F(Gate, ParallelEntriesGiveTheSameVerdicts) {
  CliResult r = gate("-j 2", "KILN_INJECT=relu:crash");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("REGRESSION    relu.kir  crash"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PASS          tanh.kir"), std::string::npos) << r.output;
}

TEST(RankTest, ExactPValuesOfSeparatedSamples) {
  gate::RankTest t = gate::mann_whitney_u({1, 2, 3}, {4, 5, 6});
  EXPECT_TRUE(t.exact);
  EXPECT_EQ(t.u, 0);
  EXPECT_NEAR(t.p_value, 0.1, 1e-12);  // 2 orderings of 20 are as extreme
  EXPECT_NEAR(gate::mann_whitney_u({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}).p_value, 2.0 / 252, 1e-12);
  EXPECT_EQ(gate::mann_whitney_u({1, 1, 1}, {1, 1, 1}).p_value, 1);  // every value equal: no evidence
  EXPECT_EQ(gate::mann_whitney_u({}, {1, 2}).p_value, 1);
}

RC_GTEST_PROP(RankTest, IsSymmetricAndUsAddUp, (const std::vector<int>& a_ints, const std::vector<int>& b_ints)) {
  RC_PRE(!a_ints.empty() && !b_ints.empty());
  std::vector<double> a(a_ints.begin(), a_ints.end()), b(b_ints.begin(), b_ints.end());
  gate::RankTest ab = gate::mann_whitney_u(a, b), ba = gate::mann_whitney_u(b, a);
  RC_ASSERT(ab.u + ba.u == double(a.size() * b.size()));
  RC_ASSERT(std::fabs(ab.p_value - ba.p_value) < 1e-9);
  RC_ASSERT(ab.p_value > 0 && ab.p_value <= 1);
}

// Samples from one distribution are rarely called different: at alpha 0.05, about 5% of the time.
RC_GTEST_PROP(RankTest, SamplesOfOneDistributionRarelyDiffer, ()) {
  int alarms = 0;
  const int trials = 200;
  for (int i = 0; i < trials; ++i) {
    auto a = *rc::gen::container<std::vector<int>>(5, rc::gen::inRange(0, 1000000));
    auto b = *rc::gen::container<std::vector<int>>(5, rc::gen::inRange(0, 1000000));
    alarms += gate::mann_whitney_u({a.begin(), a.end()}, {b.begin(), b.end()}).p_value < 0.05;
  }
  RC_ASSERT(alarms < trials / 8);
}

}  // namespace
