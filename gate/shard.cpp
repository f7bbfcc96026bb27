// The split of a suite into shards and the merge of shard reports (shard.h).
#include "gate/shard.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/escape.h"
#include "core/files.h"
#include "core/hash.h"

namespace kiln::gate {

using nlohmann::json;

namespace {

constexpr const char* kShardTag = "kiln_gate_shard";
constexpr int kShardFormatVersion = 1;

// The first 8 bytes of the name's SHA-256: the same on every machine and build (std::hash is neither).
uint64_t stable_hash(const std::string& s) {
  const Sha256Digest d = sha256(s);
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = h << 8 | d[size_t(i)];
  return h;
}

json machine_json(const Machine& m) { return {{"cpu", utf8_lossless(m.cpu)}, {"threads", m.threads}}; }
Machine machine_from(const json& j) { return {j.at("cpu").get<std::string>(), j.at("threads").get<int>()}; }

json config_json(const RunConfig& c) {
  return {{"backend", utf8_lossless(c.backend)}, {"grad", c.gradients}, {"tolerance", c.tolerance},
          {"timeout_s", c.timeout_s}, {"repetitions", c.repetitions}};
}
RunConfig config_from(const json& j) {
  RunConfig c;
  c.backend = j.at("backend").get<std::string>();
  c.gradients = j.at("grad").get<bool>();
  c.tolerance = j.at("tolerance").get<double>();
  c.timeout_s = j.at("timeout_s").get<double>();
  c.repetitions = j.at("repetitions").get<int>();
  return c;
}

json thresholds_json(const Thresholds& t) {
  return {{"time_tolerance", t.time_tolerance}, {"alpha", t.alpha}, {"compile_tolerance", t.compile_tolerance},
          {"memory_tolerance", t.memory_tolerance}};
}
Thresholds thresholds_from(const json& j) {
  return {j.at("time_tolerance").get<double>(), j.at("alpha").get<double>(), j.at("compile_tolerance").get<double>(),
          j.at("memory_tolerance").get<double>()};
}

json entry_json(const Entry& e) {
  json j = {{"name", utf8_lossless(e.name)}, {"path", utf8_lossless(e.path)},
            {"kind", e.kind == EntryKind::Repro ? "repro" : "graph"}, {"inputs", utf8_lossless(e.inputs_dir)},
            {"seed", e.seed}, {"skip", utf8_lossless(e.skip_reason)}};
  if (e.tolerance) j["tolerance"] = *e.tolerance;
  if (e.timeout_s) j["timeout_s"] = *e.timeout_s;
  if (e.gradients) j["grad"] = *e.gradients;
  return j;
}
Entry entry_from(const json& j) {
  Entry e;
  e.name = j.at("name").get<std::string>();
  e.path = j.at("path").get<std::string>();
  e.kind = j.at("kind").get<std::string>() == "repro" ? EntryKind::Repro : EntryKind::Graph;
  e.inputs_dir = j.at("inputs").get<std::string>();
  e.seed = j.at("seed").get<uint64_t>();
  e.skip_reason = j.at("skip").get<std::string>();
  if (j.contains("tolerance")) e.tolerance = j["tolerance"].get<double>();
  if (j.contains("timeout_s")) e.timeout_s = j["timeout_s"].get<double>();
  if (j.contains("grad")) e.gradients = j["grad"].get<bool>();
  return e;
}

// One shard report as read back: its section, and the file it came from for messages.
struct ReadShard {
  std::string path;
  json section;
  ShardInfo info;
  std::string suite, baseline_path;
  double seconds = 0;
};

ReadShard read_shard(const std::string& path) {
  ReadShard s;
  s.path = path;
  json report;
  try {
    report = json::parse(read_input_file(path, "gate shard report"));
  } catch (const json::parse_error& e) {
    fail("{}: not JSON ({}); pass the --json report of a `kiln gate --shard K/N` run", path, e.what());
  }
  KILN_CHECK(report.is_object() && report.contains("shard") && report["shard"].is_object() &&
                 report["shard"].contains(kShardTag),
             "{}: not a shard report (no \"shard\" section); write one with `kiln gate SUITE --shard K/N --json {}`",
             path, path);
  KILN_CHECK(report["shard"][kShardTag] == kShardFormatVersion, "{}: shard report format {} is not the one this "
             "kiln reads ({}); run the shards and the merge with one kiln", path, report["shard"][kShardTag].dump(),
             kShardFormatVersion);
  try {
    s.section = report["shard"];
    s.suite = report.at("suite").get<std::string>();
    s.seconds = report.at("seconds").get<double>();
    s.baseline_path = report.at("baseline").get<std::string>();
    const json& sec = s.section;
    s.info.spec = {sec.at("index").get<int>(), sec.at("count").get<int>()};
    KILN_CHECK(s.info.spec.count >= 1 && s.info.spec.index >= 1 && s.info.spec.index <= s.info.spec.count,
               "{}: shard {} is not K/N with 1 <= K <= N", path, s.info.spec.str());
    s.info.suite_entries = sec.at("suite_entries").get<std::vector<std::string>>();
    s.info.machine = machine_from(sec.at("machine"));
    s.info.config = config_from(sec.at("config"));
    s.info.thresholds = thresholds_from(sec.at("thresholds"));
    if (!sec.at("baseline").is_null()) {
      s.info.baseline_machine = machine_from(sec["baseline"].at("machine"));
      s.info.baseline_backend = sec["baseline"].at("backend").get<std::string>();
    }
    KILN_CHECK(report.at("complete").get<bool>() && sec.at("complete").get<bool>(),
               "{}: shard {} is incomplete ({} of its {} entries): that run did not finish (killed, crashed or timed "
               "out); run the shard again", path, s.info.spec.str(), sec.at("entries").size(),
               sec.at("entries_total").get<size_t>());
  } catch (const json::exception& e) {
    fail("{}: malformed shard report ({}); write it again with `kiln gate --shard K/N --json`", path, e.what());
  }
  return s;
}

// Everything that decides a verdict must be the same in every shard, or the merge is not one run's result.
void check_same_run(const ReadShard& first, const ReadShard& s) {
  auto differs = [&](const char* what, const json& a, const json& b) {
    KILN_CHECK(a == b, "{} and {}: the shards differ in {} ({} vs {}); every shard must run the same suite with the "
               "same options and baseline", first.path, s.path, what, a.dump(), b.dump());
  };
  differs("the shard count", first.info.spec.count, s.info.spec.count);
  differs("the suite's entries", first.section["suite_entries"], s.section["suite_entries"]);
  differs("the configuration", first.section["config"], s.section["config"]);
  differs("the thresholds", first.section["thresholds"], s.section["thresholds"]);
  differs("the baseline", first.section["baseline"], s.section["baseline"]);
}

}  // namespace

std::vector<int> assign_shards(const Suite& suite, const Baseline* baseline, int count) {
  std::vector<int> shard(suite.entries.size(), 0);
  if (!baseline) {
    for (size_t i = 0; i < suite.entries.size(); ++i)
      shard[i] = int(stable_hash(suite.entries[i].name) % uint64_t(count));
    return shard;
  }
  // Longest processing time first: each entry, heaviest first (ties by name), to the least loaded shard (ties:
  // the lowest). An entry the baseline lacks weighs the median of those it has.
  std::vector<double> weight(suite.entries.size(), -1), known;
  for (size_t i = 0; i < suite.entries.size(); ++i) {
    auto it = baseline->entries.find(suite.entries[i].name);
    if (it == baseline->entries.end()) it = baseline->entries.find(utf8_lossless(suite.entries[i].name));
    if (it != baseline->entries.end()) known.push_back(weight[i] = it->second.seconds);
  }
  const double fallback = known.empty() ? 1.0 : median(known);
  for (double& w : weight)
    if (w < 0) w = fallback;
  std::vector<size_t> order(suite.entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (weight[a] != weight[b]) return weight[a] > weight[b];
    return suite.entries[a].name < suite.entries[b].name;
  });
  std::vector<double> load(size_t(count), 0.0);
  for (size_t i : order) {
    const int lightest = int(std::min_element(load.begin(), load.end()) - load.begin());
    shard[i] = lightest;
    load[size_t(lightest)] += weight[i];
  }
  return shard;
}

Suite shard_of(const Suite& suite, const Baseline* baseline, const ShardSpec& spec) {
  const std::vector<int> shard = assign_shards(suite, baseline, spec.count);
  Suite out{suite.root, {}};
  for (size_t i = 0; i < suite.entries.size(); ++i)
    if (shard[i] == spec.index - 1) out.entries.push_back(suite.entries[i]);
  return out;
}

json shard_section(const ShardInfo& info, const std::vector<EntryResult>& results) {
  json entries = json::array();
  for (const EntryResult& r : results) {
    // The reproduce line names the KILN_* settings of the shard's environment, which the merge's need not have.
    json e = {{"entry", entry_json(r.entry)}, {"result", to_json(r.now)}, {"reproduce", utf8_lossless(r.reproduce)}};
    if (r.before) e["baseline"] = to_json(*r.before);
    entries.push_back(e);
  }
  json names = json::array();
  for (const std::string& n : info.suite_entries) names.push_back(utf8_lossless(n));
  json baseline = nullptr;
  if (info.baseline_machine)
    baseline = {{"machine", machine_json(*info.baseline_machine)}, {"backend", utf8_lossless(info.baseline_backend)}};
  return {{kShardTag, kShardFormatVersion},
          {"index", info.spec.index},
          {"count", info.spec.count},
          {"suite_entries", names},
          {"machine", machine_json(info.machine)},
          {"config", config_json(info.config)},
          {"thresholds", thresholds_json(info.thresholds)},
          {"baseline", baseline},
          {"entries", entries},
          {"entries_total", info.shard_entries},
          {"complete", results.size() == info.shard_entries}};
}

MergedRun merge_shard_reports(const std::vector<std::string>& paths) {
  KILN_CHECK(!paths.empty(), "kiln gate merge: no shard reports given");
  std::vector<ReadShard> shards;
  for (const std::string& p : paths) shards.push_back(read_shard(p));
  const ReadShard& first = shards.front();
  std::map<int, const ReadShard*> by_index;
  for (const ReadShard& s : shards) {
    check_same_run(first, s);
    auto [it, fresh] = by_index.emplace(s.info.spec.index, &s);
    KILN_CHECK(fresh, "{} and {} are both shard {}; pass each shard's report once", it->second->path, s.path,
               s.info.spec.str());
  }
  const int count = first.info.spec.count;
  std::vector<std::string> missing;
  for (int k = 1; k <= count; ++k)
    if (!by_index.count(k)) missing.push_back(fmt::format("{}/{}", k, count));
  KILN_CHECK(missing.empty(), "shard{} {} missing (given: {}); a shard that did not run or whose report was lost "
             "makes the merge incomplete: run it and pass its report", missing.size() > 1 ? "s" : "",
             fmt::join(missing, ", "), fmt::join(paths, ", "));

  // Each entry's result, judged as its shard judged it.
  const std::vector<std::string>& names = first.info.suite_entries;
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < names.size(); ++i) position[names[i]] = i;
  std::vector<std::optional<EntryResult>> results(names.size());
  std::vector<Measurement> measured(names.size());
  MergedRun run;
  run.machine = first.info.machine;
  for (const ReadShard& s : shards) {
    if (run.machine && !(*run.machine == s.info.machine)) run.machine.reset();
    Suite suite;
    std::vector<Measurement> now;
    std::vector<std::string> reproduce;
    Baseline baseline;
    baseline.backend = s.info.baseline_backend;
    if (s.info.baseline_machine) baseline.machine = *s.info.baseline_machine;
    try {
      for (const json& e : s.section.at("entries")) {
        Entry entry = entry_from(e.at("entry"));
        const std::string where = fmt::format("{}: entry {}", s.path, terminal_safe(entry.name));
        now.push_back(measurement_from_json(e.at("result"), where));
        reproduce.push_back(e.at("reproduce").get<std::string>());
        if (e.contains("baseline")) baseline.entries[entry.name] = measurement_from_json(e["baseline"], where);
        suite.entries.push_back(std::move(entry));
      }
    } catch (const json::exception& e) {
      fail("{}: malformed shard entry ({}); write it again with `kiln gate --shard K/N --json`", s.path, e.what());
    }
    std::vector<EntryResult> judged = judge(suite, now, s.info.config, s.info.baseline_machine ? &baseline : nullptr,
                                            s.info.thresholds, &s.info.machine);
    for (size_t i = 0; i < judged.size(); ++i) {
      const std::string name = utf8_lossless(judged[i].entry.name);
      auto at = position.find(name);
      KILN_CHECK(at != position.end(), "{}: entry {} is not in the suite the shards were split from", s.path,
                 terminal_safe(name));
      KILN_CHECK(!results[at->second], "entry {} was measured by two shards ({} among them): the shards were split "
                 "differently (another baseline or suite?); run every shard with the same ones", terminal_safe(name),
                 s.path);
      measured[at->second] = now[i];
      judged[i].reproduce = reproduce[i];
      results[at->second] = std::move(judged[i]);
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    KILN_CHECK(results[i].has_value(), "entry {} was measured by no shard: the shards were split differently "
               "(another baseline or suite?); run every shard with the same ones", terminal_safe(names[i]));
    run.results.push_back(std::move(*results[i]));
    run.measured.push_back(measured[i]);
  }
  run.info.suite = first.suite;
  run.info.backend = first.info.config.backend;
  run.info.baseline = first.info.baseline_machine ? first.baseline_path : "";
  for (const ReadShard& s : shards) run.info.seconds = std::max(run.info.seconds, s.seconds);
  run.info.entries_total = names.size();
  return run;
}

}  // namespace kiln::gate
