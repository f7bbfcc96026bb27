// The comparator's baselines (graph/compare.h comparison_baselines): a low-precision graph is judged against
// eager at its own dtypes, as PyTorch's `same()` does, by every tool (`kiln run --check`, the failure oracle
// behind `kiln repro run` and `kiln gate`, the minifier, `kiln fuzz`). Before, "eager" was the fp64 reference
// rounded to each output's dtype, and correct bf16/f16 graphs failed even on the eager backend (issue 21);
// a genuinely wrong bf16 result (KILN_INJECT) must still fail.
#include <gtest/gtest.h>

#include "cli_run.h"
#include "core/options.h"
#include "fuzz/check.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "minifier/minifier.h"
#include "oracle_testing.h"

using namespace kiln;
using namespace kiln::cli_test;

namespace {

// A Llama-style block in bf16 (RMSNorm, an MLP with SiLU), its result also returned in f32 as logits are: the
// rounded fp64 reference of the f32 output has almost no error, so the old baseline allowed ~1e-5.
const char* kLlamaBf16 = R"(graph block(%x: bf16[4, 16, 64], %g: bf16[64], %w1: bf16[64, 128], %w2: bf16[128, 64]) {
  %sq = mul(%x, %x) : bf16[4, 16, 64]
  %ms = mean(%sq, [-1], True) : bf16[4, 16, 1]
  %e = add(%ms, 1e-06) : bf16[4, 16, 1]
  %r = rsqrt(%e) : bf16[4, 16, 1]
  %n = mul(%x, %r) : bf16[4, 16, 64]
  %h = mul(%n, %g) : bf16[4, 16, 64]
  %u = matmul(%h, %w1) : bf16[4, 16, 128]
  %us = mul(%u, 0.125) : bf16[4, 16, 128]
  %a = silu(%us) : bf16[4, 16, 128]
  %d = matmul(%a, %w2) : bf16[4, 16, 64]
  %ds = mul(%d, 0.0625) : bf16[4, 16, 64]
  %f = to(%ds, f32) : f32[4, 16, 64]
  return %ds, %f
}
)";

// Attention probabilities in f16, also returned in f32.
const char* kSoftmaxF16 = R"(graph attn(%q: f16[2, 8, 32], %k: f16[2, 32, 8]) {
  %s = matmul(%q, %k) : f16[2, 8, 8]
  %t = mul(%s, 0.17677669529663687) : f16[2, 8, 8]
  %p = softmax(%t, -1) : f16[2, 8, 8]
  %pf = to(%p, f32) : f32[2, 8, 8]
  return %p, %pf
}
)";

graph::Graph parse(const char* text) { return graph::parse_graph(text, "test.kir"); }

class BaselinesCli : public CliTest {};

}  // namespace

TEST(ComparisonBaselines, EagerRunsInTheGraphsOwnDtypesAndFp64InF64) {
  graph::Graph g = parse(kLlamaBf16);
  manual_seed(0);
  ComparisonBaselines b = comparison_baselines(g, graph::seeded_inputs(g, 1));
  ASSERT_EQ(b.eager.size(), 2u);
  EXPECT_EQ(b.eager[0].dtype(), DType::BF16);
  EXPECT_EQ(b.eager[1].dtype(), DType::F32);
  EXPECT_EQ(b.fp64[0].dtype(), DType::F64);
  // eager's own error against fp64 is what the RMSE rule scales: far more than one rounding of the output.
  CompareVerdict self = compare_to_baselines(b, b.eager);
  EXPECT_TRUE(self.ok) << self.str();
}

TEST_F(BaselinesCli, RunCheckPassesCorrectLowPrecisionGraphsOnEveryBackend) {
  const std::string llama = file("llama.kir", kLlamaBf16), softmax = file("softmax.kir", kSoftmaxF16);
  for (const std::string& backend : {"eager", "inductor"})
    for (const std::string& seed : {"0", "1"})
      for (const std::string& f : {llama, softmax}) {
        CliResult r = kiln_cli("run " + f + " --check --backend " + backend + " --seed " + seed);
        EXPECT_EQ(r.exit_code, 0) << backend << " seed " << seed << " " << f << ":\n" << r.output;
        EXPECT_NE(r.output.find("check against the fp64 reference: PASS"), std::string::npos) << r.output;
      }
}

TEST_F(BaselinesCli, RunCheckStillFailsAWrongBf16Result) {
  const std::string llama = file("llama.kir", kLlamaBf16);
  CliResult r = kiln_cli("run " + llama + " --check --backend inductor --seed 1", "KILN_INJECT=silu:accuracy");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("check against the fp64 reference: FAIL"), std::string::npos) << r.output;
}

TEST_F(BaselinesCli, GatePassesCorrectLowPrecisionGraphs) {
  file("llama.kir", kLlamaBf16);
  file("softmax.kir", kSoftmaxF16);
  CliResult r = kiln_cli("gate " + dir_.string() + " --backend inductor");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(ComparisonBaselines, TheFailureOracleJudgesAgainstEagerAtTheGraphsDtypes) {
  for (const char* text : {kLlamaBf16, kSoftmaxF16}) {
    graph::Graph g = parse(text);
    for (uint64_t seed : {0, 1}) {
      std::vector<Tensor> inputs = graph::seeded_inputs(g, seed);
      for (const std::string backend : {"eager", "inductor"}) {
        FailureSignature f = classify_on(backend, g, inputs, 60);
        EXPECT_FALSE(f.failed()) << g.name << " on " << backend << ", seed " << seed << ": " << f.message;
      }
    }
  }
  graph::Graph g = parse(kLlamaBf16);
  ScopedOption inject(Opt::Inject, "silu:accuracy");
  FailureSignature f = classify_on("inductor", g, graph::seeded_inputs(g, 1), 60);
  EXPECT_EQ(f.kind, FailureKind::Accuracy) << f.message;
}

TEST(ComparisonBaselines, TheMinifierSeesNoAccuracyFailureInACorrectBf16GraphAndFindsAnInjectedOne) {
  graph::Graph g = parse(kLlamaBf16);
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 1);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_baselines_minify_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  minify::MinifyOptions o;
  o.backend = "inductor";
  o.accuracy = true;
  o.output = (dir / "correct.repro").string();
  EXPECT_THROW(minify::minify(g, inputs, o), Error) << "the minifier chased an accuracy failure that is not there";

  ScopedOption inject(Opt::Inject, "silu:accuracy");
  o.output = (dir / "injected.repro").string();
  o.config = minify::current_config();
  minify::MinifyResult r = minify::minify(g, inputs, o);
  EXPECT_TRUE(r.reverified) << r.reverify_message;
  ASSERT_EQ(r.graph.num_op_nodes(), 1) << graph::print_graph(r.graph);
  for (const graph::Node& n : r.graph.nodes())
    if (n.kind == graph::NodeKind::Op) EXPECT_EQ(n.op, OpId::silu) << graph::print_graph(r.graph);
  std::filesystem::remove_all(dir);
}

TEST(ComparisonBaselines, KilnFuzzChecksAgainstTheSameBaselines) {
  graph::Graph g = parse(kLlamaBf16);
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 1);
  manual_seed(0);
  ComparisonBaselines b = comparison_baselines(g, inputs);
  fuzz::CheckJob job{&g, &inputs, &b.eager, &b.fp64, {}, 0};
  fuzz::CheckOptions o;
  o.backend = "inductor";
  EXPECT_FALSE(fuzz::check_isolated({job}, o)[0].failed());
  job.config["KILN_INJECT"] = "silu:accuracy";
  EXPECT_EQ(fuzz::check_isolated({job}, o)[0].kind, FailureKind::Accuracy);
}
