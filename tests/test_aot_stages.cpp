// AOT autograd's stages (src/aot/stages.h): the one list in order, and the checks after each stage: a stage that
// breaks what it must keep (a copy-back it drops, a forward graph missing a saved value, an invalid graph) is
// named in the internal error, where it broke, instead of surfacing later as a wrong gradient.
#include <gtest/gtest.h>

#include <algorithm>

#include "aot/stages.h"
#include "api/pipeline.h"
#include "core/error.h"
#include "graph/text.h"

namespace kiln {
namespace {

// An in-place write to an input that requires no grad, beside one that does: functionalize must record the
// write of %s (the copy-back, which also makes the output %t an alias of %s).
constexpr const char* kWritesAnInput = R"(graph step(%x: f32[4] grad, %s: f32[4]) {
  %y = mul(%x, %x) : f32[4]
  %t = add_(%s, %y) : f32[4]
  %l = sum(%y) : f32[]
  return %l, %t
})";

std::vector<bool> grads_of(const graph::Graph& g) {
  std::vector<bool> r;
  for (graph::ValueId in : g.inputs()) r.push_back(g.value(in).requires_grad);
  return r;
}

// The internal error run_aot_stages throws with `stage` replaced by `broken`, or "" when it throws none.
std::string error_with(const std::string& stage, std::function<void(aot::AotState&, const aot::AotConfig&)> broken) {
  graph::Graph g = graph::parse_graph(kWritesAnInput, "step.kir");
  std::vector<aot::AotStage> stages = aot::aot_stages();
  auto it = std::find_if(stages.begin(), stages.end(), [&](const aot::AotStage& s) { return s.name == stage; });
  EXPECT_NE(it, stages.end()) << stage;
  if (it == stages.end()) return "no such stage";
  it->run = [original = it->run, broken](aot::AotState& s, const aot::AotConfig& c) {
    original(s, c);
    broken(s, c);
  };
  try {
    aot::run_aot_stages(g, grads_of(g), aot_backend_config("aot_eager"), stages);
  } catch (const Error& e) {
    EXPECT_TRUE(e.internal()) << e.what();
    return e.what();
  }
  return "";
}

TEST(AotStages, AreListedOnceInOrder) {
  std::vector<std::string> names;
  for (const aot::AotStage& s : aot::aot_stages()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"expand", "functionalize", "rng", "joint", "transform", "partition"}));
}

TEST(AotStages, TheRealStagesPassEveryCheck) {
  graph::Graph g = graph::parse_graph(kWritesAnInput, "step.kir");
  for (const char* backend : {"aot_eager", "aot_eager_decomp_partition", "inductor"}) {
    aot::AotGraphs gs = aot::run_aot_stages(g, grads_of(g), aot_backend_config(backend), aot::aot_stages());
    ASSERT_EQ(gs.mutations.size(), 1u) << backend;
    EXPECT_EQ(gs.mutations[0].first, 1) << "the write of %s is copied back";
    ASSERT_EQ(gs.output_aliases.size(), 1u) << "%t aliases %s";
    EXPECT_EQ(gs.output_aliases[0].output, 1);
  }
}

TEST(AotStages, AFunctionalizeThatDropsACopyBackIsNamed) {
  const std::string why = error_with("functionalize", [](aot::AotState& s, const aot::AotConfig&) {
    s.out.mutations.clear();  // the write into %s (and the alias %t of it) is lost
    s.out.output_aliases.clear();
  });
  EXPECT_NE(why.find("AOT stage functionalize of graph step broke its invariant"), std::string::npos) << why;
  EXPECT_NE(why.find("input 1 (s) is written in place but not in the copy-back list"), std::string::npos) << why;
}

TEST(AotStages, AFunctionalizeThatLeavesAnInPlaceNodeIsNamed) {
  const std::string why = error_with("functionalize", [](aot::AotState& s, const aot::AotConfig&) {
    s.graph = graph::parse_graph(kWritesAnInput, "step.kir");  // the mutating graph, unchanged
  });
  EXPECT_NE(why.find("AOT stage functionalize"), std::string::npos) << why;
  EXPECT_NE(why.find("the graph still has an in-place node"), std::string::npos) << why;
}

TEST(AotStages, APartitionThatLosesASavedValueIsNamed) {
  const std::string why = error_with("partition", [](aot::AotState& s, const aot::AotConfig&) {
    s.out.partition.num_saved += 1;  // claims a saved value the forward graph does not return
  });
  EXPECT_NE(why.find("AOT stage partition of graph step broke its invariant: the forward graph has"),
            std::string::npos) << why;
}

TEST(AotStages, AStageThatMakesAnInvalidGraphIsNamedByTheVerifier) {
  const std::string why = error_with("joint", [](aot::AotState& s, const aot::AotConfig&) {
    graph::Graph& j = s.out.joint.graph;
    j.value(j.outputs()[0]).meta.sizes = {7};  // the loss's recorded shape no longer matches its node
  });
  EXPECT_NE(why.find("AOT stage joint of graph step produced an invalid graph"), std::string::npos) << why;
}

}  // namespace
}  // namespace kiln
