// `kiln trace report DIR -o OUT`: KILN_TRACE's JSON lines (core/trace.h) read back, checked against the schema
// (schema.h), and drawn as one self-contained HTML page (OUT/index.html: the compile sites as a trie coloured by
// outcome, every compile id with its stages' times, graphs, guards, breaks, recompiles, cache lookups, errors and
// kernels, provenance links from each kernel to the graph nodes and source lines it came from and back, an index
// of the processes that flags where their configurations differ) and a Chrome/Perfetto trace (OUT/trace.json).
// Trace files are untrusted input: every string is escaped for the page, and a line that does not parse or
// does not match the schema is reported (a killed process's incomplete last line is expected) and skipped.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::trace {

struct ProcessTrace {
  std::string file;
  nlohmann::json header;                // the process line (null when the file has none)
  std::vector<nlohmann::json> events;   // every other valid line, in order
  std::vector<std::string> problems;    // "file:line: what is wrong" for each line skipped
};

// Every kiln-*.jsonl file of `dir`, in name order. A kiln::Error (exit 2) when `dir` holds none.
std::vector<ProcessTrace> read_trace_dir(const std::string& dir);
// One trace file.
ProcessTrace read_trace_file(const std::string& path);

struct ReportSummary {
  int processes = 0, compiles = 0, errors = 0, graph_breaks = 0, recompiles = 0, kernels = 0, problems = 0;
};

// The page.
std::string trace_report_html(const std::vector<ProcessTrace>& traces, const std::string& source, ReportSummary* summary = nullptr);
// The Chrome trace (JSON object format): compiles, stages and passes, and runtime calls and launches as complete
// ("X") events per process and thread.
nlohmann::json chrome_trace(const std::vector<ProcessTrace>& traces);

}  // namespace kiln::trace
