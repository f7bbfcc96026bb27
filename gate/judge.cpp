// Baseline files and the verdict rules of judge.h.
#include "gate/judge.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/escape.h"
#include "core/files.h"
#include "repro/command.h"

namespace kiln::gate {

using nlohmann::json;

namespace {

constexpr const char* kBaselineTag = "kiln_gate_baseline";

// The command that shows this entry's result, from the run's whole configuration (repro/command.h).
std::string reproduce_command(const Entry& e, const RunConfig& c, const Measurement& m) {
  RunLine line;
  line.file = e.path;
  if (e.kind == EntryKind::Repro) {
    line.repro_run = true;
    return kiln::reproduce_command(line);
  }
  line.backend = c.backend;
  if (e.inputs_dir.empty()) line.seed = e.seed;
  else line.inputs_dir = e.inputs_dir;
  line.tolerance = e.tolerance.value_or(c.tolerance);
  line.gradients = m.gradients;
  return kiln::reproduce_command(line);
}

// A sample of times regressed when its median is more than `tolerance` above the baseline's and the rank test
// says the difference is not noise.
void compare_times(EntryResult& r, const char* what, const std::vector<double>& now,
                   const std::vector<double>& before, double tolerance, const Thresholds& t,
                   std::optional<RankTest>* test_out) {
  if (now.empty() || before.empty()) return;
  RankTest test = mann_whitney_u(now, before);
  if (test_out) *test_out = test;
  double was = median(before), is = median(now);
  if (is > was * (1 + tolerance) && test.p_value < t.alpha)
    r.regressions.push_back(fmt::format("{} {:.3g} ms, baseline {:.3g} ms ({:+.0f}%, p = {:.3g} < {})", what, is,
                                        was, 100 * (is / was - 1), test.p_value, t.alpha));
}

void compare_memory(EntryResult& r, const Measurement& before, const Thresholds& t) {
  if (before.peak_bytes < 0 || r.now.peak_bytes < 0) return;
  double limit = double(before.peak_bytes) * (1 + t.memory_tolerance) + 64 * 1024;
  if (double(r.now.peak_bytes) > limit)
    r.regressions.push_back(fmt::format("peak memory {} bytes, baseline {} (more than {:.0f}% higher)",
                                        r.now.peak_bytes, before.peak_bytes, 100 * t.memory_tolerance));
}

// Every field of a baseline entry the verdicts read, checked before it is read, so a hand-edited or damaged
// baseline is bad input naming the field rather than a silent verdict: a status gate knows (another word would
// count as a failure that is now FIXED), times that are numbers >= 0, a peak that is an integer >= 0, and call
// times for a graph entry that passed (with none, its time comparison would silently never happen).
void check_baseline_entry(const json& j, const std::string& name, const std::string& where) {
  KILN_CHECK(j.is_object(), "{} is {}; expected an object", where, j.type_name());
  KILN_CHECK(j.contains("status") && j["status"].is_string() && is_status_word(j["status"].get<std::string>()),
             "{}: \"status\" is {}; expected one of pass, skipped, compile_error, runtime_error, crash, hang, "
             "accuracy, invalid", where, j.contains("status") ? j["status"].dump() : std::string("missing"));
  if (j.contains("message"))
    KILN_CHECK(j["message"].is_string(), "{}: \"message\" is {}; expected text", where, j["message"].type_name());
  for (const char* key : {"run_ms", "compile_ms"}) {
    if (!j.contains(key)) continue;
    KILN_CHECK(j[key].is_array(), "{}: \"{}\" is {}; expected a list of milliseconds", where, key, j[key].type_name());
    for (const json& v : j[key])
      KILN_CHECK(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0, "{}: \"{}\" holds {}; "
                 "expected milliseconds, numbers >= 0", where, key, v.dump());
  }
  if (j.contains("seconds"))
    KILN_CHECK(j["seconds"].is_number() && j["seconds"].get<double>() >= 0, "{}: \"seconds\" is {}; expected a "
               "number >= 0", where, j["seconds"].dump());
  if (j.contains("peak_bytes")) {
    const json& p = j["peak_bytes"];
    KILN_CHECK(p.is_number_unsigned() && p.get<uint64_t>() <= uint64_t(INT64_MAX), "{}: \"peak_bytes\" is {}; "
               "expected a byte count, an integer >= 0", where, p.dump());
  }
  const bool graph = !(name.size() >= 6 && name.compare(name.size() - 6, 6, ".repro") == 0);
  const bool no_calls = !j.contains("run_ms") || j["run_ms"].empty();
  KILN_CHECK(!(graph && j["status"] == "pass" && no_calls), "{}: \"run_ms\" is empty for a graph entry that "
             "passed; a baseline records its call times (a repro entry has none)", where);
}

}  // namespace

std::string Machine::str() const { return fmt::format("{} ({} threads)", cpu.empty() ? "unknown CPU" : cpu, threads); }

Machine this_machine() {
  Machine m;
  m.threads = int(std::thread::hardware_concurrency());
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) m.cpu = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  return m;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "PASS";
    case Verdict::KnownFailure: return "KNOWN FAILURE";
    case Verdict::Fixed: return "FIXED";
    case Verdict::Skipped: return "SKIPPED";
    case Verdict::Regression: return "REGRESSION";
  }
  return "?";
}

Baseline load_baseline(const std::string& path) {
  json j;
  try {
    j = json::parse(read_input_file(path, "gate baseline"));
  } catch (const json::parse_error& e) {
    fail("{}: the baseline is not valid JSON ({}); restore it or write a new one with --update-baseline", path,
         e.what());
  }
  KILN_CHECK(j.is_object() && j.contains(kBaselineTag), "{}: not a kiln gate baseline (no \"{}\" key); write one "
             "with --update-baseline", path, kBaselineTag);
  KILN_CHECK(j[kBaselineTag] == kBaselineFormatVersion, "{}: baseline format {} is not the one this kiln reads ({})",
             path, j[kBaselineTag].dump(), kBaselineFormatVersion);
  Baseline b;
  try {
    b.backend = j.at("backend").get<std::string>();
    b.machine.cpu = j.at("machine").at("cpu").get<std::string>();
    b.machine.threads = j.at("machine").at("threads").get<int>();
    b.kiln_version = j.value("kiln_version", "");
    b.git_hash = j.value("git", "");
    KILN_CHECK(j.at("entries").is_object(), "{}: \"entries\" is {}; expected an object of entries by name", path,
               j.at("entries").type_name());
    for (const auto& [name, entry] : j.at("entries").items()) {
      const std::string where = fmt::format("{}: entry {}", path, terminal_safe(name));
      check_baseline_entry(entry, name, where);
      b.entries[name] = measurement_from_json(entry, where);
    }
  } catch (const json::exception& e) {
    fail("{}: malformed baseline ({}); write a new one with --update-baseline", path, e.what());
  }
  return b;
}

void save_baseline(const Baseline& b, const std::string& path) {
  json entries = json::object();
  // Entry names are file names, which need not be UTF-8: keyed by utf8_lossless(name), as judge looks them up.
  for (const auto& [name, m] : b.entries) entries[utf8_lossless(name)] = to_json(m);
  json j = {{kBaselineTag, kBaselineFormatVersion},
            {"backend", utf8_lossless(b.backend)},
            {"machine", {{"cpu", utf8_lossless(b.machine.cpu)}, {"threads", b.machine.threads}}},
            {"kiln_version", utf8_lossless(b.kiln_version)},
            {"git", utf8_lossless(b.git_hash)},
            {"entries", entries}};
  write_file_atomic(path, j.dump(2) + "\n");
}

std::vector<EntryResult> judge(const Suite& suite, const std::vector<Measurement>& measured, const RunConfig& config,
                               const Baseline* baseline, const Thresholds& t, const Machine* measured_on) {
  const bool same_machine = baseline && baseline->machine == (measured_on ? *measured_on : this_machine());
  std::vector<EntryResult> results;
  for (size_t i = 0; i < suite.entries.size(); ++i) {
    EntryResult r;
    r.entry = suite.entries[i];
    r.now = measured[i];
    r.reproduce = reproduce_command(r.entry, config, r.now);
    if (baseline) {
      auto it = baseline->entries.find(r.entry.name);
      if (it == baseline->entries.end()) it = baseline->entries.find(utf8_lossless(r.entry.name));  // save_baseline's key
      if (it != baseline->entries.end()) r.before = it->second;
      else r.notes.push_back("new entry: not in the baseline");
    }
    const std::string expected = r.before && r.before->status != "skipped" ? r.before->status : "pass";
    if (r.now.status == "skipped") {
      r.verdict = Verdict::Skipped;
    } else if (r.now.status != expected) {
      if (r.now.passed()) {
        r.verdict = Verdict::Fixed;
        r.notes.push_back(fmt::format("fixed: the baseline recorded {}; accept with --update-baseline", expected));
      } else {
        r.regressions.push_back(fmt::format("{} (expected {}): {}", r.now.status, expected, r.now.message));
      }
    } else if (!r.now.passed()) {
      r.verdict = Verdict::KnownFailure;
    }
    if (r.now.passed() && r.before && r.before->passed()) {
      if (same_machine) {
        compare_times(r, "call time", r.now.run_ms, r.before->run_ms, t.time_tolerance, t, &r.time_test);
        compare_times(r, "cold compile", r.now.compile_ms, r.before->compile_ms, t.compile_tolerance, t, nullptr);
      }
      else r.notes.push_back("times not compared: the baseline was measured on " + baseline->machine.str());
      compare_memory(r, *r.before, t);
    }
    if (!r.regressions.empty()) r.verdict = Verdict::Regression;
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace kiln::gate
