// Sharded gates: `kiln gate SUITE --shard K/N` on N runners and `kiln gate merge` of their reports give exactly the
// verdicts, JUnit and exit status of one unsharded run (N = 1, 2, 3, 5; pass, regression, known failure, fixed and
// skipped entries among them); a missing, duplicated, incomplete or foreign shard fails the merge loudly. And
// the split itself: every entry in exactly one shard, the same split on every call, balanced by the baseline's
// times (longest first), and without a baseline an entry's shard does not move when others are added.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "cli_run.h"
#include "gate/shard.h"

namespace kiln::cli_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string pointwise_graph(const std::string& op) {
  return "graph g(%x: f32[4, 8]) {\n  %y = " + op + "(%x) : f32[4, 8]\n  return %y\n}\n";
}

// JUnit without what differs between two measurements of the same code: times and the figures in system-out.
std::string verdicts_of_junit(const std::string& xml) {
  static const std::regex time(R"( time="[^"]*")"), out(R"(<system-out>[^<]*</system-out>)");
  return std::regex_replace(std::regex_replace(xml, time, ""), out, "");
}

class GateShard : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    fs::create_directories(dir_ / "suite");
    for (const char* op : {"relu", "tanh", "neg", "exp", "sigmoid", "abs"})
      write_file(dir_ / "suite" / (std::string(op) + ".kir"), pointwise_graph(op));
    write_file(dir_ / "suite" / "gate.json", R"({"entries": [{"path": "abs.kir", "skip": "flaky on purpose"}]})");
    write_file(dir_ / "suite" / "relu_accuracy.repro", "kiln-repro: 1\nbackend: inject_test\ninputs: seed 0\n"
               "tolerance: 0.0001\nfailure: accuracy\nmessage: \"output 0 differs\"\n\n" + pointwise_graph("relu"));
    // The baseline: tanh crashed then (a known failure that is now fixed).
    CliResult b = gate("--baseline " + path("baseline.json") + " --update-baseline", "KILN_INJECT=tanh:crash");
    ASSERT_EQ(b.exit_code, 0) << b.output;
  }
  CliResult gate(const std::string& args, const std::string& env = "KILN_INJECT=relu:accuracy") {
    return kiln_cli("gate " + path("suite") + " --backend inject_test --repetitions 2 " + args, env);
  }
};

TEST_F(GateShard, MergedShardsGiveTheUnshardedVerdictsJUnitAndExitStatus) {
  CliResult whole = gate("--baseline " + path("baseline.json") + " --junit " + path("whole.xml") + " --json " +
                         path("whole.json"));
  ASSERT_EQ(whole.exit_code, 1) << whole.output;  // relu's graph and repro regress
  json expected = json::parse(read_text(path("whole.json")));
  std::set<std::string> verdicts;
  for (const json& e : expected["entries"]) verdicts.insert(e["verdict"].get<std::string>());
  EXPECT_EQ(verdicts, (std::set<std::string>{"PASS", "REGRESSION", "FIXED", "SKIPPED"})) << expected.dump(2);
  for (int n : {1, 2, 3, 5}) {
    SCOPED_TRACE(n);
    std::string reports;
    for (int k = 1; k <= n; ++k) {
      const std::string report = path(fmt::format("shard-{}-of-{}.json", k, n));
      CliResult shard = gate(fmt::format("--baseline {} --shard {}/{} --json {}", path("baseline.json"), k, n, report));
      ASSERT_TRUE(shard.exit_code == 0 || shard.exit_code == 1) << shard.output;
      EXPECT_NE(shard.output.find(fmt::format("shard {}/{}", k, n)), std::string::npos) << shard.output;
      reports += " " + report;
    }
    CliResult merged = kiln_cli("gate merge" + reports + " --junit " + path("merged.xml") + " --json " +
                                path("merged.json") + " --markdown " + path("merged.md"));
    EXPECT_EQ(merged.exit_code, whole.exit_code) << merged.output;
    EXPECT_EQ(verdicts_of_junit(read_text(path("merged.xml"))), verdicts_of_junit(read_text(path("whole.xml"))));
    json got = json::parse(read_text(path("merged.json")));
    ASSERT_EQ(got["entries"].size(), expected["entries"].size());
    for (size_t i = 0; i < got["entries"].size(); ++i) {
      for (const char* key : {"name", "verdict", "regressions", "reproduce", "notes"})
        EXPECT_EQ(got["entries"][i][key], expected["entries"][i][key]) << key;
    }
    EXPECT_NE(read_text(path("merged.md")).find("### kiln gate: 2 regressions"), std::string::npos);
  }
}

TEST_F(GateShard, MissingDuplicateIncompleteAndForeignShardsFailTheMerge) {
  const std::string baseline = " --baseline " + path("baseline.json");
  for (int k = 1; k <= 2; ++k) gate(fmt::format("{} --shard {}/2 --json {}", baseline, k, path(fmt::format("s{}.json", k))));
  auto merge = [&](const std::string& files) { return kiln_cli("gate merge " + files); };
  auto expect_refused = [&](const CliResult& r, const std::string& says) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
  };
  expect_refused(merge(path("s1.json")), "shard 2/2 missing");
  expect_refused(merge(path("s1.json") + " " + path("s1.json") + " " + path("s2.json")), "are both shard 1/2");
  expect_refused(merge(path("s1.json") + " " + path("nope.json")), "nope.json");
  // A shard killed part-way leaves an incomplete report.
  json s2 = json::parse(read_text(path("s2.json")));
  json cut = s2;
  if (!cut["shard"]["entries"].empty()) {
    cut["shard"]["entries"].erase(cut["shard"]["entries"].begin());
    cut["shard"]["complete"] = false;
    cut["complete"] = false;
    write_file(path("cut.json"), cut.dump());
    expect_refused(merge(path("s1.json") + " " + path("cut.json")), "incomplete");
  }
  // Another suite, another configuration, or an ordinary report.
  json other = s2;
  other["shard"]["config"]["tolerance"] = 0.5;
  write_file(path("other.json"), other.dump());
  expect_refused(merge(path("s1.json") + " " + path("other.json")), "differ in the configuration");
  gate("--json " + path("plain.json"));
  expect_refused(merge(path("plain.json")), "not a shard report");
  // Shards must write their report, and a shard cannot write the baseline.
  expect_refused(gate("--shard 1/2"), "pass --json");
  expect_refused(gate(baseline + " --shard 1/2 --json x.json --update-baseline"), "kiln gate merge");
  expect_refused(gate("--shard 3/2 --json x.json"), "expected K/N");
  // Merged shards write a baseline one run would have written.
  CliResult update = kiln_cli("gate merge " + path("s1.json") + " " + path("s2.json") + " --baseline " +
                              path("merged-baseline.json") + " --update-baseline");
  ASSERT_EQ(update.exit_code, 0) << update.output;
  json b = json::parse(read_text(path("merged-baseline.json")));
  EXPECT_EQ(b["entries"].size(), 7u);
  EXPECT_EQ(b["entries"]["relu.kir"]["status"], "accuracy");
}

gate::Suite suite_of(const std::vector<std::string>& names) {
  gate::Suite s{"suite", {}};
  for (const std::string& n : names) s.entries.push_back({.name = n, .path = "suite/" + n});
  return s;
}

RC_GTEST_PROP(GateSplit, EveryEntryInOneShardBalancedByTheBaselinesTimes,
              (const std::vector<uint8_t>& weights, uint8_t count_draw)) {
  RC_PRE(!weights.empty());
  const int count = 1 + count_draw % 6;
  std::vector<std::string> names;
  gate::Baseline baseline;
  double total = 0, heaviest = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    names.push_back(fmt::format("e{}.kir", i));
    baseline.entries[names.back()].seconds = weights[i];
    total += weights[i];
    heaviest = std::max(heaviest, double(weights[i]));
  }
  const gate::Suite suite = suite_of(names);
  const std::vector<int> shard = gate::assign_shards(suite, &baseline, count);
  RC_ASSERT(shard == gate::assign_shards(suite, &baseline, count));  // every runner computes the same split
  std::vector<double> load(size_t(count), 0);
  for (size_t i = 0; i < shard.size(); ++i) {
    RC_ASSERT(shard[i] >= 0 && shard[i] < count);
    load[size_t(shard[i])] += weights[i];
  }
  // Longest-first greedy: no shard exceeds the mean by more than one entry.
  for (double l : load) RC_ASSERT(l <= total / count + heaviest);
}

RC_GTEST_PROP(GateSplit, WithoutABaselineAddingEntriesMovesNoOther, (const std::vector<uint16_t>& ids, uint8_t count_draw)) {
  RC_PRE(ids.size() >= 2);
  const int count = 1 + count_draw % 6;
  std::vector<std::string> names;
  for (uint16_t id : ids) names.push_back(fmt::format("graph_{}.kir", id));
  std::vector<std::string> fewer(names.begin(), names.begin() + long(names.size() / 2));
  const std::vector<int> all = gate::assign_shards(suite_of(names), nullptr, count);
  const std::vector<int> part = gate::assign_shards(suite_of(fewer), nullptr, count);
  for (size_t i = 0; i < part.size(); ++i) RC_ASSERT(part[i] == all[i]);
}

}  // namespace
}  // namespace kiln::cli_test
