// Tests of the comparator (decision 6), the isolated runner (fork: crashes and hangs are results), and repro
// files (round trip, versioning, failure matching).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "graph/compare.h"
#include "graph/text.h"
#include "ops/api.h"
#include "repro/isolate.h"
#include "repro/repro.h"
#include "repro/reproduce.h"
#include "oracle_testing.h"
#include "eager/npy.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "cli_run.h"

#include <unistd.h>

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
  // One NaN that all three agree on does not hide another element: compiled lost a NaN eager and fp64 have,
  // compiled added one, or compiled is far off elsewhere.
  CompareVerdict lost = compare_outputs({vec({NAN, NAN, 1})}, {vec({NAN, 9, 1})}, {vec64({NAN, NAN, 1})});
  EXPECT_FALSE(lost.ok);
  EXPECT_EQ(lost.outputs[0].rule, "nan");
  EXPECT_NE(lost.outputs[0].detail.find("1 NaN(s) of eager and fp64"), std::string::npos) << lost.str();
  EXPECT_FALSE(compare_outputs({vec({NAN, 2, 1})}, {vec({NAN, NAN, 1})}, {vec64({NAN, 2, 1})}).ok);
  CompareVerdict far = compare_outputs({vec({NAN, 2, 1})}, {vec({NAN, 5, 1})}, {vec64({NAN, 2, 1})});
  EXPECT_FALSE(far.ok);
  EXPECT_EQ(far.outputs[0].rule, "rmse");
  // Infinities in the same places are equal in the RMSE rule too (not inf - inf = NaN).
  EXPECT_TRUE(compare_outputs({vec({INFINITY, 1.01f})}, {vec({INFINITY, 1.001f})}, {vec64({INFINITY, 1.0})}).ok);
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
  EXPECT_EQ(ok.kind, FailureKind::None);
  EXPECT_EQ(ok.payload, "1048576.000000");
  IsolatedResult err = run_isolated([]() -> std::string { add(ones({2}), ones({3})); return ""; }, 30);
  EXPECT_EQ(err.kind, FailureKind::RuntimeError);
  EXPECT_NE(err.payload.find("broadcast"), std::string::npos);
  IsolatedResult crash = run_isolated([]() -> std::string { raise(SIGSEGV); return ""; }, 30);
  EXPECT_EQ(crash.kind, FailureKind::Crash);
#if !defined(__SANITIZE_ADDRESS__)  // under ASan its own handler reports the SEGV and exits instead
  EXPECT_EQ(crash.signal, SIGSEGV);
#endif
  IsolatedResult hang = run_isolated([]() -> std::string { for (;;) pause(); }, 0.5);
  EXPECT_EQ(hang.kind, FailureKind::Hang);
}

TEST(Isolate, BesideRunsBothAndAResultThatCameInTimeIsNotAHang) {
  // The child answers at once; the parent is busy past the child's limit before it reads the answer.
  bool ran_beside = false;
  IsolatedResult r = run_isolated_beside([] { return std::string("answer"); }, 0.2, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    ran_beside = true;
  });
  EXPECT_TRUE(ran_beside);
  EXPECT_EQ(r.kind, FailureKind::None);
  EXPECT_EQ(r.payload, "answer");
  EXPECT_LT(r.seconds, 5.0);
  // A child still without a result at its limit is a hang, found once the parent's work is done.
  IsolatedResult hang = run_isolated_beside([]() -> std::string { for (;;) pause(); }, 0.2, [] {});
  EXPECT_EQ(hang.kind, FailureKind::Hang);
  // The parent's exception propagates (the child is killed and reaped).
  EXPECT_THROW(run_isolated_beside([]() -> std::string { for (;;) pause(); }, 30, [] { fail("beside failed"); }),
               Error);
}

TEST(Repro, FailureMessagesMatchModuloNamesAndNumbers) {
  FailureSignature a{FailureKind::RuntimeError, "index 7 is out of range for %x_3 of size 5"};
  FailureSignature b{FailureKind::RuntimeError, "index 12 is out of range for %y of size 2"};
  FailureSignature c{FailureKind::RuntimeError, "shapes cannot be broadcast"};
  EXPECT_TRUE(same_failure(a, b));
  EXPECT_FALSE(same_failure(a, c));
  EXPECT_FALSE(same_failure(a, FailureSignature{FailureKind::Crash, a.message}));
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
  r.expected = {FailureKind::RuntimeError, "line one\nline \"two\""};
  std::string text = print_repro(r);
  ReproFile back = parse_repro(text, "r.kir");
  EXPECT_EQ(print_repro(back), text);
  EXPECT_EQ(back.expected.message, r.expected.message);
  EXPECT_EQ(*back.input_seed, 3u);
  std::string newer = text;
  newer.replace(newer.find("kiln-repro: 1"), 13, fmt::format("kiln-repro: {}", kReproFormatVersion + 1));
  try {
    parse_repro(newer, "r.kir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("newer kiln"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_repro("backend: eager\n", "r.kir"), Error);
}

namespace {
// exp(x) -> relu(exp(x)) - 1 ... a graph with a relu, and backends that get relu wrong in each way.
graph::Graph relu_graph() {
  graph::Graph g;
  auto x = g.add_input("x", {DType::F32, {4, 8}, {}, {}});
  auto e = g.add_op1(OpId::exp, {graph::TensorArg{x}}, "e");
  auto r = g.add_op1(OpId::relu, {graph::TensorArg{e}}, "r");
  g.set_outputs({r});
  return g;
}
bool has_relu(const graph::Graph& g) {
  for (const auto& n : g.nodes())
    if (n.kind == graph::NodeKind::Op && n.op == OpId::relu) return true;
  return false;
}
void register_broken_backends() {
  register_backend("test_relu_runtime_error", [](const graph::Graph& g, const std::vector<Tensor>& in) {
    if (has_relu(g)) fail("relu kernel 3 failed at element 17");
    return graph::run_graph(g, in);
  });
  register_backend("test_relu_compile_error", [](const graph::Graph& g, const std::vector<Tensor>& in) -> std::vector<Tensor> {
    if (has_relu(g)) throw CompileError("invalid IR for relu");
    return graph::run_graph(g, in);
  });
  register_backend("test_relu_crash", [](const graph::Graph& g, const std::vector<Tensor>& in) {
    if (has_relu(g)) raise(SIGSEGV);
    return graph::run_graph(g, in);
  });
  register_backend("test_relu_accuracy", [](const graph::Graph& g, const std::vector<Tensor>& in) {
    std::vector<Tensor> out = graph::run_graph(g, in);
    if (has_relu(g)) out[0] = add(out[0], 1.0);
    return out;
  });
}
}  // namespace

TEST(Repro, ReproduceClassifiesEachFailureKind) {
  register_broken_backends();
  graph::Graph g = relu_graph();
  std::vector<Tensor> in = graph::seeded_inputs(g, 0);
  EXPECT_EQ(classify_on("eager", g, in, 30).kind, FailureKind::None);
  EXPECT_EQ(classify_on("test_relu_runtime_error", g, in, 30).kind, FailureKind::RuntimeError);
  EXPECT_EQ(classify_on("test_relu_compile_error", g, in, 30).kind, FailureKind::CompileError);
  EXPECT_EQ(classify_on("test_relu_crash", g, in, 30).kind, FailureKind::Crash);
  FailureSignature acc = classify_on("test_relu_accuracy", g, in, 30);
  EXPECT_EQ(acc.kind, FailureKind::Accuracy);
  EXPECT_NE(acc.message.find("FAIL"), std::string::npos) << acc.message;
  EXPECT_THROW(classify_on("no_such_backend", g, in, 30), Error);
}

TEST(Repro, ARecordedFailureReproducesUntilFixed) {
  register_broken_backends();
  ReproFile r = make_repro(relu_graph());
  r.backend = "test_relu_runtime_error";
  r.input_seed = 1;
  r.expected = {FailureKind::RuntimeError, "relu kernel 9 failed at element 2"};  // same modulo numbers
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln_repro_test";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "r.repro").string();
  save_repro(r, path);
  ReproOutcome still = reproduce(load_repro(path), path, 30);
  EXPECT_TRUE(still.reproduces);
  r.backend = "eager";  // "the fix": the backend no longer fails
  save_repro(r, path);
  ReproOutcome fixed = reproduce(load_repro(path), path, 30);
  EXPECT_FALSE(fixed.reproduces);
  EXPECT_FALSE(fixed.observed.failed());
  r.backend = "test_relu_crash";  // a different failure is not the recorded one
  save_repro(r, path);
  ReproOutcome other = reproduce(load_repro(path), path, 30);
  EXPECT_FALSE(other.reproduces);
  EXPECT_EQ(other.observed.kind, FailureKind::Crash);
  // inputs from .npy files are hash-checked
  r.input_seed.reset();
  r.input_dir = "inputs";
  graph::save_inputs(r.graph, graph::seeded_inputs(r.graph, 2), (dir / "inputs").string());
  r.input_hashes["x.npy"] = content_hash_of_file((dir / "inputs" / "x.npy").string());
  r.backend = "test_relu_accuracy";
  r.expected = {FailureKind::Accuracy, ""};
  save_repro(r, path);
  EXPECT_TRUE(reproduce(load_repro(path), path, 30).reproduces);
  write_npy((dir / "inputs" / "x.npy").string(), zeros({4, 8}));
  EXPECT_THROW(reproduce(load_repro(path), path, 30), Error);
}

// A repro of a CUDA backend or of CUDA values records the device and the GPU model (format 3, the oldest that holds
// them); other repros stay format 1, and files of formats 1 and 2 still read.
TEST(Repro, GpuReprosRecordTheDeviceAndModelInFormat3) {
  graph::Graph g = relu_graph();
  ReproFile cpu = make_repro(g, "inductor");
  EXPECT_EQ(cpu.gpu, "");
  std::string text = print_repro(cpu);
  EXPECT_NE(text.find("kiln-repro: 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("gpu:"), std::string::npos) << text;

  ReproFile cuda = make_repro(g, "inductor_cuda");
  EXPECT_EQ(cuda.cuda_device, "cuda:0");
  EXPECT_EQ(cuda.gpu, this_gpu());
  EXPECT_FALSE(cuda.gpu.empty());
  text = print_repro(cuda);
  EXPECT_NE(text.find("kiln-repro: 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ncuda-device: cuda:0\ngpu: " + cuda.gpu + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("device: cpu ("), std::string::npos) << "the host is still recorded: " << text;
  ReproFile back = parse_repro(text, "g.repro");
  EXPECT_EQ(back.cuda_device, "cuda:0");
  EXPECT_EQ(back.gpu, cuda.gpu);
  EXPECT_EQ(print_repro(back), text);

  graph::Graph on_gpu = graph::parse_graph("graph d(%x: f32[4]@cuda:0) {\n  %y = relu(%x) : f32[4]@cuda:0\n  return %y\n}\n", "d.kir");
  EXPECT_EQ(make_repro(on_gpu, "eager").cuda_device, "cuda:0") << "a graph of CUDA values runs on the GPU on any backend";

  // gradients and a GPU: still format 3 (it holds both)
  ReproFile both = cuda;
  both.gradients = true;
  EXPECT_NE(print_repro(both).find("kiln-repro: 3\n"), std::string::npos);

  // the fields in a file of an older format are an error at their line; without them, older formats read
  std::string old = text;
  old.replace(old.find("kiln-repro: 3"), 13, "kiln-repro: 2");
  try {
    parse_repro(old, "old.repro");
    FAIL() << "format 2 with a gpu line";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("old.repro:7:1: 'cuda-device' and 'gpu' need repro format 3"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(parse_repro(print_repro(cpu), "v1.repro"));
  EXPECT_THROW(parse_repro("kiln-repro: 3\ngpu: \nbackend: eager\n", "empty.repro"), Error);
}

TEST(Repro, RunningAGpuReproElsewhereSaysSo) {
  ReproFile r = make_repro(relu_graph(), "inductor_cuda");
  EXPECT_EQ(gpu_mismatch_note(r), "") << "the same GPU (or the same lack of one) as here";
  r.gpu = "NVIDIA Imaginary 9000 (sm_120)";
  const std::string note = gpu_mismatch_note(r);
  EXPECT_NE(note.find("recorded on cuda:0 NVIDIA Imaginary 9000 (sm_120)"), std::string::npos) << note;
  if (this_gpu().rfind("none", 0) == 0)
    EXPECT_NE(note.find("this machine has no GPU kiln can use: none ("), std::string::npos) << note;
  else
    EXPECT_NE(note.find("this machine's is " + this_gpu()), std::string::npos) << note;
  EXPECT_EQ(gpu_mismatch_note(make_repro(relu_graph(), "inductor")), "");

  // kiln repro run prints the note, then runs the repro as always (here on eager: it does not fail)
  const std::string kiln = cli_test::kiln_command();
  if (kiln.empty()) GTEST_SKIP() << "no kiln CLI: not at " << KILN_CLI << " and GPU_TEST_KILN is not set";
  r.backend = "eager";
  r.input_seed = 1;
  r.expected = {FailureKind::Accuracy, ""};
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("kiln_gpu_repro_{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "g.repro").string();
  save_repro(r, path);
  EXPECT_NE(load_repro(path).gpu, "");
  cli_test::CliResult out = cli_test::shell(kiln + " repro run " + path);
  EXPECT_EQ(out.exit_code, 0) << out.output;
  EXPECT_NE(out.output.find("note: this repro was recorded on cuda:0 NVIDIA Imaginary 9000 (sm_120)"), std::string::npos)
      << out.output;
  EXPECT_NE(out.output.find("DOES NOT REPRODUCE"), std::string::npos) << out.output;
  std::filesystem::remove_all(dir);
}
