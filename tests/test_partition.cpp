// The forward/backward partitioners (src/aot/partition*.{h,cpp}, docs/partitioners.md): hand-written joint
// graphs (a pointwise chain after a matmul, softmax, layer norm, dropout, the 4x and distance rules) with
// exactly the saved values each partitioner must choose; the forward and backward graphs verify and together
// compute bit for bit what the joint graph computes; every decision is logged with its reason; and a
// property over random joint graphs.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>

#include "aot/partition.h"
#include "aot/partition_impl.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "ops/api.h"

using namespace kiln;
using namespace kiln::graph;
using kiln::aot::JointLayout;
using kiln::aot::Partition;

namespace {

// Each joint graph below: primals, then tangents; forward outputs, then one gradient per primal.

// y = silu(x @ w): the backward of the pointwise chain reads h and g; w and x feed the matmul gradients.
constexpr std::string_view kMatmulChain = R"(graph mm_chain(%primals_1: f32[8, 16], %primals_2: f32[16, 32], %tangents_1: f32[8, 32]) {
  %h = mm(%primals_1, %primals_2)
  %g = sigmoid(%h)
  %y = mul(%h, %g)
  %one_minus_g = sub(1.0, %g)
  %dg = mul(%g, %one_minus_g)
  %h_dg = mul(%h, %dg)
  %dsilu = add(%g, %h_dg)
  %dh = mul(%tangents_1, %dsilu)
  %w_t = permute(%primals_2, [1, 0])
  %dx = mm(%dh, %w_t)
  %x_t = permute(%primals_1, [1, 0])
  %dw = mm(%x_t, %dh)
  return %y, %dx, %dw
})";

// softmax over the last dim, decomposed; its backward reads only the output.
constexpr std::string_view kSoftmax = R"(graph softmax(%primals_1: f32[4, 8], %tangents_1: f32[4, 8]) {
  %m = amax(%primals_1, [1], True)
  %z = sub(%primals_1, %m)
  %e = exp(%z)
  %s = sum(%e, [1], True)
  %y = div(%e, %s)
  %ty = mul(%tangents_1, %y)
  %sty = sum(%ty, [1], True)
  %d = sub(%tangents_1, %sty)
  %dx = mul(%y, %d)
  return %y, %dx
})";

// layer norm without affine parameters, decomposed; the backward reads the output and rstd.
constexpr std::string_view kLayerNorm = R"(graph layer_norm(%primals_1: f32[4, 16], %tangents_1: f32[4, 16]) {
  %mean = mean(%primals_1, [1], True)
  %xc = sub(%primals_1, %mean)
  %sq = mul(%xc, %xc)
  %var = mean(%sq, [1], True)
  %var_eps = add(%var, 1e-05)
  %rstd = rsqrt(%var_eps)
  %y = mul(%xc, %rstd)
  %g1 = mean(%tangents_1, [1], True)
  %ty = mul(%tangents_1, %y)
  %g2 = mean(%ty, [1], True)
  %y_g2 = mul(%y, %g2)
  %r1 = sub(%tangents_1, %g1)
  %r2 = sub(%r1, %y_g2)
  %dx = mul(%r2, %rstd)
  return %y, %dx
})";

// dropout(p=0.25), decomposed: the keep mask (bool) is what the backward needs.
constexpr std::string_view kDropout = R"(graph dropout(%primals_1: f32[4, 8], %tangents_1: f32[4, 8]) {
  %r = rand_like(%primals_1)
  %keep = ge(%r, 0.25)
  %masked = mul(%primals_1, %keep)
  %y = mul(%masked, 1.3333333333333333)
  %t_keep = mul(%tangents_1, %keep)
  %dx = mul(%t_keep, 1.3333333333333333)
  return %y, %dx
})";

// y = x * mean(x): the backward reads x and the row means (16 bytes from 256: the 4x rule keeps them saved).
constexpr std::string_view kScaleByMean = R"(graph scale_by_mean(%primals_1: f32[4, 16], %tangents_1: f32[4, 16]) {
  %m = mean(%primals_1, [1], True)
  %y = mul(%primals_1, %m)
  %a = mul(%tangents_1, %m)
  %b = mul(%tangents_1, %primals_1)
  %c = sum(%b, [1], True)
  %d = div(%c, 16.0)
  %dx = add(%a, %d)
  return %y, %dx
})";

// A pointwise chain whose backward reads its first and last values: b is 3 forward steps from the backward.
constexpr std::string_view kLongChain = R"(graph chain(%primals_1: f32[16], %tangents_1: f32[16]) {
  %a = exp(%primals_1)
  %b = mul(%a, 2.0)
  %c = mul(%b, 2.0)
  %d = mul(%c, 2.0)
  %y = sin(%d)
  %cos_d = cos(%d)
  %dd = mul(%tangents_1, %cos_d)
  %dc = mul(%dd, 2.0)
  %db = mul(%dc, 2.0)
  %da = mul(%db, 2.0)
  %dx = mul(%da, %a)
  return %y, %dx
})";

// y = v * v for v = x[0:48]: the default saves v (192 bytes); the raw min cut would save x (256 bytes, its
// weight is lower because v is never materialised), so min-cut falls back to the default's choice.
constexpr std::string_view kSliceSquare = R"(graph slice_square(%primals_1: f32[64], %tangents_1: f32[48]) {
  %v = slice(%primals_1, 0, 0, 48)
  %y = mul(%v, %v)
  %tv = mul(%tangents_1, %v)
  %dv = mul(%tv, 2.0)
  %dx = pad(%dv, [0, 16])
  return %y, %dx
})";

// Two halves of the input: the forward uses one, the backward reads the other.
constexpr std::string_view kChunked = R"(graph chunked(%primals_1: f32[8], %tangents_1: f32[4]) {
  %a, %b = chunk(%primals_1, 2)
  %y = mul(%a, 3.0)
  %tb = mul(%tangents_1, %b)
  %da = mul(%tangents_1, 3.0)
  %dx = cat([%da, %tb], 0)
  return %y, %dx
})";

constexpr JointLayout kOneInOneOut{.num_primals = 1, .num_forward_outputs = 1};

// The saved values of a partition: the forward's outputs after the forward outputs, by name; checks that the
// backward takes the same values, in the same order, as its first inputs.
std::vector<std::string> saved_names(const Partition& p, const JointLayout& layout) {
  std::vector<std::string> names;
  const auto& outs = p.forward.outputs();
  for (size_t i = size_t(layout.num_forward_outputs); i < outs.size(); ++i) names.push_back(p.forward.value(outs[i]).name);
  EXPECT_EQ(int(names.size()), p.num_saved);
  for (size_t i = 0; i < names.size() && i < p.backward.inputs().size(); ++i)
    EXPECT_EQ(p.backward.value(p.backward.inputs()[i]).name, names[i]);
  return names;
}

std::vector<std::string> recomputed_names(const Partition& p) {
  std::vector<std::string> names;
  for (const auto& d : p.decisions)
    if (!d.saved) names.push_back(d.value);
  return names;
}

// Runs the joint graph, and the forward then the backward, on the same seeded inputs (the random generator
// reset before each); returns what differs from the joint's forward outputs and gradients, bit for bit ("" if
// nothing).
std::string mismatch_against_joint(const Graph& joint, const JointLayout& layout, const Partition& p) {
  std::vector<Tensor> inputs = seeded_inputs(joint, 11);
  manual_seed(5);
  std::vector<Tensor> expected = run_graph(joint, inputs);
  manual_seed(5);
  std::vector<Tensor> primals(inputs.begin(), inputs.begin() + layout.num_primals);
  std::vector<Tensor> forward_out = run_graph(p.forward, primals);
  std::vector<Tensor> backward_in(forward_out.begin() + layout.num_forward_outputs, forward_out.end());
  backward_in.insert(backward_in.end(), inputs.begin() + layout.num_primals, inputs.end());
  std::vector<Tensor> gradients = run_graph(p.backward, backward_in);
  if (size_t(layout.num_forward_outputs) + gradients.size() != expected.size()) return "output count differs";
  std::string diff;
  for (size_t i = 0; i < size_t(layout.num_forward_outputs); ++i)
    if (!same_bits(forward_out[i], expected[i])) diff += fmt::format("forward output {} differs; ", i);
  for (size_t i = 0; i < gradients.size(); ++i)
    if (!same_bits(gradients[i], expected[size_t(layout.num_forward_outputs) + i]))
      diff += fmt::format("gradient {} differs; ", i);
  return diff;
}

// Whether any value the backward recomputes (a forward value, not backward work) comes from a matrix product
// or another op the partitioners must never recompute.
std::vector<std::string> recomputed_unrecomputables(const Graph& joint, const JointLayout& layout, const Partition& p) {
  aot::JointRegions regions = aot::classify_joint(joint, layout);
  std::vector<std::string> bad;
  for (const auto& d : p.decisions) {
    if (d.saved) continue;
    ValueId id = *joint.find_value(d.value);
    if (regions.of_value[size_t(id)] != aot::JointRegion::Forward) continue;
    if (!aot::recomputable(aot::recompute_class(joint.nodes()[size_t(joint.value(id).producer)]))) bad.push_back(d.value);
  }
  return bad;
}

struct Both {
  Partition save_needed, min_cut;
};

// Partitions `text` both ways and checks what every partition must satisfy.
Both partition_both(std::string_view text, const JointLayout& layout, const aot::MinCutOptions& options = {}) {
  Graph joint = parse_graph(text, "joint.kir");
  Both b{aot::partition_joint(joint, layout, aot::PartitionPolicy::SaveNeeded),
         aot::partition_min_cut(joint, layout, options)};
  for (const Partition* p : {&b.save_needed, &b.min_cut}) {
    EXPECT_NO_THROW(verify_graph(p->forward, "forward.kir")) << print_graph(p->forward);
    EXPECT_NO_THROW(verify_graph(p->backward, "backward.kir")) << print_graph(p->backward);
    EXPECT_EQ(mismatch_against_joint(joint, layout, *p), "");
    EXPECT_EQ(recomputed_unrecomputables(joint, layout, *p), std::vector<std::string>{});
  }
  EXPECT_LE(b.min_cut.saved_bytes, b.save_needed.saved_bytes);
  return b;
}

using Names = std::vector<std::string>;

}  // namespace

TEST(Partition, MatmulThenPointwiseChainRecomputesTheChainNotTheMatmul) {
  const JointLayout layout{.num_primals = 2, .num_forward_outputs = 1};
  Both b = partition_both(kMatmulChain, layout);
  EXPECT_EQ(saved_names(b.save_needed, layout), (Names{"primals_1", "primals_2", "h", "g"}));
  EXPECT_EQ(b.save_needed.saved_bytes, 512 + 2048 + 1024 + 1024);
  EXPECT_EQ(saved_names(b.min_cut, layout), (Names{"primals_1", "primals_2", "h"}));
  EXPECT_EQ(b.min_cut.saved_bytes, 512 + 2048 + 1024);
  // g = sigmoid(h) is recomputed; the rest of the backward's inputs are computed there either way.
  EXPECT_EQ(recomputed_names(b.min_cut), (Names{"g", "one_minus_g", "dg", "h_dg", "dsilu", "w_t", "x_t"}));
  EXPECT_EQ(recomputed_names(b.save_needed), (Names{"one_minus_g", "dg", "h_dg", "dsilu", "w_t", "x_t"}));
  // The forward of min-cut does not return g; its backward recomputes it from h.
  EXPECT_NE(print_graph(b.min_cut.backward).find("%g = sigmoid(%h)"), std::string::npos) << print_graph(b.min_cut.backward);
  EXPECT_EQ(print_graph(b.min_cut.backward).find("mm(%primals_1"), std::string::npos);
}

TEST(Partition, SoftmaxSavesItsOutput) {
  Both b = partition_both(kSoftmax, kOneInOneOut);
  EXPECT_EQ(saved_names(b.save_needed, kOneInOneOut), Names{"y"});
  EXPECT_EQ(saved_names(b.min_cut, kOneInOneOut), Names{"y"});
  EXPECT_EQ(b.min_cut.saved_bytes, 4 * 8 * 4);
}

TEST(Partition, LayerNormSavesItsOutputAndRstd) {
  Both b = partition_both(kLayerNorm, kOneInOneOut);
  EXPECT_EQ(saved_names(b.save_needed, kOneInOneOut), (Names{"rstd", "y"}));
  EXPECT_EQ(saved_names(b.min_cut, kOneInOneOut), (Names{"rstd", "y"}));
  EXPECT_EQ(b.min_cut.saved_bytes, 16 + 256);
}

TEST(Partition, DropoutSavesTheMaskAndNeverRedraws) {
  Both b = partition_both(kDropout, kOneInOneOut);
  EXPECT_EQ(saved_names(b.save_needed, kOneInOneOut), Names{"keep"});
  EXPECT_EQ(saved_names(b.min_cut, kOneInOneOut), Names{"keep"});
  EXPECT_EQ(b.min_cut.saved_bytes, 32);  // bool
  for (const Partition* p : {&b.save_needed, &b.min_cut})
    EXPECT_EQ(print_graph(p->backward).find("rand_like"), std::string::npos) << print_graph(p->backward);
}

TEST(Partition, FourTimesSmallerOutputsAreSavedNotRecomputed) {
  Both b = partition_both(kScaleByMean, kOneInOneOut);
  EXPECT_EQ(saved_names(b.save_needed, kOneInOneOut), (Names{"primals_1", "m"}));
  EXPECT_EQ(saved_names(b.min_cut, kOneInOneOut), (Names{"primals_1", "m"}));
  const auto& m_decision = b.min_cut.decisions.at(1);
  EXPECT_EQ(m_decision.value, "m");
  EXPECT_NE(m_decision.reason.find("4x rule: its output (16 bytes) is over 4x smaller than its inputs (256 bytes)"),
            std::string::npos) << m_decision.reason;
  // Without the rule, the mean is recomputed from the saved input.
  Both off = partition_both(kScaleByMean, kOneInOneOut, {.ban_small_outputs = false});
  EXPECT_EQ(saved_names(off.min_cut, kOneInOneOut), Names{"primals_1"});
  EXPECT_EQ(recomputed_names(off.min_cut), Names{"m"});
}

TEST(Partition, DistanceRuleStopsLongRecomputations) {
  Both b = partition_both(kLongChain, kOneInOneOut);
  EXPECT_EQ(saved_names(b.save_needed, kOneInOneOut), (Names{"a", "d"}));
  // By default the whole chain is recomputed from the input.
  EXPECT_EQ(saved_names(b.min_cut, kOneInOneOut), Names{"primals_1"});
  EXPECT_EQ(recomputed_names(b.min_cut), (Names{"a", "b", "c", "d", "cos_d"}));
  // With at most 2 steps, b (3 steps from the backward) may not be recomputed: the cut moves to d.
  Both near = partition_both(kLongChain, kOneInOneOut, {.max_dist_from_bw = 2});
  EXPECT_EQ(saved_names(near.min_cut, kOneInOneOut), (Names{"primals_1", "d"}));
  EXPECT_EQ(recomputed_names(near.min_cut), (Names{"a", "cos_d"}));
}

TEST(Partition, MinCutFallsBackToTheDefaultWhenTheCutWouldSaveMoreBytes) {
  Both b = partition_both(kSliceSquare, kOneInOneOut);
  EXPECT_EQ(saved_names(b.save_needed, kOneInOneOut), Names{"v"});
  EXPECT_EQ(saved_names(b.min_cut, kOneInOneOut), Names{"v"});
  ASSERT_EQ(b.min_cut.decisions.size(), 1u);
  EXPECT_EQ(b.min_cut.decisions[0].reason,
            "the min cut would save 256 bytes, more than the default partition's 192: the default's saved values "
            "are used");
}

// Regression: a node with several outputs runs whole. Its output that only the backward reads is a forward
// value (saved by the default partitioner), not backward work that would need the unsaved input.
TEST(Partition, MultiOutputNodesRunWhole) {
  Both b = partition_both(kChunked, kOneInOneOut);
  EXPECT_EQ(saved_names(b.save_needed, kOneInOneOut), Names{"b"});
  EXPECT_EQ(saved_names(b.min_cut, kOneInOneOut), Names{"b"});
}

// When one output of a multi-output node is saved and another is recomputed, the backward's copy of the node
// names the saved one afresh and keeps reading the saved input.
TEST(Partition, RecomputingANodeWithASavedOutputKeepsTheSavedValue) {
  Graph joint = parse_graph(R"(graph halves(%primals_1: f32[8], %tangents_1: f32[4]) {
  %a, %b = chunk(%primals_1, 2)
  %y = mul(%a, %b)
  %ta = mul(%tangents_1, %a)
  %tb = mul(%tangents_1, %b)
  %dx = cat([%tb, %ta], 0)
  return %y, %dx
})", "joint.kir");
  aot::JointRegions regions = aot::classify_joint(joint, kOneInOneOut);
  auto reason = [](ValueId) { return std::string("chosen by the test"); };
  Partition p = aot::build_partition(joint, kOneInOneOut, regions, {*joint.find_value("a"), *joint.find_value("primals_1")},
                                     reason, reason, "test");
  EXPECT_EQ(saved_names(p, kOneInOneOut), (Names{"primals_1", "a"}));
  EXPECT_EQ(recomputed_names(p), Names{"b"});
  EXPECT_NO_THROW(verify_graph(p.backward, "backward.kir"));
  EXPECT_NE(print_graph(p.backward).find("%a.1, %b = chunk(%primals_1, 2)"), std::string::npos) << print_graph(p.backward);
  EXPECT_NE(print_graph(p.backward).find("%ta = mul(%tangents_1, %a)"), std::string::npos) << print_graph(p.backward);
  EXPECT_EQ(mismatch_against_joint(joint, kOneInOneOut, p), "");
}

TEST(Partition, EveryDecisionIsLoggedWithItsReason) {
  Graph joint = parse_graph(kMatmulChain, "joint.kir");
  testing::internal::CaptureStderr();
  {
    ScopedOption logs(Opt::Logs, "partitioner");
    aot::partition_joint(joint, {.num_primals = 2, .num_forward_outputs = 1}, aot::PartitionPolicy::MinCut);
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[kiln:partitioner] min-cut partition of 'mm_chain': 3 saved values, 3584 bytes\n"),
            std::string::npos) << err;
  EXPECT_NE(err.find("[kiln:partitioner]   save %h: on the min cut (1024 bytes, weight 1126); extern kernel "
                     "(matrix product, convolution or pooling) op: never recomputed\n"),
            std::string::npos) << err;
  EXPECT_NE(err.find("[kiln:partitioner]   save %primals_1: on the min cut (512 bytes, weight 563); a primal"),
            std::string::npos) << err;
  EXPECT_NE(err.find("[kiln:partitioner]   recompute %g: pointwise: recomputed in the backward from the saved "
                     "values (saving it would weigh 2252)\n"),
            std::string::npos) << err;
  EXPECT_NE(err.find("[kiln:partitioner]   recompute %w_t: view: only the backward reads it, computed there\n"),
            std::string::npos) << err;
  // Off by default: nothing is written.
  testing::internal::CaptureStderr();
  aot::partition_joint(joint, {.num_primals = 2, .num_forward_outputs = 1}, aot::PartitionPolicy::MinCut);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(Partition, BadLayoutsAreErrorsNamingTheProblem) {
  Graph joint = parse_graph(kSoftmax, "joint.kir");
  for (auto policy : {aot::PartitionPolicy::SaveNeeded, aot::PartitionPolicy::MinCut}) {
    try {
      aot::partition_joint(joint, {.num_primals = 3, .num_forward_outputs = 1}, policy);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_FALSE(e.internal());
      EXPECT_STREQ(e.what(), "joint graph 'softmax': the layout names 3 primals but the graph has 2 inputs; a joint "
                             "graph's inputs are the primals followed by the tangents");
    }
    try {  // %dx (an output computed from the tangent) taken for a forward output
      aot::partition_joint(joint, {.num_primals = 1, .num_forward_outputs = 2}, policy);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_FALSE(e.internal());
      EXPECT_NE(std::string(e.what()).find("forward output %dx depends on tangent input(s)"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Partition, ClassificationComesFromTheOpTable) {
  Graph g = parse_graph(R"(graph ops(%x: f32[4, 4], %w: f32[4, 4]) {
  %mm = mm(%x, %w)
  %lin = linear(%x, %w)
  %e = exp(%x)
  %t = permute(%x, [1, 0])
  %r = reshape(%x, [16])
  %s = sum(%x, [1], True)
  %sm = softmax(%x, 1)
  %c = cat([%x, %w], 0)
  %z = zeros([2])
  %rn = rand_like(%x)
  %dr = dropout(%x, 0.5, True)
  %de = dropout(%x, 0.5, False)
  return %mm
})", "ops.kir");
  std::vector<std::string> classes;
  for (const graph::Node& n : g.nodes()) classes.push_back(std::string(aot::recompute_class_name(aot::recompute_class(n))));
  const std::string ext = "extern kernel (matrix product, convolution or pooling)";
  EXPECT_EQ(classes, (Names{ext, ext, "pointwise", "view", "view", "reduction", "reduction", "copy", "creation",
                            "random", "random", "reduction"}));
}

// ---------------------------------------------------------------- property: random joint graphs

namespace {

// A random joint graph in .kir text: forward ops over the primals (pointwise, reductions, matrix products),
// then "backward" ops over everything (any graph of this shape is a joint graph to a partitioner; its
// gradients need not be true gradients), gradients = a backward value + tangents_1.
std::string random_joint_text(int num_primals, int num_forward_outputs) {
  struct Val {
    std::string name;
    bool wide;  // f32[4, 4], else f32[4, 1]
  };
  std::vector<Val> forward, all;
  std::string header, body;
  for (int i = 1; i <= num_primals; ++i) {
    forward.push_back({fmt::format("primals_{}", i), true});
    header += fmt::format("%primals_{}: f32[4, 4], ", i);
  }
  auto type_of = [](bool wide) { return wide ? "f32[4, 4]" : "f32[4, 1]"; };
  int counter = 0;
  auto add_node = [&](std::vector<Val>& pool) {
    std::string name = fmt::format("v{}", counter++);
    const Val& a = *rc::gen::elementOf(pool);
    const Val& b = *rc::gen::elementOf(pool);
    int kind = *rc::gen::inRange(0, 4);
    std::vector<Val> wide;
    for (const Val& v : pool)
      if (v.wide) wide.push_back(v);
    if (kind == 3 && wide.size() >= 1) {
      const Val& p = *rc::gen::elementOf(wide);
      const Val& q = *rc::gen::elementOf(wide);
      body += fmt::format("  %{} = mm(%{}, %{})\n", name, p.name, q.name);
      return Val{name, true};
    }
    if (kind == 2) {
      std::string op = *rc::gen::element<std::string>("sum", "amax", "mean");
      body += fmt::format("  %{} = {}(%{}, [1], True)\n", name, op, a.name);
      return Val{name, false};
    }
    if (kind == 1) {
      std::string op = *rc::gen::element<std::string>("add", "mul", "sub");
      body += fmt::format("  %{} = {}(%{}, %{})\n", name, op, a.name, b.name);
      return Val{name, a.wide || b.wide};
    }
    std::string op = *rc::gen::element<std::string>("sin", "tanh", "sigmoid", "neg", "relu");
    body += fmt::format("  %{} = {}(%{})\n", name, op, a.name);
    return Val{name, a.wide};
  };
  // The first forward node is wide, so forward output 1 (and tangents_1) can be.
  body += fmt::format("  %v{} = sin(%primals_1)\n", counter);
  forward.push_back({fmt::format("v{}", counter++), true});
  int num_forward = *rc::gen::inRange(0, 8);
  for (int k = 0; k < num_forward; ++k) forward.push_back(add_node(forward));
  std::vector<Val> outputs{forward[size_t(num_primals)]};
  for (int k = 1; k < num_forward_outputs; ++k)
    outputs.push_back(*rc::gen::elementOf(std::vector<Val>(forward.begin() + num_primals, forward.end())));
  all = forward;
  for (int k = 0; k < num_forward_outputs; ++k) {
    header += fmt::format("%tangents_{}: {}, ", k + 1, type_of(outputs[size_t(k)].wide));
    all.push_back({fmt::format("tangents_{}", k + 1), outputs[size_t(k)].wide});
  }
  int num_backward = *rc::gen::inRange(1, 10);
  for (int k = 0; k < num_backward; ++k) all.push_back(add_node(all));
  std::string returns;
  for (const Val& v : outputs) returns += "%" + v.name + ", ";
  for (int i = 1; i <= num_primals; ++i) {
    const Val& g = *rc::gen::elementOf(all);
    body += fmt::format("  %grad_{} = add(%{}, %tangents_1)\n", i, g.name);
    returns += fmt::format("%grad_{}, ", i);
  }
  header.resize(header.size() - 2);
  returns.resize(returns.size() - 2);
  return fmt::format("graph random_joint({}) {{\n{}  return {}\n}}\n", header, body, returns);
}

}  // namespace

RC_GTEST_PROP(PartitionProperties, BothPartitionsComputeWhatTheJointComputes, ()) {
  const int num_primals = *rc::gen::inRange(1, 4);
  const int num_forward_outputs = *rc::gen::inRange(1, 3);
  const std::string text = random_joint_text(num_primals, num_forward_outputs);
  const JointLayout layout{.num_primals = num_primals, .num_forward_outputs = num_forward_outputs};
  RC_LOG() << text;
  Graph joint = parse_graph(text, "random_joint.kir");
  Partition save_needed = aot::partition_joint(joint, layout, aot::PartitionPolicy::SaveNeeded);
  Partition min_cut = aot::partition_joint(joint, layout, aot::PartitionPolicy::MinCut);
  for (const Partition* p : {&save_needed, &min_cut}) {
    RC_LOG() << (p == &min_cut ? "min-cut" : "save-needed") << ": " << p->saved_bytes << " bytes saved\n";
    for (const auto& d : p->decisions) RC_LOG() << (d.saved ? "  save %" : "  recompute %") << d.value << ": " << d.reason << "\n";
    verify_graph(p->forward, "forward.kir");
    verify_graph(p->backward, "backward.kir");
    RC_ASSERT(mismatch_against_joint(joint, layout, *p) == "");
    RC_ASSERT(recomputed_unrecomputables(joint, layout, *p).empty());
  }
  RC_ASSERT(min_cut.saved_bytes <= save_needed.saved_bytes);
  RC_CLASSIFY(min_cut.saved_bytes < save_needed.saved_bytes, "min-cut saves fewer bytes");
  RC_CLASSIFY(std::any_of(min_cut.decisions.begin(), min_cut.decisions.end(),
                          [](const auto& d) { return d.reason.rfind("the min cut would save", 0) == 0; }),
              "min-cut fell back to the default");
}
