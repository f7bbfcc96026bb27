// The loop IR's index algebra (inductor/ir.h): floor division and modulo of affine indices simplify only to
// equal expressions (a RapidCheck property evaluating both at random points), reshapes read through another
// shape lose their per-element divisions, and a strided view reduced twice is copied contiguous first.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <string>

#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "inductor/ir.h"

namespace kiln::inductor {
namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// The value of `a` with each variable atom set from `at` (by key).
int64_t eval(const Index& a, const std::map<std::string, int64_t>& at) {
  int64_t v = a.constant;
  for (const auto& [atom, k] : a.terms) {
    int64_t x = 0;
    switch (atom->kind) {
      case IndexAtom::Kind::Var: x = at.at(atom->key); break;
      case IndexAtom::Kind::Div: x = floor_div(eval(atom->arg, at), atom->divisor); break;
      case IndexAtom::Kind::Mod: x = eval(atom->arg, at) - floor_div(eval(atom->arg, at), atom->divisor) * atom->divisor; break;
    }
    v += k * x;
  }
  return v;
}

// Whether any division or modulo atom is left in `a`.
bool has_div_or_mod(const Index& a) {
  for (const auto& [atom, k] : a.terms)
    if (atom->kind != IndexAtom::Kind::Var) return true;
  return false;
}

RC_GTEST_PROP(IndexAlgebra, DivisionAndModuloSimplifyToEqualExpressions, ()) {
  const int nvars = *rc::gen::inRange(1, 4);
  std::vector<Index> vars;
  std::vector<int64_t> extents;
  Index a = ix_const(*rc::gen::inRange<int64_t>(0, 50));
  for (int i = 0; i < nvars; ++i) {
    extents.push_back(*rc::gen::inRange<int64_t>(1, 300));
    vars.push_back(ix_var(extents.back()));
    // Coefficients often share factors with the divisor (strides of a reshape).
    const int64_t k = *rc::gen::oneOf(rc::gen::inRange<int64_t>(0, 400), rc::gen::element<int64_t>(1, 3, 32, 48, 192, 1024));
    a = ix_add(a, ix_scale(vars.back(), k));
  }
  const int64_t d = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 7000), rc::gen::element<int64_t>(32, 96, 192, 6144, 1536));
  const int64_t d2 = *rc::gen::inRange<int64_t>(1, 64);
  const Index q = ix_div(a, d), r = ix_mod(a, d), nested = ix_mod(ix_div(a, d2), d);
  for (int sample = 0; sample < 20; ++sample) {
    std::map<std::string, int64_t> at;
    for (size_t i = 0; i < vars.size(); ++i) at[vars[i].terms[0].first->key] = *rc::gen::inRange<int64_t>(0, extents[i]);
    const int64_t x = eval(a, at);
    RC_ASSERT(eval(q, at) == floor_div(x, d));
    RC_ASSERT(eval(r, at) == x - floor_div(x, d) * d);
    RC_ASSERT(eval(nested, at) == floor_div(x, d2) % d);
  }
}

// A [1024, 192] loop reading a contiguous [1, 32, 32, 192] buffer (a linear layer's input viewed as a matrix):
// unravelling 192*o + x into that shape and flattening it back gives 192*o + x, with no division left, so the
// element loop vectorises (it held (192*o + x)//6144 per element, 6x slower on ConvNeXt's MLP).
TEST(IndexAlgebra, AReshapeReadThroughAnotherShapeKeepsNoDivision) {
  const Index o = ix_var(1024), x = ix_var(192);
  const Index flat = ix_add(ix_scale(o, 192), x);
  const Index back = ix_linear(ix_unravel(flat, {1, 32, 32, 192}), {1, 32, 32, 192});
  EXPECT_EQ(back.str(), flat.str());
  EXPECT_FALSE(has_div_or_mod(back)) << back.str();
  EXPECT_EQ(ix_div(flat, 6144).str(), ix_div(o, 32).str());
  EXPECT_EQ(ix_mod(flat, 6144).str(), ix_add(ix_scale(ix_mod(o, 32), 192), x).str());
}

// ConvNeXt's layer norm over channels: a channels-first tensor permuted to channels-last and normalised over
// its (strided) last dim. The view is copied contiguous once, the decision says why, and the result matches
// the interpreter.
TEST(ColumnReductions, AStridedViewReducedTwiceIsCopiedContiguousFirst) {
  const graph::Graph g = graph::parse_graph(
      "graph lnp(%x: f32[1, 48, 32, 32], %g: f32[48], %b: f32[48]) {\n"
      "  %p = permute(%x, [0, 2, 3, 1]) : f32[1, 32, 32, 48]{49152, 32, 1, 1024}\n"
      "  %y = layer_norm(%p, [48], %g, %b, 1e-06) : f32[1, 32, 32, 48]\n"
      "  return %y\n}\n", "lnp.kir");
  CompileOptions options;
  options.use_graph_cache = false;
  std::shared_ptr<CompiledGraph> c = compile(g, options);
  std::string copies;
  for (const std::string& d : c->decisions())
    if (d.find("contiguous copy") != std::string::npos) copies += d + "\n";
  EXPECT_NE(copies.find("realize %p: contiguous copy: 2 reductions"), std::string::npos) << copies;
  const std::vector<Tensor> in = graph::seeded_inputs(g, 3);
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  CompareVerdict v = compare_outputs(graph::run_graph(g, in), (*c)(in), graph::run_graph(g, in, fp64));
  EXPECT_TRUE(v.ok) << v.str();
  // A view the graph returns stays a view of its input, copied or not.
  const graph::Graph returned = graph::parse_graph(
      "graph lnp2(%x: f32[1, 48, 32, 32], %g: f32[48], %b: f32[48]) {\n"
      "  %p = permute(%x, [0, 2, 3, 1]) : f32[1, 32, 32, 48]{49152, 32, 1, 1024}\n"
      "  %y = layer_norm(%p, [48], %g, %b, 1e-06) : f32[1, 32, 32, 48]\n"
      "  return %p, %y\n}\n", "lnp2.kir");
  std::shared_ptr<CompiledGraph> r = compile(returned, options);
  for (const std::string& d : r->decisions()) EXPECT_EQ(d.find("contiguous copy"), std::string::npos) << d;
  const std::vector<Tensor> in2 = graph::seeded_inputs(returned, 4);
  std::vector<Tensor> out2 = (*r)(in2);
  EXPECT_EQ(Shape(out2[0].strides().begin() + 1, out2[0].strides().end()), (Shape{32, 1, 1024}));  // dim 0 has size 1
  CompareVerdict v2 = compare_outputs(graph::run_graph(returned, in2), out2, graph::run_graph(returned, in2, fp64));
  EXPECT_TRUE(v2.ok) << v2.str();
  // One reduction alone (a column sum) reads the view where it is.
  const graph::Graph sum = graph::parse_graph(
      "graph s(%x: f32[1, 48, 32, 32]) {\n"
      "  %p = permute(%x, [0, 2, 3, 1]) : f32[1, 32, 32, 48]{49152, 32, 1, 1024}\n"
      "  %s = sum(%p, [3]) : f32[1, 32, 32]\n  return %s\n}\n", "s.kir");
  std::shared_ptr<CompiledGraph> summed = compile(sum, options);
  for (const std::string& d : summed->decisions())
    EXPECT_EQ(d.find("contiguous copy"), std::string::npos) << d;
}

}  // namespace
}  // namespace kiln::inductor
