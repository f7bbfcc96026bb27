// The symbolic-size algebra (core/sym.h, issue 33): canonical forms, exact division, range analysis, guards and
// the parser. Properties over random expression trees: the built expression evaluates as the tree does at every
// assignment in the symbols' ranges, its bounds contain every such value, it prints and parses back to itself,
// and what ShapeEnv proves holds at every assignment in range, what it guards holds at the hints.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <functional>
#include <memory>

#include "core/error.h"
#include "core/sym.h"

namespace kiln::sym {
namespace {

struct Env {
  ShapeEnv env;
  Expr s0, s1, s2;
  std::map<std::string, Expr, std::less<>> names;
  Env() {
    s0 = env.new_symbol({1, 40}, 8);
    s1 = env.new_symbol({2, 17}, 16);
    s2 = env.new_symbol({0, 9}, 3);
    names = {{"s0", s0}, {"s1", s1}, {"s2", s2}};
  }
};

TEST(SymbolicSizes, CanonicalFormsAreEqualExactlyWhenTheyPrintTheSame) {
  Env e;
  EXPECT_EQ((e.s0 * e.s1 + e.s1 * e.s0).str(), "2*s0*s1");
  EXPECT_EQ((2 * e.s0 - e.s0 - e.s0).str(), "0");
  EXPECT_EQ(floor_div(64 * e.s0, 64), e.s0);
  EXPECT_EQ(floor_div(e.s0 * e.s1, e.s1), e.s0) << "exact division by a monomial";
  EXPECT_EQ(floor_div(4 * e.s0 + 3, 4), e.s0) << "a remainder below the divisor vanishes";
  EXPECT_EQ(mod(4 * e.s0 + 3, 4), Expr(3));
  EXPECT_EQ(mod(5 * e.s0, 4).str(), "s0 % 4");
  EXPECT_EQ(floor_div(e.s0 + 1, 2).str(), "(s0 + 1)//2");
  EXPECT_EQ((3 * floor_div(e.s0, 2) + 1).str(), "3*(s0//2) + 1");
  EXPECT_EQ(mod(mod(e.s0, 4), 4), mod(e.s0, 4));
  EXPECT_EQ(((e.s0 + 1) * (e.s0 - 1)).str(), "s0*s0 - 1");
  EXPECT_EQ(e.s0.as_symbol(), 0);
  EXPECT_FALSE((2 * e.s0).as_symbol());
  EXPECT_EQ((e.s0 * floor_div(e.s2, e.s1)).symbols(), (std::vector<int>{0, 1, 2}));
}

TEST(SymbolicSizes, RangesProveWhatTheyCanAndGuardTheRestAtTheHints) {
  Env e;
  EXPECT_EQ(e.env.bounds(e.s0 * e.s1 + 1).str(), "[3, 681]");
  EXPECT_EQ(e.env.prove(e.s0, Cmp::Ge, Expr(1)), true);
  EXPECT_EQ(e.env.prove(e.s1, Cmp::Eq, Expr(1)), false) << "s1 >= 2: 0/1 specialisation needs no guard";
  EXPECT_FALSE(e.env.prove(e.s0, Cmp::Eq, Expr(1)).has_value());
  EXPECT_TRUE(e.env.decide(e.s1, Cmp::Gt, Expr(1), "always"));
  EXPECT_TRUE(e.env.guards().empty());
  EXPECT_TRUE(e.env.decide(mod(e.s0, 8), Cmp::Eq, Expr(0), "vectorise by 8 (line 3)"));
  EXPECT_FALSE(e.env.decide(e.s0, Cmp::Eq, Expr(1), "broadcast"));
  ASSERT_EQ(e.env.guards().size(), 2u);
  EXPECT_EQ(e.env.guards()[0].str(), "s0 % 8 == 0");
  EXPECT_EQ(e.env.guards()[1].str(), "s0 != 1") << "the guard is what held at the hint";
  EXPECT_FALSE(e.env.first_failed_guard(e.env.hints()).has_value());
  Assignment other = e.env.hints();
  other[0] = 12;
  ASSERT_TRUE(e.env.first_failed_guard(other).has_value());
  EXPECT_EQ(e.env.first_failed_guard(other)->reason, "vectorise by 8 (line 3)");
  e.env.decide(mod(e.s0, 8), Cmp::Eq, Expr(0), "again");
  EXPECT_EQ(e.env.guards().size(), 2u) << "one guard per decision";
}

TEST(SymbolicSizes, BadInputIsAClearError) {
  Env e;
  EXPECT_THROW(floor_div(e.s0, 0), Error);
  EXPECT_THROW(parse_expr("s0 +", e.names), Error);
  EXPECT_THROW(parse_expr("s9 * 2", e.names), Error);
  EXPECT_THROW(parse_expr("s0 // 0", e.names), Error);
  EXPECT_THROW(e.env.new_symbol({5, 2}, 3), Error);
  EXPECT_THROW(e.env.new_symbol({2, 9}, 10), Error);
  EXPECT_THROW(evaluate(e.s0 * Expr(INT64_MAX / 2), {{0, 40}}), Error) << "evaluation is overflow-checked";
  try {
    parse_expr("s0 + $", e.names);
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("column 6"), std::string::npos) << err.what();
  }
}

// A random expression as a tree, evaluated directly (the reference) and built through the algebra.
struct Tree {
  enum Kind { Const, Sym, Add, Sub, Mul, Div, Mod } kind = Const;
  int64_t value = 0;
  int symbol = 0;
  std::shared_ptr<Tree> a, b;
};

rc::Gen<std::shared_ptr<Tree>> tree(int depth) {
  auto leaf = rc::gen::oneOf(rc::gen::map(rc::gen::inRange<int64_t>(-6, 10), [](int64_t v) {
                               auto t = std::make_shared<Tree>();
                               t->value = v;
                               return t;
                             }),
                             rc::gen::map(rc::gen::inRange(0, 3), [](int s) {
                               auto t = std::make_shared<Tree>();
                               t->kind = Tree::Sym;
                               t->symbol = s;
                               return t;
                             }));
  if (depth == 0) return leaf;
  return rc::gen::oneOf(leaf, rc::gen::exec([depth] {
    auto t = std::make_shared<Tree>();
    t->kind = Tree::Kind(*rc::gen::inRange(2, 7));
    t->a = *tree(depth - 1);
    if (t->kind == Tree::Div || t->kind == Tree::Mod) {  // divisors positive: a constant, or s0 / s1 (>= 1)
      t->b = std::make_shared<Tree>();
      if (*rc::gen::arbitrary<bool>()) t->b->value = *rc::gen::inRange<int64_t>(1, 9);
      else t->b->kind = Tree::Sym, t->b->symbol = *rc::gen::inRange(0, 2);
    } else {
      t->b = *tree(depth - 1);
    }
    return t;
  }));
}

int64_t floor_div_ref(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

int64_t direct(const Tree& t, const Assignment& v) {
  switch (t.kind) {
    case Tree::Const: return t.value;
    case Tree::Sym: return v.at(t.symbol);
    case Tree::Add: return direct(*t.a, v) + direct(*t.b, v);
    case Tree::Sub: return direct(*t.a, v) - direct(*t.b, v);
    case Tree::Mul: return direct(*t.a, v) * direct(*t.b, v);
    case Tree::Div: return floor_div_ref(direct(*t.a, v), direct(*t.b, v));
    case Tree::Mod: {
      const int64_t a = direct(*t.a, v), b = direct(*t.b, v);
      return a - b * floor_div_ref(a, b);
    }
  }
  return 0;
}

Expr build(const Tree& t, const Env& e) {
  const Expr syms[3] = {e.s0, e.s1, e.s2};
  switch (t.kind) {
    case Tree::Const: return Expr(t.value);
    case Tree::Sym: return syms[t.symbol];
    case Tree::Add: return build(*t.a, e) + build(*t.b, e);
    case Tree::Sub: return build(*t.a, e) - build(*t.b, e);
    case Tree::Mul: return build(*t.a, e) * build(*t.b, e);
    case Tree::Div: return floor_div(build(*t.a, e), build(*t.b, e));
    case Tree::Mod: return mod(build(*t.a, e), build(*t.b, e));
  }
  return Expr();
}

Assignment random_assignment(const ShapeEnv& env) {
  Assignment a;
  for (int i = 0; i < env.num_symbols(); ++i) a[i] = *rc::gen::inRange<int64_t>(env.range(i).lo, env.range(i).hi + 1);
  return a;
}

RC_GTEST_PROP(SymbolicSizes, BuiltExpressionsEvaluateAsTheTreeBoundTheirValuesAndParseBack, ()) {
  Env e;
  const std::shared_ptr<Tree> t = *tree(3);  // depth 3: every value fits in 64 bits (40^8)
  const Expr x = build(*t, e);
  const Expr back = parse_expr(x.str(), e.names);
  RC_ASSERT(back.str() == x.str());
  const Range bounds = e.env.bounds(x);
  for (int i = 0; i < 8; ++i) {
    const Assignment a = i == 0 ? e.env.hints() : random_assignment(e.env);
    const int64_t want = direct(*t, a);
    RC_ASSERT(evaluate(x, a) == want);
    RC_ASSERT(evaluate(back, a) == want);
    RC_ASSERT(bounds.contains(want));
  }
}

RC_GTEST_PROP(SymbolicSizes, WhatIsProvedHoldsEverywhereAndWhatIsGuardedHoldsAtTheHints, ()) {
  Env e;
  const std::shared_ptr<Tree> l = *tree(3), r = *tree(2);
  const Cmp op = Cmp(*rc::gen::inRange(0, 6));
  const Expr lhs = build(*l, e), rhs = build(*r, e);
  const std::optional<bool> proved = e.env.prove(lhs, op, rhs);
  const bool decided = e.env.decide(lhs, op, rhs, "property");
  RC_ASSERT(e.env.guards().size() == (proved ? 0u : 1u));
  if (!proved) RC_ASSERT(e.env.guards()[0].holds(e.env.hints()));
  for (int i = 0; i < 8; ++i) {
    const Assignment a = random_assignment(e.env);
    const Guard g{lhs, op, rhs, ""};
    if (proved) RC_ASSERT(g.holds(a) == *proved);
    if (!proved && e.env.guards()[0].holds(a)) RC_ASSERT(g.holds(a) == decided);  // under its guard, the decision holds
  }
}

}  // namespace
}  // namespace kiln::sym
