// The bisection hook: per-(stage, subsystem) and per-stage application counters checked against the
// KILN_BISECT_DISABLE and KILN_BISECT_LIMIT options.
#include "core/bisect.h"

#include <mutex>

#include "core/error.h"
#include "core/log.h"
#include "core/options.h"

namespace kiln {
namespace {

struct Counters {
  std::mutex mutex;
  std::map<std::pair<std::string, std::string>, int64_t> per_subsystem;
  std::map<std::string, int64_t, std::less<>> per_stage;
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

}  // namespace

bool should_run(std::string_view stage, std::string_view subsystem, const std::function<std::string()>& debug_info) {
  std::string key = fmt::format("{}:{}", stage, subsystem);
  int64_t index, stage_index;
  {
    Counters& c = counters();
    std::lock_guard<std::mutex> lock(c.mutex);
    index = c.per_subsystem[{std::string(stage), std::string(subsystem)}]++;
    stage_index = c.per_stage[std::string(stage)]++;
  }
  bool run = true;
  std::string why;
  for (const std::string& d : opt_list(Opt::BisectDisable))
    if (d == key || d == stage) run = false, why = fmt::format(" (KILN_BISECT_DISABLE={})", d);
  std::vector<std::string> limits = opt_list(Opt::BisectLimit);
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
}

}  // namespace kiln
