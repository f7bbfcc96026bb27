// Compiled training of the examples (docs/aot.md, "Training"): the conv block and the attention block of
// examples/*.kir, each followed by an eager loss, trained for 20 SGD steps (parameters updated in place between
// steps) through every AOT backend, against the same model written with the eager Tensor API: the same losses
// and the same parameters. (The MLP with its loss is tests/test_aot.cpp, AotTraining.)
#include <gtest/gtest.h>

#include <functional>

#include "api/backends.h"
#include "autograd/autograd.h"
#include "graph/compare.h"
#include "graph/text.h"
#include "ops/api.h"

using namespace kiln;

namespace {

// An example graph in f64, so compiled and eager agree to rounding over 20 steps.
graph::Graph example_f64(const std::string& file) {
  std::string text = graph::print_graph(graph::load_graph(std::string(KILN_SOURCE_DIR) + "/examples/" + file));
  for (size_t at = text.find("f32"); at != std::string::npos; at = text.find("f32", at)) text.replace(at, 3, "f64");
  return graph::parse_graph(text, file);
}

Tensor leaf(const Tensor& t) { return t.detach().set_requires_grad(true); }

// The model's inputs in the graph's order; `params` index the ones SGD updates.
struct Model {
  std::vector<Tensor> inputs;
  std::vector<size_t> params;
};

using Forward = std::function<Tensor(const std::vector<Tensor>&)>;

// 20 steps: loss = mean(f(inputs)^2), backward, p -= 0.1 * p.grad in place. Returns the losses.
std::vector<double> train(Model& m, const Forward& f) {
  std::vector<double> losses;
  for (int step = 0; step < 20; ++step) {
    Tensor out = f(m.inputs);
    Tensor loss = mean(mul(out, out));
    losses.push_back(loss.item<double>());
    loss.backward();
    NoGradGuard no_grad;
    for (size_t i : m.params) {
      Tensor p = m.inputs[i];
      add_(p, mul(p.grad(), -0.1));
      p.set_grad(Tensor());
    }
  }
  return losses;
}

void expect_same_training(const std::string& file, const std::function<Model()>& make, const Forward& eager_forward) {
  const graph::Graph g = example_f64(file);
  Model eager = make();
  const std::vector<double> expected = train(eager, eager_forward);
  EXPECT_LT(expected.back(), expected.front());  // it trains
  for (const std::string backend : {"aot_eager", "aot_eager_decomp_partition", "inductor"}) {
    SCOPED_TRACE(backend);
    Model compiled = make();
    GraphProgram program = compile_for_backend(backend, g, {.repro_stage = "test"});
    std::vector<double> losses = train(compiled, [&](const std::vector<Tensor>& in) {
      Tensor out = program(in)[0];
      EXPECT_TRUE(out.grad_fn() && out.grad_fn()->name().rfind("CompiledFunctionBackward", 0) == 0);
      return out;
    });
    ASSERT_EQ(losses.size(), expected.size());
    for (size_t i = 0; i < losses.size(); ++i) EXPECT_NEAR(losses[i], expected[i], 1e-9 * std::abs(expected[i])) << "step " << i;
    std::vector<Tensor> want, got;
    for (size_t i : eager.params) want.push_back(eager.inputs[i]), got.push_back(compiled.inputs[i]);
    CompareVerdict v = compare_outputs(want, got);
    EXPECT_TRUE(v.ok) << v.str();
  }
}

TEST(AotTraining, ConvBlockTwentySgdStepsMatchEager) {
  auto make = [] {
    manual_seed(21);
    Model m;
    m.inputs = {randn({2, 3, 16, 16}, DType::F64), leaf(mul(randn({8, 3, 3, 3}, DType::F64), 0.3)),
                leaf(mul(randn({8}, DType::F64), 0.1)), leaf(add(mul(randn({8}, DType::F64), 0.1), 1.0)),
                leaf(mul(randn({8}, DType::F64), 0.1)), randn({8}, DType::F64), randn({8}, DType::F64)};
    m.params = {1, 2, 3, 4};
    return m;
  };
  // examples/conv_block.kir written with the Tensor API.
  expect_same_training("conv_block.kir", make, [](const std::vector<Tensor>& in) {
    Tensor c = conv2d(in[0], in[1], in[2], {1, 1}, {1, 1});
    Tensor n = batch_norm(c, in[3], in[4], in[5], exp(in[6]), false, 0.1, 1e-5);
    return max_pool2d(relu(n), {2, 2});
  });
}

TEST(AotTraining, AttentionTwentySgdStepsMatchEager) {
  auto make = [] {
    manual_seed(22);
    Model m;
    m.inputs = {randn({2, 8, 16}, DType::F64)};
    for (int i = 0; i < 4; ++i) m.inputs.push_back(leaf(mul(randn({16, 16}, DType::F64), 0.3)));
    m.inputs.push_back(leaf(mul(randn({16}, DType::F64), 0.1)));
    m.params = {1, 2, 3, 4, 5};
    return m;
  };
  // examples/attention.kir written with the Tensor API.
  expect_same_training("attention.kir", make, [](const std::vector<Tensor>& in) {
    Tensor q = permute(view(linear(in[0], in[1]), {2, 8, 2, 8}), {0, 2, 1, 3});
    Tensor k = permute(view(linear(in[0], in[2]), {2, 8, 2, 8}), {0, 2, 3, 1});
    Tensor v = permute(view(linear(in[0], in[3]), {2, 8, 2, 8}), {0, 2, 1, 3});
    Tensor p = softmax(mul(matmul(q, k), 0.35355339059327373), -1);
    Tensor merged = reshape(transpose(matmul(p, v), 1, 2), {2, 8, 16});
    return linear(merged, in[4], in[5]);
  });
}

}  // namespace

namespace kiln {
namespace {

// A value the forward both returns and saves for the backward (relu's result: its VJP reads the mask from it)
// must not make the output's history hold itself: once the caller drops the output, its compiled backward node
// and the training step's saved activations are freed (a cycle kept every step's memory until exit).
TEST(AotTraining, AnOutputThatIsAlsoSavedLeavesNoCycle) {
  graph::Graph g = graph::parse_graph("graph f(%x: f32[64] grad) {\n  %y = relu(%x) : f32[64]\n  return %y\n}\n");
  for (const char* backend : {"aot_eager", "inductor"}) {
    GraphProgram program = compile_for_backend(backend, g);
    Tensor x = randn({64});
    x.set_requires_grad(true);
    std::weak_ptr<Node> node;
    {
      std::vector<Tensor> out = program({x});
      ASSERT_TRUE(out[0].grad_fn()) << backend << ": the output has the compiled backward as its history";
      node = out[0].grad_fn();
    }
    EXPECT_TRUE(node.expired()) << backend << ": the backward node outlived every output that refers to it";
  }
}

}  // namespace
}  // namespace kiln
