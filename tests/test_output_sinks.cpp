// Every sink an untrusted name reaches, end to end through the CLI: a value name holding a terminal escape
// (ESC ] 0 ; ... BEL retitles a terminal) reaches no terminal raw (`kiln run`'s output lines, error messages,
// `kiln doctor`'s output and its bisection's site: lines) and stays inside code spans in report.md; a file name
// that is not UTF-8 and holds a control byte leaves every JSON file parseable, the JUnit file well-formed XML 1.0
// and the HTML valid UTF-8 (`kiln gate --json/--junit/--markdown/--update-baseline`, `kiln bench --json`,
// `kiln bench report`), and the baseline written under such a name is found again by the next run.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "bisect/testing.h"
#include "cli_run.h"
#include "core/escape.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace kiln::cli_test {
namespace {

// A value name that would retitle the terminal and hold a backtick (to leave a Markdown code span), as the
// .kir text writes it (a quoted name with \xHH escapes).
const std::string kEvilKir = "%\"t3\\x1b]0;pwned\\x07`evil\"";
// What terminal_safe shows of it.
const std::string kEvilShown = "t3\\x1b]0;pwned\\x07`evil";

// Whether `text` holds a byte a terminal acts on (C0 controls but newline, DEL).
bool has_control_bytes(const std::string& text) {
  for (unsigned char c : text)
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
  return false;
}

// Whether `xml` holds only what XML 1.0 allows: valid UTF-8 without C0 controls but tab, newline, return.
bool xml10_chars(const std::string& xml) {
  if (!is_valid_utf8(xml)) return false;
  for (unsigned char c : xml)
    if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') return false;
  return true;
}

// Replaces every `%t3` token of `kir` (a chain of fewer than 10 nodes) by kEvilKir.
std::string with_evil_name(std::string kir) {
  for (size_t at = kir.find("%t3"); at != std::string::npos; at = kir.find("%t3", at + kEvilKir.size()))
    kir.replace(at, 3, kEvilKir);
  return kir;
}

class OutputSinks : public CliTest {};

TEST_F(OutputSinks, RunPrintsValueNamesTerminalSafe) {
  const std::string kir = file("g.kir", "graph g(%x: f32[4]) {\n  " + kEvilKir + " = relu(%x) : f32[4]\n  return " +
                                            kEvilKir + "\n}\n");
  CliResult r = kiln_cli("run " + kir + " --seed 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(has_control_bytes(r.output)) << r.output;
  EXPECT_NE(r.output.find("output 0 %" + kEvilShown + ": f32[4]"), std::string::npos) << r.output;
}

TEST_F(OutputSinks, ErrorMessagesQuoteNamesTerminalSafe) {
  const std::string kir = file("g.kir", "graph g(%x: f32[4]) {\n  %y = relu(" + kEvilKir + ") : f32[4]\n  return %y\n}\n");
  CliResult r = kiln_cli("run " + kir + " --seed 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_FALSE(has_control_bytes(r.output)) << r.output;
  EXPECT_NE(r.output.find(kEvilShown), std::string::npos) << r.output;
}

// A repro file is the most hostile input kiln reads: its message, backend and name reach `kiln repro run`'s
// lines; and log channels (KILN_LOGS) print value names.
TEST_F(OutputSinks, ReproRunAndLogChannelsPrintNamesTerminalSafe) {
  const std::string kir = file("g.kir", "graph g(%x: f32[4]) {\n  " + kEvilKir + " = relu(%x) : f32[4]\n  return " +
                                            kEvilKir + "\n}\n");
  CliResult logged = kiln_cli("run " + kir + " --seed 0 --backend inductor", "KILN_LOGS=lowering,graph");
  ASSERT_EQ(logged.exit_code, 0) << logged.output;
  EXPECT_NE(logged.output.find("[kiln:"), std::string::npos) << logged.output;
  EXPECT_FALSE(has_control_bytes(logged.output)) << logged.output;
  CliResult minified = kiln_cli("minify " + kir + " --backend inductor -o " + path("r.repro"),
                                "KILN_INJECT=relu:compile_error");
  ASSERT_EQ(minified.exit_code, 0) << minified.output;
  EXPECT_FALSE(has_control_bytes(minified.output)) << minified.output;
  std::string repro = read_text(path("r.repro"));
  const size_t message = repro.find("message: \"");
  ASSERT_NE(message, std::string::npos) << repro;
  repro.insert(message + 10, "\\u001b]0;pwned\\u0007");  // a recorded message holding a terminal escape
  write_file(path("r.repro"), repro);
  CliResult rerun = kiln_cli("repro run " + path("r.repro"), "KILN_INJECT=relu:compile_error");
  EXPECT_NE(rerun.output.find("recorded: "), std::string::npos) << rerun.output;
  EXPECT_FALSE(has_control_bytes(rerun.output)) << rerun.output;
}

TEST_F(OutputSinks, DoctorsOutputSiteLinesAndReportsKeepTheNameInert) {
  const bisect::InjectedGraph ig = bisect::injected_chain("lowering", 6);  // the injected relu is %t3
  ASSERT_EQ(ig.site_value, "t3");
  const std::string kir = file("chain.kir", with_evil_name(ig.kir));
  CliResult r = kiln_cli("doctor " + kir + " -o " + path("out"), "KILN_INJECT=" + ig.inject);
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(has_control_bytes(r.output)) << r.output;
  EXPECT_NE(r.output.find("site:        "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(kEvilShown), std::string::npos) << r.output;
  const std::string md = read_text(path("out/report.md"));
  EXPECT_FALSE(has_control_bytes(md)) << md;
  // Inside a code span whose fence is longer than the name's backtick.
  EXPECT_NE(md.find("First diverging node: ``%" + kEvilShown), std::string::npos) << md;
  EXPECT_NE(md.find("(``%" + kEvilShown + " = relu``, at ``%" + kEvilShown + " = relu (line "), std::string::npos) << md;
  const std::string html = read_text(path("out/report.html"));
  EXPECT_FALSE(has_control_bytes(html)) << html;
  EXPECT_NE(html.find("<code>%t3\\x1b]0;pwned\\x07`evil"), std::string::npos) << html;
  EXPECT_NO_THROW(json::parse(read_text(path("out/bisect.json"))));
}

// A copy of examples/softmax.kir under a name that is not UTF-8 (0xff) and holds a control byte (0x01).
class OddFileNames : public CliTest {
 protected:
  const std::string name = "soft\x01max\xff.kir";
  const std::string shown = "soft\\x01max\\xff.kir";
  void SetUp() override {
    CliTest::SetUp();
    fs::create_directories(dir_ / "suite");
    fs::copy_file(source_path("examples/softmax.kir"), dir_ / "suite" / name);
  }
};

TEST_F(OddFileNames, GateWritesEveryReportAndABaselineItFindsAgain) {
  const std::string suite = path("suite"), baseline = path("baseline.json");
  const std::string reports = " --json '" + path("r.json") + "' --junit '" + path("r.xml") + "' --markdown '" +
                              path("r.md") + "'";
  CliResult update = kiln_cli("gate '" + suite + "' --backend eager --repetitions 2 --baseline '" + baseline +
                              "' --update-baseline" + reports);
  ASSERT_EQ(update.exit_code, 0) << update.output;
  EXPECT_FALSE(has_control_bytes(update.output)) << update.output;
  EXPECT_NE(update.output.find("PASS          " + shown), std::string::npos) << update.output;
  const json report = json::parse(read_text(path("r.json")));
  // In JSON the control byte is \u0001 (JSON holds it), the byte that is not UTF-8 the text \xff.
  const std::string in_json = "soft\x01max\\xff.kir";
  EXPECT_EQ(report["entries"][0]["name"], in_json);
  const json written = json::parse(read_text(baseline));
  ASSERT_TRUE(written["entries"].contains(in_json)) << written.dump(2);
  EXPECT_EQ(written["entries"][in_json]["status"], "pass");
  const std::string xml = read_text(path("r.xml"));
  EXPECT_TRUE(xml10_chars(xml)) << xml;
  EXPECT_NE(xml.find("name=\"" + shown + "\""), std::string::npos) << xml;
  const std::string md = read_text(path("r.md"));
  EXPECT_FALSE(has_control_bytes(md)) << md;
  EXPECT_NE(md.find("| `" + shown + "` | PASS |"), std::string::npos) << md;

  CliResult judged = kiln_cli("gate '" + suite + "' --backend eager --repetitions 2 --baseline '" + baseline + "'" + reports);
  EXPECT_EQ(judged.exit_code, 0) << judged.output;
  EXPECT_NE(judged.output.find("PASS          " + shown), std::string::npos) << judged.output;
  EXPECT_EQ(judged.output.find("new entry"), std::string::npos) << "the baseline's entry was not found:\n"
                                                               << judged.output;
  EXPECT_NO_THROW(json::parse(read_text(path("r.json"))));
}

TEST_F(OddFileNames, BenchWritesJsonAHistoryAndItsHtml) {
  const std::string graph = (dir_ / "suite" / name).string();
  CliResult r = kiln_cli("bench '" + graph + "' --backend eager --repetitions 2 --caches warm --json '" +
                         path("b.json") + "' --history '" + path("h.jsonl") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(has_control_bytes(r.output)) << r.output;
  const json b = json::parse(read_text(path("b.json")));
  EXPECT_EQ(b["benchmarks"][0]["run_name"].get<std::string>().rfind("soft\x01max\\xff/", 0), 0u) << b.dump(2);
  // Compared with its own JSON: every case is found again.
  CliResult again = kiln_cli("bench '" + graph + "' --backend eager --repetitions 2 --caches warm --baseline '" +
                             path("b.json") + "'");
  EXPECT_NE(again.exit_code, 2) << again.output;
  EXPECT_EQ(again.output.find("missing"), std::string::npos) << again.output;
  CliResult html = kiln_cli("bench report '" + path("h.jsonl") + "' -o '" + path("h.html") + "'");
  ASSERT_EQ(html.exit_code, 0) << html.output;
  const std::string page = read_text(path("h.html"));
  EXPECT_TRUE(xml10_chars(page)) << page;
  EXPECT_NE(page.find("soft\\x01max\\xff/compiled/warm"), std::string::npos) << page;
}

}  // namespace
}  // namespace kiln::cli_test
