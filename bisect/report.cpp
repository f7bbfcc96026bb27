// The bisector's result as text (what `kiln bisect` prints) and as JSON (its -o file and `kiln doctor`'s).
#include <fmt/format.h>

#include "bisect/bisect.h"
#include "core/escape.h"

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
  // The site's debug info and location name the graph's values: terminal_safe, as every user-given name printed.
  out += fmt::format("site:        {}{}\n", c.site_info.empty() ? "(no debug info)" : terminal_safe(c.site_info),
                     c.location.empty() ? "" : " -> " + terminal_safe(c.location));
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
    out += fmt::format("failure:     {}: {}\nstage:       {}\n", failure.kind, terminal_safe_lines(failure.message),
                       stage.empty() ? "the command" : terminal_safe(stage));
    out += fmt::format("result:      FAILS with {}, not {} ({}): not bisected; drop {} to bisect this failure\n",
                       failure.kind, want_text(want), want_flag(want), want_flag(want));
    if (!repro_command.empty()) out += fmt::format("reproduce:   {}\n", repro_command);
    return out + fmt::format("child runs:  {} in {:.2f} s\n", child_runs, seconds);
  }
  out += fmt::format("failure:     {}: {}\nstage:       {}\n", failure.kind, terminal_safe_lines(failure.message),
                     stage.empty() ? "the command" : terminal_safe(stage));
  if (outcome == Outcome::Nondeterministic)
    out += "result:      NONDETERMINISTIC: the failing run passed, or failed differently, when repeated; not bisected\n";
  else if (culprit)
    out += culprit_text(*culprit);
  else
    out += "subsystem:   none explains it: disabling each site (and, past the AOT rungs, each configuration flip) "
           "left it failing\n";
  if (divergence)
    out += fmt::format("first diverging node: {} (written by {}; recorded: {})\n  {}\n  expected (fp64) from "
                       "element {}: {}\n  actual:                   {}\n", terminal_safe(divergence->node),
                       terminal_safe(divergence->step), terminal_safe(divergence->narrowed_by),
                       terminal_safe_lines(divergence->verdict), divergence->worst_index,
                       numbers(divergence->expected), numbers(divergence->actual));
  else if (!divergence_note.empty() && outcome != Outcome::Nondeterministic)
    out += fmt::format("first diverging node: none found: {}\n", terminal_safe(divergence_note));
  if (!repro_command.empty()) out += fmt::format("reproduce:   {}\n", repro_command);
  if (!good_command.empty()) out += fmt::format("passes with: {}\n", good_command);
  return out + fmt::format("child runs:  {} in {:.2f} s\n", child_runs, seconds);
}

nlohmann::json BisectReport::json() const {
  // Messages, sites and nodes name the graph's values and files, which need not be UTF-8 (nlohmann::json's
  // dump refuses that): every string goes in through utf8_lossless.
  auto lossless = [](const std::string& s) { return utf8_lossless(s); };
  nlohmann::json j;
  j["outcome"] = outcome_name(outcome);
  j["stage"] = lossless(stage);
  j["failure"] = {{"kind", failure_kind_name(failure.kind)}, {"message", lossless(failure.message)}};
  for (const LadderRung& r : ladder)
    j["ladder"].push_back({{"backend", lossless(r.backend)}, {"failure", failure_kind_name(r.failure.kind)}});
  for (const auto& [site, fixes] : tried) j["tried"].push_back({{"site", lossless(site)}, {"fixes", fixes}});
  if (culprit)
    j["culprit"] = {{"site", lossless(culprit->site)},           {"is_flip", culprit->is_flip},
                    {"applications", culprit->applications}, {"application", culprit->application},
                    {"site_info", lossless(culprit->site_info)}, {"location", lossless(culprit->location)},
                    {"bad_setting", lossless(culprit->bad_setting)}, {"good_setting", lossless(culprit->good_setting)},
                    {"runs", culprit->runs}};
  if (divergence)
    j["divergence"] = {{"value", lossless(divergence->value)},       {"node", lossless(divergence->node)},
                       {"step", lossless(divergence->step)},         {"narrowed_by", lossless(divergence->narrowed_by)},
                       {"verdict", lossless(divergence->verdict)},   {"worst_index", divergence->worst_index},
                       {"expected", divergence->expected}, {"actual", divergence->actual}};
  j["divergence_note"] = lossless(divergence_note);
  j["repro_command"] = lossless(repro_command);
  j["good_command"] = lossless(good_command);
  j["child_runs"] = child_runs;
  j["seconds"] = seconds;
  return j;
}

}  // namespace kiln::bisect
