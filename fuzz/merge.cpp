// Merging fuzz campaigns (merge.h).
#include "fuzz/merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "core/error.h"
#include "core/escape.h"
#include "core/files.h"

namespace kiln::fuzz {

namespace fs = std::filesystem;

namespace {

// The smaller repro of one bug: fewer op nodes, then fewer elements, then a fixed order of where it came from.
bool smaller(const FindingRecord& a, const FindingRecord& b) {
  return std::tie(a.nodes, a.elements, a.seed, a.index, a.variant, a.signature) <
         std::tie(b.nodes, b.elements, b.seed, b.index, b.variant, b.signature);
}

std::string first_run_id(const FuzzSummary& s) {
  std::string id = s.runs.front().id;
  for (const RunRecord& r : s.runs) id = std::min(id, r.id);
  return id;
}

void add_finding(std::map<std::string, FindingRecord>& buckets, const FindingRecord& f) {
  auto [it, fresh] = buckets.emplace(f.bucket, f);
  if (fresh) return;
  FindingRecord& kept = it->second;
  const uint64_t hits = kept.hits + f.hits;
  // Every graph of both, as the list of others of whichever representative is the smaller.
  std::vector<FindingRecord::Other> graphs = kept.others;
  graphs.insert(graphs.end(), f.others.begin(), f.others.end());
  graphs.push_back({kept.index, kept.variant, kept.signature, kept.seed});
  graphs.push_back({f.index, f.variant, f.signature, f.seed});
  if (smaller(f, kept)) kept = f;
  kept.hits = hits;
  auto key = [](const FindingRecord::Other& o) { return std::tie(o.seed, o.index, o.variant, o.signature); };
  std::sort(graphs.begin(), graphs.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  graphs.erase(std::unique(graphs.begin(), graphs.end(), [&](const auto& a, const auto& b) { return key(a) == key(b); }),
               graphs.end());
  kept.others.clear();
  for (const FindingRecord::Other& o : graphs)
    if (key(o) != std::tie(kept.seed, kept.index, kept.variant, kept.signature)) kept.others.push_back(o);
}

}  // namespace

FuzzSummary merge_summaries(std::vector<FuzzSummary> summaries, const std::vector<std::string>& where) {
  KILN_CHECK(!summaries.empty(), "kiln fuzz merge: no summaries to merge");
  std::vector<size_t> order(summaries.size());
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = 0; i < summaries.size(); ++i)
    KILN_CHECK(!summaries[i].runs.empty(), "{}: the summary lists no runs", where[i]);
  // Larger summaries first (a merged one before its parts, which it then already holds), then by run id.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (summaries[a].runs.size() != summaries[b].runs.size()) return summaries[a].runs.size() > summaries[b].runs.size();
    return first_run_id(summaries[a]) < first_run_id(summaries[b]);
  });
  FuzzSummary m;
  std::set<std::string> merged_runs;
  std::map<std::string, FindingRecord> buckets;
  std::string backend;
  for (size_t i : order) {
    FuzzSummary& s = summaries[i];
    size_t known = 0;
    for (const RunRecord& r : s.runs) known += merged_runs.count(r.id);
    if (known == s.runs.size()) continue;  // merged already (the same summary twice, or a part of a merged one)
    KILN_CHECK(known == 0, "{}: shares {} of its {} runs with another input but not all; merge the workers' own "
               "directories (or merged ones that do not overlap)", where[i], known, s.runs.size());
    for (const RunRecord& r : s.runs) {
      if (backend.empty()) backend = r.backend;
      KILN_CHECK(r.backend == backend, "{}: run {} fuzzed backend {}, another input {}; merge runs of one backend",
                 where[i], r.id, terminal_safe(r.backend), terminal_safe(backend));
      merged_runs.insert(r.id);
      m.runs.push_back(r);
    }
    m.graphs += s.graphs;
    m.valid += s.valid;
    m.nan_free += s.nan_free;
    m.near_steps += s.near_steps;
    m.checks += s.checks;
    m.seconds += s.seconds;
    for (const auto& [k, n] : s.coverage) m.coverage[k] += n;
    for (const auto& [k, n] : s.shape_coverage) m.shape_coverage[k] += n;
    for (const auto& [k, n] : s.variant_coverage) m.variant_coverage[k] += n;
    for (const auto& [pattern, gap] : s.infer_gaps) {
      auto [it, fresh] = m.infer_gaps.emplace(pattern, gap);
      if (!fresh) it->second.count += gap.count;
    }
    for (const FindingRecord& f : s.findings) add_finding(buckets, f);
  }
  std::sort(m.runs.begin(), m.runs.end(), [](const RunRecord& a, const RunRecord& b) { return a.id < b.id; });
  for (auto& [key, f] : buckets) m.findings.push_back(std::move(f));
  std::sort(m.findings.begin(), m.findings.end(), [](const FindingRecord& a, const FindingRecord& b) {
    return a.hits != b.hits ? a.hits > b.hits : a.bucket < b.bucket;
  });
  return m;
}

FuzzSummary merge_fuzz_directories(const std::vector<std::string>& dirs, const std::string& out) {
  KILN_CHECK(!out.empty(), "kiln fuzz merge: name the output directory with -o OUT");
  std::error_code ec;
  KILN_CHECK(!fs::exists(out, ec) || (fs::is_directory(out, ec) && fs::is_empty(out, ec)),
             "{}: the merge's output must be a new or empty directory (it would mix with what is there)",
             terminal_safe(out));
  std::vector<FuzzSummary> summaries;
  std::vector<std::string> where;
  for (const std::string& d : dirs) {
    const std::string path = (fs::path(d) / "summary.json").string();
    where.push_back(path);
    summaries.push_back(summary_from_json(read_input_file(path, "fuzz summary"), path));
    // A repro path is the worker's own (`-o DIR/...`): found again beside this summary, wherever DIR is now.
    for (FindingRecord& f : summaries.back().findings)
      if (!f.repro.empty()) f.repro = (fs::path(d) / fs::path(f.repro).filename()).string();
  }
  FuzzSummary m = merge_summaries(std::move(summaries), where);
  create_output_directory(out);
  for (FindingRecord& f : m.findings) {
    if (f.repro.empty()) continue;
    const fs::path from(f.repro), to = fs::path(out) / from.filename();
    KILN_CHECK(fs::is_regular_file(fs::symlink_status(from)), "{}: the repro a summary lists is missing (or not a "
               "plain file); copy the worker's whole directory", terminal_safe(f.repro));
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
    for (const char* extra : {".inputs", ".state.json"}) {
      const fs::path side = from.string() + extra;
      // Links are copied as links, never followed: nothing outside the worker's directory is read.
      if (fs::exists(fs::symlink_status(side)))
        fs::copy(side, to.string() + extra, fs::copy_options::recursive | fs::copy_options::copy_symlinks |
                                                fs::copy_options::overwrite_existing);
    }
    f.repro = to.string();
  }
  write_file_atomic((fs::path(out) / "summary.json").string(), m.json() + "\n");
  return m;
}

}  // namespace kiln::fuzz
