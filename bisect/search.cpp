// The bisector's search over a Subject (bisect.h): the ladder, the determinism check, the subsystem search
// with KILN_BISECT_DISABLE / KILN_BISECT_LIMIT, and the configuration flips.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "api/backends.h"
#include "bisect/bisect.h"
#include "core/escape.h"
#include "core/bisect.h"
#include "core/error.h"
#include "core/inject.h"
#include "core/options.h"

namespace kiln::bisect {

bool counts_as_failure(Want want, const FailureSignature& f) {
  switch (want) {
    case Want::Accuracy: return f.kind == FailureKind::Accuracy;
    case Want::Error: return f.failed() && f.kind != FailureKind::Accuracy;
    default: return f.failed();
  }
}

std::string_view want_flag(Want want) {
  switch (want) {
    case Want::Accuracy: return "--accuracy";
    case Want::Error: return "--error";
    default: return "";
  }
}

std::string_view want_text(Want want) {
  switch (want) {
    case Want::Accuracy: return "an accuracy failure";
    case Want::Error: return "an error, crash or hang";
    default: return "a failure";
  }
}

std::string_view outcome_name(BisectReport::Outcome o) {
  switch (o) {
    case BisectReport::Outcome::Passes: return "passes";
    case BisectReport::Outcome::Nondeterministic: return "nondeterministic";
    case BisectReport::Outcome::Bisected: return "bisected";
    case BisectReport::Outcome::OtherFailure: return "other_failure";
    default: return "unexplained";
  }
}

const std::vector<Flip>& flips() {
  // KILN_STREAM_MIN_BYTES at 1 PiB: no output is that large, so no store streams.
  static const std::vector<Flip> f = {{"kiln's own exp off", {{"KILN_OWN_EXP", "0"}}},
                                      {"scalar code (vector width 1)", {{"KILN_VECTOR_WIDTH", "1"}}},
                                      {"streaming stores off", {{"KILN_STREAM_MIN_BYTES", "1048576G"}}}};
  return f;
}

std::vector<std::string> ladder_to(const std::string& backend) {
  std::vector<std::string> names = backend_names(), ladder;
  for (const char* rung : {"eager", "aot_eager", "aot_eager_decomp_partition"}) {
    if (rung == backend) break;  // a rung of the ladder as the target: the ladder ends there
    if (std::find(names.begin(), names.end(), rung) != names.end()) ladder.push_back(rung);
  }
  ladder.push_back(backend);
  // The rungs past eager compile through kiln's AOT autograd and inductor, which read KILN_INJECT themselves: a
  // setting only the top backend takes (inject_test's `hang`) makes each of them fail, and the first would be
  // blamed for a bug it does not have. That is bad input, said before any rung runs.
  try {
    InjectSpec::for_compiler();
  } catch (const Error& e) {
    std::vector<std::string> rejecting;
    for (size_t i = 0; i + 1 < ladder.size(); ++i)
      if (ladder[i] != "eager") rejecting.push_back(ladder[i]);
    if (backend != "inject_test") rejecting.push_back(backend);
    if (!rejecting.empty())
      fail("KILN_INJECT={}: the ladder's rungs {} do not support it ({}), so the ladder up to {} cannot judge "
           "them with it; inject a kind every rung supports (docs/inductor.md, Bug injection), or check backend {} "
           "alone (kiln minify --backend {})", fmt::join(opt_list(Opt::Inject), ","), fmt::join(rejecting, ", "),
           e.what(), backend, backend, backend);
  }
  return ladder;
}

namespace {

using Clock = std::chrono::steady_clock;

// The search's state: the subject, its options, the report being filled, and the progress line.
class Search {
 public:
  Search(Subject& s, const BisectOptions& o) : s_(s), o_(o), start_(Clock::now()) {}

  BisectReport run() {
    r_.want = o_.want;
    if (!run_ladder()) {
      if (other_found_) {  // it fails, just not as asked: say so, never "passes"
        r_.stage = other_.backend, r_.failure = other_.failure;
        r_.repro_command = s_.command_for(Trial{r_.stage, {}, "", -1});
        return finish(BisectReport::Outcome::OtherFailure);
      }
      return finish(BisectReport::Outcome::Passes);
    }
    if (!deterministic()) return finish(BisectReport::Outcome::Nondeterministic);
    search_sites();
    if (!r_.culprit) try_flips();
    return finish(r_.culprit ? BisectReport::Outcome::Bisected : BisectReport::Outcome::Unexplained);
  }

 private:
  Subject& s_;
  BisectOptions o_;
  Clock::time_point start_;
  BisectReport r_;
  TrialResult baseline_;
  LadderRung other_;  // the first rung that failed in a way the search was not asked about
  bool other_found_ = false;

  TrialResult trial(Trial t, const std::string& what) {
    if (t.backend.empty()) t.backend = r_.stage;
    TrialResult res = s_.run(t);
    ++r_.child_runs;
    if (o_.progress)
      fmt::print(stderr, "kiln bisect: [{} runs, {:.1f} s] {}: {}\n", r_.child_runs,
                 std::chrono::duration<double>(Clock::now() - start_).count(), terminal_safe(what),
                 res.failure.failed() ? std::string(failure_kind_name(res.failure.kind)) : "passes");
    return res;
  }
  bool bad(const TrialResult& t) const { return counts_as_failure(o_.want, t.failure); }

  bool run_ladder() {
    for (const std::string& b : o_.backend.empty() ? std::vector<std::string>{""} : ladder_to(o_.backend)) {
      TrialResult t = trial(Trial{b, {}, "", -1}, b.empty() ? "the command" : "backend " + b);
      r_.ladder.push_back({b, t.failure});
      if (bad(t)) {
        r_.stage = b, r_.failure = t.failure, baseline_ = t;
        return true;
      }
      if (t.failure.failed() && !other_found_) other_ = {b, t.failure}, other_found_ = true;
    }
    return false;
  }

  bool deterministic() {
    TrialResult again = trial(Trial{}, "the failing run again (determinism)");
    return bad(again) && same_failure(r_.failure, again.failure);
  }

  // Sites latest in the pipeline first; with known counts, only those the failing run asked.
  std::vector<std::string> sites_to_try() const {
    std::vector<std::string> sites;
    for (const auto& [stage, sub] : bisect_sites()) {
      std::string site = fmt::format("{}:{}", stage, sub);
      auto it = baseline_.counts.find(site);
      if (!baseline_.counts_known || (it != baseline_.counts.end() && it->second > 0)) sites.push_back(site);
    }
    std::reverse(sites.begin(), sites.end());
    return sites;
  }

  void search_sites() {
    for (const std::string& site : sites_to_try()) {
      TrialResult off = trial(Trial{"", {{"KILN_BISECT_DISABLE", site}}, "", -1}, site + " disabled");
      r_.tried.push_back({site, !bad(off)});
      if (!bad(off)) return search_applications(site);
    }
  }

  // The smallest limit L whose run fails: application L-1 is the first bad one. Limit 0 passed (disabled).
  void search_applications(const std::string& site) {
    Culprit c;
    c.site = site;
    c.runs = 1;
    auto limited = [&](int64_t limit) {
      Trial t{"", {{"KILN_BISECT_LIMIT", fmt::format("{}={}", site, limit)}}, site, limit - 1};
      TrialResult res = trial(t, fmt::format("{} limited to {}", site, limit));
      ++c.runs;
      if (bad(res) && !res.site_info.empty()) c.site_info = res.site_info;
      return res;
    };
    int64_t lo = 0, hi = -1;
    if (baseline_.counts_known) {
      hi = baseline_.counts.at(site);
    } else {  // a command whose log was not seen: gallop to a failing limit
      for (int64_t lim = 1; hi < 0 && lim <= (int64_t(1) << 40); lim *= 2) {
        TrialResult res = limited(lim);
        if (bad(res)) hi = lim, c.site_info = res.site_info;
        else lo = lim;
      }
    }
    c.applications = baseline_.counts_known ? hi : -1;
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      TrialResult res = limited(mid);
      if (bad(res)) {
        hi = mid;
        c.site_info = res.site_info;
      } else {
        lo = mid;
      }
    }
    c.application = hi - 1;
    if (c.site_info.empty()) {  // the search never ran limit = hi (or the run did not say)
      TrialResult res = trial(Trial{"", {}, site, hi - 1}, fmt::format("reading {} #{}'s site", site, hi - 1));
      ++c.runs;
      c.site_info = res.site_info;
    }
    c.location = s_.locate(c.site_info);
    c.bad_setting = fmt::format("KILN_BISECT_LIMIT={}={}", site, hi);
    c.good_setting = fmt::format("KILN_BISECT_LIMIT={}={}", site, hi - 1);
    r_.repro_command = s_.command_for(Trial{r_.stage, {{"KILN_BISECT_LIMIT", fmt::format("{}={}", site, hi)}}, "", -1});
    r_.good_command = s_.command_for(Trial{r_.stage, {{"KILN_BISECT_LIMIT", fmt::format("{}={}", site, hi - 1)}}, "", -1});
    r_.culprit = c;
  }

  // The flips change only the inductor's code: not tried for a failure of the interpreted rungs.
  void try_flips() {
    if (r_.stage == "eager" || r_.stage == "aot_eager" || r_.stage == "aot_eager_decomp_partition") {
      r_.repro_command = s_.command_for(Trial{r_.stage, {}, "", -1});
      return;
    }
    for (const Flip& f : flips()) {
      TrialResult res = trial(Trial{"", f.settings, "", -1}, f.name);
      r_.tried.push_back({f.name, !bad(res)});
      if (bad(res)) continue;
      Culprit c;
      c.site = f.name;
      c.is_flip = true;
      c.runs = 1;
      for (const auto& [k, v] : f.settings) c.good_setting += fmt::format("{}{}={}", c.good_setting.empty() ? "" : " ", k, v);
      r_.culprit = c;
      r_.repro_command = s_.command_for(Trial{r_.stage, {}, "", -1});
      r_.good_command = s_.command_for(Trial{r_.stage, f.settings, "", -1});
      return;
    }
    r_.repro_command = s_.command_for(Trial{r_.stage, {}, "", -1});
  }

  BisectReport finish(BisectReport::Outcome o) {
    r_.outcome = o;
    if (o == BisectReport::Outcome::Nondeterministic) r_.repro_command = s_.command_for(Trial{r_.stage, {}, "", -1});
    r_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return r_;
  }
};

}  // namespace

BisectReport search(Subject& subject, const BisectOptions& o) { return Search(subject, o).run(); }

}  // namespace kiln::bisect
