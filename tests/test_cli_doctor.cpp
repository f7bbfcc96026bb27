// `kiln doctor` end to end: on an injected bug it exits 1 and writes, under -o only, a repro that
// `kiln repro run` reproduces and a report (Markdown and HTML) naming the injected site; on a passing graph it
// exits 0; without -o it is a usage error.
#include <gtest/gtest.h>

#include <set>

#include "bisect/testing.h"
#include "cli_run.h"

namespace kiln::cli_test {
namespace {

using bisect::InjectedGraph;
using bisect::injected_chain;

class CliDoctor : public CliTest, public ::testing::WithParamInterface<std::string> {};

std::set<std::string> entries(const std::filesystem::path& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

TEST_P(CliDoctor, ReportsTheInjectedSiteAndWritesAReproThatReproduces) {
  const InjectedGraph ig = injected_chain(GetParam(), 10);
  const std::string kir = file("chain.kir", ig.kir);
  CliResult r = kiln_cli("doctor -q " + kir + " -o " + path("out"), "KILN_INJECT=" + ig.inject);
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(entries(dir_), (std::set<std::string>{"chain.kir", "out"})) << "nothing outside -o is written";
  const std::string md = read_text(path("out/report.md"));
  const std::string html = read_text(path("out/report.html"));
  EXPECT_NE(md.find("| `inductor` | FAILS: accuracy |"), std::string::npos) << md;
  EXPECT_NE(md.find("The bad pass: `" + ig.site + "` application #"), std::string::npos) << md;
  EXPECT_NE(md.find("First diverging node: `%" + ig.diverging + " = "), std::string::npos) << md;
  EXPECT_NE(html.find("<h3>First diverging node: <code>%" + ig.diverging + " = "), std::string::npos) << html;
  EXPECT_NE(html.find("<th>expected (fp64)</th><th>actual</th>"), std::string::npos);
  EXPECT_NE(html.find("original ("), std::string::npos);
  // The repro records the injection: it reproduces without KILN_INJECT in the environment.
  CliResult again = kiln_cli("repro run " + path("out/repro.min.repro"));
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("REPRODUCES: accuracy"), std::string::npos) << again.output;
  // The report ends with the repro file and the exact bad pass.
  EXPECT_NE(md.rfind("Repro file: `" + path("out/repro.min.repro") + "`"), std::string::npos) << md;
}

INSTANTIATE_TEST_SUITE_P(Kinds, CliDoctor, ::testing::Values("lowering", "decomposition", "fusion"));

TEST_F(CliDoctor, APassingGraphExitsZero) {
  const std::string kir = file("chain.kir", injected_chain("lowering", 10).kir);
  CliResult r = kiln_cli("doctor -q " + kir + " -o " + path("out"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(read_text(path("out/report.md")).find("Every backend of the ladder passes"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path("out/repro.min.repro")));
}

TEST_F(CliDoctor, WithoutAnOutputDirectoryItIsAUsageError) {
  const std::string kir = file("chain.kir", injected_chain("lowering", 10).kir);
  CliResult r = kiln_cli("doctor " + kir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--output"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::cli_test
