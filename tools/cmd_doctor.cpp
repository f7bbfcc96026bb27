// `kiln doctor G.kir -o DIR [--inputs DIR | --seed N] [--backend B] [--accuracy | --error] [--tol T]
// [--timeout S] [-j N] [-q]`: ablation, minification and bisection in one command, with one report
// (bisect/doctor.h, docs/bisect.md). G is a .kir graph or a repro file. Exit 0 when every backend passes, 1 when
// something failed (the report says what; also a failure of a kind --accuracy / --error does not ask about), 2 for
// bad input, 3 when the minified repro did not reproduce (a kiln bug).
#include <fmt/format.h>

#include "bisect/doctor.h"
#include "core/files.h"
#include "core/options.h"
#include "core/seed.h"
#include "eager/philox.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "repro/graph_source.h"
#include "tools/cli_checks.h"
#include "tools/cmd_bisect.h"

namespace kiln::cli {
namespace {

struct DoctorArgs {
  std::string file, inputs_dir, output;
  std::optional<std::string> backend;  // unset: a repro file's, else inductor
  std::optional<uint64_t> seed;
  bool accuracy = false, error = false, quiet = false;
  std::optional<double> tol;  // default 1e-4, or a repro file's
  double timeout_s = 60;
  int jobs = 1;
};

int run_doctor_command(const DoctorArgs& a) {
  GraphSource src = load_graph_source(a.file, a.inputs_dir, a.seed);  // a .kir graph or a repro file
  const graph::Graph& g = src.graph;
  manual_seed(src.seed);
  bisect::DoctorOptions o;
  o.bisect.backend = a.backend ? *a.backend : src.backend_or(kDefaultBackend);
  o.bisect.want = a.accuracy ? bisect::Want::Accuracy : a.error ? bisect::Want::Error : bisect::Want::Any;
  o.bisect.tolerance = a.tol.value_or(src.tolerance_or(kDefaultTol));
  o.bisect.timeout_s = a.timeout_s;
  o.bisect.progress = !a.quiet;
  o.output_dir = a.output;
  o.jobs = a.jobs;
  o.rerun = src.run_line();
  o.source = fmt::format("{} ({} op nodes, {})", a.file, g.num_op_nodes(), src.input_desc);
  bisect::DoctorResult d = bisect::run_doctor(g, src.inputs, o);
  fmt::print("{}\nwrote {}/report.md and {}/report.html\n", d.markdown, a.output, a.output);
  if (!d.failing_backend.empty() && !d.reverified) {
    fmt::print(stderr, "kiln: error: the minified repro {} does not reproduce: {}\nThis is a kiln bug; please report "
               "it with the original graph.\n", d.repro_path, d.reverify_message);
    return 3;
  }
  return d.failed ? 1 : 0;
}

}  // namespace

void add_doctor_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  static DoctorArgs a;
  auto* d = app.add_subcommand("doctor", "troubleshoot a graph in one command: ablation over the backend ladder, "
                                         "minify the failure, bisect the minified repro, write one report");
  d->add_option("file", a.file, "the graph (.kir) or a repro file (its graph, inputs, configuration, backend and "
                                 "tolerance)")->required();
  add_output_option(*d, a.output, "the directory the report, the repro and the minified graph go to")->required();
  add_backend_option(*d, a.backend);
  auto* acc = d->add_flag("--accuracy", a.accuracy, "only accuracy failures count");
  auto* err = d->add_flag("--error", a.error, "only errors, crashes and hangs count");
  acc->excludes(err);
  add_inputs_option(*d, a.inputs_dir, add_seed_option(*d, a.seed));
  add_tol_option(*d, a.tol);
  add_timeout_option(*d, a.timeout_s);
  add_jobs_option(*d, a.jobs);
  add_quiet_option(*d, a.quiet);
  runners["doctor"] = [] { return run_doctor_command(a); };
}

}  // namespace kiln::cli
