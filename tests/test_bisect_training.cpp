// The accuracy bisector (bisect/bisect.h) in process on the AOT rungs' bugs, in generated training chains of 10,
// 100 and 1000 nodes (bisect/testing.h injected_training_chain): a wrong VJP names aot_eager, a wrong min-cut
// partition aot_eager_decomp_partition, no site explains either (the interpreted rungs count none), and the first
// diverging node is the injected one (the exp's backward; the value the partitioner recomputes wrongly).
#include <gtest/gtest.h>

#include "bisect/bisect.h"
#include "bisect/testing.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/inputs.h"
#include "graph/text.h"

namespace kiln::bisect {
namespace {

struct Case {
  std::string kind;
  int nodes;
};

class BisectTrainingInjected : public ::testing::TestWithParam<Case> {};

TEST_P(BisectTrainingInjected, NamesTheInjectedRungAndNode) {
  const InjectedGraph ig = injected_training_chain(GetParam().kind, GetParam().nodes);
  graph::Graph g = graph::parse_graph(ig.kir, "chain.kir");
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  manual_seed(0);
  ScopedOption inject(Opt::Inject, ig.inject);
  BisectOptions o;
  o.timeout_s = 120;
  BisectReport r = bisect_graph(g, inputs, o, RunLine{.file = "chain.kir", .seed = 0});
  EXPECT_EQ(r.outcome, BisectReport::Outcome::Unexplained) << r.text();
  EXPECT_EQ(r.stage, ig.site_value) << r.text();
  EXPECT_FALSE(r.culprit) << r.text();
  EXPECT_NE(r.failure.message.find("is the gradient of %x"), std::string::npos) << r.text();
  ASSERT_TRUE(r.divergence) << r.text() << r.divergence_note;
  EXPECT_EQ(r.divergence->step, "the AOT backward graph") << r.text();
  EXPECT_NE(r.divergence->node.find(ig.diverging), std::string::npos) << r.text();
  EXPECT_NE(r.repro_command.find("--backend " + ig.site_value + " --seed 0 --check --grad"), std::string::npos) << r.text();
}

// The 1000-node cases are a scale check; the sanitizer build runs the same code on 10 and 100 nodes.
std::vector<Case> training_cases() {
  std::vector<Case> cases;
  for (const std::string& kind : training_injection_kinds())
    for (int nodes : {10, 100, 1000})
      if (nodes < 1000 || !KILN_SANITIZED) cases.push_back({kind, nodes});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(KindsAndSizes, BisectTrainingInjected, ::testing::ValuesIn(training_cases()),
                         [](const auto& info) { return info.param.kind + "_" + std::to_string(info.param.nodes); });

}  // namespace
}  // namespace kiln::bisect
