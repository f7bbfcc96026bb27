// The inductor is never less safe than eager: graphs under tests/inductor_safety/ (views past their storage,
// overlapping in-place writes, indices out of range at run time, the inductor's past internal errors) give
// eager's answer or eager's error through `kiln run`; every op sample of tests/op_samples.cpp, with numbers in
// tensor slots too, compiles to eager's answer or raises eager's error (never an internal error or another
// exception); random view chains (valid or reaching past their storage) read, written in place, agree with
// eager on accept-or-reject, the message and the values; eager's own overlap checks; internal errors exit 3.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <typeinfo>

#include "core/error.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "inductor/decompose.h"
#include "inductor/lowering.h"
#include "graph/storage_model.h"
#include "op_samples.h"
#include "ops/api.h"
#include "ops/dispatch.h"
#include "cli_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using cli_test::CliResult;
using cli_test::kiln_cli;

// A value in [lo, hi) drawn at RapidCheck's full size, so every case is equally random (op_samples.cpp does
// the same); shrinking still moves towards lo.
int64_t draw(int64_t lo, int64_t hi) { return *rc::gen::resize(100, rc::gen::inRange<int64_t>(lo, hi)); }

std::string error_line(const std::string& output) {
  size_t at = output.find("kiln: ");
  if (at == std::string::npos) return "";
  return output.substr(at, output.find('\n', at) - at);
}

std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
  NoGradGuard no_grad;
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.defined() ? clone(t).detach() : t);
  return out;
}

// ---------------------------------------------------------------- the graphs of tests/inductor_safety

// Each file's first line says what both backends must do: `# expect: ok` (exit 0, and the inductor's outputs
// pass --check against the fp64 interpreter) or `# expect: error TEXT` (exit 2 from both, the same error line,
// which contains TEXT). Before these fixes the inductor read or wrote past buffers (exit 0 with garbage, or
// SIGSEGV), accepted overlapping writes, and failed on lerp's number weight and embedding's padding_idx.
TEST(InductorSafety, GraphsGiveEagersAnswerOrEagersError) {
  const fs::path dir = fs::path(KILN_SOURCE_DIR) / "tests" / "inductor_safety";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".kir") continue;
    ++files;
    std::ifstream in(entry.path());
    std::string first;
    std::getline(in, first);
    const std::string g = entry.path().string();
    SCOPED_TRACE(g);
    CliResult eager = kiln_cli("run '" + g + "' --backend eager --seed 0");
    CliResult compiled = kiln_cli("run '" + g + "' --backend inductor --seed 0");  // no fp64 reference run first
    if (first == "# expect: ok") {
      EXPECT_EQ(eager.exit_code, 0) << eager.output;
      EXPECT_EQ(compiled.exit_code, 0) << compiled.output;
      CliResult checked = kiln_cli("run '" + g + "' --backend inductor --seed 0 --check");
      EXPECT_EQ(checked.exit_code, 0) << checked.output;
      continue;
    }
    const std::string prefix = "# expect: error ";
    ASSERT_EQ(first.rfind(prefix, 0), 0u) << "the first line must be '# expect: ok' or '# expect: error TEXT'";
    EXPECT_EQ(eager.exit_code, 2) << eager.output;
    EXPECT_EQ(compiled.exit_code, 2) << compiled.output;
    EXPECT_NE(error_line(eager.output).find(first.substr(prefix.size())), std::string::npos) << eager.output;
    EXPECT_EQ(error_line(compiled.output), error_line(eager.output));
  }
  EXPECT_GE(files, 20);
}

// ---------------------------------------------------------------- internal errors

TEST(InductorSafety, InternalErrorsExitThreeAndBadInputTwo) {
  // An internal kiln::Error (a broken invariant) is a bug: the CLI says so and exits 3.
  Error internal("x", true), user("y");
  EXPECT_TRUE(internal.internal());
  EXPECT_FALSE(user.internal());
  try {
    KILN_ASSERT(1 + 1 == 3, "arithmetic is broken: {}", 2);
    FAIL() << "KILN_ASSERT did not throw";
  } catch (const Error& e) {
    EXPECT_TRUE(e.internal());
    EXPECT_STREQ(e.what(), "arithmetic is broken: 2");
  }
  // The interpreter names the node and keeps the classification.
  graph::Graph g = graph::parse_graph("graph a(%x: f32[2, 3]) {\n  %v = as_strided(%x, [7], [1]) : f32[7]\n  return %v\n}\n");
  try {
    graph::run_graph(g, graph::seeded_inputs(g, 0));
    FAIL() << "as_strided past the storage ran";
  } catch (const Error& e) {
    EXPECT_FALSE(e.internal());
    EXPECT_NE(std::string(e.what()).find("%v = as_strided (line 2:3): as_strided: size [7]"), std::string::npos) << e.what();
  }
}

TEST(InductorSafety, CompilerFailuresAreInternalCompileErrors) {
  // A kernel that fails LLVM's verifier without KILN_INJECT asking for it would be a compiler bug; with it,
  // it is the injected failure the tools are tested on (exit 2 as before).
  ScopedOption inject(Opt::Inject, "relu:compile_error");
  graph::Graph g = graph::parse_graph("graph r(%x: f32[4]) {\n  %r = relu(%x) : f32[4]\n  return %r\n}\n");
  try {
    compile(g);
    FAIL() << "the injected compile error did not fire";
  } catch (const CompileError& e) {
    EXPECT_FALSE(e.internal()) << e.what();
  }
}

// ---------------------------------------------------------------- every op sample, numbers in tensor slots too

struct OpRow {
  std::string name;
};
void PrintTo(const OpRow& r, std::ostream* os) { *os << r.name; }

const std::map<std::string, rc::Gen<OpSample>>& samples() {
  static const auto s = [] {
    auto all = differentiable_op_samples();
    for (auto& [name, gen] : non_differentiable_op_samples()) all.emplace(name, gen);
    return all;
  }();
  return s;
}
std::vector<OpRow> op_rows() {
  std::vector<OpRow> rows;
  for (const auto& [name, gen] : samples()) rows.push_back({name});
  return rows;
}

// A number standing for `t` in a tensor slot (as `lerp(%x, %y, 0.3)` writes it).
Scalar number_for(const Tensor& t) {
  if (t.dtype() == DType::Bool) return Scalar(*rc::gen::arbitrary<bool>());
  if (!is_floating(t.dtype())) return Scalar(int64_t(draw(0, 3)));
  return Scalar(*rc::gen::element(0.3, -1.5, 2.0));
}

// A one-node graph calling `op` like the sample does; each plain tensor argument is a graph input or, drawn
// at random, a number written in its slot. Returns the graph and its inputs; nullopt when the call is invalid
// (the graph's shape inference refuses it, as `kiln verify` would).
std::optional<std::pair<graph::Graph, std::vector<Tensor>>> sample_graph(const OpInfo& op, const OpSample& sample,
                                                                         DType dt) {
  try {
    return one_node_graph(op, sample, dt, [](const Tensor& t) -> std::optional<Scalar> {
      if (draw(0, 3) == 0) return number_for(t);
      return std::nullopt;
    });
  } catch (const Error&) {
    return std::nullopt;
  }
}

// What running a graph gave: its outputs, or the error (its class, message and classification).
struct Outcome {
  std::vector<Tensor> outputs;
  bool failed = false;
  bool kiln_error = false;  // a kiln::Error (else another exception)
  bool internal = false;
  std::string error_class, message;
};

template <class F>
Outcome outcome_of(F run) {
  Outcome o;
  try {
    o.outputs = run();
  } catch (const Error& e) {
    o = Outcome{{}, true, true, e.internal(), typeid(e).name(), e.what()};
  } catch (const std::exception& e) {
    o = Outcome{{}, true, false, false, typeid(e).name(), e.what()};
  }
  return o;
}

Outcome run_eager(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  return outcome_of([&] {
    manual_seed(7);
    return graph::run_graph(g, clones(inputs));
  });
}
Outcome run_compiled(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  return outcome_of([&] {
    std::shared_ptr<CompiledGraph> c = compile(g);
    manual_seed(7);
    return (*c)(clones(inputs));
  });
}

// The compiled outcome is eager's: the same outputs through the comparator, or an error of the same class
// that is neither internal nor anything but a kiln::Error. Returns whether eager refused the graph.
bool require_eagers_outcome(const graph::Graph& g, const std::vector<Tensor>& inputs, bool same_message) {
  const Outcome eager = run_eager(g, inputs);
  const Outcome compiled = run_compiled(g, inputs);
  const std::string graph_text = graph::print_graph(g);
  if (compiled.failed && (!compiled.kiln_error || compiled.internal))
    RC_FAIL(fmt::format("the inductor failed with {} ({}): {}\n{}", compiled.error_class,
                        compiled.internal ? "internal" : "not a kiln::Error", compiled.message, graph_text));
  if (eager.failed != compiled.failed)
    RC_FAIL(fmt::format("eager {}, the inductor {}\n{}", eager.failed ? "failed: " + eager.message : "ran",
                        compiled.failed ? "failed: " + compiled.message : "ran", graph_text));
  if (eager.failed) {
    RC_ASSERT(compiled.error_class == eager.error_class);
    if (same_message) RC_ASSERT(compiled.message == eager.message);
    return true;
  }
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  manual_seed(7);
  std::vector<Tensor> reference = graph::run_graph(g, clones(inputs), fp64);
  CompareVerdict v = compare_outputs(eager.outputs, compiled.outputs, reference);
  if (!v.ok) RC_FAIL(v.str() + "\n" + graph_text);
  return false;
}

// The storage model (after decomposition, where the inductor builds it) says an output lives in an input's
// storage exactly when eager's result does: an op eager answers with its input that the model does not know
// would let the compiled program write a copy where eager writes the input.
void require_storage_model_agrees(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outs;
  try {
    manual_seed(7);
    outs = graph::run_graph(g, inputs);  // the inputs themselves: their storages are compared
  } catch (const Error&) {
    return;
  }
  const graph::Graph d = inductor::decompose_composites(g, inductor::CompileContext{});
  const graph::StorageModel model(d);
  for (size_t k = 0; k < outs.size(); ++k) {
    const graph::ValueId owner = model.owner(d.outputs()[k]);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const bool eager_shares = outs[k].storage() == inputs[i].storage();
      const bool model_shares = owner == d.inputs()[i];
      if (eager_shares != model_shares)
        RC_FAIL(fmt::format("output {} {} input {}'s storage in eager but {} in the storage model\n{}", k,
                            eager_shares ? "shares" : "does not share", i, model_shares ? "does" : "does not",
                            graph::print_graph(g)));
    }
  }
}

class InductorSafetyOp : public ::testing::TestWithParam<OpRow> {};

TEST_P(InductorSafetyOp, GivesEagersAnswerOrEagersError) {
  const std::string& name = GetParam().name;
  const OpInfo* op = find_op(name);
  ASSERT_NE(op, nullptr);
  const rc::Gen<OpSample>& gen = samples().at(name);
  check_property(fmt::format("InductorSafetyOp/{}", name), [&] {
    OpSample sample = *gen;
    RC_PRE(!sample.shape_depends_on_data);
    const DType dt = *rc::gen::element(DType::F32, DType::F64, DType::BF16);
    auto built = sample_graph(*op, sample, dt);
    RC_PRE(built.has_value());
    require_eagers_outcome(built->first, built->second, false);
    std::vector<Tensor> same_layout;  // the sample's own tensors: clones would be contiguous, the graph is not
    for (const Tensor& t : built->second) same_layout.push_back(t.detach());
    require_storage_model_agrees(built->first, same_layout);
  }, 8);
}

INSTANTIATE_TEST_SUITE_P(Ops, InductorSafetyOp, ::testing::ValuesIn(op_rows()),
                         [](const ::testing::TestParamInfo<OpRow>& i) { return i.param.name; });

// ---------------------------------------------------------------- random views, read and written

// A graph over %x: f32[R, C]: %p = x * 2 (an intermediate the inductor would inline) or %x itself, then a chain
// of views (slice, select with negative indices, expand, transpose, diagonal, as_strided with sizes, strides
// and offsets that may reach past the storage), then a read of the view or an in-place write through it (add_,
// copy_ or fill_, which may overlap itself) followed by reads of %p and of %twin, computed as %p is but never
// written.
graph::Graph random_view_graph() {
  using graph::TensorArg;
  const int64_t rows = draw(1, 5), cols = draw(1, 5);
  graph::Graph g;
  const graph::ValueId x = g.add_input("x", TensorMeta{DType::F32, {rows, cols}, {cols, 1}, {}});
  const graph::ValueId p = *rc::gen::arbitrary<bool>() ? g.add_op1(OpId::mul, {TensorArg{x}, Scalar(2.0)}, "p") : x;
  // The same computation as %p before any write, another storage in eager: common-subexpression elimination
  // must keep the two apart when %p is written in place.
  const graph::ValueId twin = p != x ? g.add_op1(OpId::mul, {TensorArg{x}, Scalar(2.0)}, "twin") : x;
  graph::ValueId v = p;
  const int steps = draw(1, 4);
  for (int i = 0; i < steps; ++i) {
    const Shape sizes = g.value(v).meta.sizes;
    const int64_t ndim = int64_t(sizes.size());
    switch (draw(0, 6)) {
      case 0:
        if (ndim > 0) {
          int64_t d = draw(0, ndim), n = sizes[size_t(d)];
          int64_t start = draw(-n, n + 1), step = draw(1, 3);
          v = g.add_op1(OpId::slice, {TensorArg{v}, d, start, std::monostate{}, step});
        }
        break;
      case 1:
        if (ndim > 0 && sizes[0] > 0)
          v = g.add_op1(OpId::select, {TensorArg{v}, int64_t(0), draw(-sizes[0], sizes[0])});
        break;
      case 2: {
        IntList target = sizes;
        target.insert(target.begin(), draw(1, 3));
        v = g.add_op1(OpId::expand, {TensorArg{v}, target});
        break;
      }
      case 3:
        if (ndim >= 2) v = g.add_op1(OpId::transpose, {TensorArg{v}, int64_t(0), int64_t(1)});
        break;
      case 4:
        if (ndim >= 2) v = g.add_op1(OpId::diagonal, {TensorArg{v}, draw(-2, 3), int64_t(0), int64_t(1)});
        break;
      case 5: {
        const int64_t rank = draw(1, 3);
        IntList size, stride;
        for (int64_t k = 0; k < rank; ++k) {
          size.push_back(draw(0, 5));
          stride.push_back(draw(0, 5));
        }
        graph::Arg offset = std::monostate{};
        if (*rc::gen::arbitrary<bool>()) offset = Scalar(int64_t(draw(0, rows * cols + 2)));
        v = g.add_op1(OpId::as_strided, {TensorArg{v}, size, stride, offset});
        break;
      }
    }
  }
  std::vector<graph::ValueId> outs;
  switch (draw(0, 4)) {
    case 0: outs.push_back(g.add_op1(OpId::add, {TensorArg{v}, Scalar(1.0), Scalar(1.0)})); break;
    case 1: g.add_op1(OpId::add_, {TensorArg{v}, Scalar(1.0), Scalar(1.0)}); break;
    case 2: {
      const graph::ValueId src = g.add_input("src", TensorMeta{DType::F32, g.value(v).meta.sizes,
                                                               contiguous_strides(g.value(v).meta.sizes), {}});
      g.add_op1(OpId::copy_, {TensorArg{v}, TensorArg{src}});
      break;
    }
    case 3: g.add_op1(OpId::fill_, {TensorArg{v}, Scalar(5.0)}); break;
  }
  if (p != x) {
    outs.push_back(g.add_op1(OpId::neg, {TensorArg{p}}));  // reads %p after the write
    outs.push_back(g.add_op1(OpId::neg, {TensorArg{twin}}));
  }
  outs.push_back(v);
  g.set_outputs(outs);
  return g;
}

TEST(InductorSafetyProperty, RandomViewsAgreeWithEager) {
  int refused = 0, ran = 0;  // both kinds of graph must be drawn for the property to say anything
  check_property("InductorSafetyProperty/RandomViews", [&] {
    graph::Graph g;
    try {
      g = random_view_graph();
    } catch (const Error&) {
      RC_DISCARD("a view the graph's shape inference refuses");
    }
    ++(require_eagers_outcome(g, graph::seeded_inputs(g, uint64_t(draw(0, 100))), true) ? refused : ran);
  }, 300);
  EXPECT_GT(refused, 0);
  EXPECT_GT(ran, 0);
}

// ---------------------------------------------------------------- eager's overlap checks

TEST(EagerOverlap, InPlaceWritesThatOverlapAreRefusedLikePyTorch) {
  Tensor y = zeros({3});
  Tensor e = expand(y, {2, 3});
  try {
    add_(e, IValue(Scalar(1.0)));
    FAIL() << "add_ into an expanded view ran";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("add_: unsupported operation: more than one element of the written-to "
                                           "tensor"), std::string::npos) << err.what();
  }
  fill_(e, 2.0);  // allowed: one value everywhere
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{2, 2, 2}));
  Tensor z = arange(0, 6, 1, DType::F32);
  try {
    add_(slice(z, 0, 1, 6), slice(z, 0, 0, 5));
    FAIL() << "a partly overlapping add_ ran";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("unsupported operation: some elements of the input tensor"),
              std::string::npos) << err.what();
  }
  add_(z, z);  // the same elements in the same order: allowed
  EXPECT_EQ(z.to_double_vector(), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  copy_(slice(z, 0, 0, 3), slice(z, 0, 3, 6));  // the same storage, disjoint: allowed
  EXPECT_EQ(z.to_double_vector(), (std::vector<double>{6, 8, 10, 6, 8, 10}));
}

}  // namespace
}  // namespace kiln
