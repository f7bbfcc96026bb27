// KILN_TRACE and `kiln trace report` as a user meets them (issue 36): every line kiln writes matches the schema,
// compile ids number graphs, captured functions and their recompiles as PyTorch does, the stages' times reach
// compile_times(), a kernel's provenance names the graph nodes and lines it came from, graph breaks and recompiles
// are recorded with their reasons, a killed process leaves a trace the report still reads, and the report renders
// in headless Chromium with every compile id, break, recompile and provenance link it must show.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "capture/capture.h"
#include "capture_test_values.h"
#include "cli_run.h"
#include "core/options.h"
#include "core/trace.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "trace/report.h"
#include "trace/schema.h"

namespace kiln::cli_test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every line of every trace file in `dir`, each checked against the schema.
std::vector<Json> trace_lines(const fs::path& dir) {
  std::vector<Json> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".jsonl") continue;
    std::ifstream in(e.path());
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      Json j = Json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << e.path() << ":" << n << ": " << line.substr(0, 200);
      if (j.is_discarded()) continue;
      EXPECT_EQ(trace::schema_problem(j), "") << e.path() << ":" << n << ": " << line.substr(0, 300);
      out.push_back(std::move(j));
    }
  }
  return out;
}

std::vector<Json> events_named(const std::vector<Json>& lines, const std::string& name) {
  std::vector<Json> out;
  for (const Json& j : lines)
    if (j["event"] == name) out.push_back(j);
  return out;
}

const char* kSmallGraph = R"(graph small(%x: f32[8, 16], %y: f32[8, 16]) {
  %a = add(%x, %y) : f32[8, 16]
  %b = tanh(%a) : f32[8, 16]
  %c = sum(%b, [1]) : f32[8]
  return %c
}
)";

class TraceTest : public CliTest {
 protected:
  fs::path trace_dir() { return path("trace"); }
};

TEST_F(TraceTest, AGraphCompileIsOneCompileIdWithItsStagesTimesArtifactsAndKernelProvenance) {
  ScopedOption trace(Opt::Trace, trace_dir().string());
  ScopedOption cache(Opt::CacheDir, path("cache"));
  reset_compile_times();
  graph::Graph g = graph::parse_graph(kSmallGraph, "small.kir");
  std::shared_ptr<CompiledGraph> program = compile(g, CompileOptions{});
  const std::vector<Json> lines = trace_lines(trace_dir());
  ASSERT_FALSE(lines.empty());
  ASSERT_EQ(lines[0]["event"], "process");  // the process line comes first, with the configuration in effect
  EXPECT_EQ(lines[0]["schema"], kTraceSchemaVersion);
  EXPECT_EQ(lines[0]["config"]["KILN_TRACE"], trace_dir().string());
  EXPECT_FALSE(lines[0]["build"].get<std::string>().empty());

  const std::vector<Json> starts = events_named(lines, "compile_start");
  ASSERT_EQ(starts.size(), 1u);
  const std::string id = starts[0]["compile_id"];
  EXPECT_TRUE(std::regex_match(id, std::regex("[0-9]+/0"))) << id;
  const std::vector<Json> ends = events_named(lines, "compile_end");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0]["outcome"], "ok");
  EXPECT_EQ(ends[0]["compile_id"], id);

  std::set<std::string> passes;
  for (const Json& s : events_named(lines, "span")) {
    EXPECT_EQ(s["compile_id"], id);
    passes.insert(s["name"].get<std::string>());
  }
  for (const char* p : {"decompose", "lower", "fuse", "plan_memory", "codegen"}) EXPECT_TRUE(passes.count(p)) << p;
  std::set<std::string> artifacts;
  for (const Json& a : events_named(lines, "artifact")) artifacts.insert(a["name"].get<std::string>());
  EXPECT_TRUE(artifacts.count("graph.kir"));
  EXPECT_TRUE(artifacts.count("decompose.kir"));
  EXPECT_TRUE(artifacts.count("plan_memory.txt"));

  // Provenance: the one fused kernel computes add, tanh and sum, from lines 2-4 of the file.
  const std::vector<Json> kernels = events_named(lines, "kernel");
  ASSERT_FALSE(kernels.empty());
  std::set<std::string> nodes, ops, where;
  for (const Json& k : kernels) {
    for (const Json& n : k["nodes"]) nodes.insert(n.get<std::string>());
    for (const Json& o : k["ops"]) ops.insert(o.get<std::string>());
    for (const Json& l : k["lines"]) where.insert(l.get<std::string>());
    EXPECT_TRUE(artifacts.count("kernel " + k["kernel"].get<std::string>())) << "the kernel's code is in the trace";
  }
  for (const char* n : {"a", "b", "c"}) EXPECT_TRUE(nodes.count(n)) << n;
  EXPECT_TRUE(ops.count("tanh"));
  EXPECT_TRUE(where.count("line 3:3")) << "tanh is on line 3";

  // compile_times(): the same passes, for this compile id.
  const CompileTimes times = compile_times();
  CompileId cid{std::stoi(id.substr(0, id.find('/'))), 0};
  std::set<std::string> timed;
  for (const CompileTimeRow& r : times.of(cid)) timed.insert(r.name);
  for (const char* p : {"decompose", "lower", "fuse", "codegen", "small"}) EXPECT_TRUE(timed.count(p)) << p;
  EXPECT_TRUE(contains(times.str(), "codegen"));
  EXPECT_GT(times.total_wall_ms("inductor", "codegen"), 0.0);
}

TEST_F(TraceTest, EveryExampleGraphTracesInTheSchemaWithKernelsAndTimes) {
  int examples = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(source_path("examples"))) {
    if (e.path().extension() != ".kir") continue;
    ++examples;
    const fs::path dir = path(e.path().stem().string());
    CliResult r = shell("kiln run '" + e.path().string() + "' --backend inductor",
                        "KILN_TRACE=" + dir.string() + " KILN_TRACE_RUNTIME=1 KILN_CACHE_DIR=" + path("cache"));
    ASSERT_EQ(r.exit_code, 0) << e.path() << "\n" << r.output;
    const std::vector<Json> lines = trace_lines(dir);
    EXPECT_FALSE(events_named(lines, "kernel").empty() && events_named(lines, "extern").empty()) << e.path();
    EXPECT_FALSE(events_named(lines, "span").empty()) << e.path();
    EXPECT_FALSE(events_named(lines, "call").empty()) << e.path() << ": KILN_TRACE_RUNTIME records the call";
    for (const Json& end : events_named(lines, "compile_end")) EXPECT_EQ(end["outcome"], "ok") << e.path();
  }
  EXPECT_GE(examples, 6);
}

TEST_F(TraceTest, TracingOffWritesNothingAndAFailedCompileRecordsItsErrorAndOutcome) {
  {
    graph::Graph g = graph::parse_graph(kSmallGraph, "small.kir");
    compile(g, CompileOptions{});
    EXPECT_FALSE(fs::exists(trace_dir()));
  }
  CliResult r = shell("kiln run " + source_path("examples/chain100.kir").string() + " --backend inductor",
                      "KILN_TRACE=" + trace_dir().string() + " KILN_INJECT=tanh:compile_error KILN_CACHE_DIR=" + path("cache"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  const std::vector<Json> lines = trace_lines(trace_dir());
  const std::vector<Json> errors = events_named(lines, "compile_error");
  ASSERT_EQ(errors.size(), 1u) << "one error, recorded once by the innermost compile scope";
  EXPECT_TRUE(contains(errors[0]["message"], "chain100")) << errors[0].dump();
  EXPECT_TRUE(contains(errors[0]["kind"], "inductor/")) << "the failing stage: " << errors[0].dump();
  bool failed_end = false;
  for (const Json& e : events_named(lines, "compile_end")) failed_end |= e["outcome"] == "error";
  EXPECT_TRUE(failed_end);
  EXPECT_EQ(lines[0]["config"]["KILN_INJECT"], "tanh:compile_error");

  // A directory kiln cannot create: one warning, and the command runs as without a trace.
  CliResult unwritable = shell("kiln run " + source_path("examples/chain100.kir").string() + " --backend inductor",
                               "KILN_TRACE=/dev/null/trace KILN_CACHE_DIR=" + path("cache"));
  EXPECT_EQ(unwritable.exit_code, 0) << unwritable.output;
  size_t warnings = 0;
  for (size_t at = unwritable.output.find("KILN_TRACE"); at != std::string::npos; at = unwritable.output.find("KILN_TRACE", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1u) << unwritable.output;
}

TEST_F(TraceTest, CapturedFunctionsNumberTheirRecompilesAndRecordBreaksGuardsAndReasons) {
  ScopedOption trace(Opt::Trace, trace_dir().string());
  CompileProfiler profiler;
  auto f = kiln::compile([](const Tensor& x) { return x * sum(x).item().to_double(); },
                         {.backend = "eager", .name = "scale"});
  const int line = __LINE__ - 2;
  f(capture_test::iota({2}));
  f(capture_test::iota({3}));  // a new size: a recompile
  const std::vector<Json> lines = trace_lines(trace_dir());

  std::vector<std::string> ids;
  for (const Json& s : events_named(lines, "compile_start"))
    if (s["what"] == "function") ids.push_back(s["compile_id"]);
  ASSERT_EQ(ids.size(), 2u);
  const std::string frame = ids[0].substr(0, ids[0].find('/'));
  EXPECT_EQ(ids[0], frame + "/0");
  EXPECT_EQ(ids[1], frame + "/1") << "a recompile keeps the function's frame";

  const std::vector<Json> breaks = events_named(lines, "graph_break");
  ASSERT_GE(breaks.size(), 1u);
  EXPECT_TRUE(contains(breaks[0]["reason"], "Tensor.item()"));
  EXPECT_TRUE(contains(breaks[0]["site"], "test_trace.cpp:" + std::to_string(line))) << breaks[0].dump();
  const std::vector<Json> recompiles = events_named(lines, "recompile");
  ASSERT_EQ(recompiles.size(), 1u);
  EXPECT_TRUE(contains(recompiles[0]["reason"], "size")) << recompiles[0].dump();
  EXPECT_EQ(recompiles[0]["recompiles"], 1);
  EXPECT_FALSE(events_named(lines, "guards").empty());
  EXPECT_FALSE(events_named(lines, "guard_failure").empty());

  const std::vector<CompileProfiler::Function> fs = profiler.functions();
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_TRUE(contains(fs[0].name, "scale"));
  EXPECT_EQ(fs[0].recompiles, 1);
  EXPECT_EQ(fs[0].guard_failures, 1);
  EXPECT_GE(fs[0].graph_breaks, 2) << "one break per trace";
  EXPECT_GE(fs[0].compiles, 2);
  EXPECT_TRUE(contains(profiler.report(), "Tensor.item()")) << profiler.report();
}

// The page's links: every href="#x" names an element id="x".
void expect_links_resolve(const std::string& html) {
  std::set<std::string> ids;
  std::regex id_re("id=\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), id_re); it != std::sregex_iterator(); ++it)
    ids.insert((*it)[1]);
  std::regex href_re("href=\"#([^\"]+)\"");
  int links = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), href_re); it != std::sregex_iterator(); ++it, ++links)
    EXPECT_TRUE(ids.count((*it)[1])) << "dangling link #" << (*it)[1];
  EXPECT_GT(links, 0);
}

// Chrome's trace format: every complete event has name, ph, ts, dur, pid and tid, and on each thread the events
// nest (each starts after the one before it ends, or ends within it).
void expect_chrome_trace(const Json& t) {
  ASSERT_TRUE(t.contains("traceEvents"));
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> by_thread;
  int complete = 0;
  for (const Json& e : t["traceEvents"]) {
    for (const char* k : {"name", "ph", "pid", "tid"}) ASSERT_TRUE(e.contains(k)) << e.dump();
    if (e["ph"] != "X") continue;
    ++complete;
    ASSERT_TRUE(e["ts"].is_number_integer() && e["dur"].is_number_integer()) << e.dump();
    by_thread[{e["pid"], e["tid"]}].emplace_back(e["ts"].get<int64_t>(), e["ts"].get<int64_t>() + e["dur"].get<int64_t>());
  }
  EXPECT_GT(complete, 0);
  for (auto& [thread, spans] : by_thread) {
    std::sort(spans.begin(), spans.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<int64_t> open_ends;
    for (auto [start, end] : spans) {
      while (!open_ends.empty() && open_ends.back() <= start) open_ends.pop_back();
      if (!open_ends.empty()) EXPECT_LE(end, open_ends.back()) << "an event that overlaps its parent without nesting";
      open_ends.push_back(end);
    }
  }
}

TEST_F(TraceTest, TheReportOfATrainingStepAFailureAndACaptureRendersWithEveryCompileAndLink) {
  const std::string env = "KILN_TRACE=" + trace_dir().string() + " KILN_CACHE_DIR=" + path("cache");
  ASSERT_EQ(shell("kiln run " + source_path("examples/mlp.kir").string() + " --backend inductor --check --grad", env).exit_code, 0);
  EXPECT_NE(shell("kiln run " + source_path("examples/softmax.kir").string() + " --backend inductor",
                  env + " KILN_INJECT=exp:compile_error").exit_code, 0);
  CliResult demo = shell("'" + (fs::path(KILN_BINARY_DIR) / "kiln-capture-demo").string() + "'", env);
  ASSERT_EQ(demo.exit_code, 0) << demo.output;
  {  // this process: a captured function with a graph break
    ScopedOption trace(Opt::Trace, trace_dir().string());
    auto f = kiln::compile([](const Tensor& x) { return x * sum(x).item().to_double(); }, {.backend = "eager", .name = "scale"});
    f(capture_test::iota({2}));
  }

  CliResult r = kiln_cli("trace report '" + trace_dir().string() + "' -o '" + path("report") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "4 processes")) << r.output;
  EXPECT_TRUE(contains(r.output, "(1 failed)")) << r.output;
  const std::string html = read_text(path("report") + "/index.html");
  EXPECT_TRUE(contains(html, "class=\"cid error\"")) << "the failed compile is coloured as one";
  EXPECT_TRUE(contains(html, "class=\"kernel\""));
  EXPECT_TRUE(contains(html, "[kiln:") == false) << "log lines are recorded without their terminal prefix";
  EXPECT_TRUE(contains(html, "aot forward.kir")) << "the training step's forward graph";
  EXPECT_TRUE(contains(html, "KILN_INJECT=exp:compile_error")) << "the configuration of the failing process";
  EXPECT_TRUE(contains(html, "class=\"differs\"")) << "KILN_INJECT differs between the processes";
  expect_links_resolve(html);
  const Json chrome = Json::parse(read_text(path("report") + "/trace.json"));
  expect_chrome_trace(chrome);

  const std::string chromium = find_chromium();
  ASSERT_FALSE(chromium.empty()) << "headless Chromium is needed to render the report (ci/install-deps.sh installs it)";
  CliResult dom = shell(chromium + " --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 "
                        "--user-data-dir='" + path("chromium-profile") + "' --dump-dom 'file://" + path("report") +
                        "/index.html' 2>" + path("chromium.log"));
  ASSERT_EQ(dom.exit_code, 0) << dom.output.substr(0, 2000);
  EXPECT_TRUE(contains(dom.output, "data-ready=\"yes\"")) << "the page's script ran";
  for (const char* part : {"Compile sites", "Compile ids", "Compile time", "Kernels and the nodes they came from",
                           "graph break", "recompile"})
    EXPECT_TRUE(contains(dom.output, part)) << part;
  const std::string console = read_text(path("chromium.log"));
  EXPECT_FALSE(contains(console, "Uncaught")) << console.substr(0, 2000);
}

TEST_F(TraceTest, AProcessKilledMidRunLeavesATraceTheReportReads) {
  // A real kill: the inject_test backend hangs running a graph with tanh; SIGKILL it after its compile.
  CliResult killed = shell("timeout -s KILL 3 '" KILN_CLI "' run '" + source_path("examples/chain100.kir").string() +
                               "' --backend inject_test",
                           "KILN_TRACE=" + trace_dir().string() + " KILN_INJECT=tanh:hang");
  EXPECT_EQ(killed.signal, 9) << killed.output;
  std::vector<trace::ProcessTrace> traces = trace::read_trace_dir(trace_dir().string());
  ASSERT_EQ(traces.size(), 1u);
  EXPECT_FALSE(traces[0].header.is_null());
  ASSERT_GT(traces[0].events.size(), 0u);
  EXPECT_EQ(traces[0].events.back()["event"], "compile_end") << "every event up to the kill";
  for (const std::string& p : traces[0].problems) EXPECT_TRUE(contains(p, "incomplete")) << p;

  // A file cut inside a line: the events before it are read, the cut line is named.
  fs::path file;
  for (const fs::directory_entry& e : fs::directory_iterator(trace_dir())) file = e.path();
  std::string text = read_text(file);
  const size_t cut = text.find("\"event\":\"backend\"");
  ASSERT_NE(cut, std::string::npos);
  fs::create_directories(path("cut"));
  write_file(path("cut") + "/kiln-1-0.jsonl", text.substr(0, cut));
  traces = trace::read_trace_dir(path("cut"));
  ASSERT_EQ(traces[0].problems.size(), 1u);
  EXPECT_TRUE(contains(traces[0].problems[0], "incomplete"));
  CliResult r = kiln_cli("trace report '" + path("cut") + "' -o '" + path("cut-report") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "1 line skipped")) << r.output;
}

TEST_F(TraceTest, HostileTraceFilesAreReportedAndEscapedAndAnEmptyDirectoryIsAnInputError) {
  fs::create_directories(path("hostile"));
  const std::string header =
      R"({"event":"process","schema":1,"ts_us":0,"pid":1,"unix_ms":0,"version":"x","git":"x","build":"x","host":"h",)"
      R"("argv":["kiln"],"config":{}})";
  write_file(path("hostile") + "/kiln-1-0.jsonl",
             header + "\n" +
                 R"({"event":"compile_start","ts_us":1,"tid":1,"compile_id":"0/0","what":"graph","name":"<script>alert(1)</script>"})" "\n"
                 R"({"event":"span","ts_us":2,"tid":1,"compile_id":"0/0","category":"inductor","name":"lower","start_us":"soon","wall_ms":1,"cpu_ms":1})" "\n"
                 "not json at all\n"
                 R"([1,2,3])" "\n");
  CliResult r = kiln_cli("trace report '" + path("hostile") + "' -o '" + path("out") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "3 lines skipped")) << r.output;
  const std::string html = read_text(path("out") + "/index.html");
  EXPECT_FALSE(contains(html, "<script>alert")) << "names are HTML-escaped";
  EXPECT_TRUE(contains(html, "field \\&quot;start_us\\&quot;") || contains(html, "start_us")) << "the bad field is named";
  EXPECT_TRUE(contains(html, ":4: not JSON"));

  fs::create_directories(path("empty"));
  CliResult none = kiln_cli("trace report '" + path("empty") + "'");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_TRUE(contains(none.output, "holds no trace file")) << none.output;
}

}  // namespace
}  // namespace kiln::cli_test
