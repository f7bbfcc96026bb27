// What `kiln gate` writes: the summary it prints, JUnit XML (what GitHub Actions, GitLab and Jenkins show), a
// JSON report with every figure, and a Markdown table fit for a pull-request comment. `kiln gate` writes them after
// every entry with the entries so far, each marked incomplete until the last one.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gate/judge.h"

namespace kiln::gate {

struct RunInfo {
  std::string suite;
  std::string backend;
  std::string baseline;  // path, empty when none
  double seconds = 0;
  size_t entries_total = 0;  // the suite's entries: more than the results while the run is still going
  std::string shard;         // "K/N" when the run measured one shard of the suite
  // "" when every entry has a result, else "incomplete: K of N entries" (the reports written during a run).
  std::string incomplete(size_t results) const;
};

std::string summary_text(const std::vector<EntryResult>& results, const RunInfo& info);
std::string junit_xml(const std::vector<EntryResult>& results, const RunInfo& info);
// `shard` (when set) is added as the report's "shard" section (gate/shard.h).
std::string json_report(const std::vector<EntryResult>& results, const RunInfo& info,
                        const nlohmann::json* shard = nullptr);
std::string markdown_table(const std::vector<EntryResult>& results, const RunInfo& info);

int count_verdict(const std::vector<EntryResult>& results, Verdict v);

}  // namespace kiln::gate
