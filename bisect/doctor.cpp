// kiln doctor (doctor.h): ablation, minification, bisection of the minified repro, and the Markdown and HTML
// report.
#include "bisect/doctor.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/escape.h"
#include "core/files.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "kiln_version.h"
#include "minifier/minifier.h"
#include "repro/oracle.h"
#include "repro/training.h"

namespace kiln::bisect {
namespace {

namespace fs = std::filesystem;

// Multi-line text (a graph, the bisection's report) for an HTML <pre>: each line html_escape'd, which would
// write the newlines themselves as \x0a.
std::string html_lines(std::string_view text) {
  std::string out;
  for (size_t start = 0; start < text.size();) {
    size_t end = std::min(text.find('\n', start), text.size());
    out += html_escape(text.substr(start, end - start));
    if (end < text.size()) out += '\n';
    start = end + 1;
  }
  return out;
}

// A Markdown code block of `text`: terminal_safe lines between fences longer than any backtick run inside, so
// a value name holding ``` cannot end the block.
std::string markdown_block(std::string_view text) {
  size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  std::string body = terminal_safe_lines(text);
  if (!body.empty() && body.back() != '\n') body += '\n';
  return fence + "\n" + body + fence + "\n";
}

std::string html_code(std::string_view s) { return "<code>" + html_escape(s) + "</code>"; }

// A rung's result as the ablation saw it; a failure of a kind --accuracy / --error does not ask about says so.
std::string rung_result(const LadderRung& r, Want want) {
  if (!r.failure.failed()) return "passes";
  if (counts_as_failure(want, r.failure)) return fmt::format("FAILS: {}", r.failure.kind);
  return fmt::format("FAILS: {} (not {}: {} does not count it)", r.failure.kind, want_text(want), want_flag(want));
}

// The closing section both reports share: the repro file and the exact bad pass, as plain lines. `code`
// writes a name, path, command or message as a code span of the report's format (markdown_code, or html_code):
// everything a user's graph names goes through it, so none of it reads as markup or a terminal escape; the rest
// is kiln's own words.
std::vector<std::string> conclusion(const DoctorResult& d, std::string (*code)(std::string_view)) {
  std::vector<std::string> lines;
  if (!d.failed) return {"Every backend of the ladder passes: nothing to repair."};
  if (d.failing_backend.empty()) {  // the ladder failed, only not in the way asked about: not a pass either
    const LadderRung& r = d.other_failure;
    return {fmt::format("{} FAILS with {}, not {} ({}): not minified or bisected; run `kiln doctor` without {} to "
                        "troubleshoot this failure.", code(r.backend), r.failure.kind, want_text(d.want),
                        want_flag(d.want), want_flag(d.want)),
            fmt::format("Reproduce: {}", code(d.other_command))};
  }
  lines.push_back(fmt::format("Repro file: {} (check it with {}; {})", code(d.repro_path),
                              code(reproduce_command(RunLine{.file = d.repro_path, .repro_run = true})),
                              d.reverified ? "re-verified: it reproduces" : "NOT re-verified: " + code(d.reverify_message)));
  const BisectReport& b = d.bisect;
  lines.push_back(fmt::format("First failing stage: {} ({}).", code(b.stage.empty() ? d.failing_backend : b.stage),
                              outcome_name(b.outcome)));
  if (b.culprit && !b.culprit->is_flip)
    lines.push_back(fmt::format("The bad pass: {} application #{} ({}{}): {} fails, {} passes.", code(b.culprit->site),
                                b.culprit->application, code(b.culprit->site_info),
                                b.culprit->location.empty() ? "" : ", at " + code(b.culprit->location),
                                code(b.repro_command), code(b.good_command)));
  else if (b.culprit)
    lines.push_back(fmt::format("No compiler pass explains it; the configuration flip {} does: {} passes.",
                                code(b.culprit->site), code(b.good_command)));
  else
    lines.push_back(fmt::format("No compiler pass or configuration flip explains it ({}).", outcome_name(b.outcome)));
  if (!b.repro_command.empty() && !(b.culprit && !b.culprit->is_flip))
    lines.push_back(fmt::format("Reproduce: {}", code(b.repro_command)));
  if (b.divergence) lines.push_back(fmt::format("First diverging node: {}.", code(b.divergence->node)));
  return lines;
}

std::string markdown(const DoctorResult& d, const DoctorOptions& o, const graph::Graph& minified) {
  std::string md = fmt::format("# kiln doctor\n\n{} — kiln {} (git {}), ladder up to {}.\n\n## 1. Ablation\n\n"
                               "| backend | result |\n|---|---|\n", markdown_code(o.source), KILN_VERSION, KILN_GIT_HASH,
                               markdown_code(o.bisect.backend));
  for (const LadderRung& r : d.ablation)
    md += fmt::format("| {} | {} |\n", markdown_code(r.backend), terminal_safe(rung_result(r, d.want)));
  if (!d.failing_backend.empty()) {
    md += fmt::format("\n## 2. Minified repro\n\n{} -> {} op nodes on {}.\n\n{}", d.original_ops, d.minified_ops,
                      markdown_code(d.failing_backend), markdown_block(graph::print_graph(minified)));
    md += fmt::format("\n## 3. Bisection of the minified repro\n\n{}", markdown_block(d.bisect.text()));
  }
  md += "\n## Conclusion\n\n";
  for (const std::string& l : conclusion(d, markdown_code)) md += "- " + l + "\n";
  return md;
}

std::string values_table(const Divergence& v) {
  std::string t = "<table><tr><th>element</th><th>expected (fp64)</th><th>actual</th><th>|difference|</th></tr>\n";
  for (size_t i = 0; i < v.expected.size() && i < v.actual.size(); ++i)
    t += fmt::format("<tr><td>{}</td><td>{:.9g}</td><td>{:.9g}</td><td>{:.3g}</td></tr>\n", v.worst_index + int64_t(i),
                     v.expected[i], v.actual[i], std::abs(v.expected[i] - v.actual[i]));
  return t + "</table>\n";
}

std::string html(const DoctorResult& d, const DoctorOptions& o, const graph::Graph& original, const graph::Graph& minified) {
  std::string h = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kiln doctor</title><style>"
                  "body{font-family:sans-serif;margin:2em} pre{background:#f4f4f4;padding:.5em;overflow:auto} "
                  "td,th{border:1px solid #ccc;padding:.2em .6em;vertical-align:top} table{border-collapse:collapse}"
                  "</style></head><body>\n";
  h += fmt::format("<h1>kiln doctor</h1>\n<p>{} — kiln {} (git {}), ladder up to <code>{}</code>.</p>\n",
                   html_escape(o.source), KILN_VERSION, KILN_GIT_HASH, html_escape(o.bisect.backend));
  h += "<h2>1. Ablation</h2>\n<table><tr><th>backend</th><th>result</th></tr>\n";
  for (const LadderRung& r : d.ablation)
    h += fmt::format("<tr><td><code>{}</code></td><td>{}</td></tr>\n", html_escape(r.backend),
                     html_escape(rung_result(r, d.want)));
  h += "</table>\n";
  if (!d.failing_backend.empty()) {
    h += fmt::format("<h2>2. The graphs</h2>\n<table><tr><th>original ({} op nodes)</th><th>minified ({} op nodes)</th></tr>"
                     "<tr><td><pre>{}</pre></td><td><pre>{}</pre></td></tr></table>\n", d.original_ops, d.minified_ops,
                     html_lines(graph::print_graph(original)),
                     html_lines(graph::print_graph(minified)));
    h += fmt::format("<h2>3. Bisection of the minified repro</h2>\n<pre>{}</pre>\n", html_lines(d.bisect.text()));
    if (d.bisect.divergence)
      h += fmt::format("<h3>First diverging node: <code>{}</code></h3>\n<p>{}</p>\n{}", html_escape(d.bisect.divergence->node),
                       html_escape(d.bisect.divergence->narrowed_by), values_table(*d.bisect.divergence));
  }
  h += "<h2>Conclusion</h2>\n<ul>\n";
  for (const std::string& l : conclusion(d, html_code)) h += "<li>" + l + "</li>\n";
  return h + "</ul>\n</body></html>\n";
}

std::vector<LadderRung> ablate(const graph::Graph& g, const std::vector<Tensor>& inputs, const BisectOptions& o) {
  std::vector<LadderRung> rungs;
  for (const std::string& b : ladder_to(o.backend)) {
    OracleOptions oo;
    oo.backend = b;
    oo.tolerance = o.tolerance;
    oo.timeout_s = o.timeout_s;
    oo.gradients = trains(g);  // a wrong VJP or partition shows only in the gradients
    FailureSignature f = FailureOracle(oo).classify(g, inputs);
    LadderRung rung{b, f};
    if (o.progress) fmt::print(stderr, "kiln doctor: ablation: {} {}\n", b, rung_result(rung, o.want));
    rungs.push_back(std::move(rung));
  }
  return rungs;
}

// Minifies on the first failing rung into DIR/repro.min.repro.
minify::MinifyResult minify_failure(const graph::Graph& g, const std::vector<Tensor>& inputs, const DoctorOptions& o,
                                    const LadderRung& failing, const std::string& repro_path) {
  minify::MinifyOptions mo;
  mo.backend = failing.backend;
  mo.accuracy = mo.strict_accuracy = failing.failure.kind == FailureKind::Accuracy;
  mo.jobs = o.jobs;
  mo.timeout_s = o.bisect.timeout_s;
  mo.tolerance = o.bisect.tolerance;
  mo.gradients = trains(g);
  mo.output = repro_path;
  mo.progress = o.bisect.progress;
  mo.config = minify::current_config();
  mo.source_hash = minify::source_hash(g, inputs);
  return minify::minify(g, inputs, mo);
}

}  // namespace

DoctorResult run_doctor(const graph::Graph& g, const std::vector<Tensor>& inputs, const DoctorOptions& o) {
  KILN_CHECK(!o.output_dir.empty(), "kiln doctor: name the output directory with -o DIR");
  create_output_directory(o.output_dir);
  const fs::path dir(o.output_dir);
  DoctorResult d;
  d.original_ops = g.num_op_nodes();
  d.want = o.bisect.want;
  d.ablation = ablate(g, inputs, o.bisect);
  graph::Graph minified;
  // The conclusion follows the ladder printed: a rung that failed in a way --accuracy / --error does not ask
  // about is a failure of the run (not minified or bisected), never "nothing to repair".
  for (const LadderRung& r : d.ablation) {
    if (!r.failure.failed() || counts_as_failure(d.want, r.failure) || d.failed) continue;
    d.failed = true;
    d.other_failure = r;
    RunLine line = o.rerun;
    line.backend = r.backend;
    line.tolerance = o.bisect.tolerance;
    line.gradients = trains(g);
    d.other_command = reproduce_command(line);
  }
  for (const LadderRung& r : d.ablation) {
    if (!counts_as_failure(d.want, r.failure)) continue;
    d.other_failure = {};
    d.other_command.clear();
    d.failed = true;
    d.failing_backend = r.backend;
    d.repro_path = (dir / "repro.min.repro").string();
    minify::MinifyResult m = minify_failure(g, inputs, o, r, d.repro_path);
    minified = m.graph;
    d.minified_ops = m.graph.num_op_nodes();
    d.reverified = m.reverified;
    d.reverify_message = m.reverify_message;
    const std::string kir = (dir / "minified.kir").string();
    const std::string kir_text = graph::print_graph(m.graph);
    write_file_atomic(kir, kir_text);
    // Read back, so the bisector's sites and nodes carry their line in minified.kir.
    m.graph = graph::parse_graph(kir_text, kir);
    BisectOptions bo = o.bisect;
    bo.backend = r.backend;
    RunLine rerun;  // the bisector's lines run the minified graph with the repro's inputs
    rerun.file = kir;
    if (m.graph.inputs().empty()) rerun.seed = 0;
    else rerun.inputs_dir = d.repro_path + ".inputs";
    if (o.bisect.progress) fmt::print(stderr, "kiln doctor: bisecting the minified repro ({} op nodes)\n", d.minified_ops);
    d.bisect = bisect_graph(m.graph, m.inputs, bo, rerun);
    write_file_atomic((dir / "bisect.json").string(), d.bisect.json().dump(2) + "\n");
    break;
  }
  d.markdown = markdown(d, o, minified);
  d.html = html(d, o, g, minified);
  write_file_atomic((dir / "report.md").string(), d.markdown);
  write_file_atomic((dir / "report.html").string(), d.html);
  return d;
}

}  // namespace kiln::bisect
