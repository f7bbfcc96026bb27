// `kiln minify G [--backend B] [--accuracy | --strict-accuracy] [--grad] [--check-str S] [-j N] [--timeout S] [-o OUT]
// [--resume] [--emit cpp|torch] [--inputs DIR | --seed N] [--tol T] [--budget MB]`, or with an external oracle
// `kiln minify G --cmd CMD [--reruns N] [--check-str S] [-j N] [--timeout S] [-o DIR] [--inputs DIR | --seed N]`,
// `kiln minify G --oracle torch [--torch-backend B] [--torch-python PY] [the same options as --cmd]`.
// G is a .kir graph or a repro file (whose backend, configuration, inputs and tolerance are then the defaults).
// Exit 0 with a re-verified repro, 2 for bad input (including a graph that does not fail, and a command that
// does not fail the same way every time on it), 3 when the result could not be re-verified (a kiln bug: please
// report it; with --cmd, the command changed its mind on the result).
#include "tools/cmd_minify.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/escape.h"
#include "core/files.h"
#include "core/options.h"
#include "core/seed.h"
#include "eager/philox.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "minifier/emit.h"
#include "minifier/inject_backend.h"
#include "minifier/minifier.h"
#include "core/escape.h"
#include "repro/graph_source.h"
#include "repro/reproduce.h"
#include "repro/training.h"
#include "tools/cli_checks.h"

namespace kiln::cli {
namespace {

struct MinifyArgs {
  std::optional<std::string> backend;
  std::string file, inputs_dir, check_str, output, emit, spill_dir, command, oracle, torch_backend = "inductor",
      torch_python = "python3";
  std::optional<int> reruns;  // default 3
  std::optional<uint64_t> seed;
  std::optional<double> tol;
  bool accuracy = false, strict = false, resume = false, quiet = false, grad = false, keep_shapes = false;
  int jobs = 1;
  double timeout_s = kDefaultTimeout;
  int64_t budget_mb = 256;
};

// The accepted steps by move: "moves: window 3, truncate 1, shrink 8" (nothing when none was accepted).
void print_moves(const minify::ReduceStats& s) {
  if (s.accepted_moves.empty()) return;
  std::string line;
  for (const auto& [move, n] : s.accepted_moves) line += fmt::format("{}{} {}", line.empty() ? "" : ", ", move, n);
  fmt::print("moves: {}\n", line);
}

// The options a backend's run and a command's share, from the flags; `-o` defaults to <stem of G><suffix>
// beside G.
minify::MinifyOptions shared_options(const MinifyArgs& a, const std::string& default_suffix) {
  minify::MinifyOptions o;
  o.check_str = a.check_str;
  o.jobs = a.jobs;
  o.timeout_s = a.timeout_s;
  o.memory_budget = a.budget_mb << 20;
  o.spill_dir = a.spill_dir;
  o.output = a.output;
  if (o.output.empty()) {
    std::filesystem::path p(a.file);
    o.output = (p.parent_path() / (p.stem().string() + default_suffix)).string();
  }
  o.progress = !a.quiet;
  o.shape_moves = !a.keep_shapes;
  return o;
}

// `--cmd` and `--oracle torch`: the result is a directory, as the judge saw it (minifier/command_oracle.h,
// minifier/torch_oracle.h).
int run_minify_with_command(const MinifyArgs& a, const GraphSource& src) {
  minify::MinifyOptions o = shared_options(a, ".min");
  o.command = a.command;
  o.reruns = a.reruns.value_or(3);
  const bool torch = !a.oracle.empty();
  std::string judge = "the command " + shell_quote(a.command);
  if (torch) {
    o.torch.enabled = true;
    o.torch.python = a.torch_python;
    o.torch.backend = a.torch_backend;
    // FILE.py:FUNCTION: the file as the user named it, from wherever the workers run.
    const size_t colon = a.torch_backend.rfind(':');
    if (colon != std::string::npos) {
      const std::string path = a.torch_backend.substr(0, colon);
      KILN_CHECK(!path.empty() && colon + 1 < a.torch_backend.size(), "--torch-backend {}: give a backend's name "
                 "(inductor, aot_eager, ...) or FILE.py:FUNCTION", a.torch_backend);
      KILN_CHECK(std::filesystem::is_regular_file(path), "--torch-backend {}: {} is not a file", a.torch_backend, path);
      o.torch.backend = std::filesystem::absolute(path).lexically_normal().string() + a.torch_backend.substr(colon);
    }
    judge = fmt::format("PyTorch (backend {}, {})", o.torch.backend, a.torch_python);
  }
  manual_seed(src.seed);  // random ops draw the same in the recorded values of every candidate
  fmt::print(stderr, "kiln minify: {} ({} op nodes, {}) judged by {}\n", terminal_safe(a.file),
             src.graph.num_op_nodes(), terminal_safe(src.input_desc), terminal_safe(judge));
  minify::MinifyResult res = minify::minify(src.graph, src.inputs, o);
  const minify::CommandSummary& c = res.command;
  fmt::print("failure: {}{} (in {} of {} runs of the original)\n",
             torch ? fmt::format("{}: ", res.original.kind) : "", terminal_safe_lines(res.original.message),
             c.original_failures, c.original_runs);
  fmt::print("minified {} -> {} op nodes in {:.2f} s ({} {} runs, {} answered from the cache, {} steps)\n",
             res.stats.start_ops, res.graph.num_op_nodes(), res.stats.seconds, res.stats.oracle_calls,
             torch ? "PyTorch" : "command", res.stats.cache_hits, res.stats.accepted);
  print_moves(res.stats);
  if (torch) fmt::print("workers: {} PyTorch worker starts for -j {}\n", c.worker_starts, a.jobs);
  fmt::print("confirmations: {} accepted candidates re-run, {} flipped{}\n", c.confirmations, c.flips,
             c.flips ? (torch ? " (PyTorch is nondeterministic here: each flip was rejected)"
                              : " (the command is nondeterministic: each flip was rejected)") : "");
  if (!res.reverified) {
    fmt::print(stderr, "kiln: error: {}\nThe smallest candidate is in {}; check it with: {}\n",
               terminal_safe_lines(res.reverify_message), terminal_safe(o.output), c.reproduce_line);
    return 3;
  }
  fmt::print("re-verified: {}\n", terminal_safe_lines(res.reverify_message));
  fmt::print("wrote {}/candidate.kir{}{}; check it with: {}\n", terminal_safe(o.output),
             res.graph.inputs().empty() ? "" : " and its inputs",
             torch ? ", and candidate.py (the graph in PyTorch: it needs nothing but torch)" : "", c.reproduce_line);
  fmt::print("\n{}", graph::print_graph(res.graph));
  return 0;
}

int run_minify(const MinifyArgs& a) {
  // A repro file brings its backend, configuration, inputs, tolerance and check (repro/graph_source.h).
  GraphSource src = load_graph_source(a.file, a.inputs_dir, a.seed);
  if (!a.command.empty() || !a.oracle.empty()) return run_minify_with_command(a, src);
  KILN_CHECK(!a.reruns, "--reruns applies to --cmd and --oracle torch (the runs of an external oracle); a backend "
             "is run in-process and judged once");
  minify::MinifyOptions o = shared_options(a, ".min.repro");
  const graph::Graph& g = src.graph;
  const std::vector<Tensor>& inputs = src.inputs;
  const std::string backend = a.backend ? *a.backend : src.backend_or(kDefaultBackend);
  const std::string& input_desc = src.input_desc;
  o.tolerance = a.tol.value_or(src.tolerance_or(kDefaultTol));
  o.gradients = a.grad || src.gradients();  // judged on outputs then gradients, as `kiln run --check --grad`
  KILN_CHECK(!o.gradients || trains(g), "{}: --grad needs inputs marked `grad` (e.g. `%w: f32[4] grad`); graph {} "
             "has none", a.file, g.name);
  manual_seed(src.seed);  // random ops draw the same in every candidate
  o.backend = backend;
  o.accuracy = a.accuracy;
  o.strict_accuracy = a.strict;
  o.resume = a.resume;
  o.config = minify::current_config();
  fmt::print(stderr, "kiln minify: {} ({} op nodes, {}) on backend {}{}\n", terminal_safe(a.file), g.num_op_nodes(),
             terminal_safe(input_desc), backend, a.resume ? ", resuming from " + terminal_safe(o.output) : "");
  minify::MinifyResult res = minify::minify(g, inputs, o);
  fmt::print("failure: {}: {}\n", res.original.kind, terminal_safe_lines(res.original.message));
  fmt::print("minified {} -> {} op nodes in {:.2f} s ({} oracle calls, {} answered from the cache, {} steps)\n",
             res.stats.start_ops, res.graph.num_op_nodes(), res.stats.seconds, res.stats.oracle_calls,
             res.stats.cache_hits, res.stats.accepted);
  print_moves(res.stats);
  if (!res.reverified) {
    fmt::print(stderr, "kiln: error: the minified repro {} does not reproduce: {}\nThis is a kiln bug; please "
               "report it with the original graph.\n", terminal_safe(o.output), terminal_safe_lines(res.reverify_message));
    return 3;
  }
  fmt::print("re-verified: {}\n", terminal_safe_lines(res.reverify_message));
  fmt::print("wrote {}{}; check it with: {}\n", terminal_safe(o.output),
             res.graph.inputs().empty() ? "" : " (inputs in " + terminal_safe(o.output) + ".inputs/)",
             reproduce_command(RunLine{.file = o.output, .repro_run = true}));
  if (!a.emit.empty()) {
    ReproFile r = load_repro(o.output);
    std::filesystem::path p(o.output);
    std::string stem = (p.parent_path() / p.stem()).string();
    std::string path = stem + (a.emit == "cpp" ? ".cpp" : ".py");
    write_file_atomic(path, a.emit == "cpp" ? minify::emit_cpp(r, o.output)
                                            : minify::emit_torch(minify::with_torch_comparison_values(r, o.output),
                                                                 o.output));
    fmt::print("wrote {} (--emit {})\n", path, a.emit);
  }
  fmt::print("\n{}", graph::print_graph(res.graph));
  return 0;
}

}  // namespace

void add_minify_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  minify::register_inject_test_backend();
  static MinifyArgs a;
  auto* m = app.add_subcommand("minify", "shrink a graph that fails on a backend to a minimal repro file that fails "
                                         "the same way");
  m->add_option("file", a.file, "the failing graph (.kir) or a repro file")->required();
  auto* backend = add_backend_option(*m, a.backend);
  auto* cmd = m->add_option("--cmd", a.command, "judge each candidate by this shell command instead of a backend "
                                               "(/bin/sh -c, in a directory of its own holding candidate.kir and "
                                               "its inputs as <name>.npy; $KILN_CANDIDATE names the file, "
                                               "$KILN_CANDIDATE_DIR the directory): exit 0 passes, another status "
                                               "or a signal is the failure; -o names a directory");
  auto* oracle = m->add_option("--oracle", a.oracle, "judge each candidate by PyTorch: torch (a persistent Python "
                                                     "worker per -j slot runs eager and torch.compile; -o names a "
                                                     "directory that also gets candidate.py, the repro in PyTorch)")
                      ->check(CLI::IsMember({"torch"}));
  oracle->excludes(cmd);
  m->add_option("--torch-backend", a.torch_backend, "with --oracle torch: the torch.compile backend, a name "
                                                    "(default inductor) or FILE.py:FUNCTION (a function of a "
                                                    "torch.fx.GraphModule and example inputs)")
      ->needs(oracle);
  m->add_option("--torch-python", a.torch_python, "with --oracle torch: the Python that has torch and numpy "
                                                  "(default python3, from PATH)")
      ->needs(oracle);
  m->add_option("--reruns", a.reruns, "with --cmd or --oracle torch: runs of the original before and of the result "
                                      "after the reduction, all of which must fail the same way (default 3)")
      ->check(integer_in<int>(1, 1000, "runs"));
  auto* acc = m->add_flag("--accuracy", a.accuracy, "minify an accuracy failure (errors and crashes do not count; "
                                                    "non-float outputs are ignored)");
  auto* strict = m->add_flag("--strict-accuracy", a.strict, "like --accuracy, but non-float outputs count too");
  acc->excludes(strict);
  for (CLI::Option* external : {cmd, oracle}) external->excludes(acc)->excludes(strict)->excludes(backend);
  auto* grad = m->add_flag("--grad", a.grad, "judge the outputs and then the gradients of the inputs marked `grad` (forward and "
                                "backward, as `kiln run --check --grad`); the repro records `check: gradients` "
                                "(the default for a repro file that does)");
  cmd->excludes(grad);
  oracle->excludes(grad);
  m->add_option("--check-str", a.check_str, "an error counts when its message contains this (default: the same "
                                            "message modulo names and numbers); with --cmd or --oracle torch, a "
                                            "failure counts when the command's (PyTorch's) output contains it");
  m->add_flag("--keep-shapes", a.keep_shapes, "keep the original's sizes and dtypes (no shrink or dtype moves: by "
                                             "default sizes are halved and floating inputs made f32 wherever the "
                                             "failure stays)");
  add_jobs_option(*m, a.jobs);
  add_timeout_option(*m, a.timeout_s);
  add_output_option(*m, a.output, "the repro file to write (default: <file stem>.min.repro beside the file); "
                                  "inputs go to OUT.inputs/, the run's state to OUT.state.json. With --cmd or "
                                  "--oracle torch, a directory (default: <file stem>.min/): candidate.kir and its "
                                  "inputs (and candidate.py)");
  auto* resume = m->add_flag("--resume", a.resume, "continue an interrupted run from its checkpoint (-o OUT)");
  auto* emit = m->add_option("--emit", a.emit, "also write a standalone program: cpp (against libkiln) or torch "
                                               "(PyTorch script)")
                   ->check(CLI::IsMember({"cpp", "torch"}));
  add_inputs_option(*m, a.inputs_dir, add_seed_option(*m, a.seed));
  auto* tol = add_tol_option(*m, a.tol);
  for (CLI::Option* external : {cmd, oracle}) external->excludes(resume)->excludes(emit)->excludes(tol);
  m->add_option("--budget", a.budget_mb, "MB of recorded reference values kept in memory; the rest spill to disk "
                                         "(default 256)")
      ->check(integer_in<int64_t>(0, int64_t(1) << 20, "megabytes (at most 1 TiB)"));
  m->add_option("--spill-dir", a.spill_dir, "where recorded values beyond the budget go (default: the temp dir)");
  add_quiet_option(*m, a.quiet);
  runners["minify"] = [] { return run_minify(a); };
}

}  // namespace kiln::cli
