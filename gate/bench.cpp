// `kiln bench` (see bench.h). The timing method is kiln-bench's (bench/bench_util.h: cold caches by clflushopt
// of the run's own lines, the same-run copy baseline), so the two tools report comparable figures.
#include "gate/bench.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <time.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "api/backends.h"
#include "bench/bench_util.h"
#include "core/escape.h"
#include "eager/philox.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "kiln_version.h"
#include "ops/api.h"
#include "core/escape.h"
#include "core/files.h"
#include "repro/isolate.h"

namespace kiln::gate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int64_t bytes_of(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.numel() * int64_t(dtype_size(t.dtype()));
  return n;
}

void flush_tensors(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    if (t.storage()) flush_from_caches(t.storage()->data(), t.storage()->nbytes());
}

double wall_ms_now() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Samples of `call`: each the mean time of `iterations` calls (iterations chosen so a sample lasts at least
// min_sample_ms warm); cold samples flush `touched()` before every call and time only the calls.
BenchCase sample(const std::string& name, const std::function<void()>& call,
                 const std::function<void()>& flush, const BenchConfig& c, bool cold) {
  BenchCase out;
  out.name = name;
  call();  // warm-up: code, page faults, the compiled program's buffers
  auto t0 = std::chrono::steady_clock::now();
  call();
  double one_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.iterations = std::clamp<int64_t>(int64_t(std::ceil(c.min_sample_ms / std::max(one_ms, 1e-6))), 1, 100000);
  for (int r = 0; r < c.repetitions; ++r) {
    double wall = 0, cpu = 0;
    if (cold) {
      for (int64_t i = 0; i < out.iterations; ++i) {
        flush();
        const double w0 = wall_ms_now(), c0 = process_cpu_ms();
        call();
        cpu += process_cpu_ms() - c0, wall += wall_ms_now() - w0;
      }
    } else {
      const double w0 = wall_ms_now(), c0 = process_cpu_ms();
      for (int64_t i = 0; i < out.iterations; ++i) call();
      cpu = process_cpu_ms() - c0, wall = wall_ms_now() - w0;
    }
    out.samples_ms.push_back(wall / double(out.iterations));
    out.cpu_samples_ms.push_back(cpu / double(out.iterations));
  }
  return out;
}

std::string graph_case_prefix(const std::string& file) { return fs::path(file).stem().string(); }

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", utc);
}

}  // namespace

const BenchCase* BenchRun::find(const std::string& name) const {
  for (const BenchCase& c : cases)
    if (c.name == name) return &c;
  return nullptr;
}

bool is_gated_case(const std::string& name) { return name.find("/compiled/") != std::string::npos; }

namespace {

// The graph's first compiled run, in a forked child: compile (the setup step, with its generous limit), run,
// compare with the fp64 reference. A failure is why the graph is not timed.
FailureSignature first_run_isolated(const graph::Graph& g, const std::vector<Tensor>& inputs, const BenchConfig& c) {
  IsolatedResult r = run_isolated([&] {
    try {
      GraphProgram program;
      if (std::optional<BackendCompileFn> compile = find_backend_compiler(c.backend)) program = (*compile)(g);
      isolated_run_starts();
      manual_seed(c.seed);
      if (program) program(graph::copy_inputs(inputs));
      else find_backend(c.backend)(g, graph::copy_inputs(inputs));
    } catch (const Error& e) {
      return encode_failure(failure_of_exception(e));
    }
    return encode_failure(FailureSignature{});
  }, c.timeout_s, setup_limit_for(c.timeout_s));
  return classify(r);
}

}  // namespace

BenchRun run_benchmarks(const std::vector<std::string>& graph_files, const BenchConfig& c,
                        const std::function<void(const BenchRun&)>& after_graph) {
  BenchRun run{now_iso8601(), KILN_VERSION, KILN_GIT_HASH, c.backend, this_machine(), {}, {}};
  const BackendFn& backend = find_backend(c.backend);
  KILN_CHECK(c.inputs_dir.empty() || graph_files.size() == 1, "kiln bench --inputs {}: one graph's inputs, but {} "
             "graphs are named; bench each graph that needs real inputs on its own", c.inputs_dir, graph_files.size());
  std::set<std::string> prefixes;
  std::vector<graph::Graph> graphs;
  for (const std::string& file : graph_files) {  // every file checked before the long part
    graphs.push_back(graph::load_graph(file));
    graph::verify_graph(graphs.back(), file);
    // Case names go into JSON files (nlohmann::json refuses text that is not UTF-8) and are compared with the
    // names read back from them: made valid UTF-8 once (case_prefix below).
    KILN_CHECK(prefixes.insert(utf8_lossless(graph_case_prefix(file))).second, "{}: another graph has the name {}; "
               "benchmark names must be unique (rename one file)", terminal_safe(file),
               terminal_safe(graph_case_prefix(file)));
  }
  const int regimes = int(c.cold) + int(c.warm);
  const size_t total_cases = graph_files.size() * size_t(3 * regimes);
  size_t done_cases = 0;
  auto say = [&](const std::string& line) {
    if (c.progress) c.progress(line);
  };
  for (size_t gi = 0; gi < graph_files.size(); ++gi) {
    const std::string& file = graph_files[gi];
    const graph::Graph& g = graphs[gi];
    const std::string prefix = utf8_lossless(graph_case_prefix(file));
    std::vector<Tensor> inputs = c.inputs_dir.empty() ? graph::seeded_inputs(g, c.seed) : graph::load_inputs(g, c.inputs_dir);
    FailureSignature first = first_run_isolated(g, inputs, c);
    if (first.failed()) {
      run.failures.push_back({prefix, std::string(failure_kind_name(first.kind)), first.message});
      done_cases += size_t(3 * regimes);
      say(fmt::format("kiln bench: [{}/{}] {}: {} on {}: {} (not timed)", done_cases, total_cases,
                      terminal_safe(prefix), failure_kind_name(first.kind), c.backend, terminal_safe(first.message)));
      if (after_graph) after_graph(run);
      continue;
    }
    graph::Interpreter eager(g);
    std::vector<Tensor> outputs;
    auto compiled = [&] { manual_seed(c.seed), outputs = backend(g, inputs); };
    auto interpreted = [&] { manual_seed(c.seed), outputs = eager.run(inputs); };
    auto flush = [&] { flush_tensors(inputs), flush_tensors(outputs); };
    compiled();  // compiles (not timed: kiln gate times cold compiles) and sizes the outputs
    const int64_t read = bytes_of(inputs), written = bytes_of(outputs);
    CopyBaseline copy(std::max<int64_t>(read, 64), std::max<int64_t>(written, 64));
    auto copy_call = [&] { copy.run_streaming(); };
    auto copy_flush = [&] { copy.flush_from_caches(); };
    for (bool cold : {true, false}) {
      if ((cold && !c.cold) || (!cold && !c.warm)) continue;
      const char* regime = cold ? "cold" : "warm";
      for (auto [variant, call, fl] : {std::tuple{"compiled", std::function<void()>(compiled), std::function<void()>(flush)},
                                       std::tuple{"eager", std::function<void()>(interpreted), std::function<void()>(flush)},
                                       std::tuple{"copy", std::function<void()>(copy_call), std::function<void()>(copy_flush)}}) {
        BenchCase bc = sample(fmt::format("{}/{}/{}", prefix, variant, regime), call, fl, c, cold);
        bc.bytes = read + written;
        say(fmt::format("kiln bench: [{}/{}] {}: median {:.4g} ms ({} samples of {} calls)", ++done_cases, total_cases,
                        bc.name, median(bc.samples_ms), bc.samples_ms.size(), bc.iterations));
        run.cases.push_back(std::move(bc));
      }
    }
    if (after_graph) after_graph(run);
  }
  return run;
}

json google_benchmark_json(const BenchRun& run) {
  json benchmarks = json::array();
  for (const BenchCase& bc : run.cases) {
    const int n = int(bc.samples_ms.size());
    for (int i = 0; i < n; ++i)
      benchmarks.push_back({{"name", bc.name}, {"run_name", bc.name}, {"run_type", "iteration"},
                            {"repetitions", n}, {"repetition_index", i}, {"threads", 1},
                            {"iterations", bc.iterations}, {"real_time", bc.samples_ms[i]},
                            {"cpu_time", bc.cpu_samples_ms[i]}, {"time_unit", "ms"}, {"bytes", bc.bytes}});
    double mean = 0;
    for (double x : bc.samples_ms) mean += x / n;
    double var = 0;
    for (double x : bc.samples_ms) var += (x - mean) * (x - mean) / std::max(1, n - 1);
    const double stddev = std::sqrt(var);
    for (auto [agg, value] : {std::pair{"mean", mean}, std::pair{"median", median(bc.samples_ms)},
                              std::pair{"stddev", stddev}, std::pair{"cv", mean > 0 ? stddev / mean : 0.0}})
      benchmarks.push_back({{"name", bc.name + "_" + agg}, {"run_name", bc.name}, {"run_type", "aggregate"},
                            {"repetitions", n}, {"threads", 1}, {"aggregate_name", agg},
                            {"aggregate_unit", std::string(agg) == "cv" ? "percentage" : "time"},
                            {"iterations", n}, {"real_time", value}, {"cpu_time", value}, {"time_unit", "ms"}});
  }
  for (const BenchFailure& f : run.failures)
    benchmarks.push_back({{"name", f.graph + "/compiled"}, {"run_name", f.graph + "/compiled"},
                          {"run_type", "iteration"}, {"error_occurred", true}, {"error_message", utf8_lossless(f.message)},
                          {"error_kind", f.kind}});
  return {{"context",
           {{"date", utf8_lossless(run.date)}, {"executable", "kiln bench"}, {"kiln_version", utf8_lossless(run.kiln_version)},
            {"git", utf8_lossless(run.git_hash)}, {"backend", utf8_lossless(run.backend)},
            {"cpu", utf8_lossless(run.machine.cpu)},
            {"num_cpus", run.machine.threads}, {"library_build_type", "release"}}},
          {"benchmarks", benchmarks}};
}

BenchRun bench_run_from_json(const json& j, const std::string& where) {
  KILN_CHECK(j.is_object() && j.contains("benchmarks") && j["benchmarks"].is_array(),
             "{}: not a benchmark result (expected Google Benchmark JSON with a \"benchmarks\" list, as written by "
             "`kiln bench --json` or `kiln-bench --benchmark_format=json`)", where);
  BenchRun run;
  try {
    const json& ctx = j.value("context", json::object());
    run.date = ctx.value("date", "");
    run.kiln_version = ctx.value("kiln_version", "");
    run.git_hash = ctx.value("git", "");
    run.backend = ctx.value("backend", "");
    run.machine.cpu = ctx.value("cpu", "");
    run.machine.threads = ctx.value("num_cpus", 0);
    std::map<std::string, size_t> index;
    for (const json& b : j["benchmarks"]) {
      if (b.value("run_type", "iteration") != "iteration") continue;
      if (b.value("error_occurred", false)) {  // Google Benchmark's failed benchmark; kiln's failed graph
        std::string name = b.value("run_name", b.at("name").get<std::string>());
        run.failures.push_back({name.substr(0, name.rfind("/compiled")), b.value("error_kind", "error"),
                                b.value("error_message", "")});
        continue;
      }
      const std::string name = b.value("run_name", b.at("name").get<std::string>());
      const std::string unit = b.value("time_unit", "ns");
      const double to_ms = unit == "ns" ? 1e-6 : unit == "us" ? 1e-3 : unit == "s" ? 1e3 : 1.0;
      const double wall = b.at("real_time").get<double>() * to_ms;
      const double cpu = b.value("cpu_time", b.at("real_time").get<double>()) * to_ms;
      auto [it, fresh] = index.emplace(name, run.cases.size());
      if (fresh) {
        BenchCase bc;
        bc.name = name;
        bc.iterations = b.value("iterations", int64_t(1));
        bc.bytes = b.value("bytes", int64_t(0));
        run.cases.push_back(std::move(bc));
      }
      run.cases[it->second].samples_ms.push_back(wall);
      run.cases[it->second].cpu_samples_ms.push_back(cpu);
    }
  } catch (const json::exception& e) {
    fail("{}: malformed benchmark entry ({})", where, e.what());
  }
  return run;
}

BenchRun load_bench_json(const std::string& path) {
  const std::string text = read_input_file(path, "benchmark baseline");
  try {
    return bench_run_from_json(json::parse(text), path);
  } catch (const json::parse_error& e) {
    fail("{}: the baseline is not valid JSON ({}); write one with `kiln bench ... --json FILE`", path, e.what());
  }
}

std::vector<CaseComparison> compare_runs(const BenchRun& before, const BenchRun& now, double tolerance, double alpha,
                                         bool cpu_time) {
  auto samples = [cpu_time](const BenchCase& c) -> const std::vector<double>& {
    return cpu_time ? c.cpu_samples_ms : c.samples_ms;
  };
  std::vector<CaseComparison> out;
  for (const BenchCase& c : now.cases) {
    CaseComparison cmp{c.name, NAN, median(samples(c)), {}, "new", is_gated_case(c.name)};
    if (const BenchCase* b = before.find(c.name)) {
      cmp.before_ms = median(samples(*b));
      cmp.test = mann_whitney_u(samples(c), samples(*b));
      const bool significant = cmp.test.p_value < alpha;
      if (significant && cmp.now_ms > cmp.before_ms * (1 + tolerance)) cmp.verdict = "SLOWER";
      else if (significant && cmp.now_ms < cmp.before_ms / (1 + tolerance)) cmp.verdict = "faster";
      else cmp.verdict = "same";
    }
    out.push_back(cmp);
  }
  for (const BenchCase& b : before.cases) {
    if (now.find(b.name)) continue;
    const bool failed = std::any_of(now.failures.begin(), now.failures.end(), [&](const BenchFailure& f) {
      return b.name.rfind(f.graph + "/", 0) == 0;
    });
    out.push_back({b.name, median(samples(b)), NAN, {}, failed ? "FAILED" : "missing", is_gated_case(b.name)});
  }
  return out;
}

namespace {

// The runs of a history's text, one JSON line each (blank lines skipped).
std::vector<BenchRun> parse_history(const std::string& text, const std::string& path) {
  std::vector<BenchRun> runs;
  std::istringstream in(text);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      fail("{}:{}: not a JSON line ({}); each line of a history is one `kiln bench` run", path, line_no, e.what());
    }
    runs.push_back(bench_run_from_json(j, fmt::format("{}:{}", path, line_no)));
  }
  return runs;
}

}  // namespace

void append_history(const std::string& path, const BenchRun& run) {
  std::string text;
  if (fs::exists(path)) {
    text = read_input_file(path, "benchmark history");
    parse_history(text, path);  // refuse to append to a file that is not a history
    if (!text.empty() && text.back() != '\n') text += '\n';
  }
  write_file_atomic(path, text + google_benchmark_json(run).dump() + "\n");
}

std::vector<BenchRun> load_history(const std::string& path) {
  return parse_history(read_input_file(path, "benchmark history"), path);
}

namespace {

// The widest a label of `chars` characters at font size `px` can be: 0.62 em a character (wider than any digit,
// letter or space of a sans-serif font but W and M), so a label placed by it is never cut.
double label_width(size_t chars, double px) { return 0.62 * px * double(chars); }

// Each run's x label: its commit, with "#k" (the k-th run of that commit) where runs share one, so every label
// names its own run.
std::vector<std::string> run_labels(const std::vector<BenchRun>& history) {
  std::map<std::string, int> runs_of, seen;
  for (const BenchRun& r : history) ++runs_of[r.git_hash.substr(0, 9)];
  std::vector<std::string> out;
  for (const BenchRun& r : history) {
    const std::string commit = r.git_hash.substr(0, 9);
    out.push_back(runs_of[commit] > 1 ? fmt::format("{} #{}", commit, ++seen[commit]) : commit);
  }
  return out;
}

// One case's plot: x = run, y = median ms (0 at the bottom), a bar from the fastest to the slowest sample. Only a
// gated (compiled) case marks and counts regressions; a reference case's slower runs are marked as such, in grey.
std::string case_svg(const std::string& name, const std::vector<BenchRun>& history, double tolerance, double alpha,
                     int& regressions) {
  constexpr double H = 220, right = 20, top = 20, bottom = 40, font = 11, tick_font = 10;
  const bool gated = is_gated_case(name);
  double ymax = 0;
  for (const BenchRun& r : history)
    if (const BenchCase* c = r.find(name))
      for (double x : c->samples_ms) ymax = std::max(ymax, x);
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const std::string ytop = fmt::format("{:.3g} ms", ymax);
  const std::vector<std::string> labels = run_labels(history);
  size_t widest = 0;
  for (const std::string& l : labels) widest = std::max(widest, l.size());
  // The left margin holds the y label whole; runs are spaced so their labels do not overlap.
  const double left = std::max(60.0, label_width(ytop.size(), font) + 8);
  const double spacing = label_width(widest, tick_font) + 8;
  const size_t n = history.size();
  const double W = std::max(640.0, left + right + spacing * double(n));
  // Runs at the middles of n equal slots, so the first and last labels stay inside the plot too.
  auto X = [&](size_t i) { return left + (double(i) + 0.5) * (W - left - right) / double(n); };
  auto Y = [&](double v) { return top + (H - top - bottom) * (1 - v / ymax); };
  std::string svg = fmt::format("<svg class=\"plot\" data-case=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
                                "height=\"{}\" viewBox=\"0 0 {} {}\">\n", html_escape(name), W, H, W, H);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#888\"/>"
                     "<line x1=\"{0}\" y1=\"{2}\" x2=\"{3}\" y2=\"{2}\" stroke=\"#888\"/>\n", left, top, H - bottom, W - right);
  svg += fmt::format("<text class=\"ylabel\" x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"end\">{}</text>"
                     "<text class=\"ylabel\" x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"end\">0</text>\n",
                     left - 4, top + 4, font, ytop, left - 4, H - bottom, font);
  std::string line;
  const BenchCase* previous = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const BenchCase* c = history[i].find(name);
    if (!c || c->samples_ms.empty()) continue;
    const double med = median(c->samples_ms);
    const auto [lo, hi] = std::minmax_element(c->samples_ms.begin(), c->samples_ms.end());
    bool regressed = false;
    if (previous) {
      RankTest t = mann_whitney_u(c->samples_ms, previous->samples_ms);
      regressed = t.p_value < alpha && med > median(previous->samples_ms) * (1 + tolerance);
    }
    const bool reference_slower = regressed && !gated;  // shown, not counted: a reference, not the compiler
    regressed = regressed && gated;
    regressions += regressed;
    line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", X(i), Y(med));
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#9ab\"/>\n", X(i),
                       Y(*lo), Y(*hi));
    svg += fmt::format("<circle class=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{} {}: median "
                       "{:.4g} ms{}</title></circle>\n", regressed ? "regression" : reference_slower ? "reference-slower" : "run",
                       X(i), Y(med), regressed ? 6 : 3.5, regressed ? "#d22" : reference_slower ? "#999" : "#246",
                       html_escape(history[i].git_hash), html_escape(history[i].date), med,
                       regressed ? " (regression)" : reference_slower ? " (slower; a reference, not gated)" : "");
    svg += fmt::format("<text class=\"xlabel\" x=\"{:.1f}\" y=\"{}\" font-size=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       X(i), H - bottom + 14, tick_font, html_escape(labels[i]));
    previous = c;
  }
  svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#246\"/>\n</svg>\n", line);
  return svg;
}

}  // namespace

std::vector<Machine> machines_of(const std::vector<BenchRun>& history) {
  std::vector<Machine> out;
  for (const BenchRun& r : history)
    if (std::find(out.begin(), out.end(), r.machine) == out.end()) out.push_back(r.machine);
  return out;
}

std::string history_html(const std::vector<BenchRun>& all_runs, double tolerance, double alpha) {
  const std::vector<Machine> machines = machines_of(all_runs);
  std::string body;
  int total_regressions = 0;
  std::set<std::string> all_names;
  for (const Machine& machine : machines) {
    std::vector<BenchRun> history;
    for (const BenchRun& r : all_runs)
      if (r.machine == machine) history.push_back(r);
    std::vector<std::string> names;
    for (const BenchRun& r : history)
      for (const BenchCase& c : r.cases)
        if (std::find(names.begin(), names.end(), c.name) == names.end()) names.push_back(c.name);
    all_names.insert(names.begin(), names.end());
    if (machines.size() > 1)
      body += fmt::format("<h2 class=\"machine\">{}: {} runs</h2>\n", html_escape(machine.str()), history.size());
    for (const std::string& name : names) {
      int regressions = 0;
      std::string svg = case_svg(name, history, tolerance, alpha, regressions);
      total_regressions += regressions;
      body += fmt::format("<section><h3>{}{}</h3>\n{}</section>\n", html_escape(name),
                          regressions ? fmt::format(" <span class=\"bad\">{} regression{}</span>", regressions,
                                                    regressions > 1 ? "s" : "") : "", svg);
    }
  }
  const std::string first = all_runs.empty() ? "" : all_runs.front().date, last = all_runs.empty() ? "" : all_runs.back().date;
  return fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kiln bench history</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em}} section{{display:inline-block;margin:0 1em 1em 0}}"
      " h3{{font-size:14px;margin:0}} .bad{{color:#d22}}</style></head>\n<body>\n"
      "<h1>kiln bench: {} runs, {} cases, {} regressions</h1>\n"
      "<p>{} to {}{}. Each plot: the median ms per call of one case per run (by commit), the bar from its fastest to "
      "its slowest sample; red: a compiled case slower than the run before on the same machine by more than {:.0f}% "
      "with the rank test's p &lt; {} (grey: the same for an eager or copy case, a reference that is shown, not "
      "counted). Runs of different machines are drawn apart and never compared.</p>\n"
      "{}</body></html>\n",
      all_runs.size(), all_names.size(), total_regressions, html_escape(first), html_escape(last),
      machines.size() > 1 ? fmt::format(", {} machines", machines.size()) : "", 100 * tolerance, alpha, body);
}

}  // namespace kiln::gate
