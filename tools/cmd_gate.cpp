// `kiln gate SUITE [--backend B] [--baseline FILE] [--update-baseline] [--junit FILE] [--json FILE]
// [--markdown FILE] [-j N] [--repetitions N] [--grad] [--timeout S] [--tol T] [--time-tolerance F]`: runs every entry
// of the suite isolated, judges it against the baseline (gate/judge.h) and writes the reports. Exit status: 0
// without regressions (or after --update-baseline), 1 with any, 2 for bad input (suite, baseline, options).
#include "tools/cmd_gate.h"

#include <fmt/format.h>

#include <chrono>

#include "api/backends.h"
#include "gate/judge.h"
#include "gate/report.h"
#include "gate/suite.h"
#include "kiln_version.h"
#include "tools/cli_checks.h"
#include "core/files.h"

namespace kiln::cli {

namespace {

struct GateArgs {
  std::string suite;
  std::string baseline;
  bool update_baseline = false;
  std::string junit, json, markdown;
  int jobs = 1;
  gate::RunConfig config;
  gate::Thresholds thresholds;
};

int run_gate(const GateArgs& a) {
  find_backend(a.config.backend);  // an unknown backend is bad input, before anything runs
  gate::Suite suite = gate::load_suite(a.suite);
  std::optional<gate::Baseline> baseline;
  if (!a.baseline.empty() && !a.update_baseline) baseline = gate::load_baseline(a.baseline);
  if (baseline && baseline->backend != a.config.backend)
    fail("{}: the baseline was recorded with backend {}, this run uses {}; pass --backend {} or record a new "
         "baseline with --update-baseline", a.baseline, baseline->backend, a.config.backend, baseline->backend);

  auto t0 = std::chrono::steady_clock::now();
  std::vector<gate::Measurement> measured = gate::measure_suite(suite, a.config, a.jobs);
  std::vector<gate::EntryResult> results =
      gate::judge(suite, measured, a.config, baseline ? &*baseline : nullptr, a.thresholds);
  gate::RunInfo info{a.suite, a.config.backend, baseline ? a.baseline : "",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};

  fmt::print("{}", gate::summary_text(results, info));
  if (!a.junit.empty()) write_file_atomic(a.junit, gate::junit_xml(results, info));
  if (!a.json.empty()) write_file_atomic(a.json, gate::json_report(results, info));
  if (!a.markdown.empty()) write_file_atomic(a.markdown, gate::markdown_table(results, info));
  if (a.update_baseline) {
    gate::Baseline b{a.config.backend, gate::this_machine(), KILN_VERSION, KILN_GIT_HASH, {}};
    for (size_t i = 0; i < suite.entries.size(); ++i) b.entries[suite.entries[i].name] = measured[i];
    gate::save_baseline(b, a.baseline);
    fmt::print("baseline written to {} ({} entries)\n", a.baseline, b.entries.size());
    return 0;
  }
  return gate::count_verdict(results, gate::Verdict::Regression) ? 1 : 0;
}

}  // namespace

void add_gate_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  static GateArgs args;
  auto* gate = app.add_subcommand("gate", "check a suite of graphs and repro files against a baseline: exit 1 "
                                          "on any regression (docs/gate.md)");
  gate->add_option("suite", args.suite, "a directory of .kir graphs and .repro files, or a .json manifest")
      ->required();
  gate->add_option("--backend", args.config.backend, "the backend every graph entry runs on")->default_str("inductor");
  auto* baseline = gate->add_option("--baseline", args.baseline,
                                    "the expected results (status, times, peak memory) of each entry");
  gate->add_flag("--update-baseline", args.update_baseline,
                 "write this run's results to the --baseline file (atomically) instead of judging against it")
      ->needs(baseline);
  gate->add_option("--junit", args.junit, "write JUnit XML here (one test case per entry)");
  gate->add_option("--json", args.json, "write every result and figure as JSON here");
  gate->add_option("--markdown", args.markdown, "write a Markdown table for a pull-request comment here");
  gate->add_option("-j,--jobs", args.jobs, "entries run at a time, each in its own child process (default 1; "
                                           "times are steadier with 1)")
      ->check(integer_in<int>(1, 256, "entries at a time"));
  gate->add_option("--repetitions", args.config.repetitions, "timed calls of each passing graph (default 5)")
      ->check(integer_in<int>(1, 1000, "timed calls"));
  gate->add_flag("--grad", args.config.gradients, "judge graphs with inputs marked `grad` on their outputs and then "
                                                  "their gradients (forward and backward, as `kiln run --check --grad`)");
  gate->add_option("--timeout", args.config.timeout_s, "seconds a run may take before it counts as a hang "
                                                       "(default 60)")
      ->check(timeout_check());
  gate->add_option("--tol", args.config.tolerance, "comparator tolerance for graph entries (default 1e-4)")
      ->check(number_in(0, 1, true, "a comparator tolerance"));
  gate->add_option("--time-tolerance", args.thresholds.time_tolerance,
                   "a median call or cold compile this much slower (1 = twice as slow) with the rank test's p < 0.05 is a "
                   "regression (default 1; tighten it on a dedicated machine)")
      ->check(number_in(0, 100, false, "a relative slowdown"));
  runners["gate"] = [] { return run_gate(args); };
}

}  // namespace kiln::cli
