// Baselines and verdicts of `kiln gate`. A baseline file records, per entry, what the last accepted run
// measured (status, cold compile time, call times, peak bytes) and the machine it ran on. Each entry of a new
// run is judged against it:
//   pass / known failure   the status is the baseline's (no baseline: "pass" is expected)
//   fixed                  the baseline recorded a failure and the entry now passes (not a regression)
//   regression             a status that changed to another failure or from pass; a median call time or cold
//                          compile time slower by more than its tolerance with the rank test's p below alpha;
//                          peak bytes above the memory tolerance
// Times are compared only with a baseline taken on the same machine (CPU model and thread count), since on
// another one a difference says nothing about the code; the report says when they were not compared.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gate/measure.h"
#include "gate/rank_test.h"

namespace kiln::gate {

struct Machine {
  std::string cpu;   // /proc/cpuinfo's model name
  int threads = 0;   // hardware threads
  bool operator==(const Machine&) const = default;
  std::string str() const;
};
Machine this_machine();

struct Baseline {
  std::string backend;
  Machine machine;
  std::string kiln_version, git_hash;
  std::map<std::string, Measurement> entries;  // by entry name
};

inline constexpr int kBaselineFormatVersion = 1;
// A missing, corrupt or foreign file is a kiln::Error saying which and what to do.
Baseline load_baseline(const std::string& path);
void save_baseline(const Baseline& b, const std::string& path);  // atomic

struct Thresholds {
  // Shared CI runners move even CPU time by up to ~50% between back-to-back runs (the 2-core VM under a
  // parallel build: +37..52%), so the defaults catch what a runner cannot invent: twice as slow.
  double time_tolerance = 1.0;     // a median call time more than 100% slower...
  double alpha = 0.05;             // ...with the rank test's p-value below this is a regression
  double compile_tolerance = 1.0;  // the same for the median cold compile
  double memory_tolerance = 0.1;   // peak bytes more than 10% (and 64 KiB) higher is a regression
};

enum class Verdict { Pass, KnownFailure, Fixed, Skipped, Regression };
const char* verdict_name(Verdict v);

struct EntryResult {
  Entry entry;
  Measurement now;
  std::optional<Measurement> before;  // the baseline's, if it has the entry
  Verdict verdict = Verdict::Pass;
  std::vector<std::string> regressions;  // what regressed, one line each
  std::vector<std::string> notes;        // what a reader should know (fixed, times not compared, new entry)
  std::optional<RankTest> time_test;     // when call times were compared
  std::string reproduce;                 // the command that shows this entry's result
};

// `measured_on` is the machine the measurements were taken on (null: this one); times are compared only when it is
// the baseline's.
std::vector<EntryResult> judge(const Suite& suite, const std::vector<Measurement>& measured, const RunConfig& config,
                               const Baseline* baseline, const Thresholds& t, const Machine* measured_on = nullptr);

}  // namespace kiln::gate
