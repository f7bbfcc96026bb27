// kiln::register_op (ops/custom.h): a user's op registered at run time is called through the dispatcher,
// captured into a graph without a break, printed and parsed in .kir, run by the interpreter and (extern) by
// the inductor, differentiated by its VJP; bad registrations and kernels that disagree with their meta
// function are clear errors naming the registration's line.
#include <gtest/gtest.h>

#include <atomic>

#include "capture_test_values.h"
#include "capture/capture.h"
#include "core/options.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "ops/api.h"
#include "ops/custom.h"

namespace kiln {
namespace {

std::string here(int line) { return fmt::format("{}:{}", __FILE__, line); }

using capture_test::iota;
using capture_test::expect_same;

std::atomic<int> g_kernel_runs{0};

// The user's kernel: self * k + other, written as a loop over raw memory (nothing kiln can see inside).
std::vector<Tensor> scale_add_kernel(const OpCall& c) {
  ++g_kernel_runs;
  Tensor a = contiguous(c.tensor(0)), b = contiguous(c.tensor(1));
  Tensor out = Tensor::empty(a.sizes(), DType::F32);
  const float k = float(c.float_(2));
  for (int64_t i = 0; i < a.numel(); ++i) out.data<float>()[i] = a.data<float>()[i] * k + b.data<float>()[i];
  return {out};
}

std::vector<TensorMeta> same_as_first(const OpCall& c) { return {c.tensor(0).meta()}; }

// Registered once for the whole test program (a second registration is an error, tested below).
const CustomOp& scale_add() {
  static const CustomOp op = register_op("test::scale_add(Tensor self, Tensor other, float k=2.0) -> Tensor",
                                         {.meta = same_as_first,
                                          .kernel = scale_add_kernel,
                                          .vjp = [](const VjpCall& v) {
                                            const double k = v.call.float_(2);
                                            return std::vector<Tensor>{v.grads[0] * k, v.grads[0]};
                                          }});
  return op;
}

Tensor scale_add_ref(const Tensor& a, const Tensor& b, double k = 2.0) { return a * k + b; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CustomOps, CalledThroughTheDispatcherLikeABuiltIn) {
  const CustomOp& op = scale_add();
  EXPECT_EQ(op.info().name, "test::scale_add");
  EXPECT_EQ(find_op("test::scale_add"), &op.info());
  EXPECT_EQ(&op_info(op.info().id), &op.info());
  expect_same(op({iota({3}), iota({3}, 10)}), scale_add_ref(iota({3}), iota({3}, 10)));
  expect_same(call_op_named("test::scale_add", {iota({3}), iota({3})}, {{"k", 3.0}}).at(0),
              scale_add_ref(iota({3}), iota({3}), 3.0));
  // Shape inference on meta tensors uses the meta function.
  Tensor m = op({Tensor::meta(iota({4, 2}).meta()), Tensor::meta(iota({4, 2}).meta())});
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.sizes(), (Shape{4, 2}));
}

TEST(CustomOps, CapturedAsOneNodeWithoutABreakOnEveryBackend) {
  const int line = __LINE__ + 1;  // where fn calls the op
  auto fn = [](const Tensor& x, const Tensor& y) { return relu(scale_add()({x, y, 0.5})) + 1.0; };
  ExplainOutput e = explain(fn, iota({4}, -3), iota({4}));
  EXPECT_EQ(e.graph_count, 1);
  EXPECT_EQ(e.graph_break_count, 0);
  EXPECT_EQ(e.op_count, 3);
  ASSERT_EQ(e.graphs.size(), 1u);
  EXPECT_NE(e.graphs[0].find("= test::scale_add(%arg0, %arg1, 0.5) : f32[4]  # " + here(line)), std::string::npos)
      << e.graphs[0];
  for (std::string backend : {"eager", "inductor"}) {
    auto f = compile(fn, {.backend = backend});
    for (double start : {-3.0, 5.0}) {
      g_kernel_runs = 0;
      expect_same(f(iota({4}, start), iota({4})), relu(scale_add_ref(iota({4}, start), iota({4}), 0.5)) + 1.0);
      EXPECT_EQ(g_kernel_runs, 1) << backend << ": the user's kernel runs once per call (traced, then replayed)";
    }
    EXPECT_EQ(f.core().recompiles(), 0);
  }
}

TEST(CustomOps, KirPrintsParsesAndRunsThemAndTheInductorCallsThemExtern) {
  graph::Graph g;
  graph::ValueId x = g.add_input("x", iota({3}).meta());
  graph::ValueId y = g.add_input("y", iota({3}).meta());
  graph::ValueId s = g.add_op1(scale_add().info().id, {graph::TensorArg{x}, graph::TensorArg{y}, Scalar(3.0)});
  g.set_outputs({g.add_op1(OpId::neg, {graph::TensorArg{s}})});
  const std::string text = graph::print_graph(g);
  EXPECT_NE(text.find("test::scale_add(%x, %y, 3.0)"), std::string::npos) << text;
  graph::Graph parsed = graph::parse_graph(text, "custom.kir");
  EXPECT_EQ(graph::print_graph(parsed), text);
  const std::vector<Tensor> in = {iota({3}), iota({3}, 7)};
  const Tensor expected = -scale_add_ref(in[0], in[1], 3.0);
  expect_same(graph::run_graph(parsed, in).at(0), expected);
  testing::internal::CaptureStderr();
  std::shared_ptr<CompiledGraph> program;
  {
    ScopedOption logs(Opt::Logs, "lowering");
    program = compile(parsed);
  }
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("= test::scale_add: custom op (kiln::register_op): its kernel is opaque to the inductor"),
            std::string::npos)
      << log;
  expect_same((*program)(in).at(0), expected);
  // A program that has not registered the op cannot read the graph: the error says why.
  std::string unknown = error_of([] {
    graph::parse_graph("graph g(%x: f32[3]) {\n  %y = other::op(%x)\n  return %y\n}\n", "u.kir");
  });
  EXPECT_NE(unknown.find("u.kir:2:8: unknown op 'other::op': a custom op exists only in a program that registers it"),
            std::string::npos)
      << unknown;
}

TEST(CustomOps, TheVjpGivesGradientsAndWithoutOneAGradientIsAnError) {
  Tensor x = iota({3});
  x.set_requires_grad(true);
  Tensor y = iota({3}, 4);
  y.set_requires_grad(true);
  sum(scale_add()({x, y, 5.0}) * iota({3})).backward();
  expect_same(x.grad(), iota({3}) * 5.0);
  expect_same(y.grad(), iota({3}));

  static const CustomOp no_vjp =
      register_op("test::twice(Tensor self) -> Tensor",
                  {.meta = same_as_first, .kernel = [](const OpCall& c) { return std::vector<Tensor>{c.tensor(0) * 2.0}; }});
  Tensor z = iota({2});
  z.set_requires_grad(true);
  EXPECT_NE(error_of([&] { no_vjp({z}); }).find("test::twice: cannot differentiate"), std::string::npos);
  NoGradGuard no_grad;
  expect_same(no_vjp({z}), iota({2}) * 2.0);
}

TEST(CustomOps, BadRegistrationsAreClearErrorsNamingTheLine) {
  CustomOpFunctions ok{.meta = same_as_first, .kernel = scale_add_kernel};
  struct Case {
    std::string schema;
    CustomOpFunctions functions;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"scale2(Tensor self) -> Tensor", ok, "the op name 'scale2' needs a namespace, as in 'mylib::scale2'"},
      {"test::bad(Tensor self -> Tensor", ok, "schema 'test::bad(Tensor self -> Tensor': column"},
      {"test::bad(Tensur self) -> Tensor", ok, "unknown argument type 'Tensur'"},
      {"test::bad(Tensor(a!) self) -> Tensor", ok, "argument 'self' is mutated (Tensor(a!)): custom ops return new"},
      {"test::bad(Tensor self) -> int", ok, "it returns 'int': custom ops return Tensor, Tensor[] or (Tensor, ...)"},
      {"test::bad(Tensor self) -> Tensor", {.kernel = scale_add_kernel}, "op 'test::bad' needs a meta function"},
      {"test::bad(Tensor self) -> Tensor", {.meta = same_as_first}, "op 'test::bad' needs an eager kernel"},
      {"test::scale_add(Tensor self) -> Tensor", ok, "op 'test::scale_add' is already registered (at "},
  };
  scale_add();
  for (const Case& c : cases) {
    const int line = __LINE__ + 1;
    std::string err = error_of([&] { register_op(c.schema, c.functions); });
    EXPECT_EQ(err.find("kiln::register_op at " + here(line) + ": "), 0u) << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << c.schema << ": " << err;
  }
  EXPECT_EQ(find_op("test::bad"), nullptr) << "a refused registration adds nothing";
}

TEST(CustomOps, AKernelThatDisagreesWithItsMetaFunctionOrAliasesAnInputIsAnError) {
  static const CustomOp wrong_shape = register_op(
      "test::wrong_shape(Tensor self) -> Tensor",
      {.meta = same_as_first, .kernel = [](const OpCall& c) { return std::vector<Tensor>{zeros({7})}; }});
  EXPECT_NE(error_of([] { wrong_shape({iota({2})}); })
                .find("custom op test::wrong_shape (registered at " + here(__LINE__ - 4) +
                      "): output 0 of its kernel is f32[7] but its meta function says f32[2]"),
            std::string::npos);
  static const CustomOp aliasing = register_op(
      "test::aliasing(Tensor self) -> Tensor",
      {.meta = same_as_first, .kernel = [](const OpCall& c) { return std::vector<Tensor>{c.tensor(0)}; }});
  EXPECT_NE(error_of([] { aliasing({iota({2})}); }).find("output 0 of its kernel shares memory with an input"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
