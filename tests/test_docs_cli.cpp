// The docs check (issue 23): what README.md and docs/*.md promise about the CLI is what the binary does.
//   - every `KILN_*` name is an option in `kiln --help-options` (or a CMake option, a C++ macro, or a
//     benchmark variable read in bench/);
//   - every `--flag` written in a kiln command is in the help of the binary or one of its subcommands, and
//     every flag in that help is documented in docs/cli.md;
//   - every kiln command in a docs code block runs in a scratch directory (`g.kir` there is a graph with a
//     relu) and exits as its trailing comment says (`exit N`, else 0); a comment saying "needs a GPU" or
//     "needs PyTorch" skips it.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "cli_run.h"

using namespace kiln::cli_test;
namespace fs = std::filesystem;

namespace {

struct DocLine {
  std::string file;
  int line;
  std::string text;
  bool in_code_block;
};

std::vector<DocLine> doc_lines() {
  std::vector<fs::path> files = {source_path("README.md")};
  for (const auto& e : fs::directory_iterator(source_path("docs")))
    if (e.path().extension() == ".md") files.push_back(e.path());
  std::vector<DocLine> out;
  for (const fs::path& f : files) {
    std::istringstream in(read_text(f));
    bool code = false;
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (line.rfind("```", 0) == 0) {
        code = !code;
        continue;
      }
      out.push_back({f.filename().string(), n, line, code});
    }
  }
  return out;
}

std::string where(const DocLine& d) { return d.file + ":" + std::to_string(d.line); }

// Everything the binary's help says: the top level, every subcommand and `repro run`.
std::string all_help() {
  std::string help = shell("kiln --help").output + shell("kiln --help-options").output;
  std::smatch m;
  std::string top = shell("kiln --help").output;
  std::string subs = top.substr(top.find("Subcommands:") == std::string::npos ? 0 : top.find("Subcommands:"));
  std::regex sub_re(R"(\n  ([a-z]+) )");
  for (auto it = std::sregex_iterator(subs.begin(), subs.end(), sub_re); it != std::sregex_iterator(); ++it) {
    help += shell("kiln " + (*it)[1].str() + " --help").output;
  }
  help += shell("kiln repro run --help").output;
  return help;
}

bool contains_any(const std::string& text, std::initializer_list<std::string> needles) {
  for (const std::string& n : needles)
    if (text.find(n) != std::string::npos) return true;
  return false;
}

// A command line `[VAR=value ...] [build/]kiln ARGS [# comment]`, split up.
struct KilnCommand {
  std::string env, args, comment;
};

std::optional<KilnCommand> kiln_command(const std::string& text) {
  std::smatch m;
  if (!std::regex_match(text, m, std::regex(R"(^\s*((?:[A-Z_]+=\S*\s+)*)(?:build/)?kiln((?: [^#]*)?)(#.*)?$)")))
    return std::nullopt;
  return KilnCommand{m[1].str(), m[2].str(), m[3].str()};
}

// The `kiln ...` spans of a line: backtick spans starting with kiln, or the whole line in a code block.
std::vector<std::string> kiln_spans(const DocLine& d) {
  std::vector<std::string> out;
  if (d.in_code_block) {
    if (auto c = kiln_command(d.text)) out.push_back("kiln" + c->args);
    return out;
  }
  std::regex span(R"(`((?:[A-Z_]+=\S*\s+)*(?:build/)?kiln [^`]*)`)");
  for (auto it = std::sregex_iterator(d.text.begin(), d.text.end(), span); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

// A `kiln gate` report whose every regression is of a call or cold-compile time (no status or memory change):
// each REGRESSION entry lists what regressed on its `regressed:` lines (gate/report.cpp).
bool only_time_regressions(const std::string& output) {
  std::istringstream in(output);
  int regressed_entries = 0, time_lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("  REGRESSION  ") != std::string::npos) ++regressed_entries;
    if (line.find("regressed: ") == std::string::npos) continue;
    if (!std::regex_search(line, std::regex(R"(regressed: (call time|cold compile) [0-9.e+-]+ ms, baseline)"))) return false;
    ++time_lines;
  }
  return regressed_entries > 0 && time_lines >= regressed_entries;
}

}  // namespace

TEST(DocsCli, EveryKilnVariableIsAnOption) {
  const std::string options = shell("kiln --help-options").output;
  const std::string cmake = read_text(source_path("CMakeLists.txt"));
  std::string sources;
  for (const char* dir : {"src", "bench"})
    for (const auto& e : fs::recursive_directory_iterator(source_path(dir)))
      if (e.is_regular_file()) sources += read_text(e.path());
  std::regex name_re(R"(KILN_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_]))");
  std::set<std::string> checked;
  for (const DocLine& d : doc_lines()) {
    for (auto it = std::sregex_iterator(d.text.begin(), d.text.end(), name_re); it != std::sregex_iterator(); ++it) {
      std::string name = it->str();
      if (!checked.insert(name).second) continue;
      bool option = std::regex_search(options, std::regex("\\b" + name + "\\b"));
      bool elsewhere = contains_any(cmake, {"option(" + name + " "}) ||
                       contains_any(sources, {"#define " + name + "(", "#define " + name + " ", "getenv(\"" + name + "\")"});
      EXPECT_TRUE(option || elsewhere) << where(d) << ": " << name
                                       << " is not in `kiln --help-options` (nor a CMake option, macro or bench variable)";
    }
  }
  EXPECT_TRUE(checked.count("KILN_REPRO_AFTER") && checked.count("KILN_BISECT_DISABLE"));
}

TEST(DocsCli, EveryDocumentedFlagIsInTheHelpAndBack) {
  const std::string help = all_help();
  std::regex flag_re(R"((?:^|[\s\[|(])(--[a-z][a-z0-9-]*))");
  std::set<std::string> documented;
  for (const DocLine& d : doc_lines()) {
    for (const std::string& span : kiln_spans(d)) {
      for (auto it = std::sregex_iterator(span.begin(), span.end(), flag_re); it != std::sregex_iterator(); ++it) {
        std::string flag = (*it)[1].str();
        documented.insert(flag);
        EXPECT_TRUE(std::regex_search(help, std::regex("(^|[ ,])" + flag + "\\b")))
            << where(d) << ": `" << flag << "` is not an option of the kiln binary (in: " << span << ")";
      }
    }
  }
  const std::string cli_md = read_text(source_path("docs/cli.md"));
  std::regex help_flag(R"(\n\s+(?:-[a-zA-Z],)?(--[a-z][a-z0-9-]*))");
  for (auto it = std::sregex_iterator(help.begin(), help.end(), help_flag); it != std::sregex_iterator(); ++it) {
    std::string flag = (*it)[1].str();
    if (flag == "--help") continue;
    EXPECT_TRUE(contains_any(cli_md, {"`" + flag, " " + flag, "[" + flag, "|" + flag}))
        << flag << " is in the binary's help but not documented in docs/cli.md";
  }
}

TEST(DocsCli, EveryCommandInACodeBlockRuns) {
  fs::path sandbox = fs::temp_directory_path() / ("kiln_docs_cli_" + std::to_string(::getpid()));
  fs::remove_all(sandbox);
  fs::create_directories(sandbox);
  fs::copy_file(source_path("examples/conv_block.kir"), sandbox / "g.kir");
  fs::create_directory_symlink(source_path("examples"), sandbox / "examples");
  int ran = 0;
  for (const DocLine& d : doc_lines()) {
    if (!d.in_code_block) continue;
    std::optional<KilnCommand> cmd = kiln_command(d.text);
    if (!cmd) continue;
    if (contains_any(cmd->comment, {"needs a GPU", "needs PyTorch"})) continue;
    std::smatch m;
    int want = std::regex_search(cmd->comment, m, std::regex(R"(exit (\d+))")) ? std::stoi(m[1]) : 0;
    CliResult r = shell("cd '" + sandbox.string() + "' && " + cmd->env + "KILN_CACHE_DIR=cache '" KILN_CLI "'" + cmd->args);
    if (want == 0 && r.exit_code == 1 && only_time_regressions(r.output)) {
      // `kiln gate --baseline` judging times measured a minute apart while other tests share the 2 cores (an SMT
      // sibling's load alone can double a CPU time): the command ran as documented; its timing rules are
      // tested serially (tests/timing/).
      std::printf("%s: only times regressed (machine load), accepted: %s\n", where(d).c_str(), d.text.c_str());
    } else {
      EXPECT_EQ(r.exit_code, want) << where(d) << ": " << d.text << "\n" << r.output;
    }
    ++ran;
  }
  EXPECT_GE(ran, 4);
  fs::remove_all(sandbox);
}
