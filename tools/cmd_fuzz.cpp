// `kiln fuzz [--backend B] [--time S | --runs N] [--seed N] [--index I] [-j N] [--max-nodes N] [--ops LIST]
// [-o DIR] [--allow-nan] [--no-metamorphic] [--print] [--timeout S] [--tol T] [--shard K/N] [-q]`: property-based
// graph fuzzing (fuzz/fuzzer.h, docs/fuzz.md); `kiln fuzz merge DIR... -o OUT`: N workers' findings as one
// campaign's (fuzz/merge.h); `kiln fuzz import-crash TARGET INPUT -o R.repro`: a fuzzing engine's input as a
// minimized repro (fuzz/engine_input.h). Exit 0 without findings, 1 with any, 2 for bad options or input.
#include "tools/cmd_fuzz.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdio>

#include "core/escape.h"
#include "core/seed.h"
#include "core/files.h"
#include "core/options.h"
#include "fuzz/fuzzer.h"
#include "fuzz/engine_input.h"
#include "fuzz/merge.h"
#include "graph/text.h"
#include "repro/command.h"
#include "tools/cli_checks.h"

namespace kiln::cli {
namespace {

struct FuzzArgs {
  std::string backend = "inductor", out, shard;
  std::vector<std::string> merge_dirs;  // `kiln fuzz merge`
  std::string crash_target, crash_input;  // `kiln fuzz import-crash`
  std::optional<std::string> ops;  // --ops as given: an empty list is an error, not "every op"
  std::optional<uint64_t> runs, index;
  std::optional<double> time_s;
  std::optional<uint64_t> seed;  // graph i of seed s is always the same graph and inputs
  int jobs = 1, max_nodes = 10;
  double timeout_s = kDefaultTimeout, tol = kDefaultTol;
  bool allow_nan = false, no_metamorphic = false, print = false, quiet = false;
};

// -o/--output must be a directory kiln can create or write into, checked before the run starts.
void check_out_dir(const std::string& dir) {
  if (dir.empty()) return;
  create_output_directory(dir);
  check_output_path(dir + "/summary.json");
}

// The coverage table, one line per bug with its repro's check command, and the infer gaps: what `kiln fuzz` and
// `kiln fuzz merge` print on stdout.
void print_summary(const fuzz::FuzzSummary& s) {
  fmt::print("{}\n", s.coverage_table());
  uint64_t hits = 0;
  for (const fuzz::FindingRecord& f : s.findings) {
    hits += f.hits;
    fmt::print("finding {} ({} hits, variant {}, seed {} index {}){}{}{}\n", terminal_safe(f.signature), f.hits,
               terminal_safe(f.variant), f.seed, f.index, f.repro.empty() ? "" : ": " + terminal_safe(f.repro),
               f.minimized ? "" : " (not minimized: " + terminal_safe(f.note) + ")",
               f.repro.empty() ? "" : "; check it with: " + reproduce_command(RunLine{.file = f.repro, .repro_run = true}));
    if (!f.cause.outcome.empty()) fmt::print("  root cause: {}\n", terminal_safe(f.cause.str()));
    std::vector<std::string> others;
    for (const fuzz::FindingRecord::Other& o : f.others)
      others.push_back(fmt::format("{} (seed {} index {}, variant {})", terminal_safe(o.signature), o.seed, o.index,
                                   terminal_safe(o.variant)));
    if (!others.empty()) fmt::print("  the same bug in: {}\n", fmt::join(others, ", "));
  }
  fmt::print("{} distinct bug{} in {} failing graph{}\n", s.findings.size(), s.findings.size() == 1 ? "" : "s", hits,
             hits == 1 ? "" : "s");
  for (const auto& [pattern, gap] : s.infer_gaps)
    fmt::print("shape inference accepted what the kernel refused ({} times, first in graph {}): {}\n", gap.count,
               gap.first_index, terminal_safe(gap.example));
}

int run_fuzz_command(const FuzzArgs& a) {
  check_out_dir(a.out);
  fuzz::FuzzOptions o;
  o.gen.max_nodes = a.max_nodes;
  if (a.ops) o.gen.ops = fuzz::parse_op_list(*a.ops);
  o.gen.domains = !a.allow_nan;
  o.check.backend = a.backend;
  o.check.jobs = a.jobs;
  o.check.timeout_s = a.timeout_s;
  o.check.tolerance = a.tol;
  o.seed = a.seed.value_or(opt_seed());
  o.metamorphic = !a.no_metamorphic;
  o.out_dir = a.out;
  if (a.index) {
    o.first_index = *a.index;
    o.runs = 1;
  } else {
    o.runs = a.runs;
    o.time_s = a.time_s.value_or(a.runs ? 0 : 60);
  }
  if (a.print)
    o.on_graph = [](uint64_t i, const graph::Graph& g) { fmt::print("# graph {}\n{}\n", i, graph::print_graph(g)); };
  const bool tty = isatty(STDERR_FILENO);
  // On a terminal the line is rewritten after every round; in a log, one line every 10 s.
  auto last = std::chrono::steady_clock::now();
  if (!a.quiet)
    o.status = [tty, last](const std::string& line) mutable {
      if (tty) return fmt::print(stderr, "\r{}\x1b[K", line);
      if (std::chrono::steady_clock::now() - last < std::chrono::seconds(10)) return;
      last = std::chrono::steady_clock::now();
      fmt::print(stderr, "{}\n", line);
    };
  if (!a.quiet)
    o.progress = [tty](const std::string& line) {  // on a terminal, over the status line
      fmt::print(stderr, "{}{}{}\n", tty ? "\r" : "", terminal_safe(line), tty ? "\x1b[K" : "");
    };
  if (!a.shard.empty()) o.shard = parse_shard(a.shard);
  fuzz::FuzzSummary s = fuzz::run_fuzz(o);
  if (!a.quiet) fmt::print(stderr, "{}{}\n", tty ? "\r" : "", s.status_line());
  print_summary(s);
  std::string json = s.json();
  if (!a.out.empty()) write_file_atomic(a.out + "/summary.json", json + "\n");
  fmt::print("{}\n", json);
  return s.findings.empty() ? 0 : 1;
}

int run_merge_command(const FuzzArgs& a) {
  fuzz::FuzzSummary s = fuzz::merge_fuzz_directories(a.merge_dirs, a.out);
  print_summary(s);
  fmt::print("{} runs merged into {} ({} graphs)\n", s.runs.size(), terminal_safe(a.out), s.graphs);
  return s.findings.empty() ? 0 : 1;
}

// `kiln fuzz import-crash TARGET INPUT -o R.repro`: exit 1 with the minimized repro when the input fails here, 0
// when it passes here (nothing written), 2 for bad input.
int run_import_crash_command(const FuzzArgs& a) {
  check_output_path(a.out);
  const fuzz::EngineCase c =
      fuzz::decode_engine_input(a.crash_target, read_input_file(a.crash_input, "fuzzer input"), a.crash_input);
  fmt::print("{} decodes to a graph of {} op nodes ({} inputs)\n", terminal_safe(a.crash_input), c.graph.num_op_nodes(),
             c.graph.inputs().size());
  fuzz::CheckOptions check;
  check.backend = a.backend;
  check.timeout_s = a.timeout_s;
  check.tolerance = a.tol;
  const fuzz::ImportedCrash r = fuzz::import_engine_case(c, check, a.out);
  if (!r.failed()) {
    fmt::print("it passes on backend {} here: nothing written (an engine's finding may need its sanitizer build, or "
               "the same KILN_* settings)\n", a.backend);
    return 0;
  }
  fmt::print("{} on backend {}: {}\n", failure_kind_name(r.failure.kind), a.backend,
             terminal_safe(r.failure.message.substr(0, r.failure.message.find('\n'))));
  const int nodes = r.minified.graph.num_op_nodes();
  fmt::print("{} to {} op node{}: {}; check it with: {}\n", r.minified.minimized ? "minimized" : "not minimized",
             nodes, nodes == 1 ? "" : "s", terminal_safe(a.out),
             reproduce_command(RunLine{.file = a.out, .repro_run = true}));
  if (!r.minified.minimized) fmt::print("  (not minimized: {})\n", terminal_safe(r.minified.note));
  return 1;
}

}  // namespace

void add_fuzz_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  fuzz::register_test_backends();
  static FuzzArgs a;
  auto* f = app.add_subcommand("fuzz", "generate random valid graphs and check a backend against the fp64 "
                                       "interpreter and itself; minify what fails and bucket it by root cause (one repro per bug)");
  add_backend_option(*f, a.backend);
  auto* time = f->add_option("--time", a.time_s, "seconds to fuzz (default 60 unless --runs is given)")
                   ->check(cli::timeout_check());
  auto* runs = f->add_option("--runs", a.runs, "graphs to check")
                   ->check(cli::integer_in<uint64_t>(1, UINT64_MAX, "a number of graphs"));
  auto* index = f->add_option("--index", a.index, "check only graph I of the seed (reproduce a finding)")
                    ->check(cli::integer_in<uint64_t>(0, UINT64_MAX, "a graph index"));
  index->excludes(runs)->excludes(time);
  add_seed_option(*f, a.seed);
  add_jobs_option(*f, a.jobs);
  f->add_option("--max-nodes", a.max_nodes, "op nodes per graph, at most (default 10)")
      ->check(cli::integer_in(1, 1000, "a number of nodes"));
  f->add_option("--ops", a.ops, "comma-separated ops to draw nodes from (default: every op of the table)");
  add_output_option(*f, a.out, "directory for the findings' repro files and summary.json", /*old_out_alias=*/true);
  f->add_flag("--allow-nan", a.allow_nan, "no domain guards: values may leave an op's domain (NaN/Inf)");
  f->add_flag("--no-metamorphic", a.no_metamorphic, "only the differential check (no unfused/bisect/contiguous/f64 "
                                                    "variants)");
  f->add_flag("--print", a.print, "print every generated graph (.kir) on stdout");
  add_timeout_option(*f, a.timeout_s);
  add_tol_option(*f, a.tol);
  add_quiet_option(*f, a.quiet);
  f->add_option("--shard", a.shard, "check only shard K of N (1 <= K <= N) of the seed's graph indices: I with "
                                    "I % N == K - 1 (N workers, disjoint graphs; merge with `kiln fuzz merge`)")
      ->excludes(index);
  f->require_subcommand(0, 1);
  auto* merge = f->add_subcommand("merge", "merge the -o directories of several fuzz workers into one: one bucket "
                                           "per root cause across them, hits and coverage summed, the smallest repro "
                                           "of each bug kept");
  merge->add_option("dirs", a.merge_dirs, "each worker's -o directory (holding its summary.json)")->required();
  add_output_option(*merge, a.out, "the merged directory to write (new or empty)")->required();
  auto* import = f->add_subcommand("import-crash", "turn an input a fuzzing engine reported for one of kiln's "
                                                   "libFuzzer targets into the graph it encodes and, when it fails "
                                                   "here, a minimized repro file");
  import->add_option("target", a.crash_target, "the target that reported it: graph (graph-fuzzer) or kir "
                                               "(kir-fuzzer); repro inputs are their own reproducers")->required();
  import->add_option("input", a.crash_input, "the input file (a crash-*, timeout-* or leak-* artifact)")->required();
  add_output_option(*import, a.out, "the repro file to write")->required();
  add_backend_option(*import, a.backend);
  add_timeout_option(*import, a.timeout_s);
  add_tol_option(*import, a.tol);
  runners["fuzz"] = [merge, import] {
    if (merge->parsed()) return run_merge_command(a);
    if (import->parsed()) return run_import_crash_command(a);
    return run_fuzz_command(a);
  };
}

}  // namespace kiln::cli
