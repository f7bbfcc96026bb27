// The bisection hook (decision 4): every subsystem site (each pass application, decomposition, lowering,
// inlining and fusion, and each scheduler placement) asks should_run() before it acts. The hook counts applications per
// (stage, subsystem) and per stage, and refuses those that KILN_BISECT_DISABLE / KILN_BISECT_LIMIT exclude,
// so a bisector can switch off the Nth application and search for the first one that breaks a result.
// Skipping an application must leave a correct (possibly slower) program. See docs/options.md, Bisection.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

// Which applications may run: KILN_BISECT_DISABLE's entries (`stage` or `stage:subsystem`) and KILN_BISECT_LIMIT's
// (`stage=N` or `stage:subsystem=N`), in those options' forms. A compile passes its own in CompileOptions::bisect;
// BisectScope makes them the ones should_run obeys on this thread while it compiles.
struct BisectSettings {
  std::vector<std::string> disable;
  std::vector<std::string> limit;
  static BisectSettings from_options();  // KILN_BISECT_DISABLE and KILN_BISECT_LIMIT as set
  std::string str() const;               // "disable=...;limit=..." (the graph cache key's part)
};

// While alive, should_run on this thread obeys `settings` (checked: check_bisect_settings); nullopt changes
// nothing (the enclosing scope's settings, else the options table's). Scopes nest; each restores the outer one. The pipeline opens one per compile (kiln::compile, AOT autograd).
class BisectScope {
 public:
  explicit BisectScope(const std::optional<BisectSettings>& settings);
  ~BisectScope();
  BisectScope(const BisectScope&) = delete;
  BisectScope& operator=(const BisectScope&) = delete;

 private:
  const BisectSettings* outer_;
  std::optional<BisectSettings> mine_;
};

// The settings should_run obeys on this thread now: the innermost BisectScope's, else the options table's.
BisectSettings current_bisect_settings();

// Returns whether this application of `subsystem` in `stage` may run, and counts it. `debug_info` describes
// the site (e.g. the node a pass is about to rewrite); it is only called when the `bisect` log channel is on.
bool should_run(std::string_view stage, std::string_view subsystem, const std::function<std::string()>& debug_info);

// Every site of kiln that asks should_run, as (stage, subsystem): the registry KILN_BISECT_DISABLE /
// KILN_BISECT_LIMIT entries are checked against (tests/test_cli_suite.cpp checks it against the sources).
const std::vector<std::pair<std::string_view, std::string_view>>& bisect_sites();

// Throws kiln::Error when a KILN_BISECT_DISABLE or KILN_BISECT_LIMIT entry names a stage or stage:subsystem
// that no site has (with the closest valid name), so a misspelt bisection never quietly tests nothing.
void check_bisect_settings();
void check_bisect_settings(const BisectSettings& settings);  // the same check of a compile's own settings

// A KILN_BISECT_* entry whose site is never asked in a run is reported once, at the end of the run
// (core/fired.h): should_run records each entry that names the site it is asked for.

// Asks the hook to remember the debug info of application `index` (0-based) of `stage:subsystem` when it is
// asked (the bisector names the first bad application's site with it); watched_bisect_site() returns it ("" until
// then). One watch at a time; reset_bisect_counts() clears it.
void watch_bisect_site(std::string_view stage, std::string_view subsystem, int64_t index);
std::string watched_bisect_site();

// Runs a tool's compile step, then `run`, which compiles the same graphs again when the backend bypasses its
// graph cache (as it does under compiler logs or KILN_DEBUG_DIR): KILN_BISECT_LIMIT counts applications per process, so the run
// counts from where the compile step started and both compiles take the same decisions. When the run compiled
// nothing (it reused the compile step's program), the compile step's counts are kept.
void compile_step_then_run(const std::function<void()>& compile_step, const std::function<void()>& run);

// Applications asked so far per (stage, subsystem), including refused ones.
std::map<std::pair<std::string, std::string>, int64_t> bisect_counts();
void reset_bisect_counts();

}  // namespace kiln
