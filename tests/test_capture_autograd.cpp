// Autograd engine calls inside a captured function (docs/capture.md, break kind `autograd`; docs/aot.md):
// `t.backward()` and `kiln::grad` are graph breaks that explain() names with the user's line, and the engine runs
// on every call, so a compiled training step that calls backward() inside accumulates `.grad` as eager does
// (before, its VJP calls were recorded as ops of the function: replays computed them and never touched `.grad`).
#include <gtest/gtest.h>

#include "autograd/autograd.h"
#include "capture/capture.h"
#include "graph/compare.h"
#include "ops/api.h"

using namespace kiln;

namespace {

int g_backward_line = 0;

// loss = sum(x * w); loss.backward(); returns 2 * w.grad.
Tensor step_with_backward(const Tensor& x, const Tensor& w) {
  Tensor loss = sum(mul(x, w));
  g_backward_line = __LINE__ + 1;
  loss.backward();
  return mul(w.grad(), 2.0);
}

const ExplainOutput::Break* find_break(const ExplainOutput& e, const std::string& kind) {
  for (const ExplainOutput::Break& b : e.breaks)
    if (b.kind == kind) return &b;
  return nullptr;
}

TEST(CaptureAutograd, ExplainNamesBackwardAsAGraphBreakAtTheUsersLine) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor w = ones({3}).set_requires_grad(true);
  ExplainOutput e = kiln::explain(step_with_backward, x, w);
  const ExplainOutput::Break* b = find_break(e, "autograd");
  ASSERT_NE(b, nullptr) << e;
  EXPECT_NE(b->reason.find("Tensor::backward() runs the autograd engine"), std::string::npos) << b->reason;
  EXPECT_EQ(b->site.line, g_backward_line) << e;
  EXPECT_NE(b->site.file.find("test_capture_autograd.cpp"), std::string::npos) << b->site.str();
}

TEST(CaptureAutograd, ExplainNamesGradAsAGraphBreak) {
  auto f = [](const Tensor& x, const Tensor& w) { return kiln::grad({sum(mul(x, w))}, {w})[0]; };
  Tensor w = ones({3}).set_requires_grad(true);
  ExplainOutput e = kiln::explain(f, Tensor::from_vector<float>({1, 2, 3}, {3}), w);
  const ExplainOutput::Break* b = find_break(e, "autograd");
  ASSERT_NE(b, nullptr) << e;
  EXPECT_NE(b->reason.find("kiln::grad()"), std::string::npos) << b->reason;
}

TEST(CaptureAutograd, FullgraphRefusesBackwardInside) {
  auto f = kiln::compile(step_with_backward, {.backend = "aot_eager", .fullgraph = true, .name = "step"});
  Tensor w = ones({3}).set_requires_grad(true);
  try {
    f(Tensor::from_vector<float>({1, 2, 3}, {3}), w);
    FAIL() << "expected a fullgraph error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("autograd engine"), std::string::npos) << e.what();
  }
}

TEST(CaptureAutograd, CompiledStepCallingBackwardAccumulatesGradLikeEager) {
  for (const std::string backend : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
    Tensor w_eager = ones({3}).set_requires_grad(true), w = ones({3}).set_requires_grad(true);
    auto f = kiln::compile(step_with_backward, {.backend = backend, .name = "step"});
    for (int call = 1; call <= 3; ++call) {
      Tensor expected = step_with_backward(x, w_eager);
      Tensor got = f(x, w);
      ASSERT_TRUE(w.grad().defined());
      EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{1.0 * call, 2.0 * call, 3.0 * call})) << "call " << call;
      CompareVerdict v = compare_outputs({expected}, {got});
      EXPECT_TRUE(v.ok) << "call " << call << ": " << v.str();
    }
  }
}

}  // namespace

namespace {

// Regression: graphs did not record detach, so a tensor detached inside a captured function became a constant
// of the trace and later calls reused the first call's value (gradient 3 on every call below instead of 3, 6,
// 9). Tensor::detach() is now the `detach` op, which capture records (tests/test_capture_tensor_state.cpp: the whole class).
TEST(CaptureAutograd, DetachInsideACompiledFunctionStopsGradientsLikeEager) {
  auto f = [](const Tensor& x, const Tensor& w) { return sum(mul(mul(x, w).detach(), w)); };
  for (const std::string backend : {"aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    auto compiled = kiln::compile(f, {.backend = backend, .name = "detached"});
    for (int call = 1; call <= 3; ++call) {
      Tensor x = Tensor::from_vector<float>({1.0f * call, 2.0f * call, 3.0f * call}, {3});
      Tensor w = ones({3}).set_requires_grad(true);
      compiled(x, w).backward();
      EXPECT_EQ(w.grad().to_double_vector(), x.to_double_vector()) << "call " << call;
    }
  }
}

}  // namespace
