// The symbolic-size algebra and ShapeEnv (sym.h).
#include "core/sym.h"

#include <algorithm>
#include <cctype>
#include <functional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/size_math.h"

namespace kiln::sym {

Expr from_terms(int64_t constant, std::vector<std::pair<Monomial, int64_t>> terms);

namespace {

constexpr std::string_view kWhat = "a symbolic size";

int64_t mul(int64_t a, int64_t b) { return checked_mul(a, b, "", kWhat); }
int64_t add(int64_t a, int64_t b) { return checked_add(a, b, "", kWhat); }

int64_t floor_div_int(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floor_mod_int(int64_t a, int64_t b) { return a - b * floor_div_int(a, b); }

// A monomial's text: its atoms joined by '*', each as often as its power; divisions and moduli in parentheses.
std::string monomial_text(const Monomial& m) {
  std::string out;
  for (const auto& [atom, power] : m)
    for (int i = 0; i < power; ++i) {
      if (!out.empty()) out += '*';
      out += atom->kind == Atom::Kind::Symbol ? atom->key : "(" + atom->key + ")";
    }
  return out;
}

Monomial multiply(const Monomial& a, const Monomial& b) {
  Monomial out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first->key < b[j].first->key)) out.push_back(a[i++]);
    else if (i == a.size() || b[j].first->key < a[i].first->key) out.push_back(b[j++]);
    else {
      out.emplace_back(a[i].first, a[i].second + b[j].second);
      ++i, ++j;
    }
  }
  return out;
}

// `m` divided by `d` when every atom of `d` is in `m` at least as often.
std::optional<Monomial> divide(const Monomial& m, const Monomial& d) {
  Monomial out = m;
  for (const auto& [atom, power] : d) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first->key == atom->key; });
    if (it == out.end() || it->second < power) return std::nullopt;
    it->second -= power;
    if (it->second == 0) out.erase(it);
  }
  return out;
}

using SymbolRange = std::function<Range(int)>;

int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return a > 0 ? INT64_MAX : INT64_MIN;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a > 0) == (b > 0) ? INT64_MAX : INT64_MIN;
}
Range range_mul(Range a, Range b) {
  const int64_t c[4] = {sat_mul(a.lo, b.lo), sat_mul(a.lo, b.hi), sat_mul(a.hi, b.lo), sat_mul(a.hi, b.hi)};
  return Range{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

Range bounds_of(const Expr& e, const SymbolRange& symbol_range);

Range atom_bounds(const Atom& a, const SymbolRange& symbol_range) {
  switch (a.kind) {
    case Atom::Kind::Symbol: return symbol_range(a.symbol);
    case Atom::Kind::Mod: {
      const Range d = bounds_of(a.divisor, symbol_range);
      return Range{0, d.hi <= 0 ? 0 : d.hi - 1};
    }
    case Atom::Kind::FloorDiv: {
      const Range n = bounds_of(a.numerator, symbol_range), d = bounds_of(a.divisor, symbol_range);
      const int64_t dlo = std::max<int64_t>(d.lo, 1), dhi = std::max<int64_t>(d.hi, 1);
      const int64_t c[4] = {floor_div_int(n.lo, dlo), floor_div_int(n.lo, dhi), floor_div_int(n.hi, dlo),
                            floor_div_int(n.hi, dhi)};
      return Range{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
  }
  return Range{INT64_MIN, INT64_MAX};
}

Range bounds_of(const Expr& e, const SymbolRange& symbol_range) {
  Range total{e.constant(), e.constant()};
  for (const auto& [m, coef] : e.terms()) {
    Range r{coef, coef};
    for (const auto& [atom, power] : m)
      for (int i = 0; i < power; ++i) r = range_mul(r, atom_bounds(*atom, symbol_range));
    total = Range{sat_add(total.lo, r.lo), sat_add(total.hi, r.hi)};
  }
  return total;
}

// Symbols are sizes: without an environment, each lies in [0, inf).
Range any_size(int) { return Range{0, INT64_MAX}; }

Expr atom_expr(Atom a) {
  a.key = a.kind == Atom::Kind::Symbol ? a.name
          : a.kind == Atom::Kind::FloorDiv
              ? fmt::format("{}//{}", a.numerator.as_symbol() ? a.numerator.str() : "(" + a.numerator.str() + ")",
                            a.divisor.is_constant() ? a.divisor.str() : "(" + a.divisor.str() + ")")
              : fmt::format("{} % {}", a.numerator.as_symbol() ? a.numerator.str() : "(" + a.numerator.str() + ")",
                            a.divisor.is_constant() ? a.divisor.str() : "(" + a.divisor.str() + ")");
  Monomial m{{std::make_shared<const Atom>(std::move(a)), 1}};
  return from_terms(0, {{m, 1}});
}

// a = c*quotient + remainder, with every coefficient of the remainder and its constant in [0, c).
std::pair<Expr, Expr> split_by_constant(const Expr& a, int64_t c) {
  std::vector<std::pair<Monomial, int64_t>> q, r;
  for (const auto& [m, coef] : a.terms()) {
    const int64_t qc = floor_div_int(coef, c), rc = floor_mod_int(coef, c);
    if (qc) q.emplace_back(m, qc);
    if (rc) r.emplace_back(m, rc);
  }
  return {from_terms(floor_div_int(a.constant(), c), std::move(q)), from_terms(floor_mod_int(a.constant(), c), std::move(r))};
}

// `a` divided by `b` when the division is exact as polynomials: `b` one term, every term of `a` a multiple of it.
std::optional<Expr> exact_quotient(const Expr& a, const Expr& b) {
  if (b.terms().size() != 1 || b.constant() != 0) return std::nullopt;
  const auto& [bm, bc] = b.terms()[0];
  if (a.constant() != 0) return std::nullopt;
  std::vector<std::pair<Monomial, int64_t>> q;
  for (const auto& [m, coef] : a.terms()) {
    std::optional<Monomial> d = divide(m, bm);
    if (!d || coef % bc != 0) return std::nullopt;
    q.emplace_back(std::move(*d), coef / bc);
  }
  // Terms whose quotient is the empty monomial are constants.
  int64_t constant = 0;
  std::vector<std::pair<Monomial, int64_t>> terms;
  for (auto& [m, coef] : q) {
    if (m.empty()) constant = add(constant, coef);
    else terms.emplace_back(std::move(m), coef);
  }
  return from_terms(constant, std::move(terms));
}

}  // namespace

// ---------------------------------------------------------------- Expr

Expr from_terms(int64_t constant, std::vector<std::pair<Monomial, int64_t>> terms) {
  std::map<std::string, std::pair<Monomial, int64_t>> merged;
  for (auto& [m, coef] : terms) {
    if (coef == 0) continue;
    if (m.empty()) {
      constant = add(constant, coef);
      continue;
    }
    const std::string key = monomial_text(m);
    auto it = merged.find(key);
    if (it == merged.end()) merged.emplace(key, std::make_pair(std::move(m), coef));
    else it->second.second = add(it->second.second, coef);
  }
  Expr e;
  e.constant_ = constant;
  for (auto& [key, term] : merged)
    if (term.second != 0) e.terms_.push_back(std::move(term));
  return e;
}

Expr Expr::symbol(int id, std::string name) {
  Atom a;
  a.kind = Atom::Kind::Symbol;
  a.symbol = id;
  a.name = std::move(name);
  return atom_expr(std::move(a));
}

std::optional<int> Expr::as_symbol() const {
  if (constant_ != 0 || terms_.size() != 1 || terms_[0].second != 1 || terms_[0].first.size() != 1) return std::nullopt;
  const auto& [atom, power] = terms_[0].first[0];
  if (power != 1 || atom->kind != Atom::Kind::Symbol) return std::nullopt;
  return atom->symbol;
}

std::string Expr::str() const {
  // One division or modulo alone prints bare: "(s0 + 1)//2".
  if (constant_ == 0 && terms_.size() == 1 && terms_[0].second == 1 && terms_[0].first.size() == 1 &&
      terms_[0].first[0].second == 1)
    return terms_[0].first[0].first->key;
  std::string out;
  for (const auto& [m, coef] : terms_) {
    const int64_t magnitude = coef < 0 ? -coef : coef;  // coef > INT64_MIN: coefficients are checked sums
    const std::string body = magnitude == 1 ? monomial_text(m) : fmt::format("{}*{}", magnitude, monomial_text(m));
    if (out.empty()) out = coef < 0 ? "-" + body : body;
    else out += (coef < 0 ? " - " : " + ") + body;
  }
  if (out.empty()) return std::to_string(constant_);
  if (constant_ > 0) out += fmt::format(" + {}", constant_);
  if (constant_ < 0) out += constant_ == INT64_MIN ? fmt::format(" + {}", constant_) : fmt::format(" - {}", -constant_);
  return out;
}

std::vector<int> Expr::symbols() const {
  std::vector<int> out;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    for (const auto& [m, coef] : e.terms())
      for (const auto& [atom, power] : m) {
        if (atom->kind == Atom::Kind::Symbol) out.push_back(atom->symbol);
        else walk(atom->numerator), walk(atom->divisor);
      }
  };
  walk(*this);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Expr operator+(const Expr& a, const Expr& b) {
  std::vector<std::pair<Monomial, int64_t>> terms = a.terms();
  terms.insert(terms.end(), b.terms().begin(), b.terms().end());
  return from_terms(add(a.constant(), b.constant()), std::move(terms));
}

Expr operator-(const Expr& a) { return Expr(-1) * a; }
Expr operator-(const Expr& a, const Expr& b) { return a + (-b); }

Expr operator*(const Expr& a, const Expr& b) {
  std::vector<std::pair<Monomial, int64_t>> terms;
  for (const auto& [m, coef] : a.terms()) {
    if (b.constant()) terms.emplace_back(m, mul(coef, b.constant()));
    for (const auto& [n, coef2] : b.terms()) terms.emplace_back(multiply(m, n), mul(coef, coef2));
  }
  if (a.constant())
    for (const auto& [n, coef2] : b.terms()) terms.emplace_back(n, mul(a.constant(), coef2));
  return from_terms(mul(a.constant(), b.constant()), std::move(terms));
}

namespace {

// floor(numerator / divisor) or numerator mod divisor, as an atom of its own (nothing more divides out).
Expr division_atom(Atom::Kind kind, const Expr& numerator, const Expr& divisor) {
  Atom atom;
  atom.kind = kind;
  atom.numerator = numerator;
  atom.divisor = divisor;
  return atom_expr(std::move(atom));
}

// a = c*quotient + remainder (split_by_constant), and whether the remainder provably lies in [0, c) (then
// a // c is the quotient and a mod c the remainder).
struct ConstantDivision {
  Expr quotient, remainder;
  bool remainder_below_divisor = false;
};
ConstantDivision divide_by_constant(const Expr& a, int64_t c, std::string_view what) {
  KILN_CHECK(c > 0, "a symbolic size {} {}: divisors of sizes must be positive", what, c);
  auto [q, r] = split_by_constant(a, c);
  const Range rb = bounds_of(r, any_size);
  return ConstantDivision{std::move(q), std::move(r), rb.lo >= 0 && rb.hi < c};
}

}  // namespace

Expr floor_div(const Expr& a, const Expr& b) {
  if (std::optional<int64_t> c = b.as_constant()) {
    ConstantDivision d = divide_by_constant(a, *c, "divided by");
    if (d.remainder.is_constant()) return d.quotient + Expr(floor_div_int(d.remainder.constant(), *c));
    if (d.remainder_below_divisor) return d.quotient;
    return d.quotient + division_atom(Atom::Kind::FloorDiv, d.remainder, b);
  }
  if (std::optional<Expr> exact = exact_quotient(a, b)) return *exact;
  return division_atom(Atom::Kind::FloorDiv, a, b);
}

Expr mod(const Expr& a, const Expr& b) {
  if (std::optional<int64_t> c = b.as_constant()) {
    ConstantDivision d = divide_by_constant(a, *c, "modulo");
    if (d.remainder.is_constant() || d.remainder_below_divisor) return d.remainder;
    return division_atom(Atom::Kind::Mod, d.remainder, b);
  }
  if (exact_quotient(a, b)) return Expr(0);
  return division_atom(Atom::Kind::Mod, a, b);
}

int64_t evaluate(const Expr& e, const Assignment& values) {
  int64_t total = e.constant();
  for (const auto& [m, coef] : e.terms()) {
    int64_t term = coef;
    for (const auto& [atom, power] : m) {
      int64_t v = 0;
      switch (atom->kind) {
        case Atom::Kind::Symbol: {
          auto it = values.find(atom->symbol);
          KILN_CHECK(it != values.end(), "symbol {} has no value", atom->name);
          v = it->second;
          break;
        }
        case Atom::Kind::FloorDiv:
        case Atom::Kind::Mod: {
          const int64_t n = evaluate(atom->numerator, values), d = evaluate(atom->divisor, values);
          KILN_CHECK(d > 0, "{}: the divisor is {} (divisors of sizes must be positive)", atom->key, d);
          v = atom->kind == Atom::Kind::FloorDiv ? floor_div_int(n, d) : floor_mod_int(n, d);
          break;
        }
      }
      for (int i = 0; i < power; ++i) term = mul(term, v);
    }
    total = add(total, term);
  }
  return total;
}

std::string Range::str() const {
  return fmt::format("[{}, {}]", lo, hi == INT64_MAX ? std::string("inf") : std::to_string(hi));
}

std::string_view cmp_text(Cmp c) {
  switch (c) {
    case Cmp::Eq: return "==";
    case Cmp::Ne: return "!=";
    case Cmp::Lt: return "<";
    case Cmp::Le: return "<=";
    case Cmp::Gt: return ">";
    case Cmp::Ge: return ">=";
  }
  return "?";
}

namespace {
bool compare(int64_t a, Cmp op, int64_t b) {
  switch (op) {
    case Cmp::Eq: return a == b;
    case Cmp::Ne: return a != b;
    case Cmp::Lt: return a < b;
    case Cmp::Le: return a <= b;
    case Cmp::Gt: return a > b;
    case Cmp::Ge: return a >= b;
  }
  return false;
}
}  // namespace

std::string Guard::str() const { return fmt::format("{} {} {}", lhs.str(), cmp_text(op), rhs.str()); }
bool Guard::holds(const Assignment& values) const { return compare(evaluate(lhs, values), op, evaluate(rhs, values)); }

// ---------------------------------------------------------------- ShapeEnv

Expr ShapeEnv::new_symbol(Range range, int64_t hint) {
  KILN_CHECK(range.lo >= 0 && range.lo <= range.hi, "a symbolic size's range {} must start at 0 or above and not be empty",
             range.str());
  KILN_CHECK(range.contains(hint), "a symbolic size's hint {} lies outside its range {}", hint, range.str());
  const int id = int(symbols_.size());
  symbols_.push_back(Symbol{fmt::format("s{}", id), range, hint});
  return Expr::symbol(id, symbols_.back().name);
}

Assignment ShapeEnv::hints() const {
  Assignment a;
  for (size_t i = 0; i < symbols_.size(); ++i) a[int(i)] = symbols_[i].hint;
  return a;
}

Range ShapeEnv::bounds(const Expr& e) const {
  return bounds_of(e, [this](int id) { return range(id); });
}

std::optional<bool> ShapeEnv::prove(const Expr& lhs, Cmp op, const Expr& rhs) const {
  const Range d = bounds(lhs - rhs);
  switch (op) {
    case Cmp::Eq:
      if (d.lo == 0 && d.hi == 0) return true;
      if (d.lo > 0 || d.hi < 0) return false;
      return std::nullopt;
    case Cmp::Ne: {
      std::optional<bool> eq = prove(lhs, Cmp::Eq, rhs);
      return eq ? std::optional<bool>(!*eq) : std::nullopt;
    }
    case Cmp::Lt:
      if (d.hi < 0) return true;
      if (d.lo >= 0) return false;
      return std::nullopt;
    case Cmp::Le:
      if (d.hi <= 0) return true;
      if (d.lo > 0) return false;
      return std::nullopt;
    case Cmp::Gt: return prove(rhs, Cmp::Lt, lhs);
    case Cmp::Ge: return prove(rhs, Cmp::Le, lhs);
  }
  return std::nullopt;
}

bool ShapeEnv::decide(const Expr& lhs, Cmp op, const Expr& rhs, std::string reason) {
  if (std::optional<bool> proved = prove(lhs, op, rhs)) return *proved;
  const bool at_hints = compare(hint_of(lhs), op, hint_of(rhs));
  // The guard is what the compile now assumes: the comparison as it came out at the hints.
  Guard g{lhs, op, rhs, std::move(reason)};
  if (!at_hints) {
    static constexpr Cmp kNegation[] = {Cmp::Ne, Cmp::Eq, Cmp::Ge, Cmp::Gt, Cmp::Le, Cmp::Lt};
    g.op = kNegation[int(op)];
  }
  const std::string text = g.str();
  if (std::none_of(guards_.begin(), guards_.end(), [&](const Guard& h) { return h.str() == text; }))
    guards_.push_back(std::move(g));
  return at_hints;
}

std::optional<Guard> ShapeEnv::first_failed_guard(const Assignment& values) const {
  for (const Guard& g : guards_)
    if (!g.holds(values)) return g;
  return std::nullopt;
}

// ---------------------------------------------------------------- parsing

namespace {

class Parser {
 public:
  Parser(std::string_view text, const std::map<std::string, Expr, std::less<>>& names) : text_(text), names_(names) {}

  Expr parse() {
    Expr e = sum();
    skip();
    if (pos_ != text_.size()) fail("unexpected '{}'", text_[pos_]);
    return e;
  }

 private:
  template <class... A>
  [[noreturn]] void fail(fmt::format_string<A...> f, A&&... a) {
    throw Error(fmt::format("symbolic size '{}', column {}: {}", text_, pos_ + 1, fmt::format(f, std::forward<A>(a)...)));
  }
  void skip() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool eat(std::string_view token) {
    skip();
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  Expr sum() {
    Expr e = product();
    for (;;) {
      if (eat("+")) e = e + product();
      else if (eat("-")) e = e - product();
      else return e;
    }
  }
  Expr product() {
    Expr e = unary();
    for (;;) {
      if (eat("//")) e = floor_div(e, positive(unary()));
      else if (eat("*")) e = e * unary();
      else if (eat("%")) e = mod(e, positive(unary()));
      else return e;
    }
  }
  Expr positive(Expr d) {
    if (std::optional<int64_t> c = d.as_constant(); c && *c <= 0) fail("the divisor {} is not positive", *c);
    return d;
  }
  Expr unary() {
    if (eat("-")) return -unary();
    return primary();
  }
  Expr primary() {
    skip();
    if (eat("(")) {
      Expr e = sum();
      if (!eat(")")) fail("expected ')'");
      return e;
    }
    if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      size_t end = pos_;
      while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
      int64_t v = 0;
      for (size_t i = pos_; i < end; ++i) v = checked_add(checked_mul(v, 10, "", kWhat), text_[i] - '0', "", kWhat);
      pos_ = end;
      return Expr(v);
    }
    if (pos_ < text_.size() && (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      size_t end = pos_;
      while (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_')) ++end;
      const std::string_view name = text_.substr(pos_, end - pos_);
      auto it = names_.find(name);
      if (it == names_.end()) fail("no symbol named '{}' (declare it with its range)", name);
      pos_ = end;
      return it->second;
    }
    if (pos_ == text_.size()) fail("the expression ends early");
    fail("unexpected '{}'", text_[pos_]);
  }

  std::string_view text_;
  const std::map<std::string, Expr, std::less<>>& names_;
  size_t pos_ = 0;
};

}  // namespace

Expr parse_expr(std::string_view text, const std::map<std::string, Expr, std::less<>>& names) {
  return Parser(text, names).parse();
}

}  // namespace kiln::sym
