// `kiln bench` end to end: Google Benchmark JSON that round-trips as a baseline; corrupt and foreign baselines
// are clear errors; the history report is one HTML page with a plot per case, marking the run that got slower,
// rendered by headless Chromium (the screenshot is kept in build/test-artifacts/ for a person to look at).
// Whether noise and real slowdowns are told apart is tests/timing/ (it needs the machine to itself).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "bench_util_test.h"

using nlohmann::json;
namespace fs = std::filesystem;
using namespace kiln::cli_test;

namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(Bench, WritesGoogleBenchmarkJsonThatRoundTripsAsABaseline) {
  CliResult r = bench_cli("bench '" + path("chain.kir") + "' --repetitions 3 --caches warm --json '" +
                             path("a.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("chain/compiled/warm"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("faster than eager"), std::string::npos) << r.output;
  json j = json::parse(read_text(path("a.json")));
  ASSERT_TRUE(j.contains("context"));
  int iterations = 0, medians = 0;
  for (const json& b : j["benchmarks"]) {
    iterations += b["run_type"] == "iteration";
    medians += b.value("aggregate_name", "") == "median";
    EXPECT_EQ(b["time_unit"], "ms");
  }
  EXPECT_EQ(iterations, 3 * 3);  // compiled, eager, copy: three samples each
  EXPECT_EQ(medians, 3);

  CliResult again = bench_cli("bench '" + path("chain.kir") + "' --repetitions 3 --caches warm --baseline '" +
                                 path("a.json") + "' --time-tolerance 1");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(count(again.output, " new\n") + count(again.output, " missing\n"), 0) << again.output;  // every case matched
  EXPECT_NE(again.output.find("0 compiled cases slower than the baseline"), std::string::npos) << again.output;
}

TEST_F(Bench, CorruptAndForeignBaselinesAreClearErrors) {
  write_file(dir_ / "corrupt.json", "{\"benchmarks\": [");
  CliResult corrupt = bench_cli("bench '" + path("chain.kir") + "' --baseline '" + path("corrupt.json") + "'");
  EXPECT_EQ(corrupt.exit_code, 2) << corrupt.output;
  EXPECT_NE(corrupt.output.find("the baseline is not valid JSON"), std::string::npos) << corrupt.output;

  write_file(dir_ / "foreign.json", R"({"kiln_gate_baseline": 1, "entries": {}})");
  CliResult foreign = bench_cli("bench '" + path("chain.kir") + "' --baseline '" + path("foreign.json") + "'");
  EXPECT_EQ(foreign.exit_code, 2) << foreign.output;
  EXPECT_NE(foreign.output.find("not a benchmark result"), std::string::npos) << foreign.output;

  write_file(dir_ / "history.jsonl", "{\"benchmarks\": []}\nnot json\n");
  CliResult history = bench_cli("bench report '" + path("history.jsonl") + "' -o '" + path("r.html") + "'");
  EXPECT_EQ(history.exit_code, 2) << history.output;
  EXPECT_NE(history.output.find("history.jsonl:2: not a JSON line"), std::string::npos) << history.output;
  EXPECT_FALSE(fs::exists(dir_ / "r.html"));

  CliResult none = bench_cli("bench");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("name at least one .kir graph"), std::string::npos) << none.output;
}

// A history of one case over three commits, written by hand so the verdicts are known: the second run is the
// first one's noise, the third twice as slow.
std::string history_line(const std::string& git, double base, const std::string& cpu = "") {
  json benchmarks = json::array();
  for (int i = 0; i < 8; ++i)
    benchmarks.push_back({{"name", "g/compiled/warm"}, {"run_type", "iteration"}, {"real_time", base * (1 + 0.01 * i)},
                          {"time_unit", "ms"}, {"iterations", 10}});
  json context = {{"git", git}, {"date", "2026-11-24"}};
  if (!cpu.empty()) context["cpu"] = cpu, context["num_cpus"] = 2;
  return json{{"context", context}, {"benchmarks", benchmarks}}.dump() + "\n";
}

// Histories of two machines, one report: each machine's runs are drawn apart and a slow machine's runs are not
// regressions of a fast one's; a baseline from another machine is not compared.
TEST_F(Bench, HistoriesOfSeveralMachinesAreNeverComparedAcrossMachines) {
  write_file(dir_ / "fast.jsonl", history_line("aaaa", 1.0, "Fast CPU") + history_line("cccc", 1.0, "Fast CPU"));
  write_file(dir_ / "slow.jsonl", history_line("bbbb", 3.0, "Slow CPU") + history_line("dddd", 6.0, "Slow CPU"));
  CliResult r = bench_cli("bench report '" + path("fast.jsonl") + "' '" + path("slow.jsonl") + "' -o '" +
                          path("r.html") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 runs of 2 machines"), std::string::npos) << r.output;
  std::string html = read_text(path("r.html"));
  EXPECT_NE(html.find("Fast CPU (2 threads): 2 runs"), std::string::npos) << html;
  EXPECT_NE(html.find("Slow CPU (2 threads): 2 runs"), std::string::npos) << html;
  EXPECT_EQ(count(html, "<circle class=\"regression\""), 1) << html;  // dddd against bbbb only
  EXPECT_NE(html.find("dddd 2026-11-24: median"), std::string::npos) << html;

  ASSERT_EQ(bench_cli("bench '" + path("chain.kir") + "' --repetitions 3 --caches warm -q --json '" + path("a.json") +
                      "'").exit_code, 0);
  json j = json::parse(read_text(path("a.json")));
  j["context"]["cpu"] = "Another CPU";
  for (json& b : j["benchmarks"]) b["real_time"] = 1e-6, b["cpu_time"] = 1e-6;  // far faster: would be SLOWER now
  write_file(dir_ / "other.json", j.dump());
  CliResult cmp = bench_cli("bench '" + path("chain.kir") + "' --repetitions 3 --caches warm -q --baseline '" +
                            path("other.json") + "'");
  EXPECT_EQ(cmp.exit_code, 0) << cmp.output;
  EXPECT_NE(cmp.output.find("it was measured on Another CPU"), std::string::npos) << cmp.output;
}

TEST_F(Bench, TheReportMarksOnlyTheRunThatGotSlower) {
  write_file(dir_ / "h.jsonl", history_line("aaaa", 1.0) + history_line("bbbb", 1.005) + history_line("cccc", 2.0));
  ASSERT_EQ(bench_cli("bench report '" + path("h.jsonl") + "' -o '" + path("r.html") + "'").exit_code, 0);
  std::string html = read_text(path("r.html"));
  EXPECT_EQ(count(html, "<circle class=\"regression\""), 1) << html;
  EXPECT_EQ(count(html, "<circle class=\"run\""), 2) << html;
  EXPECT_NE(html.find("cccc 2026-11-24: median 2.07 ms (regression)"), std::string::npos) << html;
  EXPECT_NE(html.find("1 regressions</h1>"), std::string::npos) << html;
}

// A graph whose compiled kernel crashes is reported (its kind, not timed) and the other graphs are timed; the JSON
// holds both, the crash as Google Benchmark's error entry; progress lines name each case as it is timed.
TEST_F(Bench, ACrashingGraphIsReportedAndTheOthersAreTimed) {
  write_file(dir_ / "r.kir", "graph r(%x: f32[64]) {\n  %y = relu(%x) : f32[64]\n  return %y\n}\n");
  CliResult r = bench_cli("bench '" + path("r.kir") + "' '" + path("chain.kir") + "' --repetitions 2 --caches warm "
                          "--json '" + path("a.json") + "'", "KILN_INJECT=relu:crash");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("r: crash on inductor, not timed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kiln bench: [3/6] r: crash on inductor"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kiln bench: [4/6] chain/compiled/warm: median"), std::string::npos) << r.output;
  json j = json::parse(read_text(path("a.json")));
  int errors = 0, chain = 0;
  for (const json& b : j["benchmarks"]) {
    errors += b.value("error_occurred", false) && b["name"] == "r/compiled";
    chain += b["name"].get<std::string>().rfind("chain/", 0) == 0 && b["run_type"] == "iteration";
  }
  EXPECT_EQ(errors, 1) << j.dump(2);
  EXPECT_EQ(chain, 3 * 2) << j.dump(2);
  // Against that file as a baseline, the crash is read back (not a case), and -q silences the progress lines.
  CliResult again = bench_cli("bench '" + path("chain.kir") + "' --repetitions 2 --caches warm -q --time-tolerance 50 "
                              "--baseline '" + path("a.json") + "'");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output.find("kiln bench: ["), std::string::npos) << again.output;
}

// The reference cases (eager, copy) are shown against the baseline, not judged: a baseline whose eager and copy
// samples are 100x faster than now, and whose compiled samples are far slower, exits 0 (6 samples a case, so the
// rank test's p can fall below 0.05).
TEST_F(Bench, OnlyCompiledCasesAreJudgedAgainstTheBaseline) {
  ASSERT_EQ(bench_cli("bench '" + path("chain.kir") + "' --repetitions 6 --caches warm -q --json '" + path("a.json") +
                      "'").exit_code, 0);
  json j = json::parse(read_text(path("a.json")));
  for (json& b : j["benchmarks"]) {
    const std::string name = b["name"];
    if (name.find("/compiled/") != std::string::npos) {
      b["real_time"] = 1e6, b["cpu_time"] = 1e6;  // far slower then: now is faster, never a regression
    } else {
      b["real_time"] = b["real_time"].get<double>() / 100, b["cpu_time"] = b["cpu_time"].get<double>() / 100;
    }
  }
  write_file(dir_ / "b.json", j.dump());
  CliResult r = bench_cli("bench '" + path("chain.kir") + "' --repetitions 6 --caches warm -q --baseline '" +
                          path("b.json") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("SLOWER (reference, not judged)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0 compiled cases slower"), std::string::npos) << r.output;
  // The report counts compiled regressions only; the reference's slower run is grey.
  write_file(dir_ / "h.jsonl", j.dump() + "\n" + json::parse(read_text(path("a.json"))).dump() + "\n");
  ASSERT_EQ(bench_cli("bench report '" + path("h.jsonl") + "' -o '" + path("r.html") + "'").exit_code, 0);
  const std::string html = read_text(path("r.html"));
  EXPECT_NE(html.find(" 0 regressions</h1>"), std::string::npos) << html;
  EXPECT_EQ(count(html, "<circle class=\"reference-slower\""), 2) << html;  // eager and copy, warm
}

// The report's labels are whole: the y label fits in the margin left of the axis (at a generous 0.62 em a
// character), and runs of one commit get distinct x labels.
TEST_F(Bench, TheReportsAxisLabelsAreWholeAndDistinct) {
  write_file(dir_ / "h.jsonl", history_line("aaaa", 0.00425) + history_line("aaaa", 0.00426) + history_line("bbbb", 0.00425));
  ASSERT_EQ(bench_cli("bench report '" + path("h.jsonl") + "' -o '" + path("r.html") + "'").exit_code, 0);
  const std::string html = read_text(path("r.html"));
  std::regex ylabel(R"re(<text class="ylabel" x="([0-9.]+)" y="[0-9.]+" font-size="([0-9.]+)" text-anchor="end">([^<]*)</text>)re");
  int ylabels = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ylabel); it != std::sregex_iterator(); ++it, ++ylabels)
    EXPECT_GE(std::stod((*it)[1]) - 0.62 * std::stod((*it)[2]) * double((*it)[3].length()), 0) << (*it)[0];
  EXPECT_EQ(ylabels, 2);
  EXPECT_NE(html.find(">0.00501 ms</text>"), std::string::npos) << html;
  std::regex xlabel(R"re(<text class="xlabel"[^>]*>([^<]*)</text>)re");
  std::set<std::string> labels;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), xlabel); it != std::sregex_iterator(); ++it)
    labels.insert((*it)[1]);
  EXPECT_EQ(labels, (std::set<std::string>{"aaaa #1", "aaaa #2", "bbbb"}));
}

// --inputs DIR: the graph is timed on those inputs (as `kiln run --inputs` reads them); it holds one graph's
// inputs, so naming two graphs is bad input.
TEST_F(Bench, InputsDirIsOneGraphsInputs) {
  ASSERT_EQ(kiln_cli("run '" + path("chain.kir") + "' --backend eager --seed 5 --dump '" + path("in") + "'").exit_code, 0);
  CliResult r = bench_cli("bench '" + path("chain.kir") + "' --repetitions 2 --caches warm -q --inputs '" + path("in") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("chain/compiled/warm"), std::string::npos) << r.output;
  write_file(dir_ / "in" / "x.npy", "not npy");
  CliResult bad = bench_cli("bench '" + path("chain.kir") + "' -q --inputs '" + path("in") + "'");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;  // the inputs are read, not generated
  CliResult two = bench_cli("bench '" + path("chain.kir") + "' '" + path("chain.kir") + "' -q --inputs '" + path("in") + "'");
  EXPECT_EQ(two.exit_code, 2) << two.output;
  EXPECT_NE(two.output.find("one graph's inputs"), std::string::npos) << two.output;
}

TEST_F(Bench, TheHistoryReportHoldsOnePlotPerCaseAndRenders) {
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(bench_cli("bench '" + path("chain.kir") + "' --repetitions 3 --history '" + path("h.jsonl") + "'")
                  .exit_code, 0);
  EXPECT_EQ(count(read_text(path("h.jsonl")), "\n"), 3);  // one line per run
  CliResult r = bench_cli("bench report '" + path("h.jsonl") + "' -o '" + path("report.html") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 runs of 1 machine drawn into"), std::string::npos) << r.output;
  std::string html = read_text(path("report.html"));
  EXPECT_EQ(count(html, "<svg class=\"plot\""), 6);  // compiled, eager, copy; cold and warm
  EXPECT_EQ(count(html, "<circle class="), 6 * 3);   // a point per case per run
  EXPECT_NE(html.find("data-case=\"chain/compiled/warm\""), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, nothing to run
  EXPECT_EQ(html.find("http://", html.find("<body")), html.find("http://www.w3.org/2000/svg", html.find("<body")));

  std::string chromium = find_chromium();
  ASSERT_FALSE(chromium.empty()) << "headless Chromium is needed to render the report (ci/install-deps.sh installs it)";
  fs::path artifacts = fs::path(KILN_BINARY_DIR) / "test-artifacts";
  fs::create_directories(artifacts);
  fs::path png = artifacts / "bench-report.png";
  fs::remove(png);
  CliResult shot = shell(chromium + " --headless --no-sandbox --disable-gpu --hide-scrollbars "
                                   "--user-data-dir='" + path("chromium-profile") + "' --window-size=1400,1000 "
                                   "--screenshot='" + png.string() + "' 'file://" + path("report.html") + "'");
  ASSERT_TRUE(fs::exists(png)) << shot.output;
  std::string bytes = read_text(png);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  EXPECT_GT(bytes.size(), 20000u) << "a blank page compresses to a few KB";  // six plots with text and lines
}

}  // namespace
