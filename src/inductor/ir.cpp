// Loop IR construction: the index simplifier (canonical affine form with floor-division and modulo atoms)
// and the scalar expression builders. See ir.h.
#include "inductor/ir.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <unordered_set>

#include "core/error.h"

namespace kiln::inductor {

// ---------------------------------------------------------------- index expressions

namespace {

std::atomic<int> g_next_var{0};

AtomPtr make_atom(IndexAtom a) {
  if (a.kind == IndexAtom::Kind::Var) a.key = fmt::format("i{:08}", a.var);  // fixed width: key order = creation order
  else a.key = fmt::format("({}){}{}", a.arg.str(), a.kind == IndexAtom::Kind::Div ? "//" : "%", a.divisor);
  return std::make_shared<const IndexAtom>(std::move(a));
}

Index from_atom(AtomPtr a, int64_t coefficient = 1) {
  Index r;
  r.terms.emplace_back(std::move(a), coefficient);
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

std::pair<int64_t, int64_t> atom_range(const IndexAtom& a) {
  switch (a.kind) {
    case IndexAtom::Kind::Var: return {0, a.extent - 1};
    case IndexAtom::Kind::Div: {
      auto [lo, hi] = ix_range(a.arg);
      return {floor_div(lo, a.divisor), floor_div(hi, a.divisor)};
    }
    case IndexAtom::Kind::Mod: return {0, a.divisor - 1};
  }
  return {0, 0};
}

// Replaces c*k*(x//c) + k*(x%c) by k*x (the pair a dimension split leaves behind when dims are merged back).
bool merge_div_mod(Index& r) {
  for (size_t i = 0; i < r.terms.size(); ++i) {
    const auto& [div, kd] = r.terms[i];
    if (div->kind != IndexAtom::Kind::Div) continue;
    for (size_t j = 0; j < r.terms.size(); ++j) {
      const auto& [mod, km] = r.terms[j];
      if (mod->kind != IndexAtom::Kind::Mod || mod->divisor != div->divisor || mod->arg.str() != div->arg.str()) continue;
      if (kd != km * div->divisor) continue;
      Index x = ix_scale(div->arg, km);
      Index rest = r;
      rest.terms.erase(rest.terms.begin() + std::max(i, j));
      rest.terms.erase(rest.terms.begin() + std::min(i, j));
      r = ix_add(rest, x);
      return true;
    }
  }
  return false;
}

// Splits `a` into the part whose coefficients (and constant) are multiples of `d` and the rest.
std::pair<Index, Index> split_multiples(const Index& a, int64_t d) {
  Index q, r;
  q.constant = floor_div(a.constant, d) * d;
  r.constant = a.constant - q.constant;
  for (const auto& t : a.terms) (t.second % d == 0 ? q : r).terms.push_back(t);
  return {q, r};
}

// For a // d and a % d: a factor k of d (1 < k < d) that splits `a` into k*q' + r with 0 <= r < k, found among
// the gcds of d with a's coefficients, largest first. Then a // d == q' // (d/k) and a % d == k*(q' % (d/k)) + r:
// the index of a reshape read through another shape (a [1024, 192] loop over a [1, 32, 32, 192] buffer gives
// (192*o + x)//6144 with x < 192, which is o//32) loses its per-element division.
struct FactorSplit {
  int64_t k = 0;  // 0: none
  Index q;        // q' (a's multiples of k, divided by k)
  Index r;
};
FactorSplit split_by_factor(const Index& a, int64_t d) {
  std::vector<int64_t> factors;
  for (const auto& t : a.terms) {
    int64_t k = std::gcd(t.second < 0 ? -t.second : t.second, d);
    if (k > 1 && k < d) factors.push_back(k);
  }
  std::sort(factors.rbegin(), factors.rend());
  factors.erase(std::unique(factors.begin(), factors.end()), factors.end());
  for (int64_t k : factors) {
    auto [q, r] = split_multiples(a, k);
    auto [rlo, rhi] = ix_range(r);
    if (rlo < 0 || rhi >= k) continue;
    q.constant /= k;
    for (auto& t : q.terms) t.second /= k;
    return {k, q, r};
  }
  return {};
}

}  // namespace

std::string Index::str() const {
  std::string s;
  for (const auto& [atom, k] : terms) {
    if (!s.empty()) s += k < 0 ? " - " : " + ";
    else if (k < 0) s += "-";
    int64_t m = k < 0 ? -k : k;
    if (m != 1) s += fmt::format("{}*", m);
    s += atom->key;
  }
  if (s.empty()) return fmt::format("{}", constant);
  if (constant > 0) s += fmt::format(" + {}", constant);
  if (constant < 0) s += fmt::format(" - {}", -constant);
  return s;
}

Index ix_var(int64_t extent) {
  IndexAtom a;
  a.kind = IndexAtom::Kind::Var;
  a.var = g_next_var++;
  a.extent = extent;
  return from_atom(make_atom(std::move(a)));
}

Index ix_const(int64_t c) {
  Index r;
  r.constant = c;
  return r;
}

Index ix_add(const Index& a, const Index& b) {
  Index r;
  r.constant = a.constant + b.constant;
  size_t i = 0, j = 0;
  while (i < a.terms.size() || j < b.terms.size()) {
    int cmp = i == a.terms.size()   ? 1
              : j == b.terms.size() ? -1
                                    : a.terms[i].first->key.compare(b.terms[j].first->key);
    if (cmp < 0) {
      r.terms.push_back(a.terms[i++]);
    } else if (cmp > 0) {
      r.terms.push_back(b.terms[j++]);
    } else {
      int64_t k = a.terms[i].second + b.terms[j].second;
      if (k != 0) r.terms.emplace_back(a.terms[i].first, k);
      ++i, ++j;
    }
  }
  while (merge_div_mod(r)) {
  }
  return r;
}

Index ix_scale(const Index& a, int64_t k) {
  if (k == 0) return ix_const(0);
  Index r = a;
  r.constant *= k;
  for (auto& t : r.terms) t.second *= k;
  return r;
}

std::pair<int64_t, int64_t> ix_range(const Index& a) {
  int64_t lo = a.constant, hi = a.constant;
  for (const auto& [atom, k] : a.terms) {
    auto [alo, ahi] = atom_range(*atom);
    if (k > 0) lo += k * alo, hi += k * ahi;
    else lo += k * ahi, hi += k * alo;
  }
  return {lo, hi};
}

Index ix_div(const Index& a, int64_t d) {
  KILN_ASSERT(d > 0, "loop IR: division of an index by {}", d);
  if (d == 1) return a;
  auto [q, r] = split_multiples(a, d);
  auto [rlo, rhi] = ix_range(r);
  if (rlo >= 0 && rhi < d) {  // (d*q' + r) // d == q' when 0 <= r < d
    Index out = q;
    out.constant /= d;
    for (auto& t : out.terms) t.second /= d;
    return out;
  }
  auto [lo, hi] = ix_range(a);
  if (lo >= 0 && hi < d) return ix_const(0);
  if (a.terms.size() == 1 && a.constant == 0 && a.terms[0].second == 1 &&
      a.terms[0].first->kind == IndexAtom::Kind::Div)  // (x // b) // d == x // (b*d)
    return ix_div(a.terms[0].first->arg, a.terms[0].first->divisor * d);
  if (FactorSplit f = split_by_factor(a, d); f.k) return ix_div(f.q, d / f.k);  // (k*q' + r) // d, 0 <= r < k | d
  IndexAtom atom;
  atom.kind = IndexAtom::Kind::Div;
  atom.arg = a;
  atom.divisor = d;
  return from_atom(make_atom(std::move(atom)));
}

Index ix_mod(const Index& a, int64_t d) {
  KILN_ASSERT(d > 0, "loop IR: modulo of an index by {}", d);
  if (d == 1) return ix_const(0);
  auto [q, r] = split_multiples(a, d);
  auto [rlo, rhi] = ix_range(r);
  if (rlo >= 0 && rhi < d) return r;  // (d*q' + r) % d == r
  auto [lo, hi] = ix_range(a);
  if (lo >= 0 && hi < d) return a;
  if (FactorSplit f = split_by_factor(a, d); f.k)  // (k*q' + r) % d == k*(q' % (d/k)) + r, 0 <= r < k | d
    return ix_add(ix_scale(ix_mod(f.q, d / f.k), f.k), f.r);
  IndexAtom atom;
  atom.kind = IndexAtom::Kind::Mod;
  atom.arg = rlo >= 0 ? r : a;  // multiples of d do not change a non-negative remainder
  atom.divisor = d;
  return from_atom(make_atom(std::move(atom)));
}

int64_t ix_coefficient(const Index& a, const Index& var) {
  KILN_ASSERT(var.terms.size() == 1 && var.terms[0].first->kind == IndexAtom::Kind::Var, "ix_coefficient: not a variable");
  for (const auto& [atom, k] : a.terms)
    if (atom->key == var.terms[0].first->key) return k;
  return 0;
}

bool ix_depends_on(const Index& a, const Index& var) {
  const std::string& key = var.terms.at(0).first->key;
  for (const auto& [atom, k] : a.terms) {
    if (atom->key == key) return true;
    if (atom->kind != IndexAtom::Kind::Var && ix_depends_on(atom->arg, var)) return true;
  }
  return false;
}

Index ix_strided(const std::vector<Index>& idx, const Shape& strides, int64_t offset) {
  Index r = ix_const(offset);
  for (size_t k = 0; k < idx.size(); ++k) r = ix_add(r, ix_scale(idx[k], strides[k]));
  return r;
}

Index ix_linear(const std::vector<Index>& idx, const Shape& sizes) {
  return ix_strided(idx, contiguous_strides(sizes), 0);
}

std::vector<Index> ix_unravel(const Index& linear, const Shape& sizes) {
  std::vector<Index> out(sizes.size(), ix_const(0));
  if (shape_numel(sizes) == 0) return out;  // an empty tensor: never read
  int64_t inner = 1;
  for (size_t k = sizes.size(); k-- > 0;) {
    out[k] = sizes[k] <= 1 ? ix_const(0) : ix_mod(ix_div(linear, inner), sizes[k]);  // 0: an empty tensor, never read
    inner *= sizes[k];
  }
  return out;
}

std::vector<Index> ix_vars(const Shape& sizes) {
  std::vector<Index> v;
  for (int64_t s : sizes) v.push_back(s == 1 ? ix_const(0) : ix_var(s));
  return v;
}

// ---------------------------------------------------------------- scalar expressions

std::string_view sop_name(SOp op) {
  switch (op) {
#define KILN_SCALAR_OP(id, arity, doc) \
  case SOp::id: return #id;
#include "inductor/scalar_ops.def"
#undef KILN_SCALAR_OP
  }
  return "?";
}

DType compute_dtype_of(DType dt) { return dt == DType::F16 || dt == DType::BF16 ? DType::F32 : dt; }

namespace {
SExpr make(SNode n) { return std::make_shared<const SNode>(std::move(n)); }
bool is_predicate(SOp op) {
  switch (op) {
    case SOp::IsNan: case SOp::IsInf: case SOp::Eq: case SOp::Ne: case SOp::Lt: case SOp::Le: case SOp::Gt:
    case SOp::Ge:
      return true;
    default:
      return false;
  }
}
}  // namespace

SExpr s_const(double v, DType dt) {
  SNode n;
  n.op = SOp::Const;
  n.dtype = compute_dtype_of(dt);
  if (is_floating(n.dtype)) n.fvalue = v;
  else n.ivalue = n.dtype == DType::Bool ? int64_t(v != 0) : int64_t(v);
  return make(std::move(n));
}

SExpr s_iconst(int64_t v, DType dt) {
  SNode n;
  n.op = SOp::Const;
  n.dtype = compute_dtype_of(dt);
  if (is_floating(n.dtype)) n.fvalue = double(v);
  else n.ivalue = n.dtype == DType::Bool ? int64_t(v != 0) : v;
  return make(std::move(n));
}

SExpr s_load(int buffer, Index index, DType buffer_dtype) {
  SNode n;
  n.op = SOp::Load;
  n.dtype = compute_dtype_of(buffer_dtype);
  n.buffer = buffer;
  n.index = std::move(index);
  return make(std::move(n));
}

SExpr s_index_value(Index index) {
  SNode n;
  n.op = SOp::IndexValue;
  n.dtype = DType::I64;
  n.index = std::move(index);
  return make(std::move(n));
}

SExpr s_cast(const SExpr& x, DType dt) {
  dt = compute_dtype_of(dt);
  if (x->dtype == dt) return x;
  if (x->op == SOp::Const) {  // fold
    if (dt == DType::Bool) return s_iconst(is_floating(x->dtype) ? x->fvalue != 0 : x->ivalue != 0, dt);
    if (is_floating(x->dtype) && is_floating(dt)) return s_const(dt == DType::F32 ? double(float(x->fvalue)) : x->fvalue, dt);
    if (!is_floating(x->dtype) && is_floating(dt)) return s_const(double(x->ivalue), dt);
  }
  SNode n;
  n.op = SOp::Cast;
  n.dtype = dt;
  n.args = {x};
  return make(std::move(n));
}

SExpr s_round_to(const SExpr& x, DType narrow) {
  if (x->op == SOp::RoundTo && DType(x->ivalue) == narrow) return x;  // already rounded there
  SNode n;
  n.op = SOp::RoundTo;
  n.dtype = DType::F32;
  n.ivalue = int64_t(narrow);
  n.args = {s_cast(x, DType::F32)};
  return make(std::move(n));
}

SExpr s_unary(SOp op, const SExpr& x) {
  SNode n;
  n.op = op;
  n.dtype = is_predicate(op) || op == SOp::Not ? DType::Bool : x->dtype;
  n.args = {x};
  return make(std::move(n));
}

SExpr s_binary(SOp op, const SExpr& a, const SExpr& b) {
  KILN_ASSERT(a->dtype == b->dtype, "loop IR: {} of {} and {} operands", sop_name(op), dtype_name(a->dtype),
             dtype_name(b->dtype));
  SNode n;
  n.op = op;
  n.dtype = is_predicate(op) ? DType::Bool : a->dtype;
  n.args = {a, b};
  return make(std::move(n));
}

SExpr s_where(const SExpr& c, const SExpr& a, const SExpr& b) {
  KILN_ASSERT(c->dtype == DType::Bool && a->dtype == b->dtype, "loop IR: where of {} ? {} : {}", dtype_name(c->dtype),
             dtype_name(a->dtype), dtype_name(b->dtype));
  SNode n;
  n.op = SOp::Where;
  n.dtype = a->dtype;
  n.args = {c, a, b};
  return make(std::move(n));
}

SExpr s_mul_add(const SExpr& x, const SExpr& y, const SExpr& z) {
  KILN_CHECK(is_floating(x->dtype) && x->dtype == y->dtype && x->dtype == z->dtype, "loop IR: muladd of {}, {} and {}",
             dtype_name(x->dtype), dtype_name(y->dtype), dtype_name(z->dtype));
  SNode n;
  n.op = SOp::MulAdd;
  n.dtype = x->dtype;
  n.args = {x, y, z};
  return make(std::move(n));
}

SExpr s_helper(const std::string& name, DType dt, std::vector<SExpr> args) {
  SNode n;
  n.op = SOp::Helper;
  n.dtype = dt;
  n.helper = name;
  n.args = std::move(args);
  return make(std::move(n));
}

SExpr s_wrap(SOp op, const SExpr& x) {
  SNode n;
  n.op = op;
  n.dtype = x->dtype;
  n.args = {x};
  return make(std::move(n));
}

SExpr s_fail(const SExpr& x, int64_t code) {
  SNode n;
  n.op = SOp::Fail;
  n.dtype = x->dtype;
  n.args = {x};
  n.ivalue = code;
  return make(std::move(n));
}

namespace {
// Why kLibmCallCost is 24: a vectorised libm call takes about as long as that many adds on the same lanes
// (docs/benchmarks.md, "Figures behind code comments"); inline polynomials (exp_f32) are ~20 ops.
int sop_cost(SOp op) {
  switch (op) {
    case SOp::Const: case SOp::IndexValue: return 0;
    case SOp::Div: case SOp::Sqrt: return 4;
    case SOp::Exp: case SOp::Exp2: case SOp::Log: case SOp::Log2: case SOp::Log1p: case SOp::Expm1:
    case SOp::Sin: case SOp::Cos: case SOp::Tan: case SOp::Tanh: case SOp::Asin: case SOp::Acos: case SOp::Atan:
    case SOp::Sinh: case SOp::Cosh: case SOp::Erf: case SOp::Pow: case SOp::Atan2: case SOp::Helper:
      return kLibmCallCost;
    default: return 1;
  }
}
int s_cost(const SExpr& e, std::unordered_set<const SNode*>& seen) {
  if (!seen.insert(e.get()).second) return 0;
  int c = sop_cost(e->op);
  for (const SExpr& a : e->args) c += s_cost(a, seen);
  return c;
}
}  // namespace

int s_cost(const SExpr& e) {
  std::unordered_set<const SNode*> seen;
  return s_cost(e, seen);
}

void s_loads(const SExpr& e, std::vector<std::pair<int, Index>>& out) {
  if (e->op == SOp::Load) out.emplace_back(e->buffer, e->index);
  for (const SExpr& a : e->args) s_loads(a, out);
}

int64_t Buffer::nbytes() const { return shape_numel(sizes) * int64_t(dtype_size(dtype)); }

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::ArgMax: return "argmax";
    case ReduceOp::ArgMin: return "argmin";
    case ReduceOp::Any: return "any";
    case ReduceOp::All: return "all";
  }
  return "?";
}

}  // namespace kiln::inductor
