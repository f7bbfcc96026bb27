// `kiln minify G [--backend B] [--accuracy | --strict-accuracy] [--grad] [--check-str S] [-j N] [--timeout S] [-o OUT]
// [--resume] [--emit cpp|torch] [--inputs DIR | --seed N] [--tol T] [--budget MB]`. G is a .kir graph or a
// repro file (whose backend, configuration, inputs and tolerance are then the defaults). Exit 0 with a
// re-verified repro, 2 for bad input (including a graph that does not fail), 3 when the result could not be
// re-verified (a kiln bug: please report it).
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
  std::string file, inputs_dir, check_str, output, emit, spill_dir;
  std::optional<uint64_t> seed;
  std::optional<double> tol;
  bool accuracy = false, strict = false, resume = false, quiet = false, grad = false;
  int jobs = 1;
  double timeout_s = kDefaultTimeout;
  int64_t budget_mb = 256;
};

int run_minify(const MinifyArgs& a) {
  // A repro file brings its backend, configuration, inputs, tolerance and check (repro/graph_source.h).
  GraphSource src = load_graph_source(a.file, a.inputs_dir, a.seed);
  minify::MinifyOptions o;
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
  o.check_str = a.check_str;
  o.jobs = a.jobs;
  o.timeout_s = a.timeout_s;
  o.memory_budget = a.budget_mb << 20;
  o.spill_dir = a.spill_dir;
  o.output = a.output;
  if (o.output.empty()) {
    std::filesystem::path p(a.file);
    o.output = (p.parent_path() / (p.stem().string() + ".min.repro")).string();
  }
  o.resume = a.resume;
  o.progress = !a.quiet;
  o.config = minify::current_config();
  fmt::print(stderr, "kiln minify: {} ({} op nodes, {}) on backend {}{}\n", terminal_safe(a.file), g.num_op_nodes(),
             terminal_safe(input_desc), backend, a.resume ? ", resuming from " + terminal_safe(o.output) : "");
  minify::MinifyResult res = minify::minify(g, inputs, o);
  fmt::print("failure: {}: {}\n", res.original.kind, terminal_safe_lines(res.original.message));
  fmt::print("minified {} -> {} op nodes in {:.2f} s ({} oracle calls, {} answered from the cache, {} steps)\n",
             res.stats.start_ops, res.graph.num_op_nodes(), res.stats.seconds, res.stats.oracle_calls,
             res.stats.cache_hits, res.stats.accepted);
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
  add_backend_option(*m, a.backend);
  auto* acc = m->add_flag("--accuracy", a.accuracy, "minify an accuracy failure (errors and crashes do not count; "
                                                    "non-float outputs are ignored)");
  auto* strict = m->add_flag("--strict-accuracy", a.strict, "like --accuracy, but non-float outputs count too");
  acc->excludes(strict);
  m->add_flag("--grad", a.grad, "judge the outputs and then the gradients of the inputs marked `grad` (forward and "
                                "backward, as `kiln run --check --grad`); the repro records `check: gradients` "
                                "(the default for a repro file that does)");
  m->add_option("--check-str", a.check_str, "an error counts when its message contains this (default: the same "
                                            "message modulo names and numbers)");
  add_jobs_option(*m, a.jobs);
  add_timeout_option(*m, a.timeout_s);
  add_output_option(*m, a.output, "the repro file to write (default: <file stem>.min.repro beside the file); "
                                  "inputs go to OUT.inputs/, the run's state to OUT.state.json");
  m->add_flag("--resume", a.resume, "continue an interrupted run from its checkpoint (-o OUT)");
  m->add_option("--emit", a.emit, "also write a standalone program: cpp (against libkiln) or torch (PyTorch script)")
      ->check(CLI::IsMember({"cpp", "torch"}));
  add_inputs_option(*m, a.inputs_dir, add_seed_option(*m, a.seed));
  add_tol_option(*m, a.tol);
  m->add_option("--budget", a.budget_mb, "MB of recorded reference values kept in memory; the rest spill to disk "
                                         "(default 256)")
      ->check(integer_in<int64_t>(0, int64_t(1) << 20, "megabytes (at most 1 TiB)"));
  m->add_option("--spill-dir", a.spill_dir, "where recorded values beyond the budget go (default: the temp dir)");
  add_quiet_option(*m, a.quiet);
  runners["minify"] = [] { return run_minify(a); };
}

}  // namespace kiln::cli
