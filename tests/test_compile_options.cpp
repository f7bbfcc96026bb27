// CompileOptions carries the injection and the bisection settings through the pipeline (issue 32): a caller
// passes them per compile, with no KILN_* variable set, and every stage that injects or asks should_run obeys
// them: the inductor's passes, AOT autograd's joint (vjp) and the min-cut partitioner (partition:accuracy).
#include <gtest/gtest.h>

#include "api/backends.h"
#include "autograd/autograd.h"
#include "core/bisect.h"
#include "core/error.h"
#include "core/inject.h"
#include "graph/compare.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "inductor/compile_options.h"
#include "ops/api.h"

namespace kiln {
namespace {

const char* kReluExp = "graph g(%x: f64[6]) {\n  %r = relu(%x)\n  %e = exp(%r)\n  return %e\n}\n";
const char* kSoftmax = "graph s(%x: f32[4, 16]) {\n  %y = softmax(%x, -1) : f32[4, 16]\n  return %y\n}\n";
const char* kTanh = "graph t(%x: f64[5] grad) {\n  %y = tanh(%x)\n  %s = sum(%y)\n  return %s\n}\n";

Tensor values() { return Tensor::from_vector<double>({-2, -0.5, 0, 0.25, 1, 3}, {6}); }

TEST(CompileOptionsInjection, AnInjectionPassedInTheOptionsChangesOnlyThatCompile) {
  const graph::Graph g = graph::parse_graph(kReluExp, "g.kir");
  CompileOptions broken;
  broken.inject = InjectSpec::parse("relu:accuracy", "test");
  const Tensor want = exp(relu(values()));
  const Tensor wrong = (*compile(g, broken))({values()})[0];
  EXPECT_FALSE(compare_outputs({want}, {wrong}).ok) << "relu:accuracy computes x + 1";
  EXPECT_TRUE(compare_outputs({exp(add(values(), 1.0))}, {wrong}).ok);
  // The same graph compiled without it (the graph cache keys the injection) is right.
  const Tensor right = (*compile(g, CompileOptions{}))({values()})[0];
  EXPECT_TRUE(compare_outputs({want}, {right}).ok) << compare_outputs({want}, {right}).str();
}

TEST(CompileOptionsInjection, AKindTheCompilerDoesNotTakeIsRefusedByName) {
  CompileOptions options;
  options.inject = InjectSpec::parse("relu:hang", "test");
  try {
    compile(graph::parse_graph(kReluExp, "g.kir"), options);
    FAIL() << "relu:hang compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hang"), std::string::npos) << e.what();
  }
  EXPECT_THROW(InjectSpec::parse("relu", "test"), Error);            // no kind
  EXPECT_THROW(InjectSpec::parse("relu:sideways", "test"), Error);   // no such kind
  EXPECT_EQ(InjectSpec::parse(" relu:accuracy, ,fusion:accuracy ", "test").str(), "relu:accuracy,fusion:accuracy");
}

TEST(CompileOptionsInjection, AVjpInjectionPassedInTheOptionsReachesAotAutograd) {
  CompileOptions options;
  options.inject = InjectSpec::parse("tanh:vjp", "test");
  for (const char* backend : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    const graph::Graph g = graph::parse_graph(kTanh, "t.kir");
    auto gradient = [&](const CompileOptions& o) {
      Tensor x = Tensor::from_vector<double>({-1, -0.25, 0, 0.5, 2}, {5}).set_requires_grad(true);
      compile_for_backend(backend, g, o)({x})[0].backward();
      return x.grad();
    };
    Tensor x = Tensor::from_vector<double>({-1, -0.25, 0, 0.5, 2}, {5}).set_requires_grad(true);
    sum(tanh(x)).backward();
    EXPECT_TRUE(compare_outputs({x.grad()}, {gradient(CompileOptions{})}).ok);
    EXPECT_TRUE(compare_outputs({add(x.grad(), 1.0)}, {gradient(options)}).ok) << "tanh:vjp adds 1 to the gradient";
  }
}

TEST(CompileOptionsBisection, SettingsPassedInTheOptionsDecideWhichSitesRun) {
  const graph::Graph g = graph::parse_graph(kSoftmax, "s.kir");
  const int fused = compile(g, CompileOptions{})->stats().kernels;
  CompileOptions unfused;
  unfused.bisect = BisectSettings{{"inductor:fusion"}, {}};
  const std::shared_ptr<CompiledGraph> c = compile(g, unfused);
  EXPECT_GT(c->stats().kernels, fused) << "with fusion disabled each node is its own kernel";
  // Nothing leaks out of the compile: the next one without settings fuses again, and the process's settings
  // are still the options table's (empty).
  EXPECT_EQ(compile(g, CompileOptions{})->stats().kernels, fused);
  EXPECT_TRUE(current_bisect_settings().disable.empty());
  // The result is right either way (skipping an application leaves a correct program).
  Tensor x = mul(randn({4, 16}), 3.0);
  EXPECT_TRUE(compare_outputs({softmax(x, -1)}, {(*c)({x})[0]}).ok);
}

TEST(CompileOptionsBisection, AMisspeltSiteInTheOptionsIsAnErrorNamingTheClosest) {
  CompileOptions options;
  options.bisect = BisectSettings{{"inductor:fusoin"}, {}};
  try {
    compile(graph::parse_graph(kSoftmax, "s.kir"), options);
    FAIL() << "a misspelt site compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inductor:fusion"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
