// The bisection hook: per-(stage, subsystem) and per-stage application counters checked against the
// KILN_BISECT_DISABLE and KILN_BISECT_LIMIT options.
#include "core/bisect.h"

#include <cstdio>
#include <mutex>
#include <tuple>

#include "core/error.h"
#include "core/fired.h"
#include "core/log.h"
#include "core/options.h"

namespace kiln {
namespace {

struct Counters {
  std::mutex mutex;
  std::map<std::pair<std::string, std::string>, int64_t> per_subsystem;
  std::map<std::string, int64_t, std::less<>> per_stage;
  std::string watched_key;  // "stage:subsystem" of watch_bisect_site ("" = none)
  int64_t watched_index = -1;
  std::string watched_info;
};

Counters& counters() {
  static Counters c;
  return c;
}

// The limit KILN_BISECT_LIMIT gives for `key` ("stage:subsystem" or "stage"), if any.
std::optional<int64_t> limit_for(const std::vector<std::string>& entries, std::string_view key) {
  for (const std::string& e : entries) {
    size_t eq = e.rfind('=');
    KILN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < e.size(),
               "KILN_BISECT_LIMIT entry '{}': expected stage:subsystem=N or stage=N", e);
    if (std::string_view(e).substr(0, eq) != key) continue;
    size_t used = 0;
    int64_t n = -1;
    try {
      n = std::stoll(e.substr(eq + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    KILN_CHECK(used == e.size() - eq - 1 && n >= 0, "KILN_BISECT_LIMIT entry '{}': N must be a non-negative integer", e);
    return n;
  }
  return std::nullopt;
}

constexpr std::pair<std::string_view, std::string_view> kSites[] = {
    {"passes", "constant_folding"}, {"passes", "cse"},       {"passes", "dce"},
    {"inductor", "decomposition"},  {"inductor", "lowering"}, {"inductor", "inline"},
    {"inductor", "nan_insensitive_max"}, {"inductor", "contiguous_copy"}, {"inductor", "fusion"},
    {"inductor", "localise"},
    {"inductor", "stream"},         {"inductor", "defer"},
};

bool is_site(std::string_view stage, std::string_view subsystem) {
  for (const auto& [st, sub] : kSites)
    if (st == stage && (subsystem.empty() || sub == subsystem)) return true;
  return false;
}

// The `stage:subsystem` or `stage` part of a setting entry (before '=' for KILN_BISECT_LIMIT).
std::string_view entry_key(std::string_view entry, bool has_limit) {
  return has_limit ? entry.substr(0, entry.rfind('=')) : entry;
}

std::pair<std::string_view, std::string_view> split_key(std::string_view key) {
  size_t colon = key.find(':');
  if (colon == std::string_view::npos) return {key, {}};
  return {key.substr(0, colon), key.substr(colon + 1)};
}

std::string closest_site(std::string_view key) {
  std::string best;
  int best_d = 1 << 30;
  auto consider = [&](const std::string& name) {
    if (int d = edit_distance(key, name); d < best_d) best_d = d, best = name;
  };
  for (const auto& [st, sub] : kSites) consider(std::string(st)), consider(fmt::format("{}:{}", st, sub));
  return best;
}

std::string site_list() {
  std::vector<std::string> names;
  for (const auto& [st, sub] : kSites) names.push_back(fmt::format("{}:{}", st, sub));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

const std::vector<std::pair<std::string_view, std::string_view>>& bisect_sites() {
  static const std::vector<std::pair<std::string_view, std::string_view>> sites(std::begin(kSites), std::end(kSites));
  return sites;
}

BisectSettings BisectSettings::from_options() { return {opt_list(Opt::BisectDisable), opt_list(Opt::BisectLimit)}; }

std::string BisectSettings::str() const {
  return fmt::format("disable={};limit={}", fmt::join(disable, ","), fmt::join(limit, ","));
}

namespace {
thread_local const BisectSettings* t_scoped_settings = nullptr;  // the innermost BisectScope's on this thread
}  // namespace

BisectScope::BisectScope(const std::optional<BisectSettings>& settings) : outer_(t_scoped_settings) {
  if (!settings) return;
  check_bisect_settings(*settings);
  mine_ = *settings;
  t_scoped_settings = &*mine_;
}

BisectScope::~BisectScope() { t_scoped_settings = outer_; }

BisectSettings current_bisect_settings() {
  return t_scoped_settings ? *t_scoped_settings : BisectSettings::from_options();
}

void check_bisect_settings() { check_bisect_settings(BisectSettings::from_options()); }

void check_bisect_settings(const BisectSettings& settings) {
  for (Opt opt : {Opt::BisectDisable, Opt::BisectLimit}) {
    const bool has_limit = opt == Opt::BisectLimit;
    for (const std::string& e : has_limit ? settings.limit : settings.disable) {
      if (has_limit) limit_for({e}, entry_key(e, true));  // checks the entry's `=N` form
      std::string_view key = entry_key(e, has_limit);
      auto [stage, subsystem] = split_key(key);
      KILN_CHECK(is_site(stage, subsystem) && (key.find(':') == std::string_view::npos || !subsystem.empty()),
                 "{} entry '{}': no bisection site is called '{}'; did you mean '{}'? (sites: {}; a stage alone "
                 "names all its sites)", option_spec(opt).env, e, key, closest_site(key), site_list());
    }
  }
}

bool should_run(std::string_view stage, std::string_view subsystem, const std::function<std::string()>& debug_info) {
  std::string key = fmt::format("{}:{}", stage, subsystem);
  int64_t index, stage_index;
  bool watched;
  {
    Counters& c = counters();
    std::lock_guard<std::mutex> lock(c.mutex);
    index = c.per_subsystem[{std::string(stage), std::string(subsystem)}]++;
    stage_index = c.per_stage[std::string(stage)]++;
    watched = index == c.watched_index && key == c.watched_key;
  }
  if (watched && debug_info) {
    std::string info = debug_info();
    Counters& c = counters();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.watched_info = std::move(info);
  }
  bool run = true;
  std::string why;
  note_settings_read();
  const BisectSettings settings = current_bisect_settings();
  for (const std::string& d : settings.disable)
    if (d == key || d == stage) {
      run = false, why = fmt::format(" (KILN_BISECT_DISABLE={})", d);
      note_setting_fired("KILN_BISECT_DISABLE=" + d);  // the site it names was asked (core/fired.h)
    }
  const std::vector<std::string>& limits = settings.limit;
  for (const std::string& l : limits)
    if (std::string_view k = entry_key(l, true); k == key || k == stage) note_setting_fired("KILN_BISECT_LIMIT=" + l);
  if (auto n = limit_for(limits, key); run && n && index >= *n)
    run = false, why = fmt::format(" (KILN_BISECT_LIMIT {}={})", key, *n);
  if (auto n = limit_for(limits, stage); run && n && stage_index >= *n)
    run = false, why = fmt::format(" (KILN_BISECT_LIMIT {}={})", stage, *n);
  KILN_LOG(LogChannel::Bisect, "{} #{} (stage #{}): {}{}: {}", key, index, stage_index, run ? "run" : "skip", why,
           debug_info ? debug_info() : "");
  return run;
}

std::map<std::pair<std::string, std::string>, int64_t> bisect_counts() {
  Counters& c = counters();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.per_subsystem;
}

void reset_bisect_counts() {
  Counters& c = counters();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.per_subsystem.clear();
  c.per_stage.clear();
  c.watched_key.clear();
  c.watched_index = -1;
  c.watched_info.clear();
}

void compile_step_then_run(const std::function<void()>& compile_step, const std::function<void()>& run) {
  Counters& c = counters();
  auto save = [&] {
    std::lock_guard<std::mutex> lock(c.mutex);
    return std::make_pair(c.per_subsystem, c.per_stage);
  };
  auto restore = [&](const auto& state) {
    std::lock_guard<std::mutex> lock(c.mutex);
    std::tie(c.per_subsystem, c.per_stage) = state;
  };
  const auto before = save();
  compile_step();
  const auto after = save();
  restore(before);
  struct KeepCompileCounts {  // also when `run` throws
    std::function<void()> done;
    ~KeepCompileCounts() { done(); }
  } keep{[&] {
    if (save() == before) restore(after);
  }};
  run();
}

void watch_bisect_site(std::string_view stage, std::string_view subsystem, int64_t index) {
  Counters& c = counters();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.watched_key = fmt::format("{}:{}", stage, subsystem);
  c.watched_index = index;
  c.watched_info.clear();
}

std::string watched_bisect_site() {
  Counters& c = counters();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.watched_info;
}

}  // namespace kiln
