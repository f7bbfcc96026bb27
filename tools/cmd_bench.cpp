// `kiln bench G... [--backend B] [--repetitions N] [--inputs DIR | --seed N] [--caches cold|warm|both]
// [--json OUT] [--baseline FILE] [--time-tolerance F] [--metric real|cpu] [--history FILE] [--timeout S] [-q]` and
// `kiln bench report HISTORY -o OUT.html`. Progress lines on stderr (one per graph checked and case timed); --json
// rewritten after every graph. Exit status: 0, or 1 when a graph failed or a compiled case is slower than the
// baseline beyond noise (gate/bench.h), 2 for bad input.
#include "tools/cmd_bench.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/escape.h"
#include "core/seed.h"
#include "core/options.h"
#include "gate/bench.h"
#include "tools/cli_checks.h"
#include "core/files.h"

namespace kiln::cli {

namespace {

struct BenchArgs {
  std::vector<std::string> graphs;
  gate::BenchConfig config;
  std::string caches = "both";
  std::string json, baseline, history, inputs_dir;
  std::optional<uint64_t> seed;
  bool quiet = false;
  double tolerance = 0.1, alpha = 0.05;
  std::string metric = "real";
  std::vector<std::string> report_histories;
  std::string report_out;
};

std::string ms(double v) { return std::isnan(v) ? std::string("-") : fmt::format("{:.4g}", v); }

void print_run(const gate::BenchRun& run) {
  fmt::print("{:<40} {:>11} {:>9} {:>10}  {}\n", "case", "median ms", "spread", "iterations", "vs eager / vs copy");
  for (const gate::BenchCase& c : run.cases) {
    const double med = gate::median(c.samples_ms);
    const auto [lo, hi] = std::minmax_element(c.samples_ms.begin(), c.samples_ms.end());
    std::string ratios;
    if (c.name.find("/compiled/") != std::string::npos) {
      std::string stem = c.name.substr(0, c.name.find("/compiled/")), regime = c.name.substr(c.name.rfind('/') + 1);
      const gate::BenchCase* eager = run.find(stem + "/eager/" + regime);
      const gate::BenchCase* copy = run.find(stem + "/copy/" + regime);
      if (eager && copy)
        ratios = fmt::format("{:.2f}x faster than eager, {:.2f} of copy speed", gate::median(eager->samples_ms) / med,
                             gate::median(copy->samples_ms) / med);
    }
    fmt::print("{:<40} {:>11} {:>8.1f}% {:>10}  {}\n", terminal_safe(c.name), ms(med), med > 0 ? 100 * (*hi - *lo) / med : 0.0,
               c.iterations, ratios);
  }
}

int run_bench(BenchArgs& a) {
  a.config.cold = a.caches != "warm";
  a.config.warm = a.caches != "cold";
  a.config.seed = a.seed.value_or(opt_seed());
  a.config.inputs_dir = a.inputs_dir;
  if (!a.quiet) a.config.progress = [](const std::string& line) { fmt::print(stderr, "{}\n", terminal_safe(line)); };
  std::optional<gate::BenchRun> baseline;
  if (!a.baseline.empty()) baseline = gate::load_bench_json(a.baseline);  // bad input before the long part
  if (!a.history.empty() && std::filesystem::exists(a.history)) gate::load_history(a.history);
  if (!a.json.empty()) check_output_path(a.json);
  // The JSON so far after every graph: a run killed at its CI timeout keeps what it measured.
  auto write_json = [&a](const gate::BenchRun& run) {
    if (!a.json.empty()) write_file_atomic(a.json, gate::google_benchmark_json(run).dump(2) + "\n");
  };
  gate::BenchRun run = gate::run_benchmarks(a.graphs, a.config, write_json);
  print_run(run);
  write_json(run);
  for (const gate::BenchFailure& f : run.failures)
    fmt::print("{}: {} on {}, not timed: {}\n", f.graph, f.kind, run.backend, terminal_safe(f.message));
  if (!a.history.empty()) {
    gate::append_history(a.history, run);
    fmt::print("appended to {}\n", terminal_safe(a.history));
  }
  if (!baseline) return run.failures.empty() ? 0 : 1;
  // Times say something about the code only on the machine they were measured on (the rule of kiln gate).
  if (!baseline->machine.cpu.empty() && !(baseline->machine == run.machine)) {
    fmt::print("\nnot compared with {}: it was measured on {}, this run on {}; record a baseline on this machine\n",
               terminal_safe(a.baseline), terminal_safe(baseline->machine.str()), terminal_safe(run.machine.str()));
    return run.failures.empty() ? 0 : 1;
  }
  std::vector<gate::CaseComparison> cmp = gate::compare_runs(*baseline, run, a.tolerance, a.alpha, a.metric == "cpu");
  fmt::print("\ncompared with {} by {} time (slower = median more than {:.0f}% above with p < {}):\n",
             terminal_safe(a.baseline),
             a.metric == "cpu" ? "CPU" : "wall-clock", 100 * a.tolerance, a.alpha);
  fmt::print("{:<40} {:>11} {:>11} {:>8} {:>8}  {}\n", "case", "baseline ms", "now ms", "change", "p", "verdict");
  int slower = 0;
  for (const gate::CaseComparison& c : cmp) {
    slower += c.regression();
    std::string change = std::isnan(c.before_ms) || std::isnan(c.now_ms) ? "-" : fmt::format("{:+.1f}%", 100 * (c.now_ms / c.before_ms - 1));
    fmt::print("{:<40} {:>11} {:>11} {:>8} {:>8}  {}\n", terminal_safe(c.name), ms(c.before_ms), ms(c.now_ms), change,
               std::isnan(c.before_ms) || std::isnan(c.now_ms) ? "-" : fmt::format("{:.3g}", c.test.p_value),
               c.gated || c.verdict == "same" || c.verdict == "new" ? c.verdict : c.verdict + " (reference, not judged)");
  }
  fmt::print("{} compiled cases slower than the baseline or failed (eager and copy are references, not judged)\n",
             slower);
  return slower || !run.failures.empty() ? 1 : 0;
}

int run_report(const BenchArgs& a) {
  // Several machines' histories draw into one page, each machine's runs apart (gate/bench.h, history_html).
  std::vector<gate::BenchRun> history;
  for (const std::string& file : a.report_histories) {
    std::vector<gate::BenchRun> runs = gate::load_history(file);
    KILN_CHECK(!runs.empty(), "{}: the history holds no runs", terminal_safe(file));
    history.insert(history.end(), runs.begin(), runs.end());
  }
  write_file_atomic(a.report_out, gate::history_html(history, a.tolerance, a.alpha));
  const size_t machines = gate::machines_of(history).size();
  fmt::print("{} runs of {} machine{} drawn into {}\n", history.size(), machines, machines == 1 ? "" : "s",
             terminal_safe(a.report_out));
  return 0;
}

}  // namespace

void add_bench_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  static BenchArgs args;
  auto* bench = app.add_subcommand("bench", "time graphs compiled and eager beside a copy of the same bytes; "
                                            "compare with a baseline by a rank test (docs/bench.md)");
  bench->require_subcommand(0, 1);
  bench->add_option("graphs", args.graphs, "the .kir graphs to time");
  add_backend_option(*bench, args.config.backend);
  bench->add_option("--repetitions", args.config.repetitions, "samples per case (default 10)")
      ->check(integer_in<int>(2, 10000, "samples per case"));
  add_inputs_option(*bench, args.inputs_dir, add_seed_option(*bench, args.seed));
  add_timeout_option(*bench, args.config.timeout_s);
  add_quiet_option(*bench, args.quiet);
  bench->add_option("--caches", args.caches, "cold (every byte flushed before each call), warm, or both (default)")
      ->check(CLI::IsMember({"cold", "warm", "both"}));
  bench->add_option("--json", args.json, "write the results as Google Benchmark JSON here");
  bench->add_option("--baseline", args.baseline, "compare with this earlier --json output; exit 1 when a case is "
                                                  "slower beyond noise");
  add_time_tolerance_option(*bench, args.tolerance, "a compiled case's median slower by more than this (default 0.1 "
                                                   "= 10%) with p < 0.05 is a regression", /*old_tolerance_alias=*/true);
  bench->add_option("--metric", args.metric, "compare wall-clock (real, default) or process CPU time (cpu: far "
                                              "less moved by other load; use with one thread)")
      ->check(CLI::IsMember({"real", "cpu"}));
  bench->add_option("--history", args.history, "append this run (commit, machine, samples) to a JSON-lines file");
  auto* report = bench->add_subcommand("report", "draw a --history file as one self-contained HTML page");
  // The report's red marks use the same rule as --baseline.
  add_time_tolerance_option(*report, args.tolerance, "a compiled case's median slower than the run before by more "
                                                    "than this (default 0.1 = 10%) with p < 0.05 is marked");
  report->add_option("history", args.report_histories, "the history files (one per machine, or any mix: each "
                                                      "machine's runs are drawn and judged apart)")->required();
  add_output_option(*report, args.report_out, "the HTML file to write")->required();
  runners["bench"] = [report] {
    if (report->parsed()) return run_report(args);
    KILN_CHECK(!args.graphs.empty(), "kiln bench: name at least one .kir graph (or `kiln bench report HISTORY -o "
               "OUT.html`)");
    return run_bench(args);
  };
}

}  // namespace kiln::cli
