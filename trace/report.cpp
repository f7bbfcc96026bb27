// The trace report (report.h): reading trace files, the model of each process's compiles, the HTML page and the
// Chrome trace.
#include "trace/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/escape.h"
#include "core/files.h"
#include "trace/schema.h"

namespace kiln::trace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// ---------------------------------------------------------------- reading

ProcessTrace read_trace_file(const std::string& path) {
  ProcessTrace t;
  t.file = path;
  // A long-running process's trace (runtime events on) outgrows the 256 MiB of other text inputs.
  const std::string text = read_input_file(path, "trace file", int64_t(1) << 30);
  size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    ++line_no;
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      t.problems.push_back(complete ? fmt::format("{}:{}: not JSON", path, line_no)
                                    : fmt::format("{}:{}: the last line is incomplete (the process was killed while "
                                                  "writing it, or is still running); the events before it are shown",
                                                  path, line_no));
      continue;
    }
    if (std::string p = schema_problem(j); !p.empty()) {
      t.problems.push_back(fmt::format("{}:{}: {}", path, line_no, p));
      continue;
    }
    if (j["event"] == "process") {
      if (t.header.is_null()) t.header = std::move(j);
      else t.problems.push_back(fmt::format("{}:{}: a second process line", path, line_no));
      continue;
    }
    t.events.push_back(std::move(j));
  }
  if (t.header.is_null()) t.problems.push_back(fmt::format("{}: no process line (not a kiln trace?)", path));
  return t;
}

std::vector<ProcessTrace> read_trace_dir(const std::string& dir) {
  std::error_code ec;
  KILN_CHECK(fs::is_directory(dir, ec), "kiln trace report: {} is not a directory (give the KILN_TRACE directory)", dir);
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("kiln-", 0) == 0 && name.size() > 6 && name.substr(name.size() - 6) == ".jsonl" &&
        e.is_regular_file(ec))
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  KILN_CHECK(!files.empty(), "kiln trace report: {} holds no trace file (kiln-<pid>-<n>.jsonl); run kiln with "
             "KILN_TRACE={} first", dir, dir);
  std::vector<ProcessTrace> out;
  for (const std::string& f : files) out.push_back(read_trace_file(f));
  return out;
}

// ---------------------------------------------------------------- the model

namespace {

std::string str(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}
double num(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}
int64_t integer(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}
std::vector<std::string> texts(const Json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it != j.end() && it->is_array())
    for (const Json& x : *it)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

struct Compile {
  std::string id;  // "frame/recompile"
  std::string what, name, site;
  double wall_ms = 0;
  bool error = false;
  std::vector<const Json*> events;  // every event of this compile id, in order
  int breaks = 0, recompiles = 0, cache_hits = 0, cache_lookups = 0, kernels = 0, nodes = 0;
  std::string outcome() const {
    if (error) return "error";
    if (breaks) return "graph break";
    if (recompiles || id.substr(id.find('/') + 1) != "0") return "recompile";
    return "ok";
  }
};

struct Process {
  const ProcessTrace* trace = nullptr;
  std::vector<Compile> compiles;  // in order of first event
  std::vector<const Json*> unattributed;  // events outside any compile (breaks, recompiles, runtime calls)
};

Process model_of(const ProcessTrace& t) {
  Process p;
  p.trace = &t;
  std::map<std::string, size_t> at;
  auto compile = [&](const std::string& id) -> Compile& {
    auto it = at.find(id);
    if (it == at.end()) {
      it = at.emplace(id, p.compiles.size()).first;
      p.compiles.push_back(Compile{id});
    }
    return p.compiles[it->second];
  };
  for (const Json& e : t.events) {
    const std::string id = str(e, "compile_id");
    const std::string ev = str(e, "event");
    if (id.empty()) {
      p.unattributed.push_back(&e);
      continue;
    }
    Compile& c = compile(id);
    c.events.push_back(&e);
    if (ev == "compile_start" && c.what.empty()) {
      c.what = str(e, "what");
      c.name = str(e, "name");
      c.site = str(e, "site");
    } else if (ev == "compile_end") {
      c.wall_ms += num(e, "wall_ms");
      c.error |= str(e, "outcome") == "error";
    } else if (ev == "compile_error") {
      c.error = true;
    } else if (ev == "graph_break") {
      ++c.breaks;
    } else if (ev == "recompile") {
      ++c.recompiles;
    } else if (ev == "cache") {
      ++c.cache_lookups;
      c.cache_hits += str(e, "result") == "hit";
    } else if (ev == "kernel") {
      ++c.kernels;
    } else if (ev == "backend" || ev == "graph_compiled") {
      c.nodes = std::max<int>(c.nodes, int(integer(e, "nodes")));
    }
  }
  return p;
}

// ---------------------------------------------------------------- the page

std::string h(std::string_view s) { return html_escape(s); }

const char* kStyle = R"(
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left;vertical-align:top}
pre{background:#f6f6f6;padding:.5em;overflow:auto;max-height:30em}
.ok{background:#d9f2d9}.error{background:#f8d0d0}.graph-break{background:#fde9c0}.recompile{background:#dde6fb}
.problems{background:#fff3cd;padding:.5em}.differs{background:#fde9c0;font-weight:bold}
.bar{background:#6b8fd6;height:.8em;display:inline-block}
.lit{outline:3px solid #e07b00}
ul.trie{list-style:none;padding-left:1.2em}
)";

const char* kScript = R"(
document.addEventListener('click', function (e) {
  var a = e.target.closest('[data-nodes]');
  if (!a) return;
  document.querySelectorAll('.lit').forEach(function (x) { x.classList.remove('lit'); });
  a.getAttribute('data-nodes').split(' ').forEach(function (id) {
    var n = document.getElementById(id);
    if (n) n.classList.add('lit');
  });
});
document.body.setAttribute('data-ready', 'yes');
)";

std::string css_class(const std::string& outcome) { return outcome == "graph break" ? "graph-break" : outcome; }

class Page {
 public:
  Page(const std::vector<ProcessTrace>& traces, std::string source) : source_(std::move(source)) {
    for (const ProcessTrace& t : traces) processes_.push_back(model_of(t));
  }

  std::string render(ReportSummary* summary) {
    header();
    problems();
    process_index();
    for (size_t p = 0; p < processes_.size(); ++p) process(p);
    out_ += "<script>" + std::string(kScript) + "</script>\n</body></html>\n";
    if (summary) *summary = summary_;
    return out_;
  }

 private:
  void header() {
    out_ += "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>kiln trace report</title><style>";
    out_ += kStyle;
    out_ += "</style></head><body>\n";
    out_ += fmt::format("<h1>kiln trace report</h1><p>From <code>{}</code>: {} process{}.</p>\n", h(source_),
                        processes_.size(), processes_.size() == 1 ? "" : "es");
    summary_.processes = int(processes_.size());
  }

  void problems() {
    std::vector<std::string> all;
    for (const Process& p : processes_)
      for (const std::string& s : p.trace->problems) all.push_back(s);
    summary_.problems = int(all.size());
    if (all.empty()) return;
    out_ += "<div class=\"problems\" id=\"problems\"><b>Lines skipped</b><ul>";
    for (const std::string& s : all) out_ += "<li>" + h(s) + "</li>";
    out_ += "</ul></div>\n";
  }

  // The processes, their commands and versions; a configuration key whose value is not the same in every process
  // is marked.
  void process_index() {
    std::map<std::string, std::set<std::string>> values;
    std::set<std::string> keys;
    for (const Process& p : processes_)
      if (p.trace->header.contains("config"))
        for (auto& [k, v] : p.trace->header["config"].items()) keys.insert(k);
    for (const Process& p : processes_)
      for (const std::string& k : keys) {
        const Json& config = p.trace->header.contains("config") ? p.trace->header["config"] : Json::object();
        values[k].insert(config.contains(k) && config[k].is_string() ? config[k].get<std::string>() : "(unset)");
      }
    out_ += "<h2 id=\"processes\">Processes</h2><table><tr><th>#</th><th>file</th><th>pid</th><th>command</th>"
            "<th>kiln</th><th>build</th><th>configuration</th><th>compiles</th></tr>\n";
    for (size_t i = 0; i < processes_.size(); ++i) {
      const Process& p = processes_[i];
      const Json& hd = p.trace->header;
      std::string argv;
      for (const std::string& w : texts(hd, "argv")) argv += (argv.empty() ? "" : " ") + shell_quote(w);
      std::string config;
      if (hd.contains("config"))
        for (auto& [k, v] : hd["config"].items()) {
          const bool differs = values[k].size() > 1;
          config += fmt::format("<div{}>{}={}</div>", differs ? " class=\"differs\"" : "", h(k),
                                h(v.is_string() ? v.get<std::string>() : v.dump()));
        }
      for (const std::string& k : keys)
        if (values[k].size() > 1 && !(hd.contains("config") && hd["config"].contains(k)))
          config += fmt::format("<div class=\"differs\">{} unset</div>", h(k));
      out_ += fmt::format("<tr><td><a href=\"#p{}\">{}</a></td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{} ({})</td>"
                          "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
                          i, i, h(fs::path(p.trace->file).filename().string()), integer(hd, "pid"), h(argv),
                          h(str(hd, "version")), h(str(hd, "git")), h(str(hd, "build")), config, p.compiles.size());
    }
    out_ += "</table>\n";
  }

  std::string compile_anchor(size_t p, size_t c) const { return fmt::format("c{}-{}", p, c); }

  void process(size_t pi) {
    const Process& p = processes_[pi];
    out_ += fmt::format("<h2 id=\"p{}\">Process {} (pid {})</h2>\n", pi, pi, integer(p.trace->header, "pid"));
    trie(pi);
    compile_table(pi);
    time_breakdown(pi);
    recompiles(pi);
    for (size_t c = 0; c < p.compiles.size(); ++c) compile_section(pi, c);
    runtime(pi);
  }

  // The compile sites: the user's line (or "graphs compiled directly"), then the function or graph, then each
  // compile id, coloured by outcome.
  void trie(size_t pi) {
    const Process& p = processes_[pi];
    std::map<std::string, std::map<std::string, std::vector<size_t>>> sites;
    std::vector<std::string> order;
    for (size_t c = 0; c < p.compiles.size(); ++c) {
      const Compile& k = p.compiles[c];
      const std::string site = k.site.empty() ? "graphs compiled directly (kiln::compile of a graph, the tools)" : k.site;
      if (!sites.count(site)) order.push_back(site);
      sites[site][k.name].push_back(c);
    }
    out_ += "<h3>Compile sites</h3><ul class=\"trie\" id=\"trie\">\n";
    for (const std::string& site : order) {
      out_ += "<li>" + h(site) + "<ul class=\"trie\">";
      for (const auto& [name, ids] : sites[site]) {
        out_ += "<li>" + h(name) + ": ";
        for (size_t c : ids) {
          const Compile& k = p.compiles[c];
          out_ += fmt::format("<a class=\"cid {}\" href=\"#{}\">[{}] {}</a> ", css_class(k.outcome()),
                              compile_anchor(pi, c), h(k.id), h(k.outcome()));
        }
        out_ += "</li>";
      }
      out_ += "</ul></li>\n";
    }
    out_ += "</ul>\n";
  }

  void compile_table(size_t pi) {
    const Process& p = processes_[pi];
    out_ += "<h3>Compile ids</h3><table id=\"compiles\"><tr><th>compile id</th><th>what</th><th>name</th><th>outcome</th>"
            "<th>wall ms</th><th>ops</th><th>cache hits</th><th>kernels</th><th>graph breaks</th></tr>\n";
    for (size_t c = 0; c < p.compiles.size(); ++c) {
      const Compile& k = p.compiles[c];
      ++summary_.compiles;
      summary_.errors += k.error;
      summary_.graph_breaks += k.breaks;
      summary_.recompiles += k.recompiles;
      summary_.kernels += k.kernels;
      out_ += fmt::format("<tr class=\"{}\"><td><a href=\"#{}\">[{}]</a></td><td>{}</td><td>{}</td><td>{}</td>"
                          "<td>{:.2f}</td><td>{}</td><td>{} / {}</td><td>{}</td><td>{}</td></tr>\n",
                          css_class(k.outcome()), compile_anchor(pi, c), h(k.id), h(k.what), h(k.name),
                          h(k.outcome()), k.wall_ms, k.nodes, k.cache_hits, k.cache_lookups, k.kernels, k.breaks);
    }
    out_ += "</table>\n";
  }

  // Per (category, name): wall time over every compile of the process, as bars.
  void bars(const std::vector<const Json*>& spans, const std::string& id) {
    std::vector<std::pair<std::string, double>> rows;
    std::map<std::string, size_t> at;
    double max = 0;
    for (const Json* s : spans) {
      const std::string key = str(*s, "category") + " / " + str(*s, "name");
      auto it = at.find(key);
      if (it == at.end()) it = at.emplace(key, rows.size()).first, rows.emplace_back(key, 0.0);
      rows[it->second].second += num(*s, "wall_ms");
      max = std::max(max, rows[it->second].second);
    }
    if (rows.empty()) return;
    std::stable_sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second > b.second; });
    out_ += fmt::format("<table class=\"times\" id=\"{}\"><tr><th>stage / pass</th><th>wall ms</th><th></th></tr>\n", id);
    for (const auto& [key, ms] : rows)
      out_ += fmt::format("<tr><td>{}</td><td>{:.3f}</td><td><span class=\"bar\" style=\"width:{}px\"></span></td></tr>\n",
                          h(key), ms, max > 0 ? int(std::lround(400 * ms / max)) : 0);
    out_ += "</table>\n";
  }

  void time_breakdown(size_t pi) {
    std::vector<const Json*> spans;
    for (const Compile& k : processes_[pi].compiles)
      for (const Json* e : k.events)
        if (str(*e, "event") == "span") spans.push_back(e);
    out_ += "<h3>Compile time</h3>\n";
    bars(spans, fmt::format("times{}", pi));
  }

  void recompiles(size_t pi) {
    const Process& p = processes_[pi];
    std::vector<const Json*> events;
    auto keep = [&](const Json* e) {
      const std::string ev = str(*e, "event");
      if (ev == "recompile" || ev == "recompile_limit" || ev == "guard_failure") events.push_back(e);
    };
    for (const Json* e : p.unattributed) keep(e);
    for (const Compile& k : p.compiles)
      for (const Json* e : k.events) keep(e);
    if (events.empty()) return;
    out_ += "<h3>Recompiles</h3><table id=\"recompiles\"><tr><th>function</th><th>event</th><th>called at</th><th>reason</th>"
            "<th>count / limit</th></tr>\n";
    for (const Json* e : events) {
      const std::string ev = str(*e, "event");
      std::string reason = ev == "guard_failure" ? "" : str(*e, "reason");
      for (const std::string& f : texts(*e, "failures")) reason += (reason.empty() ? "" : "; ") + f;
      out_ += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", h(str(*e, "function")),
                          h(ev), h(str(*e, "site")), h(reason),
                          ev == "recompile" ? fmt::format("{} / {}", integer(*e, "recompiles"), integer(*e, "limit"))
                          : ev == "recompile_limit" ? fmt::format("limit {} hit", integer(*e, "limit")) : "");
    }
    out_ += "</table>\n";
  }

  // One compile id: what it compiled, its guards, breaks and errors, its stage times, its artifacts, and its
  // kernels with the graph nodes they came from (links both ways).
  void compile_section(size_t pi, size_t ci) {
    const Compile& k = processes_[pi].compiles[ci];
    const std::string anchor = compile_anchor(pi, ci);
    out_ += fmt::format("<h3 id=\"{}\" class=\"{}\">[{}] {} {} — {}</h3>\n", anchor, css_class(k.outcome()), h(k.id),
                        h(k.what), h(k.name), h(k.outcome()));
    if (!k.site.empty()) out_ += "<p>called at <code>" + h(k.site) + "</code></p>\n";
    std::vector<const Json*> spans, artifacts, logs, kernels, externs;
    for (const Json* e : k.events) {
      const std::string ev = str(*e, "event");
      if (ev == "compile_error")
        out_ += fmt::format("<p class=\"error\">error ({}): <code>{}</code></p>\n", h(str(*e, "kind")), h(str(*e, "message")));
      else if (ev == "graph_break")
        out_ += fmt::format("<p class=\"graph-break\">graph break at <code>{}</code>: {}</p>\n", h(str(*e, "site")),
                            h(str(*e, "reason")));
      else if (ev == "recompile")
        out_ += fmt::format("<p class=\"recompile\">recompile {} of limit {}, called at <code>{}</code>: {}</p>\n",
                            integer(*e, "recompiles"), integer(*e, "limit"), h(str(*e, "site")), h(str(*e, "reason")));
      else if (ev == "guard_failure") {
        out_ += "<details><summary>failed guards</summary><pre>";
        for (const std::string& g : texts(*e, "failures")) out_ += h(g) + "\n";
        out_ += "</pre></details>\n";
      } else if (ev == "guards") {
        out_ += "<details><summary>guards</summary><pre>";
        for (const std::string& g : texts(*e, "guards")) out_ += h(g) + "\n";
        out_ += "</pre></details>\n";
      } else if (ev == "backend")
        out_ += fmt::format("<p>graph <code>{}</code> ({} ops) to backend <code>{}</code></p>\n", h(str(*e, "graph")),
                            integer(*e, "nodes"), h(str(*e, "backend")));
      else if (ev == "cache")
        out_ += fmt::format("<div>cache {}: {}</div>\n", h(str(*e, "cache")), h(str(*e, "result")));
      else if (ev == "span") spans.push_back(e);
      else if (ev == "artifact") artifacts.push_back(e);
      else if (ev == "log") logs.push_back(e);
      else if (ev == "kernel") kernels.push_back(e);
      else if (ev == "extern") externs.push_back(e);
    }
    bars(spans, anchor + "-times");
    // Each artifact; a graph or schedule beside the one before it of the same kind (before and after a pass).
    const Json* previous_of_kind[2] = {nullptr, nullptr};  // kir, txt
    for (const Json* a : artifacts) {
      const std::string kind = str(*a, "kind"), text = str(*a, "text");
      out_ += fmt::format("<details class=\"artifact\"><summary>{} <small>({} bytes)</small></summary><pre>{}</pre></details>\n",
                          h(str(*a, "name")), text.size(), h(text));
      // The key material (context.txt) is no stage's output: nothing is shown beside it.
      const int slot = str(*a, "name") == "context.txt" ? -1 : kind == "kir" ? 0 : kind == "txt" ? 1 : -1;
      if (slot < 0) continue;
      const Json* before = previous_of_kind[slot];
      previous_of_kind[slot] = a;
      if (!before || text.size() + str(*before, "text").size() > (128 << 10)) continue;
      out_ += fmt::format("<details class=\"side-by-side\"><summary>{} beside {}</summary><table><tr><th>{}</th><th>{}</th></tr>"
                          "<tr><td><pre>{}</pre></td><td><pre>{}</pre></td></tr></table></details>\n",
                          h(str(*before, "name")), h(str(*a, "name")), h(str(*before, "name")), h(str(*a, "name")),
                          h(str(*before, "text")), h(text));
    }
    if (!logs.empty()) {
      out_ += fmt::format("<details><summary>decisions and log lines ({})</summary><pre>", logs.size());
      for (const Json* l : logs) out_ += "[" + h(str(*l, "channel")) + "] " + h(str(*l, "message")) + "\n";
      out_ += "</pre></details>\n";
    }
    provenance(anchor, kernels, externs);
  }

  // Kernels and extern calls, each linking to the nodes it computes; each node linking back to its kernels.
  void provenance(const std::string& anchor, const std::vector<const Json*>& kernels, const std::vector<const Json*>& externs) {
    if (kernels.empty() && externs.empty()) return;
    struct Node {
      std::string graph, name, op, line, stands_for;
      std::vector<std::pair<std::string, std::string>> computed_by;  // (anchor, label)
    };
    std::vector<Node> nodes;
    std::map<std::pair<std::string, std::string>, size_t> node_at;
    struct Row {
      std::string anchor, label, reason;
      std::vector<size_t> nodes;
      std::vector<std::string> stores;
    };
    std::vector<Row> rows;
    auto add = [&](const Json& e, const std::string& label, const std::string& reason) {
      Row r{fmt::format("{}-k{}", anchor, rows.size()), label, reason, {}, texts(e, "stores")};
      const auto names = texts(e, "nodes"), ops = texts(e, "ops"), lines = texts(e, "lines"), stands = texts(e, "stands_for");
      for (size_t i = 0; i < names.size(); ++i) {
        auto key = std::make_pair(str(e, "graph"), names[i]);
        auto it = node_at.find(key);
        if (it == node_at.end()) {
          it = node_at.emplace(key, nodes.size()).first;
          nodes.push_back(Node{key.first, names[i], i < ops.size() ? ops[i] : "", i < lines.size() ? lines[i] : "",
                               i < stands.size() ? stands[i] : ""});
        }
        nodes[it->second].computed_by.emplace_back(r.anchor, label);
        r.nodes.push_back(it->second);
      }
      rows.push_back(std::move(r));
    };
    for (const Json* e : kernels) add(*e, "kernel " + str(*e, "kernel") + " of " + str(*e, "graph"), "");
    for (const Json* e : externs) add(*e, "extern call in " + str(*e, "graph"), str(*e, "reason"));
    auto node_anchor = [&](size_t n) { return fmt::format("{}-n{}", anchor, n); };
    out_ += "<h4>Kernels and the nodes they came from</h4><table class=\"kernels\"><tr><th>kernel</th><th>nodes</th><th>why extern</th></tr>\n";
    for (const Row& r : rows) {
      std::string ids, links;
      for (size_t n : r.nodes) {
        ids += (ids.empty() ? "" : " ") + node_anchor(n);
        links += fmt::format("<a href=\"#{}\">%{}</a> ", node_anchor(n), h(nodes[n].name));
      }
      out_ += fmt::format("<tr id=\"{}\" class=\"kernel\"><td><a href=\"#{}\" data-nodes=\"{}\">{}</a></td><td>{}</td><td>{}</td></tr>\n",
                          r.anchor, r.anchor, ids, h(r.label), links, h(r.reason));
    }
    out_ += "</table>\n<h4>Nodes</h4><table class=\"nodes\"><tr><th>node</th><th>op</th><th>source</th><th>stands for</th><th>computed by</th></tr>\n";
    for (size_t n = 0; n < nodes.size(); ++n) {
      std::string by;
      for (const auto& [a, label] : nodes[n].computed_by) by += fmt::format("<a href=\"#{}\">{}</a> ", a, h(label));
      out_ += fmt::format("<tr id=\"{}\" class=\"node\"><td>%{} <small>({})</small></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                          node_anchor(n), h(nodes[n].name), h(nodes[n].graph), h(nodes[n].op), h(nodes[n].line),
                          h(nodes[n].stands_for), by);
    }
    out_ += "</table>\n";
  }

  void runtime(size_t pi) {
    const Process& p = processes_[pi];
    std::map<std::string, std::pair<int, double>> calls, launches;
    auto count = [&](const Json* e) {
      const std::string ev = str(*e, "event");
      if (ev == "call") {
        auto& c = calls[str(*e, "graph")];
        ++c.first;
        c.second += num(*e, "wall_ms");
      } else if (ev == "launch") {
        auto& c = launches[str(*e, "graph") + " / " + str(*e, "name")];
        ++c.first;
        c.second += num(*e, "wall_us") / 1000.0;
      }
    };
    for (const Json* e : p.unattributed) count(e);
    for (const Compile& k : p.compiles)
      for (const Json* e : k.events) count(e);
    if (calls.empty() && launches.empty()) return;
    out_ += "<h3>Runtime (KILN_TRACE_RUNTIME)</h3><table id=\"runtime\"><tr><th>graph / step</th><th>calls</th><th>total ms</th></tr>\n";
    for (const auto& [name, c] : calls) out_ += fmt::format("<tr><td>{}</td><td>{}</td><td>{:.3f}</td></tr>\n", h(name), c.first, c.second);
    for (const auto& [name, c] : launches) out_ += fmt::format("<tr><td>{}</td><td>{}</td><td>{:.3f}</td></tr>\n", h(name), c.first, c.second);
    out_ += "</table>\n";
  }

  std::string source_;
  std::vector<Process> processes_;
  std::string out_;
  ReportSummary summary_;
};

}  // namespace

std::string trace_report_html(const std::vector<ProcessTrace>& traces, const std::string& source, ReportSummary* summary) {
  return Page(traces, source).render(summary);
}

// ---------------------------------------------------------------- the Chrome trace

Json chrome_trace(const std::vector<ProcessTrace>& traces) {
  Json events = Json::array();
  for (size_t pi = 0; pi < traces.size(); ++pi) {
    const ProcessTrace& t = traces[pi];
    const int64_t pid = t.header.is_null() ? int64_t(pi) : integer(t.header, "pid");
    std::string argv;
    for (const std::string& w : texts(t.header, "argv")) argv += (argv.empty() ? "" : " ") + w;
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"name", utf8_lossless(argv.empty() ? t.file : argv)}}}});
    std::map<std::pair<std::string, int64_t>, int64_t> open;  // (compile id, tid) -> start of the outermost compile
    for (const Json& e : t.events) {
      const std::string ev = str(e, "event"), id = str(e, "compile_id");
      const int64_t tid = integer(e, "tid");
      auto complete = [&](const std::string& name, const std::string& cat, int64_t ts, int64_t dur) {
        events.push_back({{"name", utf8_lossless(name)}, {"cat", cat}, {"ph", "X"}, {"ts", ts}, {"dur", std::max<int64_t>(dur, 0)},
                          {"pid", pid}, {"tid", tid}, {"args", {{"compile_id", id}}}});
      };
      if (ev == "compile_start") open[{id, tid}] = integer(e, "ts_us");
      else if (ev == "compile_end") {
        auto it = open.find({id, tid});
        if (it == open.end()) continue;
        complete(fmt::format("[{}] {}", id, str(e, "name")), "compile", it->second, integer(e, "ts_us") - it->second);
        open.erase(it);
      } else if (ev == "span") {
        complete(str(e, "category") + " " + str(e, "name"), str(e, "category"), integer(e, "start_us"),
                 std::llround(num(e, "wall_ms") * 1000));
      } else if (ev == "call") {
        complete("call " + str(e, "graph"), "runtime", integer(e, "start_us"), std::llround(num(e, "wall_ms") * 1000));
      } else if (ev == "launch") {
        complete(str(e, "kind") + " " + str(e, "name"), "runtime", integer(e, "start_us"), integer(e, "wall_us"));
      } else if (ev == "graph_break" || ev == "recompile" || ev == "compile_error" || ev == "recompile_limit") {
        events.push_back({{"name", ev}, {"cat", "capture"}, {"ph", "i"}, {"s", "t"}, {"ts", integer(e, "ts_us")},
                          {"pid", pid}, {"tid", tid}, {"args", {{"compile_id", id}, {"reason", utf8_lossless(str(e, "reason") + str(e, "message"))}}}});
      }
    }
  }
  return Json{{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace kiln::trace
