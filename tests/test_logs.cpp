// KILN_LOGS as a user reads it (issue 36): every line of a multi-line event carries its channel's prefix, the
// umbrellas (capture, aot, inductor) turn on a stage's channels, `-name` turns some off again, `+name` is name.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "cli_run.h"
#include "core/log.h"

namespace kiln::cli_test {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string example(const std::string& name) { return source_path("examples/" + name).string(); }

CliResult run_softmax(const std::string& logs, const std::string& cache) {
  return shell("kiln run " + example("softmax.kir") + " --backend inductor",
               "KILN_LOGS='" + logs + "' KILN_CACHE_DIR=" + cache);
}

TEST_F(CliTest, EveryLineOfAMultiLineEventCarriesItsChannel) {
  CliResult r = run_softmax("graph,output_code", path("cache"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  std::string line;
  int graph_lines = 0, code_lines = 0;
  while (std::getline(in, line)) {
    // A graph's node lines and LLVM IR's lines are never printed bare.
    if (contains(line, "= softmax(") || contains(line, "define ") || contains(line, "  ret "))
      EXPECT_EQ(line.rfind("[kiln:", 0), 0u) << "an event's line without its prefix: " << line;
    graph_lines += line.rfind("[kiln:graph] ", 0) == 0;
    code_lines += line.rfind("[kiln:output_code] ", 0) == 0;
  }
  EXPECT_GT(graph_lines, 10) << r.output;
  EXPECT_GT(code_lines, 10) << r.output;
}

TEST_F(CliTest, AnUmbrellaTurnsOnItsStagesChannelsAndMinusTurnsOneOff) {
  CliResult all = run_softmax("inductor", path("cache"));
  ASSERT_EQ(all.exit_code, 0) << all.output;
  for (LogChannel c : log_umbrella_channels("inductor")) {
    const std::string name(log_channel_name(c));
    if (name == "autotune" || name == "stream" || name == "defer") continue;  // GPU max-autotune; CPU thresholds
    EXPECT_TRUE(contains(all.output, "[kiln:" + name + "] ")) << "KILN_LOGS=inductor printed nothing on " << name;
  }
  EXPECT_FALSE(contains(all.output, "[kiln:passes] ")) << "passes is no inductor channel";
  EXPECT_FALSE(contains(all.output, "[kiln:partitioner] "));

  CliResult fewer = run_softmax("inductor,-output_code", path("cache"));
  ASSERT_EQ(fewer.exit_code, 0) << fewer.output;
  EXPECT_FALSE(contains(fewer.output, "[kiln:output_code] ")) << fewer.output;
  EXPECT_TRUE(contains(fewer.output, "[kiln:fusion] ")) << fewer.output;

  CliResult plus = run_softmax("+fusion", path("cache"));
  EXPECT_TRUE(contains(plus.output, "[kiln:fusion] ")) << plus.output;
  EXPECT_FALSE(contains(plus.output, "warning")) << plus.output;

  CliResult aot = shell("kiln aot --partition min-cut " + example("mlp.kir"), "KILN_LOGS=aot");
  ASSERT_EQ(aot.exit_code, 0) << aot.output;
  for (const char* channel : {"partitioner", "aot_joint_graph", "aot_graphs"})
    EXPECT_TRUE(contains(aot.output, std::string("[kiln:") + channel + "] ")) << channel << ": " << aot.output;
}

TEST_F(CliTest, AMisspeltUmbrellaIsWarnedAboutWithTheClosestName) {
  CliResult r = run_softmax("inductr", path("cache"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "unknown log channel 'inductr'; did you mean 'inductor'?")) << r.output;
}

TEST(LogUmbrellas, EveryUmbrellaHoldsChannelsAndNoChannelIsInTwo) {
  std::set<int> seen;
  for (std::string_view u : log_umbrellas()) {
    const std::vector<LogChannel> channels = log_umbrella_channels(u);
    EXPECT_FALSE(channels.empty()) << u;
    EXPECT_FALSE(find_log_channel(u)) << u << " is both an umbrella and a channel";
    for (LogChannel c : channels) EXPECT_TRUE(seen.insert(int(c)).second) << log_channel_name(c);
  }
}

}  // namespace
}  // namespace kiln::cli_test
