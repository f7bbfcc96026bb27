// The four forms of a gate run's results (see report.h). Each line of the summary names the entry, its
// verdict and figures; each regression adds what regressed and the command that reproduces it.
#include "gate/report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/escape.h"

namespace kiln::gate {

using nlohmann::json;

namespace {

std::string figures(const EntryResult& r) {
  std::vector<std::string> parts;
  if (!r.now.run_ms.empty()) {
    std::string call = fmt::format("call {:.3g} ms", median(r.now.run_ms));
    if (r.before && !r.before->run_ms.empty()) call += fmt::format(" (baseline {:.3g}", median(r.before->run_ms));
    if (r.time_test) call += fmt::format(", p = {:.2g}", r.time_test->p_value);
    if (r.before && !r.before->run_ms.empty()) call += ")";
    parts.push_back(call);
  }
  if (!r.now.compile_ms.empty()) parts.push_back(fmt::format("compile {:.3g} ms", median(r.now.compile_ms)));
  if (r.now.peak_bytes >= 0) parts.push_back(fmt::format("peak {} B", r.now.peak_bytes));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// A Markdown table cell: the first line of `s` as a code span (markdown_code: nothing in it is markup or a
// terminal escape), with '|' escaped so it cannot end the cell.
std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char c : markdown_code(first_line(s))) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// Text for a JSON string: every name, path and message comes from users' files and may not be UTF-8, which
// nlohmann::json's dump refuses (utf8_lossless).
json text(const std::string& s) { return utf8_lossless(s); }
json texts(const std::vector<std::string>& v) {
  json out = json::array();
  for (const std::string& s : v) out.push_back(text(s));
  return out;
}

}  // namespace

std::string RunInfo::incomplete(size_t results) const {
  return results < entries_total ? fmt::format("incomplete: {} of {} entries", results, entries_total) : "";
}

int count_verdict(const std::vector<EntryResult>& results, Verdict v) {
  int n = 0;
  for (const EntryResult& r : results) n += r.verdict == v;
  return n;
}

std::string summary_text(const std::vector<EntryResult>& results, const RunInfo& info) {
  const std::string incomplete = info.incomplete(results.size());
  std::string out = fmt::format("kiln gate {}{} (backend {}, {}{}):\n", terminal_safe(info.suite),
                                info.shard.empty() ? "" : ", shard " + info.shard, info.backend,
                                info.baseline.empty() ? "no baseline: every entry must pass"
                                                      : "baseline " + terminal_safe(info.baseline),
                                incomplete.empty() ? "" : "; " + incomplete);
  for (const EntryResult& r : results) {
    out += fmt::format("  {:<13} {}", verdict_name(r.verdict), terminal_safe(r.entry.name));
    if (r.verdict == Verdict::Skipped) out += "  (" + terminal_safe(r.entry.skip_reason) + ")";
    else if (r.now.passed() && !figures(r).empty()) out += "  " + figures(r);
    else out += "  " + terminal_safe(r.now.status) + ": " + terminal_safe(first_line(r.now.message));
    out += "\n";
    for (const std::string& what : r.regressions) out += "      regressed: " + terminal_safe(first_line(what)) + "\n";
    for (const std::string& note : r.notes) out += "      note: " + terminal_safe(note) + "\n";
    if (r.verdict == Verdict::Regression) out += "      reproduce: " + r.reproduce + "\n";
  }
  out += fmt::format("{} entries: {} passed, {} regressed, {} known failures, {} fixed, {} skipped ({:.1f} s)\n",
                     results.size(), count_verdict(results, Verdict::Pass), count_verdict(results, Verdict::Regression),
                     count_verdict(results, Verdict::KnownFailure), count_verdict(results, Verdict::Fixed),
                     count_verdict(results, Verdict::Skipped), info.seconds);
  return out;
}

std::string junit_xml(const std::vector<EntryResult>& results, const RunInfo& info) {
  std::string cases;
  for (const EntryResult& r : results) {
    cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\">\n", xml_escape("kiln.gate." + info.backend),
                         xml_escape(r.entry.name), r.now.seconds);
    if (r.verdict == Verdict::Regression) {
      std::string body;
      for (const std::string& what : r.regressions) body += what + "\n";
      body += "reproduce: " + r.reproduce + "\n";
      cases += fmt::format("      <failure type=\"regression\" message=\"{}\">{}</failure>\n",
                           xml_escape(first_line(r.regressions.front())), xml_escape(body));
    } else if (r.verdict == Verdict::Skipped) {
      cases += fmt::format("      <skipped message=\"{}\"/>\n", xml_escape(r.entry.skip_reason));
    }
    std::string out = verdict_name(r.verdict) + std::string(": ") + (r.now.passed() ? figures(r) : r.now.status + ": " + r.now.message);
    for (const std::string& note : r.notes) out += "\nnote: " + note;
    cases += fmt::format("      <system-out>{}</system-out>\n    </testcase>\n", xml_escape(out));
  }
  const std::string incomplete = info.incomplete(results.size());
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"kiln gate\" tests=\"{0}\" failures=\"{1}\" skipped=\"{2}\" time=\"{3:.3f}\">\n"
      "  <testsuite name=\"{4}\" tests=\"{0}\" failures=\"{1}\" errors=\"0\" skipped=\"{2}\" time=\"{3:.3f}\">\n"
      "{6}{5}  </testsuite>\n</testsuites>\n",
      results.size(), count_verdict(results, Verdict::Regression), count_verdict(results, Verdict::Skipped),
      info.seconds, xml_escape(info.suite), cases,
      incomplete.empty() ? "" : fmt::format("    <properties><property name=\"kiln.gate.progress\" value=\"{}\"/>"
                                            "</properties>\n", xml_escape(incomplete)));
}

std::string json_report(const std::vector<EntryResult>& results, const RunInfo& info, const json* shard) {
  json entries = json::array();
  for (const EntryResult& r : results) {
    json e = {{"name", text(r.entry.name)}, {"path", text(r.entry.path)}, {"verdict", verdict_name(r.verdict)},
              {"result", to_json(r.now)}, {"regressions", texts(r.regressions)}, {"notes", texts(r.notes)},
              {"reproduce", text(r.reproduce)}};
    if (r.before) e["baseline"] = to_json(*r.before);
    if (r.time_test) e["time_test"] = {{"u", r.time_test->u}, {"p_value", r.time_test->p_value}, {"exact", r.time_test->exact}};
    entries.push_back(e);
  }
  json j = {{"suite", text(info.suite)},
            {"backend", text(info.backend)},
            {"baseline", text(info.baseline)},
            {"seconds", info.seconds},
            {"regressions", count_verdict(results, Verdict::Regression)},
            {"complete", info.incomplete(results.size()).empty()},
            {"entries_total", std::max(info.entries_total, results.size())},
            {"entries", entries}};
  if (shard) j["shard"] = *shard;
  return j.dump(2) + "\n";
}

std::string markdown_table(const std::vector<EntryResult>& results, const RunInfo& info) {
  int regressed = count_verdict(results, Verdict::Regression);
  const std::string incomplete = info.incomplete(results.size());
  std::string out = fmt::format("### kiln gate: {} ({}{})\n\n", regressed ? fmt::format("{} regression{}", regressed, regressed > 1 ? "s" : "") : "no regressions",
                                info.backend, incomplete.empty() ? "" : ", " + incomplete);
  out += "| entry | verdict | result | call ms | baseline ms | compile ms | peak bytes |\n|---|---|---|---:|---:|---:|---:|\n";
  for (const EntryResult& r : results) {
    auto ms = [](const std::vector<double>& xs) { return xs.empty() ? std::string("") : fmt::format("{:.3g}", median(xs)); };
    std::string result = r.regressions.empty() ? r.now.status : r.regressions.front();
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", markdown_cell(r.entry.name), verdict_name(r.verdict),
                       markdown_cell(result), ms(r.now.run_ms), r.before ? ms(r.before->run_ms) : "",
                       ms(r.now.compile_ms),
                       r.now.peak_bytes >= 0 ? std::to_string(r.now.peak_bytes) : "");
  }
  for (const EntryResult& r : results)
    if (r.verdict == Verdict::Regression)
      out += fmt::format("\nReproduce {}: {}\n", markdown_code(r.entry.name), markdown_code(r.reproduce));
  return out;
}

}  // namespace kiln::gate
