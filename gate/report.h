// What `kiln gate` writes: the summary it prints, JUnit XML (what GitHub Actions, GitLab and Jenkins show), a
// JSON report with every figure, and a Markdown table fit for a pull-request comment.
#pragma once
#include <string>
#include <vector>

#include "gate/judge.h"

namespace kiln::gate {

struct RunInfo {
  std::string suite;
  std::string backend;
  std::string baseline;  // path, empty when none
  double seconds = 0;
};

std::string summary_text(const std::vector<EntryResult>& results, const RunInfo& info);
std::string junit_xml(const std::vector<EntryResult>& results, const RunInfo& info);
std::string json_report(const std::vector<EntryResult>& results, const RunInfo& info);
std::string markdown_table(const std::vector<EntryResult>& results, const RunInfo& info);

int count_verdict(const std::vector<EntryResult>& results, Verdict v);

}  // namespace kiln::gate
