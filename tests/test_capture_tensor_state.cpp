// Tensor API calls that make or change a tensor without an op call, inside a function compiled with
// kiln::compile (docs/capture.md, "What a cached call replays"): each must be replayed on every call's own
// tensors, never baked into the trace as the first call's value. Every test calls the compiled function
// several times with new input values and asserts eager's results each time. The members of the class:
// detach() (now the `detach` op), set_requires_grad(), grad(), set_grad(), register_hook() and retain_grad()
// (eager regions of break kind `autograd`), and ops eager answers with their input object (contiguous, to).
#include <gtest/gtest.h>

#include <utility>

#include "autograd/autograd.h"
#include "capture/capture.h"
#include "ops/api.h"

using namespace kiln;

namespace {

const std::vector<std::string> kBackends = {"eager", "aot_eager"};

Tensor values(float scale) { return Tensor::from_vector<float>({1.0f * scale, 2.0f * scale, 3.0f * scale}, {3}); }

TEST(CaptureTensorState, DetachedValueIsRecomputedOnEveryCall) {
  auto fn = [](const Tensor& x) { return mul(x.detach(), 2.0); };
  for (const std::string backend : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    auto f = kiln::compile(fn, {.backend = backend, .name = "detached"});
    for (int call = 1; call <= 3; ++call) {
      Tensor x = values(float(call));
      EXPECT_EQ(f(x).to_double_vector(), fn(x).to_double_vector()) << "call " << call;
    }
  }
}

TEST(CaptureTensorState, DetachIsAGraphOpAndNotDifferentiable) {
  auto fn = [](const Tensor& x) { return mul(x.detach(), x); };
  Tensor x = values(1).set_requires_grad(true);
  ExplainOutput e = kiln::explain(fn, x);
  bool recorded = false;
  for (const std::string& g : e.graphs) recorded = recorded || g.find("detach(") != std::string::npos;
  EXPECT_TRUE(recorded) << e;
  Tensor y = mul(x.detach(), x);
  EXPECT_FALSE(x.detach().requires_grad());
  sum(y).backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{1, 2, 3}));  // d/dx of c * x with c = x, detached
}

// contiguous() of a contiguous tensor and to() its own dtype answer with their input object: an in-place write
// through the result is a write to the argument, on every call.
TEST(CaptureTensorState, InPlaceWriteThroughAnOpThatReturnsItsInputReachesTheArgument) {
  auto fn = [](const Tensor& x) {
    add_(contiguous(x), 1.0);
    add_(to(x, DType::F32), 10.0);
    return mul(x, 2.0);
  };
  for (const std::string backend : {"eager", "aot_eager", "inductor"}) {
    SCOPED_TRACE(backend);
    auto f = kiln::compile(fn, {.backend = backend, .name = "same_object"});
    for (int call = 1; call <= 3; ++call) {
      Tensor x = values(float(call)), x_eager = values(float(call));
      Tensor expected = fn(x_eager);
      EXPECT_EQ(f(x).to_double_vector(), expected.to_double_vector()) << "call " << call;
      EXPECT_EQ(x.to_double_vector(), x_eager.to_double_vector()) << "call " << call;
    }
  }
}

// requires_grad_ on a value made inside the function: the compiled call's value must require grad too.
TEST(CaptureTensorState, SetRequiresGradInsideIsReplayed) {
  auto fn = [](const Tensor& x) {
    Tensor y = mul(x, 2.0).detach();
    y.set_requires_grad(true);
    return std::pair<Tensor, Tensor>{sum(mul(y, y)), y};
  };
  for (const std::string& backend : kBackends) {
    SCOPED_TRACE(backend);
    auto f = kiln::compile(fn, {.backend = backend, .name = "requires_grad_"});
    for (int call = 1; call <= 3; ++call) {
      auto [loss, y] = f(values(float(call)));
      ASSERT_TRUE(loss.requires_grad()) << "call " << call;
      loss.backward();
      ASSERT_TRUE(y.grad().defined()) << "call " << call;
      EXPECT_EQ(y.grad().to_double_vector(), mul(y, 2.0).to_double_vector()) << "call " << call;
    }
  }
}

// A training step that clears the gradient, runs backward and reads the gradient: each call sees its own.
TEST(CaptureTensorState, SetGradAndGradInsideAreReplayed) {
  Tensor w = ones({3}).set_requires_grad(true);
  auto fn = [&w](const Tensor& x) {
    w.set_grad(Tensor());
    sum(mul(x, w)).backward();
    return mul(w.grad(), 1.0);
  };
  for (const std::string& backend : kBackends) {
    SCOPED_TRACE(backend);
    auto f = kiln::compile(fn, {.backend = backend, .name = "step"});
    for (int call = 1; call <= 3; ++call) {
      Tensor x = values(float(call));
      EXPECT_EQ(f(x).to_double_vector(), x.to_double_vector()) << "call " << call;
      EXPECT_EQ(w.grad().to_double_vector(), x.to_double_vector()) << "call " << call;
    }
    EXPECT_TRUE(f.core().recompile_reasons().empty());
  }
}

// A hook on an intermediate value doubles its gradient on every call, not only on the traced one.
TEST(CaptureTensorState, HookOnAnIntermediateRunsOnEveryCall) {
  auto fn = [](const Tensor& x, const Tensor& w) {
    Tensor h = mul(x, w);
    h.register_hook([](const Tensor& g) { return mul(g, 2.0); });
    return sum(h);
  };
  for (const std::string& backend : kBackends) {
    SCOPED_TRACE(backend);
    auto f = kiln::compile(fn, {.backend = backend, .name = "hooked"});
    for (int call = 1; call <= 3; ++call) {
      Tensor x = values(float(call)), w = ones({3}).set_requires_grad(true);
      f(x, w).backward();
      EXPECT_EQ(w.grad().to_double_vector(), mul(x, 2.0).to_double_vector()) << "call " << call;
    }
  }
}

TEST(CaptureTensorState, RetainGradOnAReturnedIntermediateIsReplayed) {
  auto fn = [](const Tensor& x, const Tensor& w) {
    Tensor h = mul(x, w);
    h.retain_grad();
    return std::pair<Tensor, Tensor>{sum(mul(h, 3.0)), h};
  };
  for (const std::string& backend : kBackends) {
    SCOPED_TRACE(backend);
    auto f = kiln::compile(fn, {.backend = backend, .name = "retained"});
    for (int call = 1; call <= 3; ++call) {
      auto [loss, h] = f(values(float(call)), ones({3}).set_requires_grad(true));
      loss.backward();
      ASSERT_TRUE(h.grad().defined()) << "call " << call;
      EXPECT_EQ(h.grad().to_double_vector(), (std::vector<double>{3, 3, 3})) << "call " << call;
    }
  }
}

// Each state call is a graph break of kind `autograd` naming the user's line.
TEST(CaptureTensorState, StateCallsAreAutogradBreaksAtTheUsersLine) {
  int line = 0;
  auto fn = [&line](const Tensor& x) {
    Tensor y = mul(x, 2.0).detach();
    line = __LINE__ + 1;
    y.set_requires_grad(true);
    return sum(y);
  };
  ExplainOutput e = kiln::explain(fn, values(1));
  ASSERT_FALSE(e.breaks.empty()) << e;
  EXPECT_EQ(e.breaks[0].kind, "autograd") << e;
  EXPECT_NE(e.breaks[0].reason.find("Tensor::set_requires_grad() reads or changes a tensor's autograd state"),
            std::string::npos) << e.breaks[0].reason;
  EXPECT_EQ(e.breaks[0].site.line, line);
}

}  // namespace
