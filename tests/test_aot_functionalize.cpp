// Functionalization (aot/functionalize.h): the functional graph has no in-place node, and the interpreter on it
// (with the copy-back epilogue) gives the same outputs and the same input mutations as on the original graph:
// hand-written cases (writes into intermediates, through views of inputs, outputs aliasing mutated inputs) and
// a RapidCheck property over generated graphs with in-place ops and views.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "aot/functionalize.h"
#include "eager/philox.h"
#include "fuzz/rapidcheck_gen.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "op_samples.h"

using namespace kiln;

namespace {

// Runs `original` and the functionalized graph (copy-back as nodes) on copies of `inputs`; returns "" when the
// outputs and the inputs after the run agree, else what differs.
std::string functional_mismatch(const graph::Graph& original, const std::vector<Tensor>& inputs) {
  aot::FunctionalGraph f = aot::functionalize(original);
  if (aot::has_mutations(f.graph)) return "the functional graph still has in-place nodes:\n" + graph::print_graph(f.graph);
  graph::verify_graph(f.graph);
  std::vector<Tensor> a_in = graph::copy_inputs(inputs), b_in = graph::copy_inputs(inputs);
  manual_seed(9);
  std::vector<Tensor> a = graph::run_graph(original, a_in);
  manual_seed(9);
  std::vector<Tensor> b = graph::run_graph(aot::with_copy_back(f), b_in);
  // The comparator's default tolerance: the functional graph may lay values out differently (an expand where
  // the original wrote into a contiguous tensor), so f32 reductions over them round differently.
  CompareVerdict outs = compare_outputs(a, b);
  if (!outs.ok) return "outputs: " + outs.str() + "\n" + graph::print_graph(f.graph);
  CompareVerdict mutated = compare_outputs(a_in, b_in);
  if (!mutated.ok) return "inputs after the run: " + mutated.str() + "\n" + graph::print_graph(f.graph);
  return "";
}

std::vector<Tensor> seeded(const graph::Graph& g) { return graph::seeded_inputs(g, 1); }

TEST(Functionalize, InPlaceOnAnIntermediate) {
  graph::Graph g = graph::parse_graph(R"(graph f(%x: f32[3]) {
    %y = mul(%x, 2) : f32[3]
    %z = add_(%y, %x) : f32[3]
    %w = mul(%y, %z) : f32[3]
    return %w, %y
  })");
  EXPECT_EQ(functional_mismatch(g, seeded(g)), "");
  EXPECT_TRUE(aot::functionalize(g).mutations.empty());
}

TEST(Functionalize, WriteThroughAViewOfAnInputIsCopiedBackOnce) {
  graph::Graph g = graph::parse_graph(R"(graph f(%x: f32[2, 3], %u: f32[3]) {
    %v = select(%x, 0, 1) : f32[3]
    %m = mul_(%v, 3) : f32[3]
    %c = copy_(%u, %m) : f32[3]
    %s = sum(%x) : f32[]
    return %s
  })");
  EXPECT_EQ(functional_mismatch(g, seeded(g)), "");
  aot::FunctionalGraph f = aot::functionalize(g);
  ASSERT_EQ(f.mutations.size(), 2u);  // x and u, each written back once
  EXPECT_EQ(f.mutations[0].first, 0);
  EXPECT_EQ(f.mutations[1].first, 1);
  EXPECT_EQ(f.num_outputs, 1);
}

TEST(Functionalize, OutputsAliasingMutatedInputsAreRegeneratedViews) {
  graph::Graph g = graph::parse_graph(R"(graph f(%x: f32[2, 3]) {
    %t = transpose(%x, 0, 1) : f32[3, 2]{1, 3}
    %a = add_(%x, 1) : f32[2, 3]
    %r = reshape(%x, [6]) : f32[6]
    %z = zero_(%r) : f32[6]
    return %t, %a
  })");
  EXPECT_EQ(functional_mismatch(g, seeded(g)), "");
}

// Found by the property (seed 16435303373497017341): copy_ from a view of an input that a later write mutates.
// The copied-to tensor keeps the old elements; its functional value must not alias the mutated input.
TEST(Functionalize, CopyFromAViewOfAnInputMutatedLaterKeepsTheOldElements) {
  graph::Graph g = graph::parse_graph(R"(graph f(%x: f32[3], %d: f32[3], %n: f32[3]) {
    %v = view(%x, [3]) : f32[3]
    %c = copy_(%d, %v) : f32[3]
    %w = copy_(%v, %n) : f32[3]
    return %c, %w
  })");
  EXPECT_EQ(functional_mismatch(g, seeded(g)), "");
}

// A broadcast source copied into a dense tensor: the copied-to value stays dense, so a view of it works as in
// eager (found by the property below, seed 12452579094175682617).
TEST(Functionalize, CopyOfABroadcastSourceCanBeViewedLikeEager) {
  graph::Graph g = graph::parse_graph(R"(graph f(%x: f32[8, 1, 4], %s: f32[1, 4]) {
    %c = copy_(%x, %s) : f32[8, 1, 4]
    %v = view(%c, [32]) : f32[32]
    return %c, %v
  })");
  EXPECT_EQ(functional_mismatch(g, seeded(g)), "");
}

TEST(Functionalize, GraphsWithoutMutationsAreUnchanged) {
  graph::Graph g = graph::parse_graph(R"(graph f(%x: f32[3]) {
    %y = exp(%x) : f32[3]
    return %y
  })");
  EXPECT_EQ(graph::print_graph(aot::functionalize(g).graph), graph::print_graph(g));
}

TEST(Functionalize, PropertyOverGeneratedGraphsWithMutationsAndViews) {
  fuzz::GenOptions opts;
  opts.max_nodes = 8;
  opts.ops = {OpId::add_, OpId::mul_, OpId::copy_, OpId::fill_, OpId::zero_, OpId::select, OpId::slice, OpId::transpose,
              OpId::unsqueeze, OpId::view, OpId::expand, OpId::add, OpId::mul, OpId::exp, OpId::sum, OpId::clone};
  check_property("Functionalize/generated", [&] {
    fuzz::FuzzCase fc = *fuzz::fuzz_case_gen(opts);
    std::string why = functional_mismatch(fc.graph, fc.inputs);
    if (!why.empty()) RC_FAIL(why + "\noriginal:\n" + graph::print_graph(fc.graph));
  }, 100);
}

}  // namespace
