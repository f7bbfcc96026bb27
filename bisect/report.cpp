// The bisector's result as text (what `kiln bisect` prints) and as JSON (its -o file and `kiln doctor`'s).
#include <fmt/format.h>

#include "bisect/bisect.h"

namespace kiln::bisect {
namespace {

std::string rung_text(const LadderRung& r) {
  std::string name = r.backend.empty() ? "the command" : r.backend;
  return r.failure.failed() ? fmt::format("{} FAILS ({})", name, r.failure.kind) : name + " passes";
}

std::string culprit_text(const Culprit& c) {
  if (c.is_flip)
    return fmt::format("subsystem:   none; the failure goes away with {} ({})\n", c.site, c.good_setting);
  std::string out = fmt::format("subsystem:   {} (disabling it fixes the failure; {} applications)\n", c.site,
                                c.applications < 0 ? std::string("?") : std::to_string(c.applications));
  out += fmt::format("application: #{} (0-based: {} fails, {} passes; {} child runs)\n", c.application,
                     c.bad_setting, c.good_setting, c.runs);
  out += fmt::format("site:        {}{}\n", c.site_info.empty() ? "(no debug info)" : c.site_info,
                     c.location.empty() ? "" : " -> " + c.location);
  return out;
}

std::string numbers(const std::vector<double>& v) {
  std::vector<std::string> s;
  for (double d : v) s.push_back(fmt::format("{:.6g}", d));
  return fmt::format("[{}]", fmt::join(s, ", "));
}

}  // namespace

std::string BisectReport::text() const {
  std::vector<std::string> rungs;
  for (const LadderRung& r : ladder) rungs.push_back(rung_text(r));
  std::string out = fmt::format("ladder:      {}\n", fmt::join(rungs, ", "));
  if (outcome == Outcome::Passes) return out + fmt::format("result:      passes ({} child runs, {:.2f} s)\n", child_runs, seconds);
  if (outcome == Outcome::OtherFailure) {
    // Not a pass: it fails, only not the way the flag asked about.
    out += fmt::format("failure:     {}: {}\nstage:       {}\n", failure.kind, failure.message,
                       stage.empty() ? "the command" : stage);
    out += fmt::format("result:      FAILS with {}, not {} ({}): not bisected; drop {} to bisect this failure\n",
                       failure.kind, want_text(want), want_flag(want), want_flag(want));
    if (!repro_command.empty()) out += fmt::format("reproduce:   {}\n", repro_command);
    return out + fmt::format("child runs:  {} in {:.2f} s\n", child_runs, seconds);
  }
  out += fmt::format("failure:     {}: {}\nstage:       {}\n", failure.kind, failure.message, stage.empty() ? "the command" : stage);
  if (outcome == Outcome::Nondeterministic)
    out += "result:      NONDETERMINISTIC: the failing run passed, or failed differently, when repeated; not bisected\n";
  else if (culprit)
    out += culprit_text(*culprit);
  else
    out += "subsystem:   none explains it: disabling each site (and, past the AOT rungs, each configuration flip) "
           "left it failing\n";
  if (divergence)
    out += fmt::format("first diverging node: {} (written by {}; recorded: {})\n  {}\n  expected (fp64) from "
                       "element {}: {}\n  actual:                   {}\n", divergence->node, divergence->step,
                       divergence->narrowed_by, divergence->verdict, divergence->worst_index,
                       numbers(divergence->expected), numbers(divergence->actual));
  else if (!divergence_note.empty() && outcome != Outcome::Nondeterministic)
    out += fmt::format("first diverging node: none found: {}\n", divergence_note);
  if (!repro_command.empty()) out += fmt::format("reproduce:   {}\n", repro_command);
  if (!good_command.empty()) out += fmt::format("passes with: {}\n", good_command);
  return out + fmt::format("child runs:  {} in {:.2f} s\n", child_runs, seconds);
}

nlohmann::json BisectReport::json() const {
  nlohmann::json j;
  j["outcome"] = outcome_name(outcome);
  j["stage"] = stage;
  j["failure"] = {{"kind", failure_kind_name(failure.kind)}, {"message", failure.message}};
  for (const LadderRung& r : ladder)
    j["ladder"].push_back({{"backend", r.backend}, {"failure", failure_kind_name(r.failure.kind)}});
  for (const auto& [site, fixes] : tried) j["tried"].push_back({{"site", site}, {"fixes", fixes}});
  if (culprit)
    j["culprit"] = {{"site", culprit->site},           {"is_flip", culprit->is_flip},
                    {"applications", culprit->applications}, {"application", culprit->application},
                    {"site_info", culprit->site_info}, {"location", culprit->location},
                    {"bad_setting", culprit->bad_setting}, {"good_setting", culprit->good_setting},
                    {"runs", culprit->runs}};
  if (divergence)
    j["divergence"] = {{"value", divergence->value},       {"node", divergence->node},
                       {"step", divergence->step},         {"narrowed_by", divergence->narrowed_by},
                       {"verdict", divergence->verdict},   {"worst_index", divergence->worst_index},
                       {"expected", divergence->expected}, {"actual", divergence->actual}};
  j["divergence_note"] = divergence_note;
  j["repro_command"] = repro_command;
  j["good_command"] = good_command;
  j["child_runs"] = child_runs;
  j["seconds"] = seconds;
  return j;
}

}  // namespace kiln::bisect
