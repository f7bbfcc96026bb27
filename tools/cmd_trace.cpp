// `kiln trace report DIR [-o OUT]` (cmd_trace.h): reads every trace file of DIR (trace/report.h) and writes
// OUT/index.html and OUT/trace.json (OUT defaults to DIR/report), each atomically.
#include "tools/cmd_trace.h"

#include <filesystem>

#include "core/escape.h"
#include "core/files.h"
#include "tools/cli_checks.h"
#include "trace/report.h"

namespace kiln::cli {

namespace {

struct TraceArgs {
  std::string dir;
  std::string out;
};

int run_trace_report(const TraceArgs& a) {
  const std::vector<trace::ProcessTrace> traces = trace::read_trace_dir(a.dir);
  const std::string out = a.out.empty() ? (std::filesystem::path(a.dir) / "report").string() : a.out;
  create_output_directory(out);
  trace::ReportSummary s;
  const std::string page = trace::trace_report_html(traces, a.dir, &s);
  const std::string html = (std::filesystem::path(out) / "index.html").string();
  const std::string chrome = (std::filesystem::path(out) / "trace.json").string();
  write_file_atomic(html, page);
  write_file_atomic(chrome, trace::chrome_trace(traces).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  fmt::print("{}: {} process{}, {} compile{} ({} failed), {} graph break{}, {} recompile{}, {} kernel{}\n",
             terminal_safe(a.dir), s.processes, s.processes == 1 ? "" : "es", s.compiles, s.compiles == 1 ? "" : "s",
             s.errors, s.graph_breaks, s.graph_breaks == 1 ? "" : "s", s.recompiles, s.recompiles == 1 ? "" : "s",
             s.kernels, s.kernels == 1 ? "" : "s");
  if (s.problems)
    fmt::print("warning: {} line{} skipped (listed at the top of the page)\n", s.problems, s.problems == 1 ? "" : "s");
  fmt::print("report: {}\nChrome trace (ui.perfetto.dev, chrome://tracing): {}\n", terminal_safe(html), terminal_safe(chrome));
  return 0;
}

}  // namespace

void add_trace_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  static TraceArgs args;
  auto* trace = app.add_subcommand("trace", "work with KILN_TRACE's structured compile traces (docs/observability.md)");
  trace->require_subcommand(1);
  auto* report = trace->add_subcommand("report", "draw a KILN_TRACE directory as one self-contained HTML page "
                                                 "(OUT/index.html) and a Chrome/Perfetto trace (OUT/trace.json)");
  report->add_option("dir", args.dir, "the KILN_TRACE directory")->required();
  add_output_option(*report, args.out, "the directory to write index.html and trace.json to (default DIR/report)");
  runners["trace"] = [] { return run_trace_report(args); };
}

}  // namespace kiln::cli
