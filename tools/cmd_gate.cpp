// `kiln gate SUITE [--backend B] [--baseline FILE] [--update-baseline] [--junit FILE] [--json FILE]
// [--markdown FILE] [--shard K/N] [-j N] [--repetitions N] [--grad] [--timeout S] [--tol T] [--time-tolerance F]
// [--seed N] [-q]`: runs every entry of the suite (or of its shard K/N) isolated, judges it against the baseline
// (gate/judge.h) and writes the reports. A progress line per entry goes to stderr as it finishes, and the report
// files are rewritten (atomically) after every entry, so a run killed at its CI timeout leaves the entries it
// finished. `kiln gate merge SHARD.json... [--junit FILE] [--json FILE] [--markdown FILE] [--baseline FILE
// --update-baseline]` merges the shards' --json reports into what one unsharded run gives (gate/shard.h).
// Exit status: 0 without regressions (or after --update-baseline), 1 with any, 2 for bad input (suite, baseline,
// options, shard reports).
#include "tools/cmd_gate.h"

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "api/backends.h"
#include "gate/judge.h"
#include "gate/report.h"
#include "gate/shard.h"
#include "gate/suite.h"
#include "kiln_version.h"
#include "tools/cli_checks.h"
#include "core/escape.h"
#include "core/seed.h"
#include "core/options.h"
#include "core/files.h"

namespace kiln::cli {

namespace {

struct GateArgs {
  std::string suite;
  std::string baseline;
  bool update_baseline = false;
  std::string junit, json, markdown;
  int jobs = 1;
  bool quiet = false;
  std::optional<uint64_t> seed;
  gate::RunConfig config;
  gate::Thresholds thresholds;
  std::string shard;                      // "K/N", empty: the whole suite
  std::vector<std::string> shard_reports;  // `kiln gate merge`
};

void check_report_paths(const GateArgs& a) {
  for (const std::string& out : {a.junit, a.json, a.markdown})
    if (!out.empty()) check_output_path(out);  // before the long part
}

void write_baseline(const GateArgs& a, const gate::Machine& machine, const std::vector<gate::Entry>& entries,
                    const std::vector<gate::Measurement>& measured) {
  gate::Baseline b{a.config.backend, machine, KILN_VERSION, KILN_GIT_HASH, {}};
  for (size_t i = 0; i < entries.size(); ++i) b.entries[entries[i].name] = measured[i];
  gate::save_baseline(b, a.baseline);
  fmt::print("baseline written to {} ({} entries)\n", terminal_safe(a.baseline), b.entries.size());
}

int run_merge(const GateArgs& a) {
  check_report_paths(a);
  if (a.update_baseline) check_output_path(a.baseline);
  gate::MergedRun run = gate::merge_shard_reports(a.shard_reports);
  if (!a.junit.empty()) write_file_atomic(a.junit, gate::junit_xml(run.results, run.info));
  if (!a.json.empty()) write_file_atomic(a.json, gate::json_report(run.results, run.info));
  if (!a.markdown.empty()) write_file_atomic(a.markdown, gate::markdown_table(run.results, run.info));
  fmt::print("{}", gate::summary_text(run.results, run.info));
  if (a.update_baseline) {
    KILN_CHECK(run.machine.has_value(), "kiln gate merge --update-baseline: the shards ran on different machines; a "
               "baseline records one machine (times are compared only on it): run the shards on one kind of runner");
    std::vector<gate::Entry> entries;
    for (const gate::EntryResult& r : run.results) entries.push_back(r.entry);
    write_baseline(a, *run.machine, entries, run.measured);
    return 0;
  }
  return gate::count_verdict(run.results, gate::Verdict::Regression) ? 1 : 0;
}

int run_gate(const GateArgs& a) {
  find_backend(a.config.backend);  // an unknown backend is bad input, before anything runs
  const gate::Suite whole = gate::load_suite(a.suite, a.seed.value_or(opt_seed()));
  std::optional<ShardSpec> shard;
  if (!a.shard.empty()) shard = parse_shard(a.shard);
  KILN_CHECK(!(shard && a.update_baseline), "kiln gate --shard {} --update-baseline: a shard measures part of the "
             "suite; write the baseline from the merged shards: kiln gate merge SHARD.json... --baseline {} "
             "--update-baseline", a.shard, terminal_safe(a.baseline));
  KILN_CHECK(!shard || !a.json.empty(), "kiln gate --shard {}: pass --json FILE, the shard report `kiln gate merge` "
             "reads", a.shard);
  std::optional<gate::Baseline> baseline;
  if (!a.baseline.empty() && !a.update_baseline) baseline = gate::load_baseline(a.baseline);
  if (baseline && baseline->backend != a.config.backend)
    fail("{}: the baseline was recorded with backend {}, this run uses {}; pass --backend {} or record a new "
         "baseline with --update-baseline", a.baseline, baseline->backend, a.config.backend, baseline->backend);
  const gate::Suite suite = shard ? gate::shard_of(whole, baseline ? &*baseline : nullptr, *shard) : whole;
  check_report_paths(a);
  gate::ShardInfo shard_info;
  if (shard) {
    shard_info.spec = *shard;
    for (const gate::Entry& e : whole.entries) shard_info.suite_entries.push_back(e.name);
    shard_info.machine = gate::this_machine();
    shard_info.config = a.config;
    shard_info.thresholds = a.thresholds;
    if (baseline) shard_info.baseline_machine = baseline->machine, shard_info.baseline_backend = baseline->backend;
    shard_info.shard_entries = suite.entries.size();
    if (!a.quiet)
      fmt::print(stderr, "kiln gate: shard {}: {} of the suite's {} entries\n", shard->str(), suite.entries.size(),
                 whole.entries.size());
  }

  auto t0 = std::chrono::steady_clock::now();
  gate::RunInfo info{a.suite, a.config.backend, baseline ? a.baseline : "", 0, suite.entries.size(),
                     shard ? shard->str() : ""};
  auto write_reports = [&](const std::vector<gate::EntryResult>& results) {
    info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!a.junit.empty()) write_file_atomic(a.junit, gate::junit_xml(results, info));
    if (!a.json.empty()) {
      nlohmann::json section = shard ? gate::shard_section(shard_info, results) : nlohmann::json();
      write_file_atomic(a.json, gate::json_report(results, info, shard ? &section : nullptr));
    }
    if (!a.markdown.empty()) write_file_atomic(a.markdown, gate::markdown_table(results, info));
  };
  // After each entry: its progress line, and the reports over the entries finished so far (in suite order).
  std::vector<std::optional<gate::Measurement>> finished(suite.entries.size());
  size_t done = 0;
  auto on_entry = [&](size_t i, const gate::Measurement& m) {
    finished[i] = m;
    ++done;
    gate::Suite so_far{suite.root, {}};
    std::vector<gate::Measurement> measured_so_far;
    for (size_t k = 0; k < suite.entries.size(); ++k)
      if (finished[k]) so_far.entries.push_back(suite.entries[k]), measured_so_far.push_back(*finished[k]);
    std::vector<gate::EntryResult> results =
        gate::judge(so_far, measured_so_far, a.config, baseline ? &*baseline : nullptr, a.thresholds);
    if (!a.quiet) {
      const gate::EntryResult& r = *std::find_if(results.begin(), results.end(), [&](const gate::EntryResult& e) {
        return e.entry.name == suite.entries[i].name;
      });
      fmt::print(stderr, "kiln gate: [{}/{}] {}: {}{} ({:.1f} s)\n", done, suite.entries.size(),
                 terminal_safe(r.entry.name), gate::verdict_name(r.verdict),
                 r.now.passed() || r.verdict == gate::Verdict::Skipped ? "" : " (" + r.now.status + ")", m.seconds);
    }
    write_reports(results);
  };
  std::vector<gate::Measurement> measured = gate::measure_suite(suite, a.config, a.jobs, on_entry);
  std::vector<gate::EntryResult> results =
      gate::judge(suite, measured, a.config, baseline ? &*baseline : nullptr, a.thresholds);
  write_reports(results);
  fmt::print("{}", gate::summary_text(results, info));
  if (a.update_baseline) {
    write_baseline(a, gate::this_machine(), suite.entries, measured);
    return 0;
  }
  return gate::count_verdict(results, gate::Verdict::Regression) ? 1 : 0;
}

}  // namespace

void add_gate_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  static GateArgs args;
  auto* gate = app.add_subcommand("gate", "check a suite of graphs and repro files against a baseline: exit 1 "
                                          "on any regression (docs/gate.md)");
  gate->require_subcommand(0, 1);
  gate->add_option("suite", args.suite, "a directory of .kir graphs and .repro files, or a .json manifest");
  add_backend_option(*gate, args.config.backend);
  auto* baseline = gate->add_option("--baseline", args.baseline,
                                    "the expected results (status, times, peak memory) of each entry");
  gate->add_flag("--update-baseline", args.update_baseline,
                 "write this run's results to the --baseline file (atomically) instead of judging against it")
      ->needs(baseline);
  gate->add_option("--junit", args.junit, "write JUnit XML here (one test case per entry)");
  gate->add_option("--json", args.json, "write every result and figure as JSON here");
  gate->add_option("--markdown", args.markdown, "write a Markdown table for a pull-request comment here");
  add_jobs_option(*gate, args.jobs);
  gate->add_option("--repetitions", args.config.repetitions, "timed calls of each passing graph (default 5)")
      ->check(integer_in<int>(1, 1000, "timed calls"));
  gate->add_flag("--grad", args.config.gradients, "judge graphs with inputs marked `grad` on their outputs and then "
                                                  "their gradients (forward and backward, as `kiln run --check --grad`)");
  add_timeout_option(*gate, args.config.timeout_s);
  add_tol_option(*gate, args.config.tolerance);
  add_time_tolerance_option(*gate, args.thresholds.time_tolerance,
                            "a median call or cold compile this much slower (1 = twice as slow) with the rank test's "
                            "p < 0.05 is a regression (default 1; tighten it on a dedicated machine)");
  add_quiet_option(*gate, args.quiet);
  add_seed_option(*gate, args.seed);
  gate->add_option("--shard", args.shard, "measure only shard K of N (1 <= K <= N) of the suite, split stably by "
                                          "entry and balanced by the baseline's times; --json then writes the shard "
                                          "report that `kiln gate merge` reads");

  auto* merge = gate->add_subcommand("merge", "merge the --json reports of every shard of a `kiln gate --shard K/N` "
                                              "run into the verdicts, reports and exit status of one unsharded run");
  merge->add_option("shards", args.shard_reports, "every shard's --json report, each once")->required();
  merge->add_option("--junit", args.junit, "write JUnit XML here (one test case per entry)");
  merge->add_option("--json", args.json, "write every result and figure as JSON here");
  merge->add_option("--markdown", args.markdown, "write a Markdown table for a pull-request comment here");
  auto* merge_baseline = merge->add_option("--baseline", args.baseline, "with --update-baseline: the baseline file to "
                                                                        "write from the merged results");
  merge->add_flag("--update-baseline", args.update_baseline, "write the merged results to the --baseline file "
                                                             "(atomically; every shard must have run on one machine)")
      ->needs(merge_baseline);
  runners["gate"] = [merge] {
    if (merge->parsed()) return run_merge(args);
    KILN_CHECK(!args.suite.empty(), "kiln gate: name the suite (a directory or a .json manifest), or merge shard "
               "reports with `kiln gate merge SHARD.json...`");
    return run_gate(args);
  };
}

}  // namespace kiln::cli
