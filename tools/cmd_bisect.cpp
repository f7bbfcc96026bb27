// `kiln bisect G [--inputs DIR | --seed N] [--backend B] [--accuracy | --error] [--tol T] [--timeout S]
// [-o REPORT] [-q]` and `kiln bisect --cmd "CMD" [...]`: the first failing backend stage, subsystem and
// application, and the first diverging node (bisect/bisect.h, docs/bisect.md). G is a .kir graph or a repro file.
// Exit 0 when it passes, 1 when it fails (bisected, unexplained, nondeterministic, or failing in another way than
// --accuracy / --error asks about), 2 for bad input.
#include "tools/cmd_bisect.h"

#include <fmt/format.h>

#include "bisect/bisect.h"
#include "core/escape.h"
#include "core/files.h"
#include "core/options.h"
#include "core/seed.h"
#include "eager/philox.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "repro/graph_source.h"
#include "tools/cli_checks.h"

namespace kiln::cli {
namespace {

struct BisectArgs {
  std::string file, command, inputs_dir, output;
  std::optional<std::string> backend;
  std::optional<uint64_t> seed;
  bool accuracy = false, error = false, quiet = false;
  std::optional<double> tol;  // default 1e-4, or a repro file's
  double timeout_s = 60;
};

bisect::BisectOptions options_of(const BisectArgs& a) {
  bisect::BisectOptions o;
  o.backend = a.backend.value_or("");
  o.want = a.accuracy ? bisect::Want::Accuracy : a.error ? bisect::Want::Error : bisect::Want::Any;
  o.tolerance = a.tol.value_or(kDefaultTol);
  o.timeout_s = a.timeout_s;
  o.progress = !a.quiet;
  return o;
}

int run_bisect(const BisectArgs& a) {
  KILN_CHECK(a.file.empty() != a.command.empty(), "kiln bisect: give a graph file or --cmd \"COMMAND\" (one of them)");
  KILN_CHECK(a.command.empty() || (!a.accuracy && !a.error && a.inputs_dir.empty() && !a.seed),
             "kiln bisect --cmd: the command's exit status is the verdict; --accuracy, --error, --inputs and --seed "
             "apply to a graph file");
  if (!a.output.empty()) check_output_path(a.output);
  bisect::BisectOptions o = options_of(a);
  bisect::BisectReport r;
  if (!a.command.empty()) {
    fmt::print(stderr, "kiln bisect: the command `{}`{}\n", terminal_safe(a.command),
               o.backend.empty() ? "" : ", ladder up to " + o.backend);
    r = bisect::bisect_command(a.command, o);
  } else {
    // A repro file (what `kiln minify` and `kiln doctor` write) brings its graph, inputs, configuration, backend
    // and tolerance; a graph with inputs marked `grad` is judged on its gradients either way.
    GraphSource src = load_graph_source(a.file, a.inputs_dir, a.seed);
    if (o.backend.empty()) o.backend = src.backend_or(kDefaultBackend);
    o.tolerance = a.tol.value_or(src.tolerance_or(kDefaultTol));
    manual_seed(src.seed);  // random ops draw the same in every child
    fmt::print(stderr, "kiln bisect: {} ({} op nodes, {}) up to backend {}\n", terminal_safe(a.file),
               src.graph.num_op_nodes(), terminal_safe(src.input_desc), terminal_safe(o.backend));
    r = bisect::bisect_graph(src.graph, src.inputs, o, src.run_line());
  }
  fmt::print("{}", r.text());
  if (!a.output.empty()) write_file_atomic(a.output, r.json().dump(2) + "\n");
  return r.failed() ? 1 : 0;
}

}  // namespace

void add_bisect_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  static BisectArgs a;
  auto* b = app.add_subcommand("bisect", "find the first failing backend stage, compiler subsystem and application, "
                                         "and the first diverging node, of a graph or a command that fails");
  b->add_option("file", a.file, "the failing graph (.kir) or a repro file (its graph, inputs, configuration, "
                                 "backend and tolerance)");
  b->add_option("--cmd", a.command, "bisect a shell command instead (exit 0 good, non-zero bad); kiln sets "
                                    "KILN_BISECT_* in its environment, and KILN_BACKEND only with --backend (the "
                                    "ladder then goes up to it; without it the command runs as it is)");
  add_backend_option(*b, a.backend);
  auto* acc = b->add_flag("--accuracy", a.accuracy, "only accuracy failures count");
  auto* err = b->add_flag("--error", a.error, "only errors, crashes and hangs count");
  acc->excludes(err);
  add_inputs_option(*b, a.inputs_dir, add_seed_option(*b, a.seed));
  add_tol_option(*b, a.tol);
  add_timeout_option(*b, a.timeout_s);
  add_output_option(*b, a.output, "also write the result as JSON to this file");
  add_quiet_option(*b, a.quiet);
  runners["bisect"] = [] { return run_bisect(a); };
}

}  // namespace kiln::cli
