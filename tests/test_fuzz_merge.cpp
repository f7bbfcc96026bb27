// Fuzz campaigns across workers: `kiln fuzz --shard K/N` checks disjoint graphs, and `kiln fuzz merge` makes N
// workers' directories one campaign's (fuzz/merge.h). End to end: two workers that each find one injected bug merge
// into one bucket whose hits are the sum and whose repro still reproduces; the merge is order-independent and
// idempotent. Properties over random summaries: any order of the inputs gives the same merge, merging a merged
// summary with any of its parts changes nothing, hits are conserved, one finding per bucket, the kept repro is
// the bucket's smallest; a summary that shares only some runs with another is refused.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "cli_run.h"
#include "fuzz/merge.h"

namespace kiln::cli_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A summary.json with repro paths reduced to their file names (the merged copies live in another directory).
json normalized(const fs::path& summary) {
  json j = json::parse(read_text(summary));
  for (json& f : j["findings"]) f["repro"] = fs::path(f["repro"].get<std::string>()).filename().string();
  return j;
}

class FuzzMergeCli : public CliTest {
 protected:
  CliResult worker(const std::string& shard, const std::string& out) {
    return kiln_cli("fuzz -q --seed 3 --runs 6 --max-nodes 3 --ops exp,add,mul --no-metamorphic --shard " + shard +
                        " -o " + path(out),
                    "KILN_INJECT=exp:accuracy");
  }
};

TEST_F(FuzzMergeCli, TwoWorkersWithOneInjectedBugMergeIntoOneBucket) {
  ASSERT_EQ(worker("1/2", "w1").exit_code, 1);
  ASSERT_EQ(worker("2/2", "w2").exit_code, 1);
  json w1 = normalized(path("w1") + "/summary.json"), w2 = normalized(path("w2") + "/summary.json");
  // Disjoint graphs: shard 1 checks even indices, shard 2 odd ones.
  ASSERT_EQ(w1["findings"].size(), 1u) << w1.dump(2);
  ASSERT_EQ(w2["findings"].size(), 1u) << w2.dump(2);
  EXPECT_EQ(w1["findings"][0]["index"].get<uint64_t>() % 2, 0u);
  EXPECT_EQ(w2["findings"][0]["index"].get<uint64_t>() % 2, 1u);

  CliResult m = kiln_cli("fuzz merge " + path("w1") + " " + path("w2") + " -o " + path("m12"));
  EXPECT_EQ(m.exit_code, 1) << m.output;  // a finding, as `kiln fuzz` says it
  EXPECT_NE(m.output.find("2 runs merged into"), std::string::npos) << m.output;
  json merged = normalized(path("m12") + "/summary.json");
  ASSERT_EQ(merged["findings"].size(), 1u) << merged.dump(2);
  const json& f = merged["findings"][0];
  EXPECT_EQ(f["signature"], "accuracy:exp");
  EXPECT_EQ(f["hits"], w1["findings"][0]["hits"].get<uint64_t>() + w2["findings"][0]["hits"].get<uint64_t>());
  EXPECT_EQ(merged["graphs"], 12);
  EXPECT_EQ(merged["runs"].size(), 2u);
  EXPECT_EQ(merged["coverage"]["nodes"]["exp"]["f32"].get<uint64_t>(),
            w1["coverage"]["nodes"]["exp"]["f32"].get<uint64_t>() + w2["coverage"]["nodes"]["exp"]["f32"].get<uint64_t>());
  // The kept repro was copied with its inputs and still reproduces.
  const std::string repro = path("m12") + "/" + f["repro"].get<std::string>();
  CliResult again = kiln_cli("repro run " + repro, "KILN_INJECT=exp:accuracy");
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("REPRODUCES"), std::string::npos) << again.output;

  // Order-independent and idempotent.
  EXPECT_EQ(kiln_cli("fuzz merge " + path("w2") + " " + path("w1") + " -o " + path("m21")).exit_code, 1);
  EXPECT_EQ(normalized(path("m21") + "/summary.json"), merged);
  EXPECT_EQ(kiln_cli("fuzz merge " + path("m12") + " " + path("w1") + " " + path("m21") + " -o " + path("mm")).exit_code, 1);
  EXPECT_EQ(normalized(path("mm") + "/summary.json"), merged);

  // The output must be new or empty; a directory without a summary is a clear error.
  CliResult busy = kiln_cli("fuzz merge " + path("w1") + " -o " + path("w2"));
  EXPECT_EQ(busy.exit_code, 2) << busy.output;
  EXPECT_NE(busy.output.find("new or empty directory"), std::string::npos) << busy.output;
  fs::create_directories(path("empty"));
  CliResult none = kiln_cli("fuzz merge " + path("empty") + " -o " + path("m0"));
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("summary.json"), std::string::npos) << none.output;
}

// A worker directory is untrusted: a link in it is copied as a link, and what it points at is never read.
TEST_F(FuzzMergeCli, LinksInAWorkerDirectoryAreNotFollowed) {
  ASSERT_EQ(worker("1/1", "w").exit_code, 1);
  json w = normalized(path("w") + "/summary.json");
  ASSERT_EQ(w["findings"].size(), 1u);
  const std::string inputs = path("w") + "/" + w["findings"][0]["repro"].get<std::string>() + ".inputs";
  fs::create_directories(path("elsewhere"));
  write_file(path("elsewhere") + "/secret.npy", "not the worker's");
  fs::remove_all(inputs);
  fs::create_directory_symlink(path("elsewhere"), inputs);
  ASSERT_EQ(kiln_cli("fuzz merge " + path("w") + " -o " + path("m")).exit_code, 1);
  const fs::path copied = path("m") + "/" + w["findings"][0]["repro"].get<std::string>() + ".inputs";
  EXPECT_TRUE(fs::is_symlink(copied)) << "the link was followed and what it points at copied";
}

TEST_F(FuzzMergeCli, ShardsOfOneSeedCheckDisjointGraphsThatCoverTheUnshardedRun) {
  std::set<uint64_t> all, seen;
  auto indices = [&](const std::string& extra) {
    CliResult r = kiln_cli("fuzz -q --backend eager --seed 5 --max-nodes 2 --print " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::set<uint64_t> out;
    for (size_t at = r.output.find("# graph "); at != std::string::npos; at = r.output.find("# graph ", at + 1))
      out.insert(std::stoull(r.output.substr(at + 8)));
    return out;
  };
  all = indices("--runs 9");
  for (int k = 1; k <= 3; ++k) {
    std::set<uint64_t> shard = indices(fmt::format("--runs 3 --shard {}/3", k));
    EXPECT_EQ(shard.size(), 3u);
    for (uint64_t i : shard) {
      EXPECT_EQ(i % 3, uint64_t(k - 1));
      EXPECT_TRUE(seen.insert(i).second) << i;
    }
  }
  EXPECT_EQ(seen, all);
  for (const char* bad : {"0/3", "4/3", "1/0", "x", "1/2/3", "-1/2"}) {
    CliResult r = kiln_cli(std::string("fuzz --backend eager --runs 1 --shard ") + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << r.output;
    EXPECT_NE(r.output.find("expected K/N"), std::string::npos) << r.output;
  }
}

// Random summaries: a few runs each, findings in a few buckets with random sizes and hits.
std::vector<fuzz::FuzzSummary> random_summaries(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::vector<fuzz::FuzzSummary> out;
  for (int i = 0; i < count; ++i) {
    fuzz::FuzzSummary s;
    const int runs = 1 + int(rng() % 2);
    for (int r = 0; r < runs; ++r)
      s.runs.push_back({fmt::format("{:016x}", rng()), "inductor", rng() % 3, 0, rng() % 50, {1, 1}, double(rng() % 7)});
    s.graphs = rng() % 100;
    s.checks = s.graphs * 2;
    s.shape_coverage["rank" + std::to_string(rng() % 3)] = rng() % 9;
    s.variant_coverage["default"] = s.graphs;
    const int findings = int(rng() % 4);
    for (int f = 0; f < findings; ++f) {
      fuzz::FindingRecord r;
      r.bucket = "accuracy|inductor|site|op" + std::to_string(rng() % 3);
      if (std::any_of(s.findings.begin(), s.findings.end(), [&](const auto& k) { return k.bucket == r.bucket; })) continue;
      r.kind = FailureKind::Accuracy;
      r.signature = "accuracy:op";
      r.variant = "default";
      r.seed = rng() % 3;
      r.index = rng() % 1000;
      r.hits = 1 + rng() % 5;
      r.nodes = 1 + rng() % 4;
      r.elements = rng() % 64;
      s.findings.push_back(r);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> names(size_t n) {
  std::vector<std::string> w;
  for (size_t i = 0; i < n; ++i) w.push_back("summary " + std::to_string(i));
  return w;
}

RC_GTEST_PROP(FuzzMerge, IsOrderIndependentIdempotentAndKeepsEachBucketsSmallestRepro, (uint64_t seed)) {
  const int count = 1 + int(seed % 5);
  std::vector<fuzz::FuzzSummary> parts = random_summaries(seed, count);
  const fuzz::FuzzSummary merged = fuzz::merge_summaries(parts, names(parts.size()));
  std::vector<fuzz::FuzzSummary> shuffled = parts;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(seed ^ 0x9e37));
  RC_ASSERT(fuzz::merge_summaries(shuffled, names(shuffled.size())).json() == merged.json());
  for (const fuzz::FuzzSummary& part : parts)
    RC_ASSERT(fuzz::merge_summaries({merged, part}, names(2)).json() == merged.json());
  RC_ASSERT(fuzz::merge_summaries({merged, merged}, names(2)).json() == merged.json());
  uint64_t hits = 0, merged_hits = 0, graphs = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> smallest;
  for (const fuzz::FuzzSummary& p : parts) {
    graphs += p.graphs;
    for (const fuzz::FindingRecord& f : p.findings) {
      hits += f.hits;
      auto [it, fresh] = smallest.emplace(f.bucket, std::pair{f.nodes, f.elements});
      if (!fresh) it->second = std::min(it->second, std::pair{f.nodes, f.elements});
    }
  }
  std::set<std::string> buckets;
  for (const fuzz::FindingRecord& f : merged.findings) {
    merged_hits += f.hits;
    RC_ASSERT(buckets.insert(f.bucket).second);
    RC_ASSERT((std::pair{f.nodes, f.elements}) == smallest.at(f.bucket));
  }
  RC_ASSERT(buckets.size() == smallest.size());
  RC_ASSERT(merged_hits == hits);
  RC_ASSERT(merged.graphs == graphs);
}

TEST(FuzzMerge, ASummarySharingOnlySomeRunsIsRefused) {
  std::vector<fuzz::FuzzSummary> parts = random_summaries(11, 3);
  fuzz::FuzzSummary ab = fuzz::merge_summaries({parts[0], parts[1]}, names(2));
  fuzz::FuzzSummary bc = fuzz::merge_summaries({parts[1], parts[2]}, names(2));
  try {
    fuzz::merge_summaries({ab, bc}, {"ab/summary.json", "bc/summary.json"});
    FAIL() << "overlapping summaries were merged";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shares"), std::string::npos) << e.what();
  }
  fuzz::FuzzSummary other = parts[2];
  other.runs[0].backend = "eager";
  EXPECT_THROW(fuzz::merge_summaries({parts[0], other}, names(2)), Error);
}

TEST(FuzzMerge, SummariesRoundTripThroughJson) {
  for (fuzz::FuzzSummary& s : random_summaries(5, 4)) {
    const std::string text = s.json();
    EXPECT_EQ(fuzz::summary_from_json(text, "s.json").json(), text);
  }
  EXPECT_THROW(fuzz::summary_from_json("{\"graphs\": 1}", "old.json"), Error);
  EXPECT_THROW(fuzz::summary_from_json("not json", "x.json"), Error);
}

}  // namespace
}  // namespace kiln::cli_test
