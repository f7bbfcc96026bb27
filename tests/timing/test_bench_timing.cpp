// Whether `kiln bench` tells noise from a real slowdown: the same binary compared with its own baseline five
// times is never flagged, and the graph with its lowering disabled (KILN_BISECT_DISABLE) is. Timing tests are built
// apart from kiln-tests and run serially (tests/CMakeLists.txt): with another test beside them on two cores,
// a baseline and a run minutes apart see different machines.
#include <gtest/gtest.h>

#include <regex>

#include "../bench_util_test.h"

using namespace kiln::cli_test;

namespace {

// The same binary against itself, five times: on a shared 2-core machine calls move by tens of percent between
// runs seconds apart (CPU time too: a neighbour thrashing the shared cache moved the eager case by 40%), so this
// compares CPU time (one thread) with a 100% tolerance (the defaults, wall-clock time and 10%, are for a quiet
// machine); the rank test must keep alarms at zero, and the inductor's lowering disabled (every op an extern call:
// about 60x slower) must still be flagged. (This chain's pointwise ops are inlined, never fused: with
// inductor:fusion disabled it compiles to the same kernel, and only a bypassed graph cache, which recompiled on
// every timed call, used to make that run slower.)
TEST_F(Bench, TheSameBinaryIsNotFlaggedAndADisabledLoweringIs) {
  ASSERT_EQ(bench_cli("bench '" + path("chain.kir") + "' --repetitions 10 --caches warm --json '" + path("base.json") +
                     "'").exit_code, 0);
  int false_alarms = 0;
  for (int i = 0; i < 5; ++i) {
    CliResult same = bench_cli("bench '" + path("chain.kir") + "' --repetitions 10 --caches warm --time-tolerance 1 "
                                   "--metric cpu --baseline '" + path("base.json") + "'");
    false_alarms += same.exit_code != 0;
  }
  EXPECT_EQ(false_alarms, 0);

  CliResult unfused = bench_cli("bench '" + path("chain.kir") + "' --repetitions 10 --caches warm --time-tolerance 1 "
                                    "--metric cpu --baseline '" + path("base.json") + "'",
                                    "KILN_BISECT_DISABLE=inductor:lowering");
  EXPECT_EQ(unfused.exit_code, 1) << unfused.output;
  EXPECT_TRUE(std::regex_search(unfused.output, std::regex(R"(chain/compiled/warm +[0-9.e-]+ +[0-9.e-]+ +\+[0-9.]+% +[0-9.e-]+ +SLOWER)")))
      << unfused.output;
  EXPECT_NE(unfused.output.find("1 compiled cases slower than the baseline"), std::string::npos) << unfused.output;
}

}  // namespace
