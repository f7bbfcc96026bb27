// Regression tests of what `kiln fuzz` found (fuzz/findings/README.md), one class per test: an in-place copy
// between views of one buffer that differ only in a size-1 dim's stride; values internal to an op eager runs
// as one f32 kernel, rounded by constant folding or merged by CSE with a rounded twin; shape inference that
// accepts calls the kernel refuses; runtime errors that name the node's line only for parsed graphs; vector math
// whose result depended on an element's place in a loop; discontinuous ops fed values on the edge of a step.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "api/backends.h"
#include "core/options.h"
#include "eager/philox.h"
#include "fuzz/domains.h"
#include "fuzz/fuzzer.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "ops/api.h"
#include "repro/failure.h"

using namespace kiln;

namespace {

graph::Graph parse(const std::string& text) { return graph::parse_graph(text, "test.kir"); }

// The graph's outputs on eager and on the inductor, bit for bit.
void expect_inductor_matches_eager_exactly(const std::string& text) {
  graph::Graph g = parse(text);
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  std::vector<Tensor> eager = find_backend("eager")(g, graph::copy_inputs(inputs));
  std::vector<Tensor> compiled = find_backend("inductor")(g, graph::copy_inputs(inputs));
  ASSERT_EQ(eager.size(), compiled.size());
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_EQ(eager[i].to_double_vector(), compiled[i].to_double_vector()) << "output " << i << " of\n" << text;
}

}  // namespace

// ---------------------------------------------------------------- copy_ between views of one buffer

TEST(FuzzFindings, ViewsDifferingOnlyInASizeOneDimsStrideAreAnExactAlias) {
  Tensor x = arange(0, 5, 1, DType::F32);
  Tensor unsqueezed = unsqueeze(x, 0);                   // [1, 5]{5, 1}
  Tensor strided = as_strided(x, {1, 5}, {0, 1}, 0);     // [1, 5]{0, 1}: the same elements in the same order
  copy_(strided, unsqueezed);
  EXPECT_EQ(x.to_double_vector(), (std::vector<double>{0, 1, 2, 3, 4}));
  try {  // a shifted view of the same storage still overlaps partly
    copy_(as_strided(x, {1, 4}, {0, 1}, 1), as_strided(x, {1, 4}, {4, 1}, 0));
    FAIL() << "a partly overlapping copy_ ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("some elements of the input tensor"), std::string::npos) << e.what();
  }
}

TEST(FuzzFindings, CopyOfAConstantsViewIntoItselfRunsCompiled) {
  expect_inductor_matches_eager_exactly(R"(graph main() {
  %x = constant u8[5] [3, 2, 5, 3, 3]
  %v0 = unsqueeze(%x, 0)
  %v27 = copy_(%v0, %v0)
  return %v0
}
)");
}

// ---------------------------------------------------------------- unrounded values through the cleanup passes

TEST(FuzzFindings, ConstantFoldingKeepsAnOpsInternalValuesUnrounded) {
  // lerp(self, end, weight) on bf16 constants: eager computes it in f32 and rounds once; folding its
  // decomposition node by node rounded end - self to bf16 (1.203125 instead of 1.1953125).
  expect_inductor_matches_eager_exactly(R"(graph main() {
  %x = constant bf16[2] [-0.17773438, -0.16015625]
  %x_0 = constant bf16[] -1.78125
  %x_1 = constant bf16[2] [0.056396484, -0.8359375]
  %v1 = lerp(%x, %x_0, %x_1) : bf16[2]
  return %v1
}
)");
}

TEST(FuzzFindings, CseNeverMergesAnOpsInternalValueWithARoundedTwin) {
  // The user's own end - self (rounded to bf16) and lerp's (internal, unrounded) are the same node.
  expect_inductor_matches_eager_exactly(R"(graph main(%x: bf16[64], %e: bf16[64], %w: bf16[64]) {
  %d = sub(%e, %x) : bf16[64]
  %l = lerp(%x, %e, %w) : bf16[64]
  return %d, %l
}
)");
}

// ---------------------------------------------------------------- shape inference refuses what kernels refuse

TEST(FuzzFindings, VerifyRefusesEveryCallTheKernelRefuses) {
  const std::filesystem::path dir = std::filesystem::path(KILN_SOURCE_DIR) / "fuzz" / "findings";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("infer-", 0) != 0 || entry.path().extension() != ".kir") continue;
    ++files;
    try {
      graph::Graph g = graph::load_graph(entry.path().string());
      graph::verify_graph(g, entry.path().string());
      FAIL() << name << ": verify accepted a call its kernel refuses";
    } catch (const Error& e) {
      EXPECT_FALSE(e.internal()) << name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << "the error names no file: " << e.what();
    }
  }
  EXPECT_EQ(files, 8);
}

TEST(FuzzFindings, InPlaceInferenceChecksTheInPlaceContract) {
  auto refused = [](const std::string& text, const std::string& why) {
    try {
      graph::verify_graph(parse(text), "test.kir");
      ADD_FAILURE() << "accepted:\n" << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused("graph m(%x: f32[3]) {\n  %e = expand(%x, [2, 3])\n  %z = mul_(%e, %e)\n  return %z\n}\n",
          "more than one element of the written-to tensor");
  refused("graph m(%x: u8[2]) {\n  %c = clone(%x)\n  %z = fill_(%c, 300)\n  return %z\n}\n",
          "cannot be converted to type u8");
  refused("graph m(%x: i32[2]) {\n  %z = add(%x, %x, alpha=0.5)\n  return %z\n}\n", "alpha 0.5 must be an integer");
}

TEST(FuzzFindings, TheGeneratorMeetsNoInferenceGapThatIsNotValueDependent) {
  fuzz::FuzzOptions o;
  o.seed = 77;
  o.runs = 600;
  o.check.backend = "eager";
  o.metamorphic = false;
  fuzz::FuzzSummary s = fuzz::run_fuzz(o);
  for (const auto& [pattern, gap] : s.infer_gaps) {
    // What only values decide: an index into a size-0 dim, a class target of a 0-class score, a view past a
    // storage that is exactly its input's extent.
    const bool value_dependent = pattern.find("out of bounds") != std::string::npos ||
                                 pattern.find("past the storage") != std::string::npos;
    EXPECT_TRUE(value_dependent) << gap.count << " times, first in graph " << gap.first_index << ": " << gap.example;
  }
}

// ---------------------------------------------------------------- failure messages and source locations

TEST(FuzzFindings, AFailuresMessageDoesNotDependOnWhereTheGraphCameFrom) {
  const FailureSignature in_memory{FailureKind::RuntimeError, "%v27 = copy_: copy_: unsupported operation"};
  const FailureSignature parsed{FailureKind::RuntimeError, "%v27 = copy_ (line 16:3): copy_: unsupported operation"};
  EXPECT_TRUE(same_failure(in_memory, parsed));
  EXPECT_FALSE(same_failure(in_memory, {FailureKind::RuntimeError, "%v27 = copy_ (line 16:3): another error"}));
}

// ---------------------------------------------------------------- the disk cache's eviction scan

TEST(FuzzFindings, StoringAKernelScansTheCacheOnlyWhenItMayBeOverItsLimit) {
  // kiln fuzz spent most of its time (and the graph fuzzer hit a 5 s timeout) in the eviction scan, which read
  // every entry of the cache after every stored kernel. A scan also removes a dead writer's temporary file:
  // under the limit it stays, over the limit it goes.
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("kiln_fuzz_findings_cache_" + std::to_string(::getpid()));
  std::filesystem::remove_all(cache);
  ScopedOption dir(Opt::CacheDir, cache.string());
  auto compile_unary = [](const std::string& op) {
    graph::Graph g = parse("graph g(%x: f32[7]) {\n  %y = " + op + "(%x) : f32[7]\n  return %y\n}\n");
    find_backend("inductor")(g, graph::seeded_inputs(g, 0));
  };
  compile_unary("neg");
  std::filesystem::path object;  // the entry's object file, in the cache's kernels-vN directory
  for (const auto& e : std::filesystem::recursive_directory_iterator(cache))
    if (e.path().extension() == ".o") object = e.path();
  ASSERT_FALSE(object.empty());
  // A temporary file of a writer that was killed (pid 2^22 + 1 is above Linux's pid limit: never running).
  const std::filesystem::path abandoned =
      object.parent_path() / ("." + object.filename().string() + ".kiln-tmp.4194305.0");
  std::ofstream(abandoned) << "partial";
  compile_unary("relu");
  EXPECT_TRUE(std::filesystem::exists(abandoned)) << "a store under the limit scanned the cache";
  {
    ScopedOption limit(Opt::CacheSizeLimit, "1");
    compile_unary("abs");
  }
  EXPECT_FALSE(std::filesystem::exists(abandoned)) << "a store over the limit did not scan the cache";
  std::filesystem::remove_all(cache);
}

// ---------------------------------------------------------------- vector math and an element's place in a loop

TEST(FuzzFindings, VectorMathGivesEqualElementsEqualResultsWhereverTheyFallInALoop) {
  // Finding 7: tan's vectorised loop body called libmvec's variant and its remainder libm's, which differ by an
  // ulp, so equal elements got unequal results and argmax over ties moved. 67 elements: vector bodies and a
  // scalar remainder of 3 for every vector width. Every function the code generator calls through vector math.
  static const std::vector<std::string> unary = {"exp", "exp2", "log", "log2", "log1p", "expm1", "sin", "cos",
                                                 "tan", "tanh", "asin", "acos", "atan", "sinh", "cosh", "erf",
                                                 "sigmoid", "silu", "gelu"};
  static const std::vector<std::string> binary = {"pow", "atan2"};
  const bool ok = rc::check("every element of op(full(v)) is the same", [] {
    const bool is_binary = *rc::gen::arbitrary<bool>();
    const std::string op = *rc::gen::elementOf(is_binary ? binary : unary);
    const std::string dtype = *rc::gen::element(std::string("f32"), std::string("f64"));
    const double v = *rc::gen::inRange(1, 1000) * 0.0009;  // in every function's domain (asin, acos, log)
    const std::string call = is_binary ? op + "(%x, %x)" : op + "(%x)";
    graph::Graph g = parse(fmt::format("graph g(%x: {0}[67]) {{\n  %y = {1} : {0}[67]\n  return %y\n}}\n", dtype, call));
    const Tensor x = full({67}, Scalar(v), dtype == "f32" ? DType::F32 : DType::F64);
    const std::vector<double> y = find_backend("inductor")(g, {x})[0].to_double_vector();
    for (size_t i = 1; i < y.size(); ++i)
      if (y[i] != y[0]) RC_FAIL(fmt::format("{} of {}: element {} is {:a}, element 0 {:a} (x = {:a})", call, dtype, i, y[i], y[0], v));
  });
  EXPECT_TRUE(ok);
}

TEST(FuzzFindings, ArgmaxOverTiesOfACompiledTanPicksTheFirst) {
  // The finding's minimized graph and values: tanh(1) * 0.9 is 0x3f2f78a7, whose tan libm and libmvec round
  // apart; argmax gave 8 (tests/repros/tan_same_in_loop_body_and_remainder.repro).
  graph::Graph g = parse(R"(graph main(%x: f32[5, 2, 5]) {
  %t = tan(%x) : f32[5, 2, 5]
  %i = argmax(%t) : i64[]
  %r = round(%t) : f32[5, 2, 5]
  return %i, %r, %t
}
)");
  const Tensor x = full({5, 2, 5}, Scalar(double(0x1.5ef14ep-1f)), DType::F32);
  const std::vector<Tensor> out = find_backend("inductor")(g, {x});
  EXPECT_EQ(out[0].to_double_vector(), std::vector<double>{0});
  // Equal to each other (libmvec's tan of it, 1 ulp from eager's libm tan: the bound allows 4).
  const std::vector<double> t = out[2].to_double_vector();
  EXPECT_EQ(std::count(t.begin(), t.end(), t[0]), 50);
}

// ---------------------------------------------------------------- discontinuous ops on the edge of a step

namespace {

// steps_have_margin of `text`'s graph on inputs `values` (f32 tensors of one element each, in input order).
bool margin_on(const std::string& text, const std::vector<double>& values) {
  graph::Graph g = parse(text);
  std::vector<Tensor> inputs;
  for (double v : values) inputs.push_back(full({1}, Scalar(v), DType::F32));
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  return fuzz::steps_have_margin(g, graph::run_graph_all_values(g, inputs, fp64));
}

}  // namespace

TEST(FuzzFindings, TheInputSearchKeepsDiscontinuousOpsOffTheirSteps) {
  // Finding 10: floor division of exp(x) (1 ulp apart in eager and compiled code, both within their bound) by y
  // at an integer quotient: 1641 against 1642. Such inputs are drawn again; exact ties stay (computed alike).
  const std::string floor_div = "graph g(%x: f32[1], %y: f32[1]) {\n  %e = exp(%x) : f32[1]\n"
                                "  %q = div(%e, %y, rounding_mode=\"floor\") : f32[1]\n  return %q\n}\n";
  const double x = 7.0;  // e^7 = 1096.63...
  EXPECT_FALSE(margin_on(floor_div, {x, std::exp(x) / 1097.0 * (1 + 1e-7)}));  // quotient 1097 - 1e-4
  EXPECT_TRUE(margin_on(floor_div, {x, std::exp(x) / 1096.5}));
  const std::string floor = "graph g(%x: f32[1]) {\n  %y = floor(%x) : f32[1]\n  return %y\n}\n";
  EXPECT_FALSE(margin_on(floor, {double(std::nextafter(3.0f, 4.0f))}));
  EXPECT_TRUE(margin_on(floor, {3.0}));  // exactly on the step: an input, not a computed value
  EXPECT_TRUE(margin_on(floor, {3.25}));
  const std::string round = "graph g(%x: f32[1]) {\n  %y = round(%x, decimals=1) : f32[1]\n  return %y\n}\n";
  EXPECT_FALSE(margin_on(round, {double(std::nextafter(0.25f, 1.0f))}));  // 2.5000002 tenths: a tie's edge
  EXPECT_TRUE(margin_on(round, {0.21}));
  const std::string less = "graph g(%x: f32[1], %y: f32[1]) {\n  %s = sin(%x) : f32[1]\n"
                           "  %l = lt(%s, %y) : bool[1]\n  return %l\n}\n";
  EXPECT_FALSE(margin_on(less, {0.5, std::sin(0.5) * (1 + 1e-7)}));
  EXPECT_TRUE(margin_on(less, {0.5, 0.25}));
  // argmax over near ties (kiln fuzz --seed 8128, graph 1169: tanh of large values, 1 ulp apart in f32, moved
  // argmax from 8 to 11); exact ties are fine.
  graph::Graph am = parse("graph g(%x: f32[3]) {\n  %t = tanh(%x) : f32[3]\n  %i = argmax(%t) : i64[]\n  return %i\n}\n");
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  auto argmax_margin = [&](std::vector<double> v) {
    Tensor x = full({3}, Scalar(0.0), DType::F32);
    for (size_t i = 0; i < v.size(); ++i) x = where(eq(arange(0, 3, 1, DType::I64), int64_t(i)), Scalar(v[i]), x);
    return fuzz::steps_have_margin(am, graph::run_graph_all_values(am, {x}, fp64));
  };
  EXPECT_FALSE(argmax_margin({12.5, 9.5, 30.0}));
  EXPECT_TRUE(argmax_margin({0.5, 30.0, 30.0}));
  EXPECT_TRUE(argmax_margin({0.5, 1.0, 0.25}));
}

TEST(FuzzFindings, FuzzingTheFloorDivisionFindingFindsNothing) {
  // The campaign's graph 8628 of seed 12 (30 nodes): its first inputs put the floor division on a step.
  fuzz::FuzzOptions o;
  o.seed = 12;
  o.first_index = 8628;
  o.runs = 1;
  o.gen.max_nodes = 30;
  o.metamorphic = false;
  fuzz::FuzzSummary s = fuzz::run_fuzz(o);
  EXPECT_EQ(s.graphs, 1u);
  EXPECT_TRUE(s.findings.empty()) << s.json();
}

// ---------------------------------------------------------------- an op's internal values under a bisection limit

TEST(FuzzFindings, AnOpsInternalValuesStayUnroundedUnderEveryBisectionLimit) {
  // Finding 12: with KILN_BISECT_LIMIT=inductor=3..15 lerp's decomposition ran partly as externs, and end - self
  // went through a bf16 buffer between them, where eager's one f32 kernel keeps it unrounded. Any limit must give
  // eager's answer (an unlimited compile keeps the values in registers; these are stored in f32 instead).
  const std::string text = R"(graph main(%x: bf16[1], %e: bf16[1], %w: bf16[1]) {
  %v0 = erf(%x) : bf16[1]
  %v5 = lerp(%v0, %e, %w) : bf16[1]
  return %v5
}
)";
  graph::Graph g = parse(text);
  std::vector<Tensor> inputs;
  for (double v : {-0.73828125, 0.703125, -0.6484375}) inputs.push_back(full({1}, Scalar(v), DType::BF16));
  const std::vector<double> eager = find_backend("eager")(g, graph::copy_inputs(inputs))[0].to_double_vector();
  for (int limit = 0; limit <= 40; ++limit) {
    ScopedOption lim(Opt::BisectLimit, fmt::format("inductor={}", limit));
    EXPECT_EQ(find_backend("inductor")(g, graph::copy_inputs(inputs))[0].to_double_vector(), eager) << "limit " << limit;
  }
}

TEST(FuzzFindings, AnOpsInternalValuesReadByANonPointwiseExternKeepTheirDtype) {
  // The first version of finding 12's fix stored every internal value in f32, and under
  // KILN_BISECT_LIMIT=inductor=2 embedding's padding_idx decomposition handed its extern index_put f32 values for
  // an f16 tensor: a runtime error eager does not raise (kiln fuzz --seed 8128, graph 9).
  graph::Graph g = parse(R"(graph main(%w: f16[9, 4], %i: i64[9]) {
  %v6 = embedding(%w, %i, 0) : f16[9, 4]
  return %v6
}
)");
  std::vector<Tensor> inputs = {graph::seeded_inputs(g, 0)[0], arange(0, 9, 1, DType::I64)};
  inputs[1] = remainder(inputs[1], 4);
  const std::vector<double> eager = find_backend("eager")(g, graph::copy_inputs(inputs))[0].to_double_vector();
  for (int limit = 0; limit <= 20; ++limit) {
    ScopedOption lim(Opt::BisectLimit, fmt::format("inductor={}", limit));
    EXPECT_EQ(find_backend("inductor")(g, graph::copy_inputs(inputs))[0].to_double_vector(), eager) << "limit " << limit;
  }
}
