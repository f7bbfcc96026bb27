// Capture (kiln::compile of C++ functions): each graph-break kind, guard kind and recompile reason with its
// message and the user's source line; the recompile limit and eager fall-back; fullgraph; explain();
// KILN_CAPTURE_VERIFY; captured weights updated in place or replaced; suppress_errors; eager regions.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include <unistd.h>

#include "capture_test_values.h"
#include "capture/capture.h"
#include "cli_run.h"
#include "core/options.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "minifier/hook.h"
#include "repro/repro.h"
#include "repro/reproduce.h"
#include "ops/api.h"

namespace kiln {
namespace {

// How capture names a line of this file (std::source_location gives the path as compiled).
std::string here(int line) { return fmt::format("{}:{}", __FILE__, line); }

using capture_test::iota;
using capture_test::expect_same;

// The function body runs only when kiln traces; a cached call replays the graphs.
TEST(Capture, CachedCallsReplayWithoutRunningTheFunction) {
  for (std::string backend : {"eager", "inductor"}) {
    int runs = 0;
    auto f = compile([&](const Tensor& x) { ++runs; return relu(x * 2.0) + 1.0; }, {.backend = backend});
    Tensor x = iota({4}, -2);
    expect_same(f(x), relu(x * 2.0) + 1.0);
    Tensor y = iota({4}, 5);
    expect_same(f(y), relu(y * 2.0) + 1.0);
    EXPECT_EQ(runs, 1) << backend;
    EXPECT_EQ(f.core().recompiles(), 0);
  }
}

TEST(Capture, ResultsOfEveryShape) {
  auto f = compile([](const Tensor& x, double s) { return std::make_tuple(x + s, s * 2, std::vector<Tensor>{x, -x}); },
                   {.backend = "eager"});
  for (int i = 0; i < 2; ++i) {
    auto [a, b, v] = f(iota({2}), 3.0);
    expect_same(a, iota({2}) + 3.0);
    EXPECT_EQ(b, 6.0);
    ASSERT_EQ(v.size(), 2u);
    expect_same(v[1], -iota({2}));
  }
}

// ---- graph breaks: kind, reason, line ----

TEST(CaptureBreaks, ItemBreaksAndKeysTheBranchByValue) {
  int line = 0;
  auto fn = [&](const Tensor& x) {
    line = __LINE__ + 1;
    double s = sum(x).item().to_double();
    return x * s;
  };
  ExplainOutput e = explain(fn, iota({3}));
  ASSERT_EQ(e.graph_break_count, 1);
  EXPECT_EQ(e.breaks[0].kind, "item");
  EXPECT_NE(e.breaks[0].reason.find("Tensor.item()"), std::string::npos);
  EXPECT_EQ(e.breaks[0].site.line, line);
  EXPECT_EQ(e.graph_count, 2);
  auto f = compile(fn, {.backend = "eager"});
  expect_same(f(iota({3})), iota({3}) * 6.0);
  expect_same(f(iota({3})), iota({3}) * 6.0);  // same value: replayed
  EXPECT_EQ(f.core().recompiles(), 0);
  expect_same(f(iota({3}, 2)), iota({3}, 2) * 9.0);  // another value: a new branch
  ASSERT_EQ(f.core().recompile_reasons().size(), 1u);
  EXPECT_EQ(f.core().recompile_reasons()[0],
            fmt::format("the value read at {} (item) is 9.0; the cached traces saw 6.0", here(line)));
}

TEST(CaptureBreaks, BoolBranchTakesBothSidesOnLaterCalls) {
  int line = 0;
  auto f = compile(
      [&](const Tensor& x) {
        line = __LINE__ + 1;
        if (gt(sum(x), 0).is_nonzero()) return x * 2.0;
        return x - 100.0;
      },
      {.backend = "inductor"});
  Tensor pos = iota({3}), neg = iota({3}, -10);
  expect_same(f(pos), pos * 2.0);
  expect_same(f(neg), neg - 100.0);
  int traces_line = line;
  line = 0;
  expect_same(f(pos), pos * 2.0);
  expect_same(f(neg), neg - 100.0);
  EXPECT_EQ(line, 0) << "both sides are cached: the function did not run again";
  ASSERT_EQ(f.core().recompile_reasons().size(), 1u);
  EXPECT_EQ(f.core().recompile_reasons()[0],
            fmt::format("the value read at {} (bool) is False; the cached traces saw True", here(traces_line)));
  ExplainOutput e = explain([](const Tensor& x) { return gt(sum(x), 0).is_nonzero() ? x : -x; }, pos);
  ASSERT_EQ(e.breaks.size(), 1u);
  EXPECT_EQ(e.breaks[0].kind, "bool");
  EXPECT_NE(e.breaks[0].reason.find("data-dependent branch"), std::string::npos);
}

TEST(CaptureBreaks, ReadingElementsBreaks) {
  int line = 0;
  ExplainOutput e = explain(
      [&](const Tensor& x) {
        line = __LINE__ + 1;
        std::vector<double> v = (x + 1.0).to_double_vector();
        return x * v[0];
      },
      iota({2}));
  ASSERT_EQ(e.breaks.size(), 1u);
  EXPECT_EQ(e.breaks[0].kind, "elements");
  EXPECT_EQ(e.breaks[0].site.line, line);
}

TEST(CaptureBreaks, DisableRegionRunsOnEveryCall) {
  int calls = 0, line = 0;
  auto f = compile(
      [&](const Tensor& x) {
        Tensor y = x + 1.0;
        line = __LINE__ + 1;
        std::vector<Tensor> z = disable([&calls](const std::vector<Tensor>& in) { ++calls; return std::vector<Tensor>{in[0] * 3.0}; }, {y});
        return z[0] - 1.0;
      },
      {.backend = "eager"});
  for (int i = 0; i < 3; ++i) expect_same(f(iota({2})), (iota({2}) + 1.0) * 3.0 - 1.0);
  EXPECT_EQ(calls, 3);
  ExplainOutput e = explain(
      [](const Tensor& x) {
        return disable([](const std::vector<Tensor>& in) { return in; }, {x})[0] + 1.0;
      },
      iota({2}));
  ASSERT_EQ(e.breaks.size(), 1u);
  EXPECT_EQ(e.breaks[0].kind, "disable");
  EXPECT_EQ(e.breaks[0].site.line, __LINE__ - 5);
}

TEST(CaptureBreaks, PrintIsReplayedOnEveryCall) {
  auto f = compile(
      [](const Tensor& x) {
        Tensor y = x * 2.0;
        print("y", y);
        return y + 1.0;
      },
      {.backend = "eager"});
  testing::internal::CaptureStdout();
  f(iota({2}));
  f(iota({2}, 10));
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("y: "), std::string::npos);
  EXPECT_NE(out.find("22"), std::string::npos) << out;  // the second call's values, printed from the replay
  ExplainOutput e = explain([](const Tensor& x) { print("hello"); return x + 1.0; }, iota({1}));
  ASSERT_EQ(e.breaks.size(), 1u);
  EXPECT_EQ(e.breaks[0].kind, "print");
  EXPECT_EQ(e.breaks[0].site.line, __LINE__ - 3);
}

TEST(CaptureBreaks, OpsNeedingAutogradRunEagerlyAndKeepTheirHistory) {
  Tensor w = iota({3});
  w.set_requires_grad(true);
  auto f = compile([&](const Tensor& x) { return sum(x * w); }, {.backend = "eager"});
  ExplainOutput e = explain([&](const Tensor& x) { return sum(x * w); }, iota({3}));
  ASSERT_GE(e.breaks.size(), 1u);
  EXPECT_EQ(e.breaks[0].kind, "unsupported_op");
  EXPECT_NE(e.breaks[0].reason.find("needs autograd"), std::string::npos) << e.breaks[0].reason;
  for (int i = 0; i < 2; ++i) {
    w.set_grad(Tensor());
    Tensor loss = f(iota({3}));
    loss.backward();
    expect_same(w.grad(), iota({3}));
  }
}

TEST(CaptureBreaks, FullgraphMakesTheFirstBreakAnError) {
  auto f = compile([](const Tensor& x) { return x * sum(x).item().to_double(); },
                   {.backend = "eager", .fullgraph = true, .name = "scale"});
  int line = __LINE__ - 2;
  try {
    f(iota({2}));
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_EQ(std::string(err.what()).find(fmt::format("fullgraph: graph break in scale ({}) at {}: Tensor.item()",
                                                       here(line), here(line))),
              0u)
        << err.what();
  }
  auto ok = compile([](const Tensor& x) { return x + 1.0; }, {.backend = "eager", .fullgraph = true});
  expect_same(ok(iota({2})), iota({2}) + 1.0);
}

// ---- guards and recompile reasons ----

// A call that fails one guard: returns the compiled result and the eager one.
using Scale = Compiled<Tensor(const Tensor&, int64_t)>;
struct GuardCase {
  std::string name;
  std::function<std::pair<Tensor, Tensor>(Scale&)> call_again;
  std::string reason;
};

std::pair<Tensor, Tensor> scale_both(Scale& f, const Tensor& x, int64_t n) { return {f(x, n), x * double(n)}; }

TEST(CaptureGuards, EachGuardKindRecompilesWithItsReason) {
  const Tensor base = iota({2, 3});
  std::vector<GuardCase> cases = {
      {"size", [](Scale& f) { return scale_both(f, iota({4, 3}), 1); },
       "tensor 'x' size mismatch at index 0: expected 2, got 4"},
      {"rank", [](Scale& f) { return scale_both(f, iota({6}), 1); }, "tensor 'x' rank mismatch: expected 2 dims, got 1"},
      {"dtype", [](Scale& f) { return scale_both(f, to(iota({2, 3}), DType::F64), 1); },
       "tensor 'x' dtype mismatch: expected f32, got f64"},
      {"stride", [](Scale& f) { return scale_both(f, transpose(iota({3, 2}), 0, 1), 1); },
       "tensor 'x' stride mismatch at index 0: expected 3, got 1"},
      {"number", [&](Scale& f) { return scale_both(f, base, 2); }, "'n' == 1 failed: got 2"},
      {"requires_grad",
       [](Scale& f) {
         Tensor t = iota({2, 3});
         t.set_requires_grad(true);
         NoGradGuard ng;
         return scale_both(f, t, 1);
       },
       "tensor 'x' requires_grad mismatch: expected false, got true"},
      {"grad_mode", [&](Scale& f) { NoGradGuard ng; return scale_both(f, base, 1); },
       "grad mode mismatch: expected enabled, got disabled"},
      {"options", [&](Scale& f) { ScopedOption o(Opt::BisectDisable, "passes:cse"); return scale_both(f, base, 1); },
       "kiln options mismatch: expected 'backend=eager"},
  };
  for (const GuardCase& c : cases) {
    auto f = compile([](const Tensor& x, int64_t n) { return x * double(n); },
                     {.backend = "eager", .name = "scale", .arg_names = {"x", "n"}});
    int line = __LINE__ - 2;
    f(base, 1);
    testing::internal::CaptureStderr();
    {
      ScopedOption logs(Opt::Logs, "recompiles");
      for (int call = 0; call < 2; ++call) {  // a recompile, then a replay of the new trace
        auto [compiled, eager] = c.call_again(f);
        expect_same(compiled, eager);
      }
    }
    std::string err = testing::internal::GetCapturedStderr();
    ASSERT_EQ(f.core().recompile_reasons().size(), 1u) << c.name;
    EXPECT_EQ(f.core().recompile_reasons()[0].rfind(c.reason, 0), 0u) << c.name << ": " << f.core().recompile_reasons()[0];
    EXPECT_NE(err.find(fmt::format("[kiln:recompiles] recompiling scale ({}) because: {}", here(line), c.reason)),
              std::string::npos)
        << c.name << ": " << err;
    EXPECT_NE(err.find(fmt::format("(called at {}:", __FILE__)), std::string::npos) << c.name << ": " << err;
  }
}

TEST(CaptureGuards, VectorLengthAndAliasing) {
  auto f = compile([](const std::vector<Tensor>& xs) { return xs[0] + xs.back(); },
                   {.backend = "eager", .arg_names = {"xs"}});
  f(std::vector<Tensor>{iota({2}), iota({2})});
  f(std::vector<Tensor>{iota({2}), iota({2}), iota({2})});
  ASSERT_EQ(f.core().recompile_reasons().size(), 1u);
  EXPECT_EQ(f.core().recompile_reasons()[0], "'xs' length mismatch: expected 2, got 3");
  auto g = compile([](const Tensor& a, const Tensor& b) { return add_(a, 1.0) + b; },
                   {.backend = "eager", .arg_names = {"a", "b"}});
  Tensor x = iota({2});
  expect_same(g(iota({2}), iota({2})), iota({2}) * 2.0 + 1.0);
  Tensor r = g(x, x);  // a and b are one tensor: the in-place update shows through b
  expect_same(r, (iota({2}) + 1.0) * 2.0);
  ASSERT_EQ(g.core().recompile_reasons().size(), 1u);
  EXPECT_EQ(g.core().recompile_reasons()[0],
            "tensor 'b' aliasing mismatch: expected its own object, got the same object as 'a'");
}

TEST(CaptureGuards, RecompileLimitWarnsAndFallsBackToEager) {
  int runs = 0;
  auto f = compile([&](const Tensor& x, double c) { ++runs; return x + c; },
                   {.backend = "eager", .recompile_limit = 2, .name = "shift", .arg_names = {"x", "c"}});
  int line = __LINE__ - 2;
  testing::internal::CaptureStderr();
  for (int i = 0; i < 6; ++i) expect_same(f(iota({2}), 0.5 + i), iota({2}) + (0.5 + i));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(f.core().recompiles(), 2);
  EXPECT_TRUE(f.core().fell_back());
  EXPECT_EQ(runs, 6);  // three traces, then three eager calls
  EXPECT_NE(err.find(fmt::format("shift hit the recompile limit (2)\n    function: shift ({})\n    last reason: 'c' == "
                                 "2.5 failed: got 3.5",
                                 here(line))),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("hit the recompile limit", err.find("hit the recompile limit") + 1), std::string::npos)
      << "warned once";
  f(iota({2}), 0.5);  // a cached guard set still replays
  EXPECT_EQ(runs, 6);
  auto strict = compile([](const Tensor& x, double c) { return x + c; },
                        {.backend = "eager", .recompile_limit = 0, .error_on_recompile_limit = true});
  strict(iota({2}), 1.0);
  EXPECT_THROW(strict(iota({2}), 2.0), Error);
}

// ---- captured tensors ----

TEST(CaptureWeights, InPlaceUpdatesAreSeenAndReplacementsRecompile) {
  for (std::string backend : {"eager", "inductor"}) {
    struct Model {
      Tensor w = iota({3});
    } model;
    auto f = compile([&model](const Tensor& x) { return sum(x * model.w); }, {.backend = backend});
    Tensor x = iota({3});
    expect_same(f(x), sum(x * model.w));
    {
      NoGradGuard ng;  // an SGD step: w -= 0.1 * grad, in place
      add_(model.w, ones({3}), -0.1);
    }
    expect_same(f(x), sum(x * model.w));
    EXPECT_EQ(f.core().recompiles(), 0) << backend;
    model.w = iota({3}, 10);  // another object: the one the trace read is gone
    expect_same(f(x), sum(x * model.w));
    ASSERT_EQ(f.core().recompile_reasons().size(), 1u) << backend;
    EXPECT_EQ(f.core().recompile_reasons()[0],
              "captured tensor 'captured0' (f32[3]) was replaced by another object: the one the trace read is gone");
  }
}

TEST(CaptureWeights, InPlaceUpdatesOfArgumentsAreReplayed) {
  for (std::string backend : {"eager", "inductor"}) {
    auto step = compile([](const Tensor& w, const Tensor& g) { add_(w, g, -0.5); }, {.backend = backend});
    Tensor w = iota({4});
    step(w, ones({4}));
    step(w, ones({4}));
    expect_same(w, iota({4}) - 1.0);
  }
}

TEST(CaptureVerify, CatchesAGlobalKilnCannotGuard) {
  static double g_scale = 2.0;
  auto f = compile([](const Tensor& x) { return x * g_scale; }, {.backend = "eager", .name = "scaled"});
  int line = __LINE__ - 1;
  ScopedOption verify(Opt::CaptureVerify, "1");
  f(iota({2}));
  g_scale = 3.0;
  testing::internal::CaptureStderr();
  Tensor y = f(iota({2}));
  std::string err = testing::internal::GetCapturedStderr();
  expect_same(y, iota({2}) * 3.0);  // verified calls run eagerly
  EXPECT_NE(err.find(fmt::format("KILN_CAPTURE_VERIFY: scaled ({}) called at {}: this call's trace differs", here(line),
                                 here(line + 6))),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("graph1: cached `"), std::string::npos) << err;
  EXPECT_NE(err.find("3"), std::string::npos) << err;
}

TEST(CaptureBackends, SuppressErrorsRunsAFailingGraphEagerly) {
  CaptureOptions options;
  options.custom_backend = [](const graph::Graph&, const std::vector<Tensor>&) -> GraphProgram {
    throw CompileError("broken backend");
  };
  auto strict = compile([](const Tensor& x) { return x + 1.0; }, options);
  EXPECT_THROW(strict(iota({2})), CompileError);
  options.suppress_errors = true;
  auto f = compile([](const Tensor& x) { return x + 1.0; }, options);
  testing::internal::CaptureStderr();
  expect_same(f(iota({2})), iota({2}) + 1.0);
  expect_same(f(iota({2})), iota({2}) + 1.0);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("backend 'custom' failed on graph 1 of fn"), std::string::npos) << err;
  EXPECT_NE(err.find("broken backend; that graph runs eagerly (suppress_errors)"), std::string::npos) << err;
}

TEST(CaptureBackends, UnknownBackendAndModeAreErrors) {
  try {
    compile([](const Tensor& x) { return x; }, {.backend = "no_such_backend"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown backend 'no_such_backend' (available: "), std::string::npos) << e.what();
  }
  try {
    compile([](const Tensor& x) { return x; }, {.mode = "max-speed"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown compile mode 'max-speed'; the modes are default, reduce-overhead, "
                                         "max-autotune"), std::string::npos) << e.what();
  }
  ScopedOption env(Opt::Backend, "eager");
  // reduce-overhead is a CUDA graph replay, max-autotune times CUDA kernels: on a CPU backend each is an error at
  // kiln::compile naming why and where.
  for (const char* mode : {"reduce-overhead", "max-autotune"})
    for (const char* backend : {"inductor", "eager", "aot_eager"}) {
      try {
        compile([](const Tensor& x) { return x; }, {.backend = backend, .mode = mode});
        FAIL() << backend;
      } catch (const Error& e) {
        const std::string text = e.what();
        EXPECT_NE(text.find("test_capture.cpp:"), std::string::npos) << text;
        EXPECT_NE(text.find("mode " + std::string(mode)), std::string::npos) << text;
        EXPECT_NE(text.find("needs backend inductor_cuda; backend " + std::string(backend) + " has only mode default"),
                  std::string::npos) << text;
      }
    }
  auto f = compile([](const Tensor& x) { return x + 1.0; });
  f(iota({1}));
  ExplainOutput e = explain([](const Tensor& x) { return x + 1.0; }, iota({1}));
  EXPECT_NE(e.guards.back().find("backend=eager"), std::string::npos);
}

TEST(CaptureExplain, CountsGraphsBreaksOpsAndGuards) {
  auto fn = [](const Tensor& x, int64_t n) {
    Tensor y = relu(x) * double(n);
    if (gt(sum(y), 0).is_nonzero()) y = y + 1.0;
    return exp(y);
  };
  ExplainOutput e = explain(fn, iota({2}), int64_t(3));
  EXPECT_EQ(e.graph_count, 2);
  EXPECT_EQ(e.graph_break_count, 1);
  EXPECT_EQ(e.ops_per_graph, (std::vector<int>{4, 2}));
  EXPECT_EQ(e.guards[0], "tensor 'arg0': f32[2] strides [1] cpu requires_grad=false");
  EXPECT_EQ(e.guards[1], "'arg1' == 3");
  std::ostringstream os;
  os << e;
  EXPECT_EQ(os.str().rfind("Graph Count: 2\nGraph Break Count: 1\nOp Count: 6\nBreak Reasons:\n  Break Reason 1:\n", 0), 0u)
      << os.str();
}

TEST(CaptureEagerRegions, AnOutputShapeChangeIsAMiss) {
  auto f = compile(
      [](const Tensor& x) {
        std::vector<Tensor> y = disable([](const std::vector<Tensor>& in) {
          int64_t n = sum(in[0]).item<int64_t>() > 10 ? 4 : 2;
          return std::vector<Tensor>{ones({n})};
        }, {x});
        return y[0] * 2.0;
      },
      {.backend = "eager"});
  expect_same(f(iota({2})), ones({2}) * 2.0);
  expect_same(f(iota({2}, 10)), ones({4}) * 2.0);
  ASSERT_EQ(f.core().recompile_reasons().size(), 1u);
  EXPECT_NE(f.core().recompile_reasons()[0].find("size mismatch at index 0: expected 2, got 4"), std::string::npos)
      << f.core().recompile_reasons()[0];
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CaptureBreaks, DataDependentOutputShapeRunsEagerly) {
  auto fn = [](const Tensor& x) { return index(x, {gt(x, 0.0)}) * 2.0; };
  ExplainOutput e = explain(fn, iota({4}, -1));
  ASSERT_EQ(e.breaks.size(), 1u);
  EXPECT_EQ(e.breaks[0].kind, "unsupported_op");
  EXPECT_NE(e.breaks[0].reason.find("index:"), std::string::npos) << e.breaks[0].reason;
  auto f = compile(fn, {.backend = "eager"});
  for (double start : {-1.0, -1.0, -3.0, 0.0}) expect_same(f(iota({4}, start)), fn(iota({4}, start)));
}

TEST(CaptureErrors, AFailingOpRaisesTheEagerError) {
  auto f = compile([](const Tensor& a, const Tensor& b) { return mm(a, b); }, {.backend = "eager"});
  std::string eager_error, compiled_error;
  try {
    mm(iota({2, 3}), iota({2, 3}));
  } catch (const Error& e) {
    eager_error = e.what();
  }
  try {
    f(iota({2, 3}), iota({2, 3}));
  } catch (const Error& e) {
    compiled_error = e.what();
  }
  EXPECT_FALSE(eager_error.empty());
  EXPECT_EQ(compiled_error, eager_error);
  expect_same(f(iota({2, 3}), iota({3, 2})), mm(iota({2, 3}), iota({3, 2})));  // the cache is still usable
}

TEST(CaptureLogs, ChannelsAndDebugDir) {
  std::string dir = testing::TempDir() + "/capture_debug_" + std::to_string(::getpid());
  auto f = compile(
      [](const Tensor& x) {
        Tensor y = relu(x);
        return gt(sum(y), 0.0).is_nonzero() ? y * 2.0 : -y;
      },
      {.backend = "eager", .name = "logged"});
  int line = __LINE__ - 6;
  testing::internal::CaptureStderr();
  {
    ScopedOption logs(Opt::Logs, "graph_breaks,guards,graph_code,capture_ops");
    ScopedOption debug(Opt::DebugDir, dir);
    f(iota({2}));
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(fmt::format("[kiln:graph_breaks] graph break in logged ({}) at {}: data-dependent branch", here(line),
                                 here(line + 3))),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("[kiln:guards] guards of logged"), std::string::npos) << err;
  EXPECT_NE(err.find("tensor 'arg0': f32[2] strides [1] cpu requires_grad=false"), std::string::npos) << err;
  EXPECT_NE(err.find("[kiln:graph_code] graph 1 of logged"), std::string::npos) << err;
  EXPECT_NE(err.find("= relu(%arg0)"), std::string::npos) << err;
  EXPECT_NE(err.find("[kiln:capture_ops] logged (" + here(line) + "): recorded relu at " + here(line + 2) +
                     " (graph 1, op 1)"),
            std::string::npos)
      << err;
  int dumped = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/capture"))
    dumped += (entry.path().string().ends_with("_graph1") || entry.path().string().ends_with("_graph2")) &&
              std::filesystem::exists(entry.path() / "graph.kir");
  EXPECT_EQ(dumped, 2) << dir;
  std::filesystem::remove_all(dir);
}

// Each dumped graph has its inputs' values beside it: `kiln run G.kir --inputs G.inputs` (load_inputs, then the
// interpreter) replays the captured call and gives what the compiled call gave. An argument the function
// updates in place is dumped with the value the graph read, not the value after the call.
TEST(CaptureLogs, DebugDirDumpsEachGraphWithItsInputValues) {
  namespace fs = std::filesystem;
  const fs::path dir = testing::TempDir() + "/capture_inputs_" + std::to_string(::getpid());
  fs::remove_all(dir);
  Tensor w = iota({1}, 10);
  auto f = compile([&](const Tensor& x) {
    Tensor y = relu(x) * w;
    add_(x, 1.0);
    return y.is_nonzero() ? y : sum(y);
  }, {.backend = "eager"});
  // One element, so the bool break applies; run with the debug dir on so the trace keeps the values.
  const Tensor x0 = iota({1}, 4);
  Tensor x = clone(x0);
  Tensor out;
  {
    ScopedOption debug(Opt::DebugDir, dir.string());
    out = f(x);
  }
  std::vector<fs::path> kirs;
  for (const auto& e : fs::directory_iterator(dir / "capture"))
    if (fs::exists(e.path() / "graph.kir")) kirs.push_back(e.path() / "graph.kir");
  std::sort(kirs.begin(), kirs.end());
  ASSERT_EQ(kirs.size(), 1u) << "the bool read closes graph 1; nothing is recorded after it";
  const fs::path inputs = kirs[0].parent_path() / "inputs";
  ASSERT_TRUE(fs::is_directory(inputs)) << inputs;
  graph::Graph g = graph::load_graph(kirs[0].string());
  std::vector<Tensor> in = graph::load_inputs(g, inputs.string());
  ASSERT_EQ(in.size(), 2u);  // the argument and the captured weight
  expect_same(in[0], x0);    // as read, before add_ updated it
  expect_same(in[1], w);
  std::vector<Tensor> replayed = graph::run_graph(g, in);
  expect_same(replayed.at(0), out);
  // The CLI takes the same files.
  cli_test::CliResult r = cli_test::kiln_cli("run '" + kirs[0].string() + "' --inputs '" + inputs.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CaptureRepro, ReproAfterCaptureSavesTheCapturedGraphWhoseCompileFails) {
  install_repro_hook();
  std::string dir = testing::TempDir() + "/capture_repro_" + std::to_string(::getpid());
  ScopedOption after(Opt::ReproAfter, "capture"), level(Opt::ReproLevel, "1"), debug(Opt::DebugDir, dir),
      inject(Opt::Inject, "relu:compile_error");
  auto f = compile([](const Tensor& x) { return relu(x) + 1.0; }, {.backend = "inductor"});
  testing::internal::CaptureStderr();
  EXPECT_THROW(f(iota({4})), CompileError);
  std::string err = testing::internal::GetCapturedStderr();
  int repros = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    repros += entry.path().extension() == ".repro";
  EXPECT_EQ(repros, 1) << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// KILN_REPRO_AFTER=capture at the levels of docs/options.md (level 1 is tested above): 2 also minifies a
// compile error; 3 also saves and minifies a runtime error of a compiled captured graph; 4 also compares each
// compiled graph's outputs with eager and minifies an accuracy failure. Every file written reproduces.
class CaptureReproLevels : public ::testing::Test {
 protected:
  void SetUp() override {
    install_repro_hook();
    dir_ = std::filesystem::path(testing::TempDir()) /
           fmt::format("capture_repro_{}_{}", ::getpid(), testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // Compiles a three-op function with the hook at `level` and `inject`, and calls it twice (the first call
  // traces and compiles, the second runs the compiled graph). Returns the error the caller saw ("" for none).
  std::string call_twice(int level, const std::string& inject) {
    ScopedOption after(Opt::ReproAfter, "capture"), lv(Opt::ReproLevel, std::to_string(level)),
        debug(Opt::DebugDir, dir_.string()), inj(Opt::Inject, inject);
    auto f = compile([](const Tensor& x) { return relu(x * 2.0) + 1.0; }, {.backend = "inductor"});
    testing::internal::CaptureStderr();
    std::string error;
    try {
      for (int i = 0; i < 2; ++i) f(iota({4}, -2));
    } catch (const Error& e) {
      error = e.what();
    }
    stderr_ = testing::internal::GetCapturedStderr();
    return error;
  }

  // What the calls printed and the files they left, for failure messages.
  std::string seen() const {
    std::string out = "stderr:\n" + stderr_ + "files:";
    if (std::filesystem::exists(dir_))
      for (const auto& e : std::filesystem::directory_iterator(dir_)) out += " " + e.path().filename().string();
    return out;
  }

  // The repro files whose names match `pattern`, each checked to reproduce its failure kind.
  std::vector<ReproFile> reproducing(const std::string& pattern, FailureKind kind) {
    std::vector<ReproFile> out;
    if (!std::filesystem::exists(dir_)) return out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      if (!std::regex_match(e.path().filename().string(), std::regex(pattern))) continue;
      ReproFile r = load_repro(e.path().string());
      EXPECT_EQ(r.expected.kind, kind) << e.path();
      ReproOutcome o = reproduce(r, e.path().string(), 60);
      EXPECT_TRUE(o.reproduces) << e.path() << ": " << o.observed.message;
      out.push_back(std::move(r));
    }
    return out;
  }

  std::filesystem::path dir_;
  std::string stderr_;
};

TEST_F(CaptureReproLevels, Level2MinifiesTheCapturedGraphsCompileError) {
  EXPECT_NE(call_twice(2, "relu:compile_error"), "");
  std::vector<ReproFile> full = reproducing(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.repro)", FailureKind::CompileError);
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(full[0].graph.num_op_nodes(), 3) << "the captured graph as the backend got it";
  std::vector<ReproFile> min = reproducing(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)", FailureKind::CompileError);
  ASSERT_EQ(min.size(), 1u);
  EXPECT_LT(min[0].graph.num_op_nodes(), 3) << "smaller than the captured graph";
  std::filesystem::remove_all(dir_);
  EXPECT_NE(call_twice(2, "relu:runtime_error"), "");
  EXPECT_TRUE(reproducing(R"(.*\.repro)", FailureKind::RuntimeError).empty()) << "level 2 leaves runtime errors alone";
}

TEST_F(CaptureReproLevels, Level3SavesAndMinifiesARuntimeErrorOfTheCompiledGraph) {
  EXPECT_NE(call_twice(3, "relu:runtime_error"), "");
  std::vector<ReproFile> min = reproducing(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)", FailureKind::RuntimeError);
  ASSERT_EQ(min.size(), 1u);
  EXPECT_LT(min[0].graph.num_op_nodes(), 3) << "smaller than the captured graph";
  std::filesystem::remove_all(dir_);
  EXPECT_EQ(call_twice(3, ""), "");
  EXPECT_TRUE(reproducing(R"(.*\.repro)", FailureKind::RuntimeError).empty()) << "a good run leaves no repro";
}

TEST_F(CaptureReproLevels, Level4MinifiesAnAccuracyFailure) {
  EXPECT_EQ(call_twice(4, "relu:accuracy"), "");  // the calls succeed, with a wrong result
  std::vector<ReproFile> min = reproducing(R"(repro_[0-9a-f]{16}_[0-9a-f]{8}\.min\.repro)", FailureKind::Accuracy);
  ASSERT_EQ(min.size(), 1u) << seen();
  EXPECT_LT(min[0].graph.num_op_nodes(), 3) << "smaller than the captured graph";
  std::filesystem::remove_all(dir_);
  EXPECT_EQ(call_twice(3, "relu:accuracy"), "");
  EXPECT_TRUE(reproducing(R"(.*\.repro)", FailureKind::Accuracy).empty()) << "below level 4 outputs are not compared";
}

// A compiled function called from its own kiln::disable region (while it traces, and again while it replays)
// used to wait for the lock its outer call holds (glibc detects it and throws "Resource deadlock avoided"; a
// replay's nested reader lock can hang); the inner call now runs eagerly.
TEST(CaptureEagerRegions, AFunctionCalledFromItsOwnDisableRegionRunsThatCallEagerly) {
  for (std::string backend : {"eager", "inductor"}) {
    std::function<Tensor(const Tensor&, int64_t)> self;
    auto f = compile(
        [&self](const Tensor& x, int64_t depth) {
          Tensor y = x * 2.0;
          if (depth > 0)
            y = disable([&self, depth](const std::vector<Tensor>& in) { return std::vector<Tensor>{self(in[0], depth - 1)}; },
                        {y})[0];
          return y + 1.0;
        },
        {.backend = backend});
    self = [&f](const Tensor& x, int64_t depth) { return f(x, depth); };
    // depth 1: (x*2)*2 + 1 + 1; the first call traces, the second replays (the region calls f again).
    for (int i = 0; i < 2; ++i) expect_same(f(iota({3}), 1), (iota({3}) * 4.0 + 1.0) + 1.0);
    EXPECT_EQ(f.core().recompiles(), 0) << backend << ": the inner calls did not touch the cache";
  }
}

}  // namespace
}  // namespace kiln
