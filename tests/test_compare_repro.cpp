// Tests of the comparator (decision 6), the isolated runner (fork: crashes and hangs are results), and repro
// files (round trip, versioning, failure matching).
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <filesystem>

#include "graph/compare.h"
#include "graph/text.h"
#include "ops/api.h"
#include "repro/isolate.h"
#include "repro/repro.h"

using namespace kiln;

namespace {
Tensor vec(std::vector<float> v) { return Tensor::from_vector<float>(v, {int64_t(v.size())}); }
Tensor vec64(std::vector<double> v) { return Tensor::from_vector<double>(v, {int64_t(v.size())}); }
}  // namespace

TEST(Compare, AllcloseThenRmseRule) {
  CompareVerdict same = compare_outputs({vec({1, 2, 3})}, {vec({1, 2, 3.00001f})});
  EXPECT_TRUE(same.ok);
  EXPECT_EQ(same.outputs[0].rule, "allclose");
  // Not allclose, but closer to fp64 than eager is: passes by the RMSE rule.
  CompareVerdict better = compare_outputs({vec({1.01f, 2})}, {vec({1.001f, 2})}, {vec64({1.0, 2.0})});
  EXPECT_TRUE(better.ok);
  EXPECT_EQ(better.outputs[0].rule, "rmse");
  // Much further from fp64 than eager: fails, and the verdict says where.
  CompareVerdict worse = compare_outputs({vec({1.0f, 2})}, {vec({1.5f, 2})}, {vec64({1.0, 2.0})});
  EXPECT_FALSE(worse.ok);
  EXPECT_EQ(worse.outputs[0].rule, "rmse");
  EXPECT_EQ(worse.outputs[0].worst_index, 0);
  EXPECT_NE(worse.str().find("expected 1, got 1.5"), std::string::npos) << worse.str();
  // Without an fp64 reference only allclose decides.
  EXPECT_FALSE(compare_outputs({vec({1})}, {vec({1.5f})}).ok);
}

TEST(Compare, NanIntegerAndShapeRules) {
  EXPECT_TRUE(compare_outputs({vec({NAN, 1})}, {vec({NAN, 1})}).ok);
  EXPECT_FALSE(compare_outputs({vec({NAN, 1})}, {vec({0, 1})}).ok);
  // eager NaN, compiled and fp64 agree: eager's problem
  CompareVerdict eager_nan = compare_outputs({vec({NAN, 1})}, {vec({0.5f, 1})}, {vec64({0.5, 1})});
  EXPECT_TRUE(eager_nan.ok);
  EXPECT_EQ(eager_nan.outputs[0].rule, "nan");
  Tensor i1 = Tensor::from_vector<int64_t>({1, 2}, {2}), i2 = Tensor::from_vector<int64_t>({1, 3}, {2});
  EXPECT_FALSE(compare_outputs({i1}, {i2}).ok);
  CompareOptions ignore;
  ignore.ignore_non_float = true;
  EXPECT_TRUE(compare_outputs({i1}, {i2}, {}, ignore).ok);
  EXPECT_FALSE(compare_outputs({vec({1, 2})}, {vec({1, 2, 3})}).ok);
  EXPECT_FALSE(compare_outputs({vec({1, 2})}, {vec64({1, 2})}).ok);  // dtype differs
}

TEST(Isolate, CrashesHangsAndErrorsAreResults) {
  sum(ones({1 << 20})).item();  // the parent has used its thread pool before forking
  IsolatedResult ok = run_isolated([] { return std::to_string(sum(ones({1 << 20})).item<double>()); }, 30);
  EXPECT_EQ(ok.kind, IsolatedResult::Kind::Ok);
  EXPECT_EQ(ok.payload, "1048576.000000");
  IsolatedResult err = run_isolated([]() -> std::string { add(ones({2}), ones({3})); return ""; }, 30);
  EXPECT_EQ(err.kind, IsolatedResult::Kind::Error);
  EXPECT_NE(err.payload.find("broadcast"), std::string::npos);
  IsolatedResult crash = run_isolated([]() -> std::string { raise(SIGSEGV); return ""; }, 30);
  EXPECT_EQ(crash.kind, IsolatedResult::Kind::Crash);
  EXPECT_EQ(crash.signal, SIGSEGV);
  IsolatedResult hang = run_isolated([]() -> std::string { for (;;) pause(); }, 0.5);
  EXPECT_EQ(hang.kind, IsolatedResult::Kind::Hang);
}

TEST(Repro, FailureMessagesMatchModuloNamesAndNumbers) {
  FailureSignature a{"runtime_error", "index 7 is out of range for %x_3 of size 5"};
  FailureSignature b{"runtime_error", "index 12 is out of range for %y of size 2"};
  FailureSignature c{"runtime_error", "shapes cannot be broadcast"};
  EXPECT_TRUE(same_failure(a, b));
  EXPECT_FALSE(same_failure(a, c));
  EXPECT_FALSE(same_failure(a, FailureSignature{"crash", a.message}));
}

TEST(Repro, RoundTripsAndRejectsNewerVersions) {
  graph::Graph g;
  auto x = g.add_input("x", {DType::F32, {2, 3}, {}, {}});
  auto y = g.add_op1(OpId::exp, {graph::TensorArg{x}}, "y");
  g.set_outputs({y});
  ReproFile r = make_repro(g);
  r.backend = "inductor";
  r.config["KILN_INJECT"] = "relu:accuracy";
  r.input_seed = 3;
  r.expected = {"runtime_error", "line one\nline \"two\""};
  std::string text = print_repro(r);
  ReproFile back = parse_repro(text, "r.kir");
  EXPECT_EQ(print_repro(back), text);
  EXPECT_EQ(back.expected.message, r.expected.message);
  EXPECT_EQ(*back.input_seed, 3u);
  std::string newer = text;
  newer.replace(newer.find("kiln-repro: 1"), 13, "kiln-repro: 2");
  try {
    parse_repro(newer, "r.kir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("newer kiln"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_repro("backend: eager\n", "r.kir"), Error);
}
