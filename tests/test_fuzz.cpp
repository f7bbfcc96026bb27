// The fuzzer's graph generator (fuzz/generator.h): every graph it makes is valid (verifies, prints and parses
// back, and its fp64 reference runs), it reaches every op of the table in every dtype the op supports, it is
// a pure function of (seed, index), and its RapidCheck form shrinks to valid graphs.
#include <gtest/gtest.h>

#include <set>

#include "fuzz/fuzzer.h"
#include "fuzz/generator.h"
#include "fuzz/rapidcheck_gen.h"
#include "ops/api.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "graph/compare.h"
#include "op_samples.h"

namespace kiln::fuzz {
namespace {

TEST(FuzzGenerator, EveryGeneratedGraphVerifiesAndRoundTrips) {
  GenOptions opts;
  opts.max_nodes = 30;
  check_property("fuzz.verify", [opts] {
    FuzzCase fc = *fuzz_case_gen(opts);
    graph::verify_graph(fc.graph);
    std::string text = graph::print_graph(fc.graph);
    RC_ASSERT(graph::print_graph(graph::parse_graph(text)) == text);
    RC_ASSERT(fc.graph.num_op_nodes() >= 1);
    RC_ASSERT(fc.graph.num_op_nodes() <= opts.max_nodes);
  }, 300);
}

// Valid means more than shape inference: the fp64 reference interpreter runs every graph from its inputs.
TEST(FuzzGenerator, EveryGeneratedGraphRunsOnTheReference) {
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  for (uint64_t i = 0; i < 400; ++i) {
    FuzzCase fc = generate_indexed(7, i);
    SCOPED_TRACE(fmt::format("graph (seed 7, index {}):\n{}", i, graph::print_graph(fc.graph)));
    std::vector<Tensor> inputs;
    for (const Tensor& t : fc.inputs) inputs.push_back(clone(t));
    EXPECT_NO_THROW(graph::run_graph(fc.graph, inputs, fp64));
  }
}

TEST(FuzzGenerator, SameSeedSameGraphs) {
  for (uint64_t i = 0; i < 50; ++i) {
    FuzzCase a = generate_indexed(42, i), b = generate_indexed(42, i);
    EXPECT_EQ(graph::print_graph(a.graph), graph::print_graph(b.graph));
    EXPECT_EQ(a.input_seed, b.input_seed);
  }
  // ... and another seed gives other graphs.
  int differ = 0;
  for (uint64_t i = 0; i < 20; ++i)
    differ += graph::print_graph(generate_indexed(42, i).graph) != graph::print_graph(generate_indexed(43, i).graph);
  EXPECT_GE(differ, 15);
}

// The (op, dtype) pairs the op table supports, found independently of the generator: the test suite's own
// sample calls (op_samples.h) with their floating tensors cast to each floating dtype, plus the dtypes of the
// tensors the samples use, for the pairs shape inference accepts.
std::set<CoverageKey> supported_pairs() {
  static std::set<CoverageKey> pairs;
  if (!pairs.empty()) return pairs;
  std::map<std::string, rc::Gen<OpSample>> samples = differentiable_op_samples();
  for (auto& [name, gen] : non_differentiable_op_samples()) samples.emplace(name, gen);
  for (auto& [name, gen] : samples) {
    const OpInfo& op = *find_op(name);
    check_property("fuzz.supported." + name, [&op, gen = gen] {
      OpSample s = *gen;
      for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
        try {
          auto [g, inputs] = one_node_graph(op, s, dt);
          for (const CoverageKey& k : coverage_keys(g)) pairs.insert(k);
        } catch (const Error&) {
        }
      }
    }, 40);
  }
  return pairs;
}

TEST(FuzzGenerator, ReachesEveryOpInEveryDtypeItSupports) {
  std::set<CoverageKey> reached;
  GenOptions opts;
  opts.max_nodes = 20;
  // Within 4000 graphs; the search stops once everything is reached (the verdict is the same, and under the
  // sanitizers each graph costs about 30 ms: 4000 of them were two minutes of CI).
  const std::set<CoverageKey> wanted = supported_pairs();
  auto everything_reached = [&] {
    std::set<OpId> ops;
    for (const CoverageKey& k : reached) ops.insert(k.op);
    if (ops.size() < all_ops().size()) return false;
    return std::all_of(wanted.begin(), wanted.end(), [&](const CoverageKey& k) { return reached.count(k) > 0; });
  };
  for (uint64_t i = 0; i < 4000; ++i) {
    for (const CoverageKey& k : coverage_keys(generate_indexed(1, i, opts).graph)) reached.insert(k);
    if (i % 100 == 99 && everything_reached()) break;
  }
  std::set<OpId> ops_reached;
  for (const CoverageKey& k : reached) ops_reached.insert(k.op);
  for (const OpInfo& op : all_ops()) EXPECT_TRUE(ops_reached.count(op.id)) << "the generator never produced " << op.name;
  for (const CoverageKey& k : wanted)
    EXPECT_TRUE(reached.count(k)) << "the generator never produced " << op_info(k.op).name << " computing in "
                                  << dtype_name(k.dtype);
}

// RapidCheck shrinking through gen::exec: a property that fails on any graph with a `where` node shrinks to a
// graph of that node alone, and every graph tried while shrinking is valid.
TEST(FuzzGenerator, ShrinkingKeepsGraphsValidAndEndsOnTheCulprit) {
  GenOptions opts;
  opts.max_nodes = 30;
  int smallest = 1 << 30;
  int invalid = 0;
  const bool ok = rc::check("no graph has a where node", [&] {
    FuzzCase fc = *fuzz_case_gen(opts);
    try {
      graph::verify_graph(fc.graph);
    } catch (const Error&) {
      ++invalid;
    }
    bool has_where = false;
    for (const graph::Node& n : fc.graph.nodes()) has_where |= n.kind == graph::NodeKind::Op && n.op == OpId::where;
    if (has_where) smallest = std::min(smallest, fc.graph.num_op_nodes());
    RC_ASSERT(!has_where);
  });
  EXPECT_FALSE(ok) << "no graph with a where node in 100 cases";
  // The where node alone, or with the one node making its operand when shrinking leaves the generator no input
  // of that dtype (seed=4160922173207838301 ends at eye + where): either way far below the 30 nodes drawn.
  EXPECT_LE(smallest, 2) << "shrinking did not reduce the graph to the where node (and its operand's producer)";
  EXPECT_EQ(invalid, 0);
}

// The metamorphic variants are the same computation: contiguous inputs give the same outputs, and the f64
// graph has no f16/bf16/f32 value left and computes what the fp64 interpreter computes.
TEST(FuzzVariants, ContiguousAndF64GraphsComputeTheSame) {
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  int strided = 0, f64_graphs = 0;
  for (uint64_t i = 0; i < 150; ++i) {
    FuzzCase fc = generate_indexed(11, i);
    if (std::any_of(fc.graph.nodes().begin(), fc.graph.nodes().end(), [](const graph::Node& n) {
          return n.kind == graph::NodeKind::Op && graph::is_random_node(n);
        }))
      continue;  // random ops draw at their dtype: the f64 graph draws other numbers
    SCOPED_TRACE(graph::print_graph(fc.graph));
    auto copies = [](const std::vector<Tensor>& ts, bool make_f64) {
      std::vector<Tensor> out;
      for (const Tensor& t : ts) out.push_back(make_f64 && is_floating(t.dtype()) ? to(t, DType::F64) : clone(t));
      return out;
    };
    graph::Graph contiguous = with_contiguous_inputs(fc.graph);
    for (graph::ValueId v : contiguous.inputs())
      EXPECT_EQ(contiguous.value(v).meta.strides, contiguous_strides(contiguous.value(v).meta.sizes));
    for (graph::ValueId v : fc.graph.inputs())
      strided += fc.graph.value(v).meta.strides != contiguous_strides(fc.graph.value(v).meta.sizes);
    std::vector<Tensor> a = graph::run_graph(fc.graph, copies(fc.inputs, false));
    std::vector<Tensor> b = graph::run_graph(contiguous, copies(fc.inputs, false));
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(compare_outputs({a[k]}, {b[k]}).ok) << "output " << k;
    graph::Graph f64;
    try {
      f64 = in_f64(fc.graph);
    } catch (const Error&) {
      continue;  // an op that refuses the f64 version (scatter_add of an f32 zeros by f64 values): no variant
    }
    ++f64_graphs;
    for (graph::ValueId v = 0; v < f64.num_values(); ++v) {
      DType dt = f64.value(v).meta.dtype;
      if (f64.value(v).producer < 0) EXPECT_TRUE(!is_floating(dt) || dt == DType::F64) << f64.value(v).name;
    }
    std::vector<Tensor> ref = graph::run_graph(fc.graph, copies(fc.inputs, false), fp64);
    std::vector<Tensor> c = graph::run_graph(f64, copies(fc.inputs, true));
    for (size_t k = 0; k < ref.size(); ++k)
      if (is_floating(ref[k].dtype()) && c[k].dtype() == DType::F64)
        EXPECT_TRUE(compare_outputs({ref[k]}, {c[k]}).ok) << "output " << k;
  }
  EXPECT_GT(strided, 5) << "too few non-contiguous inputs to tell";
  EXPECT_GT(f64_graphs, 100);
}

TEST(FuzzGenerator, OpListRestrictsTheOps) {
  GenOptions opts;
  opts.ops = parse_op_list("relu,add");
  opts.domains = false;
  for (uint64_t i = 0; i < 50; ++i)
    for (const CoverageKey& k : coverage_keys(generate_indexed(3, i, opts).graph))
      EXPECT_TRUE(k.op == OpId::relu || k.op == OpId::add) << op_info(k.op).name;
  EXPECT_THROW(parse_op_list("relu,nosuchop"), Error);
}

}  // namespace
}  // namespace kiln::fuzz
