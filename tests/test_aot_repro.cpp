// KILN_REPRO_AFTER=aot (docs/aot.md, docs/minifier.md): with the inductor backend compiling a training step,
// a bug that only the backward graph shows (an injected bug in an op only the backward has) gives a repro of the
// backward graph, its saved values and tangents as the repro's inputs, minified and reproducing; the forward
// graph and the inference program are not blamed, and KILN_REPRO_AFTER=backend does not watch the halves.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <regex>

#include "api/backends.h"
#include "autograd/autograd.h"
#include "core/options.h"
#include "graph/text.h"
#include "minifier/hook.h"
#include "repro_hook_fixture.h"
#include "ops/api.h"
#include "repro/repro.h"
#include "repro/reproduce.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// An MLP step: `le` and `where` (relu's gradient) appear only in its backward graph.
const char* kMlp = R"(
graph mlp(%x: f32[8, 4], %w1: f32[16, 4] grad, %w2: f32[3, 16] grad, %y: i64[8]) {
  %h = linear(%x, %w1) : f32[8, 16]
  %a = relu(%h) : f32[8, 16]
  %logits = linear(%a, %w2) : f32[8, 3]
  %loss = cross_entropy(%logits, %y) : f32[]
  return %loss
}
)";

class AotReproAfter : public ReproHookFixture {
 protected:
  // One compiled training step (forward, backward) of kMlp on the inductor with the hook on; returns the error
  // the caller saw ("" when none).
  std::string train_step(const std::string& after, int level, const std::string& inject) {
    ScopedOption a(Opt::ReproAfter, after), lv(Opt::ReproLevel, std::to_string(level)), inj(Opt::Inject, inject),
        debug(Opt::DebugDir, dir_.string());
    try {
      GraphProgram program = compile_for_backend("inductor", graph::parse_graph(kMlp, "mlp.kir"));
      manual_seed(4);
      Tensor w1 = randn({16, 4}).set_requires_grad(true), w2 = randn({3, 16}).set_requires_grad(true);
      Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 2, 2, 1}, {8});
      program({randn({8, 4}), w1, w2, y})[0].backward();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

};

// Every input of a repro of the backward graph: saved values of the forward, then the tangent.
void expect_backward_graph(const ReproFile& r) {
  EXPECT_NE(r.graph.name.find("backward"), std::string::npos) << graph::print_graph(r.graph);
  ASSERT_FALSE(r.graph.inputs().empty());
  EXPECT_EQ(r.graph.value(r.graph.inputs().back()).name, "tangents_1") << graph::print_graph(r.graph);
}

TEST_F(AotReproAfter, AccuracyBugOnlyInTheBackwardIsMinifiedFromTheBackwardGraph) {
  EXPECT_EQ(train_step("aot", 4, "where:accuracy"), "");  // an accuracy bug: the step itself runs
  std::vector<fs::path> full = files(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.repro)");
  ASSERT_EQ(full.size(), 1u) << "only the backward graph fails";
  ReproFile r = load_repro(full[0]);
  EXPECT_EQ(r.expected.kind, FailureKind::Accuracy);
  expect_backward_graph(r);
  std::vector<fs::path> mins = files(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)");
  ASSERT_EQ(mins.size(), 1u);
  ReproFile m = load_repro(mins[0]);
  EXPECT_LT(m.graph.num_op_nodes(), r.graph.num_op_nodes());
  bool has_where = false;
  for (const graph::Node& n : m.graph.nodes()) has_where |= n.kind == graph::NodeKind::Op && n.info().name == "where";
  EXPECT_TRUE(has_where) << graph::print_graph(m.graph);
  ReproOutcome o = reproduce(m, mins[0], 60);
  EXPECT_TRUE(o.reproduces) << o.observed.message;
}

TEST_F(AotReproAfter, CompileErrorInTheBackwardWritesAndMinifiesItsRepro) {
  std::string error = train_step("aot", 2, "where:compile_error");
  EXPECT_NE(error, "") << "the backward's compile error reaches the caller";
  std::vector<fs::path> full = files(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.repro)");
  ASSERT_EQ(full.size(), 1u);
  ReproFile r = load_repro(full[0]);
  EXPECT_EQ(r.expected.kind, FailureKind::CompileError);
  expect_backward_graph(r);
  std::vector<fs::path> mins = files(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)");
  ASSERT_EQ(mins.size(), 1u);
  EXPECT_EQ(load_repro(mins[0]).graph.num_op_nodes(), 1);
  EXPECT_TRUE(reproduce(load_repro(mins[0]), mins[0], 60).reproduces);
}

TEST_F(AotReproAfter, TheBackendStageDoesNotWatchTheTrainingGraphs) {
  EXPECT_EQ(train_step("backend", 4, "where:accuracy"), "");
  // (The inference program, compiled but never run here, leaves its pending_<hash>.repro: level 3+.)
  EXPECT_TRUE(files(R"(repro_.*)").empty());
}

}  // namespace
}  // namespace kiln
