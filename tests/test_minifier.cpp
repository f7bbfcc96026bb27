// The minifier (issue 5): injected bugs in generated graphs minify to exactly the relu with its input, and the
// written repro reproduces; crashes in candidates are verdicts; compile_error candidates are compiled, not
// run; a different bug is never minified; an interrupted run resumes to the same result; the result always
// fails; recorded values spill to disk.
// The backend under test is one constant (kBackend): the inductor, whose injected bugs live in its lowering.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/wait.h>

#include "core/options.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "minifier/emit.h"
#include "minifier/hook.h"
#include "minifier/inject_backend.h"
#include "minifier/minifier.h"
#include "minifier/testing.h"
#include "ops/api.h"
#include "repro/isolate.h"
#include "repro/reproduce.h"
#include "oracle_testing.h"

using namespace kiln;
using namespace kiln::minify;
namespace fs = std::filesystem;

namespace {

const std::string kBackend = "inductor";  // KILN_INJECT=relu:<kind> injects into its relu lowering

std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kiln_minify_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string read_text(const fs::path& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The minified graph is exactly one relu reading the value that carries the original relu's input: a graph
// input or, once the shrink move made it small enough for the constant move, a constant.
void expect_just_the_relu(const graph::Graph& g, const std::string& relu_input) {
  ASSERT_EQ(g.num_op_nodes(), 1) << graph::print_graph(g);
  const graph::Node* relu = nullptr;
  for (const graph::Node& n : g.nodes())
    if (n.kind == graph::NodeKind::Op) relu = &n;
  EXPECT_EQ(relu->op, OpId::relu) << graph::print_graph(g);
  ASSERT_LE(g.inputs().size(), 1u) << graph::print_graph(g);
  const std::vector<graph::ValueId> args = graph::Graph::node_inputs(*relu);
  ASSERT_EQ(args.size(), 1u);
  EXPECT_EQ(g.value(args[0]).name, relu_input) << graph::print_graph(g);
  if (!g.inputs().empty()) EXPECT_EQ(args[0], g.inputs()[0]);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0], relu->outputs[0]);
}

MinifyOptions options(const std::string& out) {
  MinifyOptions o;
  o.backend = kBackend;
  o.output = out;
  o.config = current_config();
  return o;
}

struct Case {
  std::string kind;
  int nodes;
};

class MinifyInjected : public ::testing::TestWithParam<Case> {};

}  // namespace

TEST_P(MinifyInjected, ShrinksToTheReluAndItsReproReproduces) {
  register_inject_test_backend();
  const Case c = GetParam();
  ScopedOption inject(Opt::Inject, "relu:" + c.kind);
  TestGraph t = relu_test_graph(c.nodes, uint64_t(c.nodes) * 7 + c.kind.size());
  ASSERT_EQ(t.graph.num_op_nodes(), c.nodes);
  ASSERT_FALSE(t.relu_input.empty()) << "the generator placed no relu";
  std::vector<Tensor> inputs = graph::seeded_inputs(t.graph, 0);
  std::string out = temp_dir(c.kind + std::to_string(c.nodes)) + "/min.repro";
  MinifyResult r = minify::minify(t.graph, inputs, options(out));
  EXPECT_EQ(failure_kind_name(r.original.kind), c.kind) << r.original.message;
  expect_just_the_relu(r.graph, t.relu_input);
  EXPECT_EQ(failure_kind_name(r.failure.kind), c.kind);
  EXPECT_TRUE(r.reverified) << r.reverify_message;
  EXPECT_EQ(r.stats.start_ops, c.nodes);
  // The file as a user gets it: `kiln repro run` semantics, in this process.
  ReproFile rf = load_repro(out);
  EXPECT_EQ(failure_kind_name(rf.expected.kind), c.kind);
  EXPECT_EQ(rf.config.at("KILN_INJECT"), "relu:" + c.kind);
  ReproOutcome o = reproduce(rf, out, 30);
  EXPECT_TRUE(o.reproduces) << o.observed.kind << ": " << o.observed.message;
  // ... and once the bug is fixed (here: the repro run on the reference backend), the repro says so.
  rf.backend = "eager";
  EXPECT_FALSE(reproduce(rf, out, 30).reproduces);
}

INSTANTIATE_TEST_SUITE_P(Kinds, MinifyInjected,
                         ::testing::Values(Case{"compile_error", 10}, Case{"compile_error", 100}, Case{"compile_error", 1000},
                                           Case{"runtime_error", 10}, Case{"runtime_error", 100}, Case{"runtime_error", 1000},
                                           Case{"crash", 10}, Case{"crash", 100}, Case{"crash", 1000},
                                           Case{"accuracy", 10}, Case{"accuracy", 100}, Case{"accuracy", 1000}),
                         [](const auto& info) { return info.param.kind + "_" + std::to_string(info.param.nodes); });

TEST(Minifier, ACrashInACandidateIsAVerdictNotTheEndOfTheRun) {
  register_inject_test_backend();
  // The target is relu's compile error; candidates without the relu but with a sin crash their child. They
  // run only on a backend without a compile step (api/backends.h; with one, compile_error candidates are only
  // compiled, below): inject_test's run function alone, whose compile error shows when it is run.
  register_backend("inject_test_run_only", find_backend(kInjectTestBackend));
  ScopedOption inject(Opt::Inject, "relu:compile_error,sin:crash");
  TestGraph t = relu_test_graph(200, 11);
  MinifyOptions o = options(temp_dir("crashy") + "/m.repro");
  o.backend = "inject_test_run_only";
  MinifyResult r = minify::minify(t.graph, graph::seeded_inputs(t.graph, 0), o);
  EXPECT_EQ(r.original.kind, FailureKind::CompileError);
  expect_just_the_relu(r.graph, t.relu_input);
  EXPECT_GT(r.stats.observed[FailureKind::Crash], 0) << "no candidate crashed: the test does not test anything";
}

TEST(Minifier, CompileErrorCandidatesAreCompiledNotRun) {
  register_inject_test_backend();
  // The same graph with relu's compile error as the target: the candidates that would crash when run (a sin
  // without the relu) are only compiled (api/backends.h BackendCompileFn), so none crashes, and the result
  // is still the relu, which `kiln repro run` (a full run) reproduces.
  ScopedOption inject(Opt::Inject, "relu:compile_error,sin:crash");
  TestGraph t = relu_test_graph(200, 11);
  std::string out = temp_dir("compile_only") + "/m.repro";
  MinifyResult r = minify::minify(t.graph, graph::seeded_inputs(t.graph, 0), options(out));
  EXPECT_EQ(r.original.kind, FailureKind::CompileError);
  expect_just_the_relu(r.graph, t.relu_input);
  EXPECT_EQ(r.stats.observed[FailureKind::Crash], 0) << "a compile_error candidate was run";
  EXPECT_GT(r.stats.observed[FailureKind::None], 0) << "no candidate compiled: the test does not test anything";
  EXPECT_TRUE(r.reverified) << r.reverify_message;
  EXPECT_TRUE(reproduce(load_repro(out), out, 30).reproduces);
}

TEST(Minifier, NeverMinifiesOntoADifferentBug) {
  register_inject_test_backend();
  // relu fails first; sigmoids fail with another message. An oracle taking any error would shrink onto one.
  // (8x16 values: more than constant substitution's 64 elements, so the relu keeps its input.)
  ScopedOption inject(Opt::Inject, "relu:runtime_error,sigmoid:runtime_error");
  graph::Graph g;
  auto x = g.add_input("x", {DType::F32, {8, 16}, {}, {}});
  auto a = g.add_op1(OpId::tanh, {graph::TensorArg{x}}, "a");
  auto r = g.add_op1(OpId::relu, {graph::TensorArg{a}}, "r");
  auto s1 = g.add_op1(OpId::sigmoid, {graph::TensorArg{r}}, "s1");
  auto s2 = g.add_op1(OpId::sigmoid, {graph::TensorArg{s1}}, "s2");
  auto m = g.add_op1(OpId::mul, {graph::TensorArg{s2}, graph::TensorArg{a}}, "m");
  g.set_outputs({m});
  MinifyResult res = minify::minify(g, graph::seeded_inputs(g, 0), options(temp_dir("other") + "/m.repro"));
  EXPECT_NE(res.original.message.find("relu"), std::string::npos) << res.original.message;
  expect_just_the_relu(res.graph, "a");
  EXPECT_GT(res.stats.observed[FailureKind::RuntimeError], 1) << "no candidate showed the other bug";
  // With a check string matching both, any injected runtime error counts: the reduction may end on a sigmoid.
  MinifyOptions o = options(temp_dir("other2") + "/m.repro");
  o.check_str = "injected runtime error";
  MinifyResult loose = minify::minify(g, graph::seeded_inputs(g, 0), o);
  EXPECT_EQ(loose.graph.num_op_nodes(), 1);
  EXPECT_TRUE(loose.reverified);
}

TEST(Minifier, AnInterruptedRunResumesToTheSameResult) {
  register_inject_test_backend();
  ScopedOption inject(Opt::Inject, "relu:accuracy");
  TestGraph t = relu_test_graph(300, 5);
  std::vector<Tensor> inputs = graph::seeded_inputs(t.graph, 0);
  MinifyResult whole = minify::minify(t.graph, inputs, options(temp_dir("whole") + "/m.repro"));
  std::string out = temp_dir("interrupted") + "/m.repro";
  MinifyOptions o = options(out);
  o.max_steps = 3;
  MinifyResult part = minify::minify(t.graph, inputs, o);
  EXPECT_GT(part.graph.num_op_nodes(), 1) << "the 'interruption' came too late to test resuming";
  // The checkpoint left behind is itself a repro that reproduces: nothing is lost.
  EXPECT_TRUE(reproduce(load_repro(out), out, 30).reproduces);
  o.max_steps = -1;
  o.resume = true;
  MinifyResult resumed = minify::minify(t.graph, inputs, o);
  EXPECT_EQ(graph::print_graph(resumed.graph), graph::print_graph(whole.graph));
  EXPECT_GE(resumed.stats.accepted, part.stats.accepted);
  // Resuming against another graph is refused.
  TestGraph other = relu_test_graph(300, 6);
  EXPECT_THROW(minify::minify(other.graph, graph::seeded_inputs(other.graph, 0), o), Error);
}

TEST(Minifier, RecordedValuesSpillToDiskWithTheSameResult) {
  register_inject_test_backend();
  ScopedOption inject(Opt::Inject, "relu:accuracy");
  TestGraph t = relu_test_graph(100, 3);
  MinifyOptions o = options(temp_dir("spill") + "/m.repro");
  o.memory_budget = 0;  // every recorded value goes to the spill file
  MinifyResult r = minify::minify(t.graph, graph::seeded_inputs(t.graph, 0), o);
  expect_just_the_relu(r.graph, t.relu_input);
  EXPECT_TRUE(r.reverified);
  ValueStore store(0);
  store.put(3, Tensor::from_vector<float>({1, 2, 3}, {3}));
  EXPECT_EQ(store.memory_bytes(), 0);
  EXPECT_EQ(store.spilled_bytes(), 12);
  EXPECT_EQ(store.get(3).to_double_vector(), (std::vector<double>{1, 2, 3}));
  // Within the budget, values stay in (shared) memory; get() hands out copies, so writing into one (as a
  // forked candidate might) never changes the recorded value.
  ValueStore mem(16);
  mem.put(1, Tensor::from_vector<float>({4, 5}, {2}));
  mem.put(2, Tensor::from_vector<float>({6, 7, 8}, {3}));  // 64 + 12 bytes: beyond the budget, spilled
  EXPECT_EQ(mem.memory_bytes(), 8);
  EXPECT_EQ(mem.spilled_bytes(), 12);
  Tensor v = mem.get(1);
  add_(v, 1.0);
  EXPECT_EQ(mem.get(1).to_double_vector(), (std::vector<double>{4, 5}));
  EXPECT_EQ(mem.get(2).to_double_vector(), (std::vector<double>{6, 7, 8}));
  IsolatedResult child = run_isolated([&] { return fmt::format("{}", mem.get(1).to_double_vector()[1]); }, 30);
  EXPECT_EQ(child.payload, "5");
}

TEST(Minifier, SmallInputsBecomeConstants) {
  register_inject_test_backend();
  ScopedOption inject(Opt::Inject, "relu:compile_error");
  graph::Graph g;
  auto x = g.add_input("x", {DType::F32, {4, 8}, {}, {}});
  auto m = g.add_op1(OpId::mean, {graph::TensorArg{x}, std::monostate{}, Scalar(false), std::monostate{}}, "m");
  auto r = g.add_op1(OpId::relu, {graph::TensorArg{m}}, "r");
  auto y = g.add_op1(OpId::mul, {graph::TensorArg{x}, graph::TensorArg{r}}, "y");
  g.set_outputs({y});
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  std::string out = temp_dir("const") + "/m.repro";
  // The inductor folds relu(constant) away (its cleanup passes fold constants), which rightly makes the
  // substitution lose the bug there; the interpreter-based test backend keeps the relu, so it shows the move.
  MinifyOptions o = options(out);
  o.backend = kInjectTestBackend;
  MinifyResult res = minify::minify(g, inputs, o);
  ASSERT_EQ(res.graph.num_op_nodes(), 1) << graph::print_graph(res.graph);
  EXPECT_TRUE(res.graph.inputs().empty()) << graph::print_graph(res.graph);
  // The constant holds the recorded mean of x (rounded to f32): the repro is self-contained.
  double mean = 0;
  for (double v : inputs[0].to_double_vector()) mean += v / 32;
  const graph::Node& c = res.graph.nodes()[0];
  ASSERT_EQ(c.kind, graph::NodeKind::Constant);
  EXPECT_NEAR(c.constant.to_double_vector()[0], mean, 1e-6);
  EXPECT_TRUE(reproduce(load_repro(out), out, 30).reproduces);
}

TEST(Minifier, AGraphThatDoesNotFailIsAnErrorNotAnEmptyRepro) {
  register_inject_test_backend();
  ScopedOption inject(Opt::Inject, "");
  TestGraph t = relu_test_graph(20, 1);
  try {
    minify::minify(t.graph, graph::seeded_inputs(t.graph, 0), options(temp_dir("nofail") + "/m.repro"));
    FAIL() << "minify accepted a graph that does not fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fail"), std::string::npos) << e.what();
  }
  ScopedOption inject2(Opt::Inject, "relu:compile_error");
  MinifyOptions o = options(temp_dir("nofail2") + "/m.repro");
  o.accuracy = true;  // the graph fails, but not with an accuracy failure
  EXPECT_THROW(minify::minify(t.graph, graph::seeded_inputs(t.graph, 0), o), Error);
}

// An oracle whose quick test has false positives (any graph of at most 3 op nodes "fails"), whose
// confirmation knows better: the reducer must never accept what confirmation rejects.
TEST(Minifier, NeverReturnsAGraphThatDoesNotFail) {
  TestGraph t = relu_test_graph(64, 9);
  auto has_relu = [](const graph::Graph& g) {
    for (const graph::Node& n : g.nodes())
      if (n.kind == graph::NodeKind::Op && n.op == OpId::relu) return true;
    return false;
  };
  struct Liar : Oracle {
    std::function<bool(const graph::Graph&)> truth;
    Verdict test(const Candidate& c) override { return {c.graph.num_op_nodes() <= 3 || truth(c.graph), {}}; }
    Verdict confirm(const Candidate& c) override { return {truth(c.graph), {}}; }
  } liar;
  liar.truth = has_relu;
  ReduceStats stats;
  Candidate out = reduce({t.graph, "original"}, liar, {}, stats);
  EXPECT_TRUE(has_relu(out.graph)) << graph::print_graph(out.graph);
  EXPECT_EQ(out.graph.num_op_nodes(), 1);
  EXPECT_GT(stats.rejected_on_confirm, 0);
}

// Pure reducer property: for any generated graph and relu position, an in-process "has a relu" oracle
// reduces to exactly the relu (1-minimality), and every move made progress (the measure fell).
RC_GTEST_PROP(MinifierProps, ReducesAnyGraphToTheRelu, ()) {
  int nodes = *rc::gen::inRange(3, 80);
  int relu_at = *rc::gen::inRange(1, nodes);
  uint64_t seed = *rc::gen::arbitrary<uint32_t>();
  TestGraph t = relu_test_graph(nodes, seed, 2, 3, relu_at);
  FnOracle oracle([](const graph::Graph& g) {
    for (const graph::Node& n : g.nodes())
      if (n.kind == graph::NodeKind::Op && n.op == OpId::relu) return Verdict{true, {FailureKind::RuntimeError, "relu"}};
    return Verdict{false, {FailureKind::None, ""}};
  });
  ReduceStats stats;
  ReduceOptions ro;
  Measure last = measure(t.graph);
  bool monotone = true;
  ro.on_accept = [&](const Candidate& c, const ReduceStats&) {
    monotone &= measure(c.graph) < last;
    last = measure(c.graph);
  };
  Candidate out = reduce({t.graph, "original"}, oracle, ro, stats);
  RC_ASSERT(monotone);
  RC_ASSERT(out.graph.num_op_nodes() == 1);
  RC_ASSERT(out.graph.inputs().size() == 1u);
  RC_ASSERT(out.graph.value(out.graph.inputs()[0]).name == t.relu_input);
}

// With the real backend oracle: whatever the kind and position, the result fails the same way when re-run
// from scratch (FailureOracle::classify, as `kiln repro run` does) and is the relu.
RC_GTEST_PROP(MinifierProps, TheResultAlwaysFailsTheSameWay, ()) {
  register_inject_test_backend();
  const std::string kind = *rc::gen::element<std::string>("compile_error", "runtime_error", "accuracy", "crash");
  int nodes = *rc::gen::inRange(3, 40);
  int relu_at = *rc::gen::inRange(1, nodes);
  uint64_t seed = *rc::gen::arbitrary<uint32_t>();
  ScopedOption inject(Opt::Inject, "relu:" + kind);
  TestGraph t = relu_test_graph(nodes, seed, 3, 5, relu_at);
  std::vector<Tensor> inputs = graph::seeded_inputs(t.graph, seed);
  MinifyOptions o;
  o.backend = kBackend;
  MinifyResult r = minify::minify(t.graph, inputs, o);
  RC_ASSERT(r.reverified);
  FailureSignature again = classify_on(kBackend, r.graph, r.inputs, 30);
  RC_ASSERT(failure_kind_name(again.kind) == kind);
  RC_ASSERT(r.graph.num_op_nodes() == 1);
}

// Names, file names and messages in a repro are data: in the emitted program they stay inside string literals
// and comments, whatever characters they hold (a graph's quoted names are free text).
TEST(Minifier, EmittedProgramsKeepHostileNamesAsData) {
  ReproFile r = make_repro(graph::parse_graph(
      "graph g(%\")KIR\\\"; int evil; //\": f32[2]) {\n  %y = relu(%\")KIR\\\"; int evil; //\") : f32[2]\n  return %y\n}\n",
      "hostile.kir"));
  r.input_seed = 0;
  r.expected = {FailureKind::RuntimeError, "boom"};
  const std::string path = temp_dir("hostile") + "/bad\nname.repro";
  std::string cpp = emit_cpp(r, path);
  EXPECT_EQ(cpp.find(")KIR\";"), std::string::npos) << cpp;  // no raw string a name could close
  // The graph literal is exactly the graph's text.
  size_t at = cpp.find("static const char* kGraph = ");
  ASSERT_NE(at, std::string::npos);
  size_t begin = at + std::string("static const char* kGraph = ").size(), end = cpp.find(";\n", begin);
  EXPECT_EQ(nlohmann::json::parse(cpp.substr(begin, end - begin)).get<std::string>(), graph::print_graph(r.graph));
  for (const std::string& text : {cpp, emit_torch(r, path)})  // the file name's newline stays in its comment
    EXPECT_EQ(text.find("\nname.repro"), std::string::npos) << text;
}

TEST(Minifier, EmitsATorchScriptAndACppProgramOfTheRepro) {
  register_inject_test_backend();
  ScopedOption inject(Opt::Inject, "relu:compile_error");
  TestGraph t = relu_test_graph(30, 2);
  std::string out = temp_dir("emit") + "/m.repro";
  minify::minify(t.graph, graph::seeded_inputs(t.graph, 0), options(out));
  ReproFile r = load_repro(out);
  std::string py = emit_torch(r, out);
  EXPECT_NE(py.find("torch.ops.aten.relu(v_" + t.relu_input + ")"), std::string::npos) << py;
  EXPECT_NE(py.find("load(\"" + t.relu_input + ".npy\", torch.float32)"), std::string::npos) << py;  // run by test_cli_suite
  std::string cpp = emit_cpp(r, out);
  EXPECT_NE(cpp.find("relu(%" + t.relu_input + ")"), std::string::npos) << cpp;
  EXPECT_NE(cpp.find("oracle.backend = \"" + kBackend + "\""), std::string::npos) << cpp;
  EXPECT_NE(cpp.find("FailureOracle(oracle).classify(g, inputs)"), std::string::npos) << cpp;
  if (std::system("python3 -c 'import ast' > /dev/null 2>&1") == 0) {  // the script is valid Python
    std::string path = fs::path(out).parent_path() / "m.py";
    std::ofstream(path) << py;
    EXPECT_EQ(std::system(("python3 -c 'import ast,sys; ast.parse(open(sys.argv[1]).read())' " + path).c_str()), 0);
  }
  // The program builds with the line in its header (this build's libraries for $KILN/build) and, run beside the
  // repro's inputs, reports the failure with exit code 1. Not in sanitizer builds, whose libraries need the
  // sanitizers' flags too.
  if (KILN_SANITIZED || std::system("g++ --version > /dev/null 2>&1") != 0) return;
  const fs::path dir = fs::path(out).parent_path();
  std::ofstream(dir / "m.cpp") << cpp;
  std::string line;
  std::istringstream header(cpp);
  for (std::string l; std::getline(header, l) && l.rfind("//", 0) == 0;) {
    if (l.rfind("//   g++", 0) == 0) line = l.substr(2);
    else if (!line.empty() && line.back() == '\\') line = line.substr(0, line.size() - 1) + l.substr(2);
  }
  ASSERT_NE(line.find("g++"), std::string::npos) << cpp;
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t at = line.find(from); at != std::string::npos; at = line.find(from, at + to.size()))
      line.replace(at, from.size(), to);
  };
  replace_all("$KILN/build/", std::string(KILN_BINARY_DIR) + "/");
  replace_all("$KILN", KILN_SOURCE_DIR);
  replace_all("THIS.cpp", (dir / "m.cpp").string());
  replace_all("-o repro", "-o " + (dir / "m").string());
  ASSERT_EQ(std::system((line + " 2> " + (dir / "build.txt").string()).c_str()), 0)
      << line << "\n" << read_text(dir / "build.txt");
  const int status = std::system(((dir / "m").string() + " > " + (dir / "run.txt").string() + " 2>&1").c_str());
  const std::string run = read_text(dir / "run.txt");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << run;
  EXPECT_NE(run.find("compile_error"), std::string::npos) << run;
}

TEST(Minifier, ReproHookWritesAndMinifiesByLevel) {
  register_inject_test_backend();
  ScopedOption inject(Opt::Inject, "relu:compile_error");
  std::string dir = temp_dir("hook");
  ScopedOption debug(Opt::DebugDir, dir);
  TestGraph t = relu_test_graph(40, 4);
  FailureSignature f{FailureKind::CompileError, "relu: injected compile error: the lowering of %v20 emits invalid IR "
                                      "(KILN_INJECT=relu:compile_error)"};
  {
    ScopedOption off(Opt::ReproAfter, "");
    EXPECT_EQ(on_compile_failure(t.graph, nullptr, f, kBackend), "");
  }
  ScopedOption after(Opt::ReproAfter, "backend");
  EXPECT_TRUE(repro_hook_wants("backend"));
  EXPECT_FALSE(repro_hook_wants("aot"));
  {
    ScopedOption level(Opt::ReproLevel, "1");
    std::string path = on_compile_failure(t.graph, nullptr, f, kBackend);
    ASSERT_FALSE(path.empty());
    EXPECT_EQ(load_repro(path).graph.num_op_nodes(), 40);  // level 1: written, not minified
    EXPECT_EQ(on_compile_failure(t.graph, nullptr, {FailureKind::RuntimeError, "x"}, kBackend), "");  // level 3 only
  }
  ScopedOption level(Opt::ReproLevel, "2");
  std::string path = on_compile_failure(t.graph, nullptr, f, kBackend);
  ASSERT_FALSE(path.empty());
  ReproFile min = load_repro(path);
  EXPECT_EQ(min.graph.num_op_nodes(), 1);
  EXPECT_TRUE(reproduce(min, path, 30).reproduces);
  EXPECT_FALSE(in_minifier());
}

TEST(Minifier, CliMinifiesAndTheReproRunsFromTheCommandLine) {
  std::string dir = temp_dir("cli");
  TestGraph t = relu_test_graph(120, 8);
  graph::save_graph(t.graph, dir + "/g.kir");
  std::string cmd = "cd " + dir + " && KILN_INJECT=relu:runtime_error " + KILN_CLI +
                    " minify g.kir --backend inject_test -q -j 2 --emit torch > out.txt 2> err.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string text = read_text(dir + "/out.txt");
  EXPECT_NE(text.find("minified 120 -> 1 op nodes"), std::string::npos) << text;
  EXPECT_NE(text.find("REPRODUCES"), std::string::npos) << text;
  EXPECT_TRUE(fs::exists(dir + "/g.min.py"));
  // The repro carries KILN_INJECT in its config: no environment needed to reproduce it.
  int rc = std::system(("cd " + dir + " && " + KILN_CLI + " repro run g.min.repro > run.txt").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 1);
  // A graph that does not fail is bad input: exit 2 with a message.
  rc = std::system(("cd " + dir + " && " + KILN_CLI + " minify g.kir --backend inject_test -q > /dev/null 2> err2.txt").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
}
