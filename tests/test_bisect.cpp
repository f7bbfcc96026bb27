// The accuracy bisector (bisect/bisect.h) in process: for each injected bug kind (lowering, decomposition,
// fusion) in generated chains of 10, 100 and 1000 nodes it names exactly the injected stage, subsystem and
// application (checked against KILN_BISECT_LIMIT itself: the named application's limit fails, one less passes)
// and the first diverging node; a passing graph passes, a nondeterministic failure and a failure no site
// explains are reported as such; compile_step_then_run keeps a compile step and the run's compile alike.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "api/backends.h"
#include "bisect/bisect.h"
#include "bisect/nodes.h"
#include "bisect/testing.h"
#include "core/bisect.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "ops/api.h"
#include "repro/oracle.h"

namespace kiln::bisect {
namespace {

struct Case {
  std::string kind;
  int nodes;
};

FailureSignature classify_with(const graph::Graph& g, const std::vector<Tensor>& inputs, const std::string& limit) {
  ScopedOption lim(Opt::BisectLimit, limit);
  OracleOptions oo;
  oo.backend = "inductor";
  oo.timeout_s = 120;
  return FailureOracle(oo).classify(g, inputs);
}

class BisectInjected : public ::testing::TestWithParam<Case> {};

TEST_P(BisectInjected, NamesTheInjectedSiteApplicationAndNode) {
  const InjectedGraph ig = injected_chain(GetParam().kind, GetParam().nodes);
  graph::Graph g = graph::parse_graph(ig.kir, "chain.kir");
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  manual_seed(0);
  ScopedOption inject(Opt::Inject, ig.inject);
  BisectOptions o;
  o.timeout_s = 120;
  BisectReport r = bisect_graph(g, inputs, o, RunLine{.file = "chain.kir", .seed = 0});
  ASSERT_EQ(r.outcome, BisectReport::Outcome::Bisected) << r.text();
  EXPECT_EQ(r.stage, "inductor");
  ASSERT_TRUE(r.culprit) << r.text();
  const Culprit& c = *r.culprit;
  EXPECT_EQ(c.site, ig.site) << r.text();
  // The site's debug info names the value the injected application acts on, with its source line.
  std::string named = c.site_info.substr(0, c.site_info.find(' '));
  if (!named.empty() && named[0] == '%') named.erase(0, 1);
  EXPECT_EQ(named, ig.site_value) << r.text();
  EXPECT_NE(c.location.find("(line "), std::string::npos) << r.text();
  // Exactly the first bad application: with it the graph fails, without it (and all later ones) it passes.
  EXPECT_EQ(classify_with(g, inputs, fmt::format("{}={}", c.site, c.application + 1)).kind, FailureKind::Accuracy);
  EXPECT_EQ(classify_with(g, inputs, fmt::format("{}={}", c.site, c.application)).kind, FailureKind::None);
  // Child runs within 2 + log2(applications) for the site searched.
  EXPECT_LE(c.runs, 2 + int(std::ceil(std::log2(double(std::max<int64_t>(c.applications, 1)))))) << r.text();
  ASSERT_TRUE(r.divergence) << r.text() << r.divergence_note;
  EXPECT_EQ(r.divergence->value, ig.diverging) << r.text();
  EXPECT_EQ(r.divergence->node.rfind("%" + ig.diverging + " = ", 0), 0u) << r.text();
  EXPECT_NE(r.repro_command.find(c.bad_setting), std::string::npos) << r.repro_command;
}

// The 1000-node case is a scale check (each bisection child compiles a 1000-op kernel); the sanitizer build
// runs the same code on 10 and 100 nodes, where a sanitizer finds what it would find at 1000.
std::vector<Case> injected_cases() {
  std::vector<Case> cases{Case{"lowering", 10},  Case{"decomposition", 10},  Case{"fusion", 10},
                          Case{"lowering", 100}, Case{"decomposition", 100}, Case{"fusion", 100}};
  if (!KILN_SANITIZED)
    for (const std::string& kind : injection_kinds()) cases.push_back(Case{kind, 1000});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(KindsAndSizes, BisectInjected, ::testing::ValuesIn(injected_cases()),
                         [](const auto& info) { return info.param.kind + "_" + std::to_string(info.param.nodes); });

TEST(Bisect, APassingGraphPassesWithNoCulprit) {
  graph::Graph g = graph::parse_graph(injected_chain("lowering", 10).kir, "chain.kir");
  BisectReport r = bisect_graph(g, graph::seeded_inputs(g, 0), BisectOptions{}, RunLine{.file = "chain.kir", .seed = 0});
  EXPECT_EQ(r.outcome, BisectReport::Outcome::Passes) << r.text();
  EXPECT_FALSE(r.failed());
  EXPECT_FALSE(r.culprit);
  EXPECT_FALSE(r.divergence);
  EXPECT_EQ(r.text().find("subsystem:"), std::string::npos) << r.text();
}

// A counter in a file the forked children share: the function fails on every other call.
TEST(Bisect, AFailureThatComesAndGoesIsReportedNondeterministic) {
  const std::filesystem::path counter = std::filesystem::temp_directory_path() / fmt::format("kiln_bisect_nd_{}", getpid());
  std::ofstream(counter) << 0;
  auto flaky = [&] {
    int n = 0;
    std::ifstream(counter) >> n;
    std::ofstream(counter) << n + 1;
    return n % 2 == 0;  // eager rung: good; inductor rung: bad; its repetition: good
  };
  BisectReport r = bisect_function(flaky, BisectOptions{});
  std::filesystem::remove(counter);
  EXPECT_EQ(r.outcome, BisectReport::Outcome::Nondeterministic) << r.text();
  EXPECT_FALSE(r.culprit);
  EXPECT_NE(r.text().find("NONDETERMINISTIC"), std::string::npos) << r.text();
}

TEST(Bisect, AFailureNoSiteExplainsSaysSo) {
  // Bad on the inductor, whatever the bisection settings and flips: no site and no flip explains it.
  BisectReport r = bisect_function([] { return opt_string(Opt::Backend) != "inductor"; }, BisectOptions{});
  EXPECT_EQ(r.outcome, BisectReport::Outcome::Unexplained) << r.text();
  EXPECT_EQ(r.stage, "inductor");
  EXPECT_FALSE(r.culprit);
  EXPECT_NE(r.text().find("none explains it"), std::string::npos) << r.text();
  for (const auto& [site, fixes] : r.tried) EXPECT_FALSE(fixes) << site;
  EXPECT_EQ(r.tried.size(), flips().size()) << "every flip tried (the function compiles nothing: no site asked)";
}

TEST(Bisect, AFailureOfAnInterpretedRungIsNotFlipped) {
  // Bad from aot_eager on: the flips change only the inductor's code, so none is tried.
  BisectReport r = bisect_function([] { return opt_string(Opt::Backend) == "eager"; }, BisectOptions{});
  EXPECT_EQ(r.outcome, BisectReport::Outcome::Unexplained) << r.text();
  EXPECT_EQ(r.stage, "aot_eager");
  EXPECT_TRUE(r.tried.empty()) << r.text();
  EXPECT_NE(r.text().find("none explains it"), std::string::npos) << r.text();
}

// The node step does not depend on a culprit: an unexplained failure still gets its first diverging node.
TEST(Bisect, TheNodeStepNamesTheDivergingNodeWithoutACulprit) {
  const InjectedGraph ig = injected_chain("lowering", 10);
  graph::Graph g = graph::parse_graph(ig.kir, "chain.kir");
  ScopedOption inject(Opt::Inject, ig.inject);
  manual_seed(0);
  BisectReport r;
  r.outcome = BisectReport::Outcome::Unexplained;
  r.stage = "inductor";
  find_divergence(g, graph::seeded_inputs(g, 0), r, BisectOptions{});
  ASSERT_TRUE(r.divergence) << r.divergence_note;
  EXPECT_EQ(r.divergence->value, ig.diverging);
}

// A captured-style program (kiln::compile inside the function) bisects to the same site and application as
// its graph does.
TEST(Bisect, AFunctionBisectsToTheGraphsAnswer) {
  const InjectedGraph ig = injected_chain("lowering", 10);
  graph::Graph g = graph::parse_graph(ig.kir, "chain.kir");
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  ScopedOption inject(Opt::Inject, ig.inject);
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  std::vector<Tensor> ref = graph::run_graph(g, graph::copy_inputs(inputs), fp64);
  auto good = [&] {
    const std::string backend = opt_string(Opt::Backend).empty() ? "inductor" : opt_string(Opt::Backend);
    std::vector<Tensor> out = compile_for_backend(backend, g)(graph::copy_inputs(inputs));
    std::vector<Tensor> expected;
    for (size_t i = 0; i < out.size(); ++i) expected.push_back(to(ref[i], out[i].dtype()));
    return compare_outputs(expected, out, ref).ok;
  };
  BisectReport viaf = bisect_function(good, BisectOptions{});
  manual_seed(0);
  BisectReport viag = bisect_graph(g, inputs, BisectOptions{}, RunLine{.file = "chain.kir", .seed = 0});
  ASSERT_TRUE(viaf.culprit && viag.culprit) << viaf.text() << viag.text();
  EXPECT_EQ(viaf.culprit->site, viag.culprit->site);
  EXPECT_EQ(viaf.culprit->application, viag.culprit->application);
  EXPECT_EQ(viaf.culprit->site_info, viag.culprit->site_info);
  EXPECT_EQ(viaf.stage, "inductor");
}

// Regression: the oracle's compile step and the backend's run both compiled under KILN_BISECT_LIMIT, the second
// counting on from the first, so a limit that lets the relu's lowering run in `kiln run` let none run in the
// oracle (`kiln repro run` said DOES NOT REPRODUCE).
TEST(Bisect, TheOracleCompilesUnderALimitAsOneCompileDoes) {
  const InjectedGraph ig = injected_chain("lowering", 10);
  graph::Graph g = graph::parse_graph(ig.kir, "chain.kir");
  ScopedOption inject(Opt::Inject, ig.inject);
  EXPECT_EQ(classify_with(g, graph::seeded_inputs(g, 0), "inductor:lowering=6").kind, FailureKind::Accuracy);
  EXPECT_EQ(classify_with(g, graph::seeded_inputs(g, 0), "inductor:lowering=5").kind, FailureKind::None);
}

TEST(Bisect, CompileStepThenRunKeepsTheCompileStepsCountsWhenTheRunCompilesNothing) {
  reset_bisect_counts();
  compile_step_then_run([] { should_run("passes", "cse", nullptr); }, [] {});
  EXPECT_EQ((bisect_counts()[{"passes", "cse"}]), 1);
  reset_bisect_counts();
  compile_step_then_run([] { should_run("passes", "cse", nullptr); }, [] { should_run("passes", "cse", nullptr); });
  EXPECT_EQ((bisect_counts()[{"passes", "cse"}]), 1) << "the run's compile counts from where the compile step began";
  reset_bisect_counts();
}

TEST(Bisect, TheLadderHasOnlyRegisteredBackendsAndEndsWithTheTarget) {
  std::vector<std::string> l = ladder_to("inductor");
  ASSERT_FALSE(l.empty());
  EXPECT_EQ(l.front(), "eager");
  EXPECT_EQ(l.back(), "inductor");
  std::vector<std::string> names = backend_names();
  for (const std::string& b : l) EXPECT_NE(std::find(names.begin(), names.end(), b), names.end()) << b;
}

}  // namespace
}  // namespace kiln::bisect
