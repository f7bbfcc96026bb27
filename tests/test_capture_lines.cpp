// Per-op source lines: every Tensor API call (functions and operators) carries the caller's file:line into the
// dispatcher (ops/api.h CallSite / TensorOperand), so captured graph nodes, the `capture` and `graph_breaks`
// channels, breaks at unsupported ops, fullgraph errors and explain() name the user's line.
#include <gtest/gtest.h>

#include <sstream>

#include "capture_test_values.h"
#include "capture/capture.h"
#include "core/options.h"
#include "ops/api.h"

namespace kiln {
namespace {

std::string here(int line) { return fmt::format("{}:{}", __FILE__, line); }

using capture_test::iota;

// The .kir line of the node that defines `%name` in `text`.
std::string node_line(const std::string& text, const std::string& op) {
  size_t at = text.find("= " + op + "(");
  if (at == std::string::npos) return "(no " + op + " node)";
  size_t begin = text.rfind('\n', at) + 1, end = text.find('\n', at);
  return text.substr(begin, end - begin);
}

TEST(CaptureLines, EveryRecordedNodeNamesItsLine) {
  const int line = __LINE__ + 2;
  auto fn = [](const Tensor& x) {
    Tensor a = relu(x);                     // line + 0
    Tensor b = a * 3.0;                     // line + 1: an operator
    Tensor c = 2.0 - b;                     // line + 2: the tensor on the right
    Tensor d = -c;                          // line + 3: unary
    std::vector<Tensor> parts = split(d, 2);  // line + 4: several outputs
    return sum(parts[0] + parts[1], IntList{0}, true);  // line + 5: defaults and an operator on one line
  };
  ExplainOutput e = explain(fn, iota({4}));
  ASSERT_EQ(e.graphs.size(), 1u);
  const std::string& g = e.graphs[0];
  const std::vector<std::pair<std::string, int>> expected = {{"relu", 0}, {"mul", 1}, {"sub", 2}, {"neg", 3},
                                                             {"split", 4}, {"add", 5}, {"sum", 5}};
  for (const auto& [op, offset] : expected)
    EXPECT_TRUE(node_line(g, op).ends_with("# " + here(line + offset))) << op << ": " << node_line(g, op) << "\n" << g;
}

TEST(CaptureLines, TheCaptureChannelNamesEachOpsLine) {
  const int line = __LINE__ + 1;
  auto f = compile([](const Tensor& x) { return exp(x) / 2.0; }, {.backend = "eager", .name = "f"});
  testing::internal::CaptureStderr();
  {
    ScopedOption logs(Opt::Logs, "capture_ops");
    f(iota({2}));
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(fmt::format("[kiln:capture_ops] f ({}): recorded exp at {} (graph 1, op 1)", here(line), here(line))),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(fmt::format("recorded div at {} (graph 1, op 2)", here(line))), std::string::npos) << err;
  EXPECT_EQ(err.find("line unknown"), std::string::npos) << err;
}

TEST(CaptureLines, AnUnsupportedOpBreakNamesItsLine) {
  const int line = __LINE__ + 3;
  auto fn = [](const Tensor& x) {
    Tensor y = x * 2.0;
    Tensor picked = index(y, {gt(y, 0.0)});  // data-dependent output shape: runs eagerly
    return picked + 1.0;
  };
  ExplainOutput e = explain(fn, iota({4}, -1));
  ASSERT_EQ(e.breaks.size(), 1u);
  EXPECT_EQ(e.breaks[0].kind, "unsupported_op");
  EXPECT_EQ(e.breaks[0].site.str(), here(line));
  const int compiled_at = __LINE__ + 1;
  auto f = compile(fn, {.backend = "eager", .name = "pick"});
  testing::internal::CaptureStderr();
  {
    ScopedOption logs(Opt::Logs, "graph_breaks");
    f(iota({4}, -1));
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(fmt::format("[kiln:graph_breaks] graph break in pick ({}) at {}: index: shape inference "
                                 "failed (index: the output shape depends on the data",
                                 here(compiled_at), here(line))),
            std::string::npos)
      << err;
  auto strict = compile(fn, {.backend = "eager", .fullgraph = true, .name = "strict"});
  try {
    strict(iota({4}, -1));
    FAIL() << "expected a fullgraph error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find(fmt::format("at {}: index: shape inference failed", here(line))),
              std::string::npos)
        << err.what();
  }
}

TEST(CaptureLines, AnOpNeedingAutogradNamesItsLine) {
  Tensor w = iota({3});
  w.set_requires_grad(true);
  const int line = __LINE__ + 1;
  ExplainOutput e = explain([&](const Tensor& x) { return sum(x * w); }, iota({3}));
  ASSERT_GE(e.breaks.size(), 1u);
  EXPECT_EQ(e.breaks[0].site.str(), here(line));
  std::ostringstream printed;
  printed << e;
  EXPECT_NE(printed.str().find("User Stack: " + here(line)), std::string::npos) << printed.str();
}

}  // namespace
}  // namespace kiln
