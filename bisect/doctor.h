// `kiln doctor` (issue 17, docs/bisect.md): the whole troubleshooting sequence in one call. Ablation over the
// backend ladder (bisect.h ladder_to), the failing graph minified on the first failing backend (minifier/),
// the minified repro bisected (bisect_graph), and one report: DIR/report.md, and DIR/report.html with the
// graphs and the diverging values side by side, ending with the repro file and the exact bad pass. Every file
// goes under the output directory, written atomically (core/files.h):
//   DIR/repro.min.repro (+ .inputs/, .state.json)  the minified repro (`kiln repro run` reproduces it)
//   DIR/minified.kir                                the minified graph (what the bisector's commands run)
//   DIR/bisect.json                                 the bisector's result
//   DIR/report.md, DIR/report.html
#pragma once
#include <string>
#include <vector>

#include "bisect/bisect.h"

namespace kiln::bisect {

struct DoctorOptions {
  BisectOptions bisect;      // backend (top of the ladder), want, tolerance, timeout, progress
  std::string output_dir;    // required
  std::string source;        // how the graph was given, for the report ("g.kir, inputs from seed 0")
  int jobs = 1;              // the minifier's parallel candidates
  RunLine rerun;             // how reproduce lines name the original graph and its inputs (repro/command.h)
};

struct DoctorResult {
  Want want = Want::Any;         // what the run was asked about
  std::vector<LadderRung> ablation;  // each rung's failure as seen, of any kind
  bool failed = false;           // some rung failed (in any way: see failing_backend)
  std::string failing_backend;   // the first rung failing as asked, minified and bisected ("" when none did)
  LadderRung other_failure;      // when none did: the first rung that failed another way...
  std::string other_command;     // ...and the command that shows it
  int original_ops = 0, minified_ops = 0;
  std::string repro_path;        // DIR/repro.min.repro ("" when nothing failed)
  bool reverified = false;       // the written repro reproduced
  std::string reverify_message;
  BisectReport bisect;           // on the minified graph
  std::string markdown, html;    // what was written to DIR/report.md and DIR/report.html
};

DoctorResult run_doctor(const graph::Graph& g, const std::vector<Tensor>& inputs, const DoctorOptions& o);

}  // namespace kiln::bisect
