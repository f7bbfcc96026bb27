// Sharded gate runs: a suite split into N shards that N CI runners measure (`kiln gate SUITE --shard K/N --json
// SHARD.json`), and the merge of their shard reports (`kiln gate merge SHARD.json...`) into the verdicts,
// reports and exit status one unsharded run gives. The split is a pure function of the suite and the baseline,
// so every runner computes the same one: with a baseline, entries are dealt longest-first to the least loaded
// shard by the wall time the baseline recorded for them (an entry it lacks weighs its median); without one, an
// entry's shard is a hash of its name (adding an entry moves no other). A shard's --json report carries what the
// merge needs to judge each entry as the shard did (the entries, their measurements and baseline figures, the
// run's configuration and thresholds, and the machine the shard measured on: times are compared only against a
// baseline from the same machine, per shard). The merge refuses, loudly, anything that would make its verdict
// differ from the unsharded run's: a missing, duplicated or incomplete shard, shards of different suites,
// configurations or baselines, an entry measured twice or never.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/shard.h"
#include "gate/judge.h"
#include "gate/report.h"

namespace kiln::gate {

// The shard (0-based) of each entry of `suite`, by the rules above.
std::vector<int> assign_shards(const Suite& suite, const Baseline* baseline, int count);
// `suite` with only the entries of shard `spec` (in suite order).
Suite shard_of(const Suite& suite, const Baseline* baseline, const ShardSpec& spec);

// What a shard report records besides its results.
struct ShardInfo {
  ShardSpec spec;
  std::vector<std::string> suite_entries;  // every entry of the whole suite, in suite order
  Machine machine;                          // where this shard measured
  RunConfig config;
  Thresholds thresholds;
  std::optional<Machine> baseline_machine;  // set when judged against a baseline
  std::string baseline_backend;
  size_t shard_entries = 0;                 // this shard's: the report is complete when each has a result
};
// The "shard" section `kiln gate --shard` adds to its --json report.
nlohmann::json shard_section(const ShardInfo& info, const std::vector<EntryResult>& results);

struct MergedRun {
  std::vector<EntryResult> results;  // in suite order
  RunInfo info;
  std::vector<Measurement> measured;  // by result
  std::optional<Machine> machine;     // every shard's machine, when they agree
};
// Reads and checks every shard report and judges each entry as its shard did. Bad or inconsistent input is a
// kiln::Error naming the file and what to do.
MergedRun merge_shard_reports(const std::vector<std::string>& paths);

}  // namespace kiln::gate
