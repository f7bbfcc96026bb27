// Symbolic sizes (issue 33, dynamic shapes): the one integer algebra for every size, stride and index that may
// depend on a symbol, and the ShapeEnv that owns the symbols, their ranges and hints, and the guards a decision
// over them records (PyTorch's sympy expressions and ShapeEnv are the anchor; kiln's is small on purpose).
//
// An expression is kept canonical as it is built: a constant plus a sum of integer coefficients times monomials,
// a monomial being a product of atoms in a fixed order, an atom a symbol or a floor division / modulo of an
// expression by a positive constant (or, when it does not divide out, by another expression). So s0*s1 + s0*s1
// is 2*s0*s1, (64*s0)//64 is s0, (s0*s1)//s1 is s0 and 2*s0 - s0 - s0 is 0; two expressions are equal exactly
// when their canonical texts are. Symbols are sizes: their ranges start at 0 or above, which lets range analysis
// bound a polynomial from its symbols' ranges and prove most comparisons without a guard.
//
// Arithmetic is overflow-checked (a SizeOverflowError, as core/size_math.h's helpers) in constants, coefficients
// and evaluation.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::sym {

struct Atom;
using AtomPtr = std::shared_ptr<const Atom>;

// A product of atoms, each with its power (atoms sorted by their canonical text).
using Monomial = std::vector<std::pair<AtomPtr, int>>;

class Expr {
 public:
  Expr() = default;
  Expr(int64_t c) : constant_(c) {}  // NOLINT: a concrete size is an expression
  static Expr symbol(int id, std::string name);

  bool is_constant() const { return terms_.empty(); }
  int64_t constant() const { return constant_; }
  // The value when constant.
  std::optional<int64_t> as_constant() const { return is_constant() ? std::optional<int64_t>(constant_) : std::nullopt; }
  // The symbol's id when the expression is exactly one symbol.
  std::optional<int> as_symbol() const;
  const std::vector<std::pair<Monomial, int64_t>>& terms() const { return terms_; }

  // Canonical text: "2*s0*s1 + s0 + 3", "(s0 + 1)//2", "s0 % 8". Equal expressions print the same.
  std::string str() const;
  bool operator==(const Expr& o) const { return str() == o.str(); }
  bool operator!=(const Expr& o) const { return !(*this == o); }

  // Every symbol id it mentions (inside divisions too), ascending.
  std::vector<int> symbols() const;

  friend Expr operator+(const Expr& a, const Expr& b);
  friend Expr operator-(const Expr& a, const Expr& b);
  friend Expr operator*(const Expr& a, const Expr& b);
  friend Expr operator-(const Expr& a);

 private:
  friend Expr from_terms(int64_t constant, std::vector<std::pair<Monomial, int64_t>> terms);
  int64_t constant_ = 0;
  std::vector<std::pair<Monomial, int64_t>> terms_;  // sorted by the monomial's text, no zero coefficients
};

struct Atom {
  enum class Kind : uint8_t { Symbol, FloorDiv, Mod } kind = Kind::Symbol;
  int symbol = -1;        // Symbol
  std::string name;       // Symbol: "s0"
  Expr numerator, divisor;  // FloorDiv, Mod: floor(numerator / divisor), numerator mod divisor (divisor > 0)
  std::string key;        // canonical text
};

// floor(a / b) and a mod b (the result has b's sign; b must be positive: sizes, strides, tile widths). Simplified
// where it can be shown exact: constants fold, a term divisible by a constant or by a monomial factor divides
// out, a remainder the numerator's range keeps below the divisor vanishes (e.g. (4*s0 + 3)//4 is s0 when
// s0 >= 0).
Expr floor_div(const Expr& a, const Expr& b);
Expr mod(const Expr& a, const Expr& b);

// A value for each symbol id; evaluation of an expression under it (kiln::Error naming the symbol when one has no
// value; SizeOverflowError on overflow; a division by a divisor that evaluates to 0 or less is a kiln::Error).
using Assignment = std::map<int, int64_t>;
int64_t evaluate(const Expr& e, const Assignment& values);

// Inclusive bounds of a symbol.
struct Range {
  int64_t lo = 0, hi = INT64_MAX;
  bool contains(int64_t v) const { return lo <= v && v <= hi; }
  std::string str() const;  // "[2, 8192]", "[2, inf]"
};

enum class Cmp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };
std::string_view cmp_text(Cmp c);  // "==", "!=", "<", "<=", ">", ">="

// A decision a compile took over symbols it could not prove from their ranges: `lhs op rhs` held at the hints,
// the compiled code assumes it, and a call whose sizes break it must recompile. `reason` says who asked (the op
// and the user's line, as the recompile message shows them).
struct Guard {
  Expr lhs;
  Cmp op;
  Expr rhs;
  std::string reason;
  std::string str() const;  // "s0 % 8 == 0"
  bool holds(const Assignment& values) const;
};

// The symbols of one compile (as PyTorch's ShapeEnv): each with its name, range and hint (the size it had when it
// was made symbolic), and the guards recorded so far.
class ShapeEnv {
 public:
  // A new symbol s<N> over `range` whose hint is `hint` (which must lie in the range; the range must start at 0
  // or above: symbols are sizes).
  Expr new_symbol(Range range, int64_t hint);
  int num_symbols() const { return int(symbols_.size()); }
  const std::string& name(int id) const { return symbols_.at(size_t(id)).name; }
  const Range& range(int id) const { return symbols_.at(size_t(id)).range; }
  int64_t hint(int id) const { return symbols_.at(size_t(id)).hint; }
  // Every symbol at its hint.
  Assignment hints() const;

  // Inclusive bounds of the values `e` takes over the symbols' ranges (sound, not always tight).
  Range bounds(const Expr& e) const;
  // `e` at the hints.
  int64_t hint_of(const Expr& e) const { return evaluate(e, hints()); }

  // The truth of `lhs op rhs`: proved from the ranges when it can be (no guard), else taken at the hints and
  // recorded as a guard with `reason`. The compile's code may then rely on it.
  bool decide(const Expr& lhs, Cmp op, const Expr& rhs, std::string reason);
  // Whether `lhs op rhs` is proved from the ranges alone (nullopt: it depends on the sizes).
  std::optional<bool> prove(const Expr& lhs, Cmp op, const Expr& rhs) const;

  const std::vector<Guard>& guards() const { return guards_; }
  // Whether every guard holds for `values`, else the first that does not.
  std::optional<Guard> first_failed_guard(const Assignment& values) const;

 private:
  struct Symbol {
    std::string name;
    Range range;
    int64_t hint;
  };
  std::vector<Symbol> symbols_;
  std::vector<Guard> guards_;
};

// Parses an expression as str() writes it (and as .kir types will): integers, symbols s<N> (looked up by name in
// `names`), + - * // % and parentheses. kiln::Error naming the position on anything else.
Expr parse_expr(std::string_view text, const std::map<std::string, Expr, std::less<>>& names);

}  // namespace kiln::sym
