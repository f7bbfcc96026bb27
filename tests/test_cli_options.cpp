// One CLI (issue 30): the flags several commands share (tools/cli_checks.h) have one spelling, default, range and
// help text in every command that takes them, read from each command's --help as a user reads it; each command
// that works on a graph takes the input flags; the old spellings users' scripts have (--out, bench's
// --tolerance) still work but are not shown; and a range is the same everywhere (a value one command refuses,
// every command refuses).
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "cli_run.h"

namespace kiln::cli_test {
namespace {

// Every command and subcommand whose help lists options: the top level's subcommands, then nested ones.
std::vector<std::string> commands() {
  std::vector<std::string> out;
  const std::string top = shell("kiln --help").output;
  std::regex sub_re(R"(\n  ([a-z]+) )");
  const std::string subs = top.substr(top.find("Subcommands:"));
  for (auto it = std::sregex_iterator(subs.begin(), subs.end(), sub_re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  out.push_back("repro run");
  out.push_back("bench report");
  return out;
}

// The help line of `flag` in `help` ("--tol FLOAT:[0, 1e+06] the comparator's ..."), whitespace runs folded to
// one space so column widths (which depend on a command's longest option) do not count, and CLI11's note of
// which other flags it excludes or needs (those depend on the command: fuzz has no --inputs for --seed to exclude,
// run's --tol needs its --check) left out; "" when absent.
std::string help_line(const std::string& help, const std::string& flag) {
  std::regex line_re("\n  (?:-[a-zA-Z], ?)?" + flag + "(?![a-z-])( [^\n]*)?(\n {10,}[^\n]*)*");
  std::smatch m;
  if (!std::regex_search(help, m, line_re)) return "";
  std::string line = std::regex_replace(m.str(), std::regex(R"(\s+)"), " ");
  line = std::regex_replace(line, std::regex(R"( (Excludes|Needs):( --?[a-z][a-z-]*)+)"), "");
  return line.substr(line.find(flag));
}

const std::vector<std::string> kShared = {"--backend", "--seed", "--inputs", "--tol", "--timeout",
                                          "--output",  "--jobs", "--quiet"};

TEST(CliOptions, EverySharedFlagReadsTheSameInEveryCommand) {
  std::map<std::string, std::map<std::string, std::string>> lines;  // flag -> command -> help line
  for (const std::string& cmd : commands()) {
    const std::string help = shell("kiln " + cmd + " --help").output;
    for (const std::string& flag : kShared)
      if (std::string line = help_line(help, flag); !line.empty()) lines[flag][cmd] = line;
  }
  for (const auto& [flag, by_command] : lines) {
    const std::string& first = by_command.begin()->second;
    for (const auto& [cmd, line] : by_command) {
      // -o/--output says what the command writes: only its spelling and type are shared.
      if (flag == "--output") {
        EXPECT_EQ(line.substr(0, line.find(' ', line.find(' ') + 1)), "--output TEXT") << cmd << ": " << line;
        continue;
      }
      EXPECT_EQ(line, first) << flag << " differs between kiln " << by_command.begin()->first << " and kiln " << cmd;
    }
  }
  // Which commands take which: every command that works on one graph takes its inputs and a seed.
  const std::map<std::string, std::set<std::string>> expected = {
      {"--backend", {"run", "minify", "bisect", "doctor", "gate", "bench", "fuzz"}},
      {"--seed", {"run", "minify", "bisect", "doctor", "gate", "bench", "fuzz"}},
      {"--inputs", {"run", "minify", "bisect", "doctor", "bench"}},
      {"--tol", {"minify", "bisect", "doctor", "gate", "fuzz"}},
      {"--timeout", {"repro run", "minify", "bisect", "doctor", "gate", "bench", "fuzz"}},
      {"--output", {"minify", "bisect", "doctor", "fuzz", "aot", "import", "bench report"}},
      {"--jobs", {"minify", "doctor", "gate", "fuzz"}},
      {"--quiet", {"minify", "bisect", "doctor", "gate", "bench", "fuzz"}},
  };
  for (const auto& [flag, cmds] : expected)
    for (const std::string& cmd : cmds) EXPECT_TRUE(lines[flag].count(cmd)) << "kiln " << cmd << " lacks " << flag;
  EXPECT_NE(lines["--backend"]["run"].find("default inductor"), std::string::npos) << lines["--backend"]["run"];
  EXPECT_NE(lines["--timeout"]["fuzz"].find("default 60"), std::string::npos) << lines["--timeout"]["fuzz"];
}

// The old spellings are hidden aliases: not in the help (so docs and new scripts use one spelling) but accepted.
TEST_F(CliTest, OldSpellingsStillWorkAndAreNotShown) {
  for (const std::string& cmd : {"fuzz", "aot", "import"})
    EXPECT_EQ(help_line(shell("kiln " + cmd + " --help").output, "--out"), "") << cmd;
  EXPECT_EQ(help_line(shell("kiln bench --help").output, "--tolerance"), "");
  CliResult fuzz = kiln_cli("fuzz -q --backend eager --runs 2 --out " + path("found"));
  EXPECT_EQ(fuzz.exit_code, 0) << fuzz.output;
  EXPECT_TRUE(std::filesystem::exists(path("found") + "/summary.json")) << fuzz.output;
  CliResult fuzz_o = kiln_cli("fuzz -q --backend eager --runs 2 -o " + path("found_o"));
  EXPECT_EQ(fuzz_o.exit_code, 0) << fuzz_o.output;
  EXPECT_TRUE(std::filesystem::exists(path("found_o") + "/summary.json")) << fuzz_o.output;
  CliResult tol = kiln_cli("bench " + file("g.kir", "graph g(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n") +
                           " --tolerance 200");
  EXPECT_EQ(tol.exit_code, 2) << tol.output;  // the alias has the new flag's range
  EXPECT_NE(tol.output.find("too large"), std::string::npos) << tol.output;
}

// One range: a value is refused (exit 2, naming the flag) by every command that takes the flag, or by none (gate
// took (0, 1] where the others took [0, 1e6]).
TEST_F(CliTest, ASharedFlagsRangeIsTheSameInEveryCommand) {
  const std::string g = file("g.kir", "graph g(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n");
  const std::map<std::string, std::string> args = {
      {"minify", "minify " + g + " --backend eager"}, {"bisect", "bisect " + g + " --backend eager"},
      {"doctor", "doctor " + g + " --backend eager -o " + path("d")}, {"gate", "gate " + path(".") + " --backend eager"},
      {"fuzz", "fuzz --backend eager --runs 1"}};
  for (const auto& [value, refused] : std::map<std::string, bool>{{"0", false}, {"5", false}, {"-1", true},
                                                                  {"nan", true}, {"2e6", true}}) {
    for (const auto& [cmd, line] : args) {
      CliResult r = kiln_cli(line + " -q --tol " + value);
      const bool said_no = r.exit_code == 2 && r.output.find("--tol:") != std::string::npos;
      EXPECT_EQ(said_no, refused) << cmd << " --tol " << value << "\n" << r.output;
    }
  }
}

}  // namespace
}  // namespace kiln::cli_test
