// RapidCheck generators of valid sample calls for every op of ops.def (see op_samples.h). Each op has a
// recipe that draws shapes, attributes and values with a SampleBuilder; recipes follow PyTorch's rules for
// what a valid call is (dims in range, broadcastable shapes, pool/conv geometries with positive output sizes,
// class targets in range) and keep values where the op is smooth (positive for log/sqrt, |x| < 0.9 for
// asin/acos, away from kinks and ties), so central finite differences agree with the true derivative.
#include "op_samples.h"

#include <gtest/gtest.h>
#include <rapidcheck/GenerationFailure.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <cmath>
#include <functional>
#include <numeric>
#include <ostream>
#include <set>

#include "autograd/autograd.h"
#include "ops/api.h"

namespace kiln {

std::vector<Tensor> OpSample::flat_tensors() const {
  std::vector<Tensor> out;
  auto add = [&](const IValue& v) {
    if (v.is_tensor() && v.tensor().defined()) out.push_back(v.tensor());
    if (v.is_tensor_list())
      for (const Tensor& t : v.tensor_list())
        if (t.defined()) out.push_back(t);
  };
  for (const IValue& v : args) add(v);
  for (const auto& [name, v] : kwargs) add(v);
  return out;
}

namespace {

void show_ivalue(const IValue& v, std::ostream& os) {
  auto show_tensor = [&](const Tensor& t) {
    if (!t.defined()) {
      os << "None";
      return;
    }
    os << format_tensor(t, 256) << " (strides " << shape_str(t.strides()) << (t.requires_grad() ? ", requires_grad" : "")
       << ")";
  };
  if (v.is_tensor()) show_tensor(v.tensor());
  else if (v.is_tensor_list()) {
    os << "[";
    for (size_t i = 0; i < v.tensor_list().size(); ++i) {
      os << (i ? ",\n    " : "");
      show_tensor(v.tensor_list()[i]);
    }
    os << "]";
  } else os << v.str();
}

}  // namespace

void showValue(DType dtype, std::ostream& os) { os << dtype_name(dtype); }

void showValue(const OpSample& sample, std::ostream& os) {
  os << "OpSample(" << (sample.write_through_view ? "written through a view of a fresh base" : "");
  for (size_t i = 0; i < sample.args.size(); ++i) {
    os << "\n  arg " << i << ": ";
    show_ivalue(sample.args[i], os);
  }
  for (const auto& [name, v] : sample.kwargs) {
    os << "\n  " << name << "=";
    show_ivalue(v, os);
  }
  os << ")";
}

namespace {

// ---------------------------------------------------------------- drawing primitives
// Every draw uses the full RapidCheck size, so each case is equally random; shrinking still moves towards
// the low end of each range.
constexpr int kFullSize = 100;

int64_t draw_int(int64_t lo, int64_t hi) {  // inclusive
  if (hi <= lo) return lo;
  return *rc::gen::resize(kFullSize, rc::gen::inRange<int64_t>(lo, hi + 1));
}
bool chance(int percent) { return draw_int(0, 99) < percent; }
template <class T>
T pick(const std::vector<T>& options) {
  return options[size_t(draw_int(0, int64_t(options.size()) - 1))];
}
double draw_real(double lo, double hi) { return lo + (hi - lo) * double(draw_int(0, 1 << 20)) / double(1 << 20); }

// Where values of a tensor may lie.
struct Domain {
  double lo = -2, hi = 2;
  double period = 0;           // when > 0, stay `margin` away from every multiple of `period`
  std::vector<double> avoid;   // and `margin` away from each of these points
  double margin = 0.1;
  bool distinct = false;       // no two distinct-domain values of one sample closer than kDistinctStep
  int zero_percent = 0;        // chance of an exact 0 (ops that special-case zeros but stay smooth there)
};
constexpr double kDistinctStep = 0.01;

Domain in_range(double lo, double hi) {
  Domain d;
  d.lo = lo;
  d.hi = hi;
  return d;
}
Domain any_values(double bound = 2) { return in_range(-bound, bound); }
Domain positive() { return in_range(0.25, 2); }
Domain unit_interval() { return in_range(-0.85, 0.85); }
Domain away_from_zero(double margin = 0.1) { return Domain{.avoid = {0.0}, .margin = margin}; }
Domain away_from_integers() { return Domain{.lo = -3, .hi = 3, .period = 1.0, .avoid = {}, .margin = 0.1}; }
// For round(x, decimals): away from multiples of half a unit of the last kept decimal.
Domain away_from_half_units(double unit) {
  return Domain{.lo = -3 * unit, .hi = 3 * unit, .period = 0.5 * unit, .avoid = {}, .margin = 0.08 * unit};
}
Domain distinct_values() {
  Domain d;
  d.distinct = true;
  return d;
}
Domain avoiding(Domain d, std::vector<double> points, double margin) {
  d.avoid = std::move(points);
  d.margin = margin;
  return d;
}

bool admissible(double v, const Domain& d) {
  if (v < d.lo || v > d.hi) return false;
  if (d.period > 0 && std::abs(v - d.period * std::round(v / d.period)) < d.margin) return false;
  for (double a : d.avoid)
    if (std::abs(v - a) < d.margin) return false;
  return true;
}

int64_t dim_size(int64_t min_size, int64_t max_size) {
  int64_t r = draw_int(0, 99);
  if (min_size <= 0 && r < 8) return 0;
  if (min_size <= 1 && r < 30) return std::min<int64_t>(1, max_size);
  return draw_int(std::max<int64_t>(min_size, std::min<int64_t>(2, max_size)), max_size);
}

// A size in [0, n], rarely 0 (an index shape that must fit inside a dim of size n).
int64_t at_most(int64_t n) { return n == 0 || chance(10) ? 0 : draw_int(1, n); }

int64_t wrap(int64_t dim, int64_t rank) { return dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim; }

// A valid dim of a rank-`rank` tensor, negative a third of the time (0-dim tensors accept 0 and -1).
int64_t any_dim(int64_t rank) {
  int64_t n = std::max<int64_t>(rank, 1);
  int64_t d = draw_int(0, n - 1);
  return chance(30) ? d - n : d;
}
// `count` distinct valid dims in random order, some negative.
IntList distinct_dims(int64_t rank, int64_t count) {
  std::vector<int64_t> free(size_t(std::max<int64_t>(rank, 1)));
  std::iota(free.begin(), free.end(), 0);
  IntList out;
  for (int64_t i = 0; i < count && !free.empty(); ++i) {
    size_t k = size_t(draw_int(0, int64_t(free.size()) - 1));
    int64_t d = free[k];
    free.erase(free.begin() + std::ptrdiff_t(k));
    out.push_back(chance(30) ? d - std::max<int64_t>(rank, 1) : d);
  }
  return out;
}

enum class Grad { Maybe, Never };

// Accumulates one sample: draws shapes, values and leaves, then picks which float leaves require grad.
class SampleBuilder {
 public:
  OpSample sample;

  Shape shape(int64_t min_rank = 0, int64_t max_rank = 3, int64_t min_size = 0, int64_t max_size = 4) {
    Shape s(size_t(draw_int(min_rank, max_rank)));
    for (int64_t& x : s) x = dim_size(min_size, max_size);
    return s;
  }

  // A shape that broadcasts to `target`: a suffix of it with some dims turned into 1.
  Shape broadcastable_to(const Shape& target) {
    int64_t rank = draw_int(0, int64_t(target.size()));
    Shape s(target.end() - rank, target.end());
    for (int64_t& x : s)
      if (chance(25)) x = 1;
    return s;
  }

  // `n` mutually broadcastable shapes (their broadcast has rank <= max_rank).
  std::vector<Shape> broadcast_shapes(int n, int64_t max_rank = 3) {
    Shape full = shape(0, max_rank);
    std::vector<Shape> out;
    for (int i = 0; i < n; ++i) out.push_back(broadcastable_to(full));
    return out;
  }

  double value(const Domain& d) {
    for (int attempt = 0; attempt < 200; ++attempt) {
      if (d.zero_percent && chance(d.zero_percent)) return 0.0;
      if (d.distinct) {
        int64_t slot = draw_int(int64_t(std::ceil(d.lo / kDistinctStep)), int64_t(std::floor(d.hi / kDistinctStep)));
        double v = double(slot) * kDistinctStep;
        if (used_slots_.count(slot) || !admissible(v, d)) continue;
        used_slots_.insert(slot);
        return v;
      }
      double v = draw_real(d.lo, d.hi);
      if (admissible(v, d)) return v;
    }
    throw rc::GenerationFailure("op_samples: could not draw a value inside the domain");
  }
  std::vector<double> values(int64_t n, const Domain& d) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = value(d);
    return v;
  }

  // An f64 leaf holding `logical` (row-major) in a random layout: contiguous, transposed, or a step-2 slice
  // of a larger buffer.
  Tensor leaf(const std::vector<double>& logical, const Shape& shape, Grad grad = Grad::Maybe) {
    int64_t rank = int64_t(shape.size());
    int64_t layout = draw_int(0, 9);
    Tensor t;
    if (layout < 2 && rank >= 2) {
      int64_t a = draw_int(0, rank - 1), b = (a + draw_int(1, rank - 1)) % rank;
      t = transpose(contiguous(transpose(Tensor::from_vector<double>(logical, shape), a, b)), a, b);
    } else if (layout < 4 && rank >= 1) {
      int64_t d = draw_int(0, rank - 1);
      t = slice(strided_buffer(logical, shape, d), d, 0, std::nullopt, 2);
    } else {
      t = Tensor::from_vector<double>(logical, shape);
    }
    t = t.detach();
    if (grad == Grad::Maybe) grad_candidates_.push_back(t);
    return t;
  }
  Tensor tensor(const Shape& shape, const Domain& d = {}, Grad grad = Grad::Maybe) {
    return leaf(values(shape_numel(shape), d), shape, grad);
  }
  Tensor contiguous_tensor(const Shape& shape, const Domain& d = {}, Grad grad = Grad::Maybe) {
    Tensor t = Tensor::from_vector<double>(values(shape_numel(shape), d), shape);
    if (grad == Grad::Maybe) grad_candidates_.push_back(t);
    return t;
  }
  // int64 tensor with values in [lo, hi].
  Tensor indices(const Shape& shape, int64_t lo, int64_t hi) {
    std::vector<int64_t> v(size_t(shape_numel(shape)));
    for (int64_t& x : v) x = draw_int(lo, hi);
    return Tensor::from_vector<int64_t>(v, shape);
  }
  Tensor mask(const Shape& shape) {
    std::vector<bool> v(size_t(shape_numel(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = chance(50);
    return Tensor::from_vector<bool>(v, shape);
  }

  void arg(IValue v) { sample.args.push_back(std::move(v)); }
  void kwarg(const std::string& name, IValue v) { sample.kwargs[name] = std::move(v); }

  // Each float leaf requires grad with probability 3/4, and at least one does.
  OpSample finish() {
    bool any = false;
    for (Tensor& t : grad_candidates_)
      if (chance(75)) {
        t.set_requires_grad(true);
        any = true;
      }
    if (!any && !grad_candidates_.empty())
      grad_candidates_[size_t(draw_int(0, int64_t(grad_candidates_.size()) - 1))].set_requires_grad(true);
    return sample;
  }

 private:
  // A contiguous buffer twice as long as `shape` along `dim`, holding `logical` at the even positions.
  static Tensor strided_buffer(const std::vector<double>& logical, const Shape& shape, int64_t dim) {
    Shape big = shape;
    big[size_t(dim)] *= 2;
    int64_t outer = 1, inner = 1, n = shape[size_t(dim)];
    for (int64_t i = 0; i < dim; ++i) outer *= shape[size_t(i)];
    for (size_t i = size_t(dim) + 1; i < shape.size(); ++i) inner *= shape[i];
    std::vector<double> buf(size_t(shape_numel(big)), 1e6);  // odd positions are never seen through the view
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i)
          buf[size_t((o * 2 * n + 2 * j) * inner + i)] = logical[size_t((o * n + j) * inner + i)];
    return Tensor::from_vector<double>(buf, big);
  }

  std::set<int64_t> used_slots_;
  std::vector<Tensor> grad_candidates_;
};

using Recipe = std::function<void(SampleBuilder&)>;
using SampleTable = std::map<std::string, rc::Gen<OpSample>>;

rc::Gen<OpSample> from_recipe(Recipe recipe) {
  return rc::gen::exec([recipe] {
    SampleBuilder b;
    recipe(b);
    return b.finish();
  });
}

IValue none() { return IValue(); }
IValue maybe(bool present, IValue v) { return present ? v : none(); }

// ---------------------------------------------------------------- pointwise
Recipe unary(Domain d) {
  return [d](SampleBuilder& b) { b.arg(b.tensor(b.shape(), d)); };
}

// A binary operand: a tensor of `shape`, or (when allowed) a Python number in the same domain.
IValue operand(SampleBuilder& b, const Shape& shape, const Domain& d, bool number_allowed = true) {
  if (number_allowed && shape.empty() && chance(30)) return IValue(b.value(d));
  return IValue(b.tensor(shape, d));
}

Recipe binary(Domain da, Domain db, bool number_allowed = true) {
  return [da, db, number_allowed](SampleBuilder& b) {
    auto shapes = b.broadcast_shapes(2);
    b.arg(b.tensor(shapes[0], da));
    b.arg(operand(b, shapes[1], db, number_allowed));
  };
}

// (self, other) with self = q * other elementwise and q away from integers, so self / other stays away from
// the kinks of floor/trunc/remainder. `other` broadcasts to self's shape.
void quotient_pair(SampleBuilder& b) {
  Shape s = b.shape();
  Shape os = b.broadcastable_to(s);
  Tensor other = b.tensor(os, away_from_zero(0.3));
  std::vector<double> ov = contiguous(expand(other, s)).to_double_vector();
  std::vector<double> q = b.values(shape_numel(s), away_from_integers());
  for (size_t i = 0; i < q.size(); ++i) q[i] *= ov[i];
  b.arg(b.leaf(q, s));
  b.arg(other);
}

void add_pointwise(SampleTable& t) {
  struct U { const char* name; Domain d; };
  const U unaries[] = {
      {"abs", away_from_zero()}, {"neg", any_values()}, {"exp", any_values()}, {"exp2", any_values()},
      {"log", positive()}, {"log2", positive()}, {"log1p", in_range(-0.7, 2)}, {"expm1", any_values()},
      {"sqrt", positive()}, {"rsqrt", positive()}, {"sin", any_values(3)}, {"cos", any_values(3)},
      {"tan", any_values(1.2)}, {"tanh", any_values()}, {"asin", unit_interval()}, {"acos", unit_interval()},
      {"atan", any_values()}, {"sinh", any_values()}, {"cosh", any_values()}, {"sigmoid", any_values(4)},
      {"relu", away_from_zero()}, {"silu", any_values(3)}, {"erf", any_values()}, {"floor", away_from_integers()},
      {"ceil", away_from_integers()}, {"trunc", away_from_integers()}, {"sign", away_from_zero()},
      {"reciprocal", away_from_zero(0.3)},
  };
  for (const U& u : unaries) t.emplace(u.name, from_recipe(unary(u.d)));
  t.emplace("gelu", from_recipe([](SampleBuilder& b) {
    b.arg(b.tensor(b.shape(), any_values(3)));
    if (chance(60)) b.kwarg("approximate", pick<std::string>({"none", "tanh"}));
  }));
  t.emplace("round", from_recipe([](SampleBuilder& b) {
    int64_t decimals = pick<int64_t>({0, 0, 1, 2});
    b.arg(b.tensor(b.shape(), away_from_half_units(std::pow(10.0, -double(decimals)))));
    if (decimals != 0 || chance(30)) b.kwarg("decimals", decimals);
  }));

  auto alpha_kwarg = [](SampleBuilder& b) {
    if (chance(50)) b.kwarg("alpha", pick<double>({2.0, -0.5, 1.0}));
  };
  t.emplace("add", from_recipe([alpha_kwarg](SampleBuilder& b) {
    binary(any_values(), any_values())(b);
    alpha_kwarg(b);
  }));
  t.emplace("sub", from_recipe([alpha_kwarg](SampleBuilder& b) {
    binary(any_values(), any_values())(b);
    alpha_kwarg(b);
  }));
  t.emplace("mul", from_recipe(binary(any_values(), any_values())));
  t.emplace("div", from_recipe([](SampleBuilder& b) {
    if (chance(40)) {
      quotient_pair(b);
      b.kwarg("rounding_mode", pick<std::string>({"trunc", "floor"}));
    } else {
      binary(any_values(), away_from_zero(0.3))(b);
    }
  }));
  t.emplace("remainder", from_recipe(quotient_pair));
  t.emplace("pow", from_recipe([](SampleBuilder& b) {
    auto shapes = b.broadcast_shapes(2);
    b.arg(b.tensor(shapes[0], positive()));
    if (chance(30)) b.arg(pick<IValue>({IValue(2), IValue(3), IValue(0.5), IValue(-1.5)}));
    else b.arg(b.tensor(shapes[1], any_values()));
  }));
  t.emplace("maximum", from_recipe(binary(distinct_values(), distinct_values(), false)));
  t.emplace("minimum", from_recipe(binary(distinct_values(), distinct_values(), false)));
  t.emplace("atan2", from_recipe(binary(any_values(), away_from_zero(), false)));

  t.emplace("where", from_recipe([](SampleBuilder& b) {
    auto shapes = b.broadcast_shapes(3);
    b.arg(b.mask(shapes[0]));
    b.arg(operand(b, shapes[1], any_values()));
    b.arg(operand(b, shapes[2], any_values()));
  }));
  t.emplace("clamp", from_recipe([](SampleBuilder& b) {
    int64_t which = draw_int(0, 2);  // min only, max only, both
    double lo = 0.25 * double(draw_int(-4, 2)), hi = lo + 0.25 * double(draw_int(1, 6));
    std::vector<double> bounds;
    if (which != 1) bounds.push_back(lo);
    if (which != 0) bounds.push_back(hi);
    b.arg(b.tensor(b.shape(), avoiding(any_values(), bounds, 0.05)));
    b.arg(maybe(which != 1, lo));
    b.arg(maybe(which != 0, hi));
  }));
  t.emplace("lerp", from_recipe([](SampleBuilder& b) {
    auto shapes = b.broadcast_shapes(3);
    b.arg(b.tensor(shapes[0]));
    b.arg(b.tensor(shapes[1]));
    b.arg(operand(b, shapes[2], in_range(-0.5, 1.5)));
  }));
  t.emplace("addcmul", from_recipe([](SampleBuilder& b) {
    auto shapes = b.broadcast_shapes(3);
    for (const Shape& s : shapes) b.arg(b.tensor(s));
    if (chance(50)) b.kwarg("value", pick<double>({0.5, -2.0, 1.0}));
  }));
}

// ---------------------------------------------------------------- reductions
// A dim list for a rank-`rank` reduction: None (all dims) or a list of distinct dims (possibly empty when
// `empty_ok`, which PyTorch also reads as all dims).
std::optional<IntList> reduction_dims(int64_t rank, bool none_ok, bool empty_ok) {
  if (none_ok && chance(25)) return std::nullopt;
  int64_t lo = empty_ok ? 0 : 1;
  return distinct_dims(rank, draw_int(lo, std::max<int64_t>(rank, 1)));
}
// The dims `dims` reduces, wrapped (all of them for None or an empty list).
std::vector<int64_t> reduced(const std::optional<IntList>& dims, int64_t rank) {
  std::vector<int64_t> out;
  if (!dims || dims->empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
  } else {
    for (int64_t d : *dims)
      if (rank > 0) out.push_back(wrap(d, rank));
  }
  return out;
}
// Makes every reduced dim at least `min_size` long (ops that reject or are singular on short reductions).
void lengthen_reduced(Shape& s, const std::vector<int64_t>& dims, int64_t min_size) {
  for (int64_t d : dims) s[size_t(d)] = std::max(s[size_t(d)], min_size);
}

void add_reductions(SampleTable& t) {
  for (const char* name : {"sum", "mean"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) {
      Shape s = b.shape();
      b.arg(b.tensor(s));
      b.arg(IValue(reduction_dims(int64_t(s.size()), true, true)));
      b.arg(chance(50));
      if (chance(25)) b.kwarg("dtype", DType::F64);
    }));
  }
  t.emplace("cumsum", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    b.arg(b.tensor(s));
    b.arg(any_dim(int64_t(s.size())));
    if (chance(25)) b.kwarg("dtype", DType::F64);
  }));
  t.emplace("prod", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    Domain d = in_range(-1.3, 1.3);
    d.zero_percent = 8;
    b.arg(b.tensor(s, d));
    b.arg(chance(30) ? none() : IValue(any_dim(int64_t(s.size()))));
    b.arg(chance(50));
  }));
  for (const char* name : {"amax", "amin"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) {
      Shape s = b.shape();
      auto dims = reduction_dims(int64_t(s.size()), false, true);
      lengthen_reduced(s, reduced(dims, int64_t(s.size())), 1);
      b.arg(b.tensor(s, distinct_values()));
      b.arg(IValue(*dims));
      b.arg(chance(50));
    }));
  }
  for (const char* name : {"var", "std"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) {
      Shape s = b.shape(1, 3);
      auto dims = reduction_dims(int64_t(s.size()), true, false);
      std::vector<int64_t> red = reduced(dims, int64_t(s.size()));
      lengthen_reduced(s, red, 1);
      int64_t n = 1;
      for (int64_t d : red) n *= s[size_t(d)];
      if (n < 2) s[size_t(red[0])] = 2;  // at least two values: correction 1 stays finite, std stays smooth
      b.arg(b.tensor(s, distinct_values()));
      b.arg(IValue(dims));
      if (chance(60)) b.kwarg("correction", pick<IValue>({none(), IValue(0), IValue(1)}));
      if (chance(60)) b.kwarg("keepdim", chance(50));
    }));
  }
  t.emplace("logsumexp", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    auto dims = reduction_dims(int64_t(s.size()), false, false);
    lengthen_reduced(s, reduced(dims, int64_t(s.size())), 1);
    b.arg(b.tensor(s, any_values(3)));
    b.arg(IValue(*dims));
    b.arg(chance(50));
  }));
}

// ---------------------------------------------------------------- matrix products
void add_linalg(SampleTable& t) {
  t.emplace("mm", from_recipe([](SampleBuilder& b) {
    int64_t n = dim_size(0, 4), k = dim_size(0, 4), m = dim_size(0, 4);
    b.arg(b.tensor({n, k}));
    b.arg(b.tensor({k, m}));
  }));
  t.emplace("bmm", from_recipe([](SampleBuilder& b) {
    int64_t bs = dim_size(0, 3), n = dim_size(0, 4), k = dim_size(0, 4), m = dim_size(0, 4);
    b.arg(b.tensor({bs, n, k}));
    b.arg(b.tensor({bs, k, m}));
  }));
  t.emplace("addmm", from_recipe([](SampleBuilder& b) {
    int64_t n = dim_size(0, 4), k = dim_size(0, 4), m = dim_size(0, 4);
    b.arg(b.tensor(b.broadcastable_to({n, m})));
    b.arg(b.tensor({n, k}));
    b.arg(b.tensor({k, m}));
    if (chance(50)) b.kwarg("beta", pick<double>({0.5, -1.0, 0.0}));
    if (chance(50)) b.kwarg("alpha", pick<double>({2.0, -0.5}));
  }));
  t.emplace("matmul", from_recipe([](SampleBuilder& b) {
    int64_t ra = draw_int(1, 3), rb = draw_int(1, 3);
    int64_t n = dim_size(0, 4), k = dim_size(0, 4), m = dim_size(0, 4);
    Shape batch = b.shape(0, 1, 0, 3);
    auto batched = [&](int64_t rank, Shape mat) {
      if (rank <= 2) return mat;
      Shape s = batch.empty() ? Shape{1} : batch;
      if (chance(30)) s[0] = 1;  // broadcast batch dim
      s.insert(s.end(), mat.begin(), mat.end());
      return s;
    };
    b.arg(b.tensor(ra == 1 ? Shape{k} : batched(ra, {n, k})));
    b.arg(b.tensor(rb == 1 ? Shape{k} : batched(rb, {k, m})));
  }));
  t.emplace("linear", from_recipe([](SampleBuilder& b) {
    int64_t in = dim_size(0, 4), out = dim_size(0, 4);
    Shape s = b.shape(0, 2, 0, 3);
    s.push_back(in);
    b.arg(b.tensor(s));
    b.arg(b.tensor({out, in}));
    b.arg(chance(60) ? IValue(b.tensor({out})) : none());
  }));
}

// ---------------------------------------------------------------- views and copies
// A random shape of `numel` elements (1-3 dims, maybe with a -1), for view/reshape.
IntList target_shape(int64_t numel, bool allow_infer) {
  if (numel == 0) return pick<IntList>({{0}, {2, 0}, {0, 3}, {1, 0, 1}});
  std::vector<int64_t> factors;
  for (int64_t n = numel, p = 2; n > 1;) {
    if (n % p == 0) {
      factors.push_back(p);
      n /= p;
    } else {
      ++p;
    }
  }
  IntList dims(size_t(draw_int(1, 3)), 1);
  for (int64_t f : factors) dims[size_t(draw_int(0, int64_t(dims.size()) - 1))] *= f;
  if (allow_infer && chance(30)) dims[size_t(draw_int(0, int64_t(dims.size()) - 1))] = -1;
  return dims;
}

void add_views(SampleTable& t) {
  t.emplace("view", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    b.arg(b.contiguous_tensor(s));
    b.arg(target_shape(shape_numel(s), true));
  }));
  t.emplace("reshape", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    b.arg(b.tensor(s));
    b.arg(target_shape(shape_numel(s), true));
  }));
  t.emplace("permute", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    b.arg(b.tensor(s));
    b.arg(s.empty() ? IntList{} : distinct_dims(int64_t(s.size()), int64_t(s.size())));
  }));
  t.emplace("transpose", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    b.arg(b.tensor(s));
    b.arg(any_dim(int64_t(s.size())));
    b.arg(any_dim(int64_t(s.size())));
  }));
  t.emplace("expand", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    for (int64_t& x : s)
      if (chance(40)) x = 1;
    b.arg(b.tensor(s));
    IntList size;
    for (int64_t i = draw_int(0, 2); i > 0; --i) size.push_back(dim_size(0, 3));
    for (int64_t x : s) size.push_back(chance(25) ? -1 : x == 1 ? dim_size(0, 3) : x);
    b.arg(size);
  }));
  t.emplace("slice", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    b.arg(b.tensor(s));
    b.arg(any_dim(int64_t(s.size())));
    b.arg(chance(25) ? none() : IValue(draw_int(-6, 6)));
    b.arg(chance(25) ? none() : IValue(draw_int(-6, 6)));
    b.arg(draw_int(1, 3));
  }));
  t.emplace("select", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    int64_t d = any_dim(int64_t(s.size()));
    int64_t& n = s[size_t(wrap(d, int64_t(s.size())))];
    n = std::max<int64_t>(n, 1);
    int64_t index = draw_int(-n, n - 1);
    b.arg(b.tensor(s));
    b.arg(d);
    b.arg(index);
  }));
  t.emplace("squeeze", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    for (int64_t& x : s)
      if (chance(30)) x = 1;
    b.arg(b.tensor(s));
    if (chance(70)) b.arg(distinct_dims(int64_t(s.size()), draw_int(0, std::max<int64_t>(int64_t(s.size()), 1))));
  }));
  t.emplace("unsqueeze", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    int64_t r = int64_t(s.size());
    b.arg(b.tensor(s));
    b.arg(draw_int(-r - 1, r));
  }));
  t.emplace("as_strided", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3, 1, 4);
    int64_t numel = shape_numel(s);
    b.arg(b.contiguous_tensor(s));
    // Sizes and strides whose furthest element stays inside the input's storage: strides shrink until it does.
    IntList size(size_t(draw_int(0, 3))), stride(size.size());
    for (size_t i = 0; i < size.size(); ++i) {
      size[i] = dim_size(0, 3);
      stride[i] = draw_int(0, 4);
    }
    int64_t offset = draw_int(0, numel - 1);
    auto last = [&] {
      int64_t l = offset;
      for (size_t i = 0; i < size.size(); ++i) l += std::max<int64_t>(size[i] - 1, 0) * stride[i];
      return l;
    };
    for (size_t i = 0; last() >= numel; i = (i + 1) % size.size())
      if (stride[i] > 0) --stride[i];
      else if (size[i] > 1) --size[i];
    if (last() >= numel) offset = 0;
    b.arg(size);
    b.arg(stride);
    b.arg(offset == 0 && chance(50) ? none() : IValue(offset));
  }));
  t.emplace("diagonal", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(2, 3);
    IntList dims = distinct_dims(int64_t(s.size()), 2);
    b.arg(b.tensor(s));
    b.arg(draw_int(-3, 3));
    b.arg(dims[0]);
    b.arg(dims[1]);
  }));
  t.emplace("narrow", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    int64_t d = any_dim(int64_t(s.size()));
    int64_t n = s[size_t(wrap(d, int64_t(s.size())))];
    int64_t start = draw_int(-n, n);
    int64_t length = draw_int(0, n - (start < 0 ? start + n : start));
    b.arg(b.tensor(s));
    b.arg(d);
    b.arg(start);
    b.arg(length);
  }));
  t.emplace("flatten", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    int64_t r = int64_t(s.size()), n = std::max<int64_t>(r, 1);
    int64_t start = draw_int(0, n - 1), end = draw_int(start, n - 1);
    b.arg(b.tensor(s));
    b.arg(chance(30) ? start - n : start);
    b.arg(chance(30) ? end - n : end);
  }));
  t.emplace("split", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    b.arg(b.tensor(s));
    b.arg(draw_int(1, 4));
    b.arg(any_dim(int64_t(s.size())));
  }));
  t.emplace("chunk", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    b.arg(b.tensor(s));
    b.arg(draw_int(1, 4));
    b.arg(any_dim(int64_t(s.size())));
  }));
  t.emplace("contiguous", from_recipe(unary(any_values())));
  t.emplace("clone", from_recipe(unary(any_values())));
  t.emplace("to", from_recipe([](SampleBuilder& b) {
    b.arg(b.tensor(b.shape()));
    b.arg(DType::F64);  // f64 -> f64: lower precisions are not finite-difference checkable
  }));
}

// ---------------------------------------------------------------- data movement
void add_index(SampleTable& t) {
  t.emplace("cat", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    int64_t d = any_dim(int64_t(s.size()));
    TensorList xs;
    for (int64_t i = draw_int(1, 3); i > 0; --i) {
      s[size_t(wrap(d, int64_t(s.size())))] = dim_size(0, 3);
      xs.push_back(b.tensor(s));
    }
    b.arg(xs);
    b.arg(d);
  }));
  t.emplace("stack", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(0, 2);
    int64_t r = int64_t(s.size());
    TensorList xs;
    for (int64_t i = draw_int(1, 3); i > 0; --i) xs.push_back(b.tensor(s));
    b.arg(xs);
    b.arg(draw_int(-r - 1, r));
  }));
  t.emplace("repeat", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(0, 2);
    IntList repeats(s.size() + size_t(draw_int(0, 1)));
    for (int64_t& x : repeats) x = draw_int(0, 3);
    b.arg(b.tensor(s));
    b.arg(repeats);
  }));
  t.emplace("flip", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    b.arg(b.tensor(s));
    b.arg(distinct_dims(int64_t(s.size()), draw_int(0, std::max<int64_t>(int64_t(s.size()), 1))));
  }));
  t.emplace("roll", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    b.arg(b.tensor(s));
    if (chance(30)) {  // no dims: roll the flattened tensor
      b.arg(IntList{draw_int(-5, 5)});
      return;
    }
    IntList dims = distinct_dims(int64_t(s.size()), draw_int(1, int64_t(s.size())));
    IntList shifts(dims.size());
    for (int64_t& x : shifts) x = draw_int(-5, 5);
    b.arg(shifts);
    b.arg(dims);
  }));
  for (const char* name : {"tril", "triu"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) {
      b.arg(b.tensor(b.shape(2, 3)));
      if (chance(70)) b.arg(draw_int(-3, 3));
    }));
  }
  t.emplace("pad", from_recipe([](SampleBuilder& b) {
    std::string mode = pick<std::string>({"constant", "constant", "reflect", "replicate", "circular"});
    if (mode == "constant") {
      Shape s = b.shape();
      IntList pad;
      // pairs (before, after) from the last dim backwards; negative pads crop but leave a size >= 0
      for (int64_t k = draw_int(0, int64_t(s.size())), i = 0; i < k; ++i) {
        int64_t n = s[s.size() - 1 - size_t(i)];
        int64_t before = draw_int(-std::min<int64_t>(n, 1), 2);
        int64_t after = draw_int(-std::min<int64_t>(n + std::min<int64_t>(before, 0), 1), 2);
        pad.push_back(before);
        pad.push_back(after);
      }
      b.arg(b.tensor(s));
      b.arg(pad);
      if (chance(50)) b.arg(mode);
      if (chance(50)) b.kwarg("value", pick<double>({0.0, 1.5, -2.0}));
      return;
    }
    // reflect/replicate/circular pad the last k (1 or 2) dims of a (k+1)- or (k+2)-dim input
    int64_t k = draw_int(1, 2);
    Shape s = b.shape(k + 1, k + 2, 1, 4);
    IntList pad;
    for (int64_t i = 0; i < k; ++i) {
      int64_t n = s[s.size() - 1 - size_t(i)];
      int64_t most = mode == "reflect" ? n - 1 : mode == "circular" ? n : 2;
      pad.push_back(draw_int(0, most));
      pad.push_back(draw_int(0, most));
    }
    b.arg(b.tensor(s));
    b.arg(pad);
    b.arg(mode);
  }));
  t.emplace("index_select", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    int64_t d = any_dim(int64_t(s.size()));
    int64_t n = s.empty() ? 1 : s[size_t(wrap(d, int64_t(s.size())))];
    // a 0-dim input takes exactly one index (0-dim or [1])
    Shape is = s.empty() ? pick<Shape>({{}, {1}}) : Shape{n == 0 ? 0 : dim_size(0, 4)};
    b.arg(b.tensor(s));
    b.arg(d);
    b.arg(b.indices(is, 0, n - 1));
  }));
  t.emplace("gather", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    int64_t r = int64_t(s.size()), d = any_dim(r);
    int64_t dw = wrap(d, r);
    Shape is = s;
    for (int64_t i = 0; i < r; ++i) is[size_t(i)] = i == dw ? (s[size_t(i)] == 0 ? 0 : dim_size(0, 4)) : at_most(s[size_t(i)]);
    b.arg(b.tensor(s));
    b.arg(d);
    b.arg(b.indices(is, 0, s[size_t(dw)] - 1));
  }));
  for (const char* name : {"scatter", "scatter_add"}) {
    bool unique = std::string(name) == "scatter";  // scatter with repeated targets is order-dependent
    t.emplace(name, from_recipe([unique](SampleBuilder& b) {
      Shape s = b.shape(1, 3);
      int64_t r = int64_t(s.size()), d = any_dim(r), dw = wrap(d, r);
      Shape is(s.size()), ss(s.size());
      for (int64_t i = 0; i < r; ++i) {
        is[size_t(i)] = at_most(i == dw && !unique ? 4 : s[size_t(i)]);
        if (s[size_t(dw)] == 0) is[size_t(dw)] = 0;
        ss[size_t(i)] = is[size_t(i)] + draw_int(0, 1);
      }
      // index values: per position outside `dim`, distinct targets along `dim` when unique
      std::vector<int64_t> idx(size_t(shape_numel(is)));
      int64_t inner = 1;
      for (int64_t i = dw + 1; i < r; ++i) inner *= is[size_t(i)];
      int64_t len = is[size_t(dw)], outer = len ? int64_t(idx.size()) / (len * std::max<int64_t>(inner, 1)) : 0;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          std::vector<int64_t> perm(static_cast<size_t>(s[size_t(dw)]));
          std::iota(perm.begin(), perm.end(), 0);
          for (size_t j = perm.size(); j > 1; --j) std::swap(perm[j - 1], perm[size_t(draw_int(0, int64_t(j) - 1))]);
          for (int64_t j = 0; j < len; ++j)
            idx[size_t((o * len + j) * inner + i)] = unique ? perm[size_t(j)] : draw_int(0, s[size_t(dw)] - 1);
        }
      b.arg(b.tensor(s));
      b.arg(d);
      b.arg(Tensor::from_vector<int64_t>(idx, is));
      b.arg(b.tensor(ss));
    }));
  }
  t.emplace("index", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    int64_t r = int64_t(s.size());
    TensorList indices;
    if (chance(20)) {  // one bool mask over the leading dims: the result size depends on the mask's values
      int64_t k = draw_int(1, r);
      indices.push_back(b.mask(Shape(s.begin(), s.begin() + k)));
      b.sample.shape_depends_on_data = true;
    } else {
      auto shapes = b.broadcast_shapes(r, 2);
      for (int64_t i = 0, n = draw_int(1, r); i < n; ++i) {
        int64_t size = s[size_t(i)];
        if (chance(30) || size == 0) indices.push_back(Tensor());
        else indices.push_back(b.indices(shapes[size_t(i)], -size, size - 1));
      }
      bool any_index = std::any_of(indices.begin(), indices.end(), [](const Tensor& x) { return x.defined(); });
      if (!any_index) {
        int64_t n = std::max<int64_t>(s[0], 1);
        s[0] = n;
        indices[0] = b.indices(shapes[0], -n, n - 1);
      }
    }
    b.arg(b.tensor(s));
    b.arg(indices);
  }));
  t.emplace("index_put", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3, 1, 4);
    int64_t r = int64_t(s.size());
    bool accumulate = chance(50);
    // Nones for the first p dims, then k adjacent index tensors: the indexed shape is
    // s[:p] + broadcast(index shapes) + s[p+k:].
    int64_t p = draw_int(0, r - 1), k = accumulate ? draw_int(1, r - p) : 1;
    TensorList indices(static_cast<size_t>(p));
    Shape bshape;
    if (accumulate) {
      auto shapes = b.broadcast_shapes(int(k), 2);
      for (int64_t i = 0; i < k; ++i) {
        int64_t n = s[size_t(p + i)];
        indices.push_back(b.indices(shapes[size_t(i)], -n, n - 1));
      }
      for (const Tensor& x : indices)
        if (x.defined() && x.dim() > int64_t(bshape.size())) bshape = x.sizes();
      for (const Tensor& x : indices) {  // broadcast of the index shapes
        if (!x.defined()) continue;
        for (int64_t j = 0; j < x.dim(); ++j) {
          int64_t& out = bshape[bshape.size() - size_t(x.dim()) + size_t(j)];
          if (out == 1) out = x.sizes()[size_t(j)];
        }
      }
    } else {  // distinct targets: the result does not depend on write order
      int64_t n = s[size_t(p)];
      std::vector<int64_t> perm(static_cast<size_t>(n));
      std::iota(perm.begin(), perm.end(), 0);
      for (size_t j = perm.size(); j > 1; --j) std::swap(perm[j - 1], perm[size_t(draw_int(0, int64_t(j) - 1))]);
      perm.resize(size_t(draw_int(0, n)));
      bshape = {int64_t(perm.size())};
      indices.push_back(Tensor::from_vector<int64_t>(perm, bshape));
    }
    Shape indexed(s.begin(), s.begin() + p);
    indexed.insert(indexed.end(), bshape.begin(), bshape.end());
    indexed.insert(indexed.end(), s.begin() + p + k, s.end());
    b.arg(b.tensor(s));
    b.arg(indices);
    b.arg(b.tensor(b.broadcastable_to(indexed)));
    b.arg(accumulate);
  }));
  t.emplace("embedding", from_recipe([](SampleBuilder& b) {
    int64_t v = draw_int(1, 5), d = dim_size(0, 4);
    b.arg(b.tensor({v, d}));
    b.arg(b.indices(b.shape(0, 2), 0, v - 1));
    // a padding_idx row gets no gradient although the output depends on it, so gradcheck cannot use one
  }));
}

// ---------------------------------------------------------------- nn
// Output size of a pooling window along one dim (ATen pooling_output_shape).
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// A pooling geometry (kernel, stride, padding, dilation, ceil_mode) with output sizes >= 1 for `hw`.
struct PoolGeometry {
  IntList kernel, stride, padding, dilation;
  bool ceil_mode = false;
  bool explicit_stride = true;
  Shape out;
};
PoolGeometry pool_geometry(Shape& hw, bool dilated) {
  PoolGeometry g;
  g.ceil_mode = chance(30);
  g.explicit_stride = chance(70);
  for (int i = 0; i < 2; ++i) {
    int64_t k = draw_int(1, 3), s = g.explicit_stride ? draw_int(1, 3) : k, p = draw_int(0, k / 2),
            d = dilated ? draw_int(1, 2) : 1;
    int64_t span = d * (k - 1) + 1;
    // at least one window; without padding for dilated windows, which could otherwise see only padding
    hw[size_t(i)] = std::max(hw[size_t(i)], dilated ? span : span - 2 * p);
    g.kernel.push_back(k);
    g.stride.push_back(s);
    g.padding.push_back(p);
    g.dilation.push_back(d);
    g.out.push_back(pool_out(hw[size_t(i)], k, s, p, d, g.ceil_mode));
  }
  return g;
}

// A conv2d geometry: input [N, Cin, H, W] (or unbatched), weight [Cout, Cin/groups, kh, kw].
struct ConvGeometry {
  Shape input, weight;
  IntList stride, padding, dilation;
  int64_t groups = 1;
  Shape out;
};
ConvGeometry conv_geometry(bool batched) {
  ConvGeometry g;
  g.groups = draw_int(1, 2);
  int64_t cin = g.groups * draw_int(1, 2), cout = g.groups * draw_int(1, 2);
  g.input = batched ? Shape{draw_int(1, 2), cin} : Shape{cin};
  g.weight = {cout, cin / g.groups};
  g.out = batched ? Shape{g.input[0], cout} : Shape{cout};
  for (int i = 0; i < 2; ++i) {
    int64_t k = draw_int(1, 3), s = draw_int(1, 2), p = draw_int(0, 1), d = draw_int(1, 2);
    int64_t span = d * (k - 1) + 1;
    int64_t h = std::max<int64_t>(1, span - 2 * p) + draw_int(0, 2);
    g.input.push_back(h);
    g.weight.push_back(k);
    g.stride.push_back(s);
    g.padding.push_back(p);
    g.dilation.push_back(d);
    g.out.push_back((h + 2 * p - span) / s + 1);
  }
  return g;
}

// Class-index targets in [0, c) for `shape`, some equal to ignore_index; with reduction 'mean' at least one
// is not ignored (all ignored gives 0/0 = nan).
Tensor class_targets(const Shape& shape, int64_t c, int64_t ignore_index, int64_t reduction) {
  std::vector<int64_t> v(size_t(shape_numel(shape)));
  for (int64_t& x : v) x = ignore_index < 0 && chance(15) ? ignore_index : draw_int(0, c - 1);
  if (reduction == 1 && !v.empty() && std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == ignore_index; }))
    v[0] = ignore_index == 0 ? c - 1 : 0;
  return Tensor::from_vector<int64_t>(v, shape);
}

void add_nn(SampleTable& t) {
  for (const char* name : {"softmax", "log_softmax"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) {
      Shape s = b.shape();
      b.arg(b.tensor(s, any_values(3)));
      b.arg(any_dim(int64_t(s.size())));
      if (chance(30)) b.arg(DType::F64);
    }));
  }
  t.emplace("layer_norm", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    int64_t k = draw_int(1, int64_t(s.size()));
    Shape normalized(s.end() - k, s.end());
    for (int64_t& x : normalized) x = std::max<int64_t>(x, 1);
    std::copy(normalized.begin(), normalized.end(), s.end() - k);
    b.arg(b.tensor(s));
    b.arg(IntList(normalized));
    b.arg(chance(60) ? IValue(b.tensor(normalized)) : none());
    b.arg(chance(60) ? IValue(b.tensor(normalized)) : none());
    if (chance(40)) b.arg(pick<double>({1e-5, 0.1}));
  }));
  t.emplace("rms_norm", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape(1, 3);
    int64_t k = draw_int(1, int64_t(s.size()));
    Shape normalized(s.end() - k, s.end());
    for (int64_t& x : normalized) x = std::max<int64_t>(x, 1);
    std::copy(normalized.begin(), normalized.end(), s.end() - k);
    b.arg(b.tensor(s, away_from_zero(0.2)));
    b.arg(IntList(normalized));
    b.arg(chance(60) ? IValue(b.tensor(normalized)) : none());
    if (chance(50)) b.arg(pick<IValue>({none(), IValue(1e-5), IValue(0.1)}));
  }));
  t.emplace("dropout", from_recipe([](SampleBuilder& b) {
    b.arg(b.tensor(b.shape()));
    b.arg(pick<double>({0.0, 0.25, 0.5, 1.0}));
    b.arg(chance(70));
  }));
  t.emplace("mse_loss", from_recipe([](SampleBuilder& b) {
    Shape s = b.shape();
    b.arg(b.tensor(s));
    b.arg(b.tensor(s));
    if (chance(70)) b.arg(draw_int(0, 2));
  }));
  t.emplace("nll_loss", from_recipe([](SampleBuilder& b) {
    int64_t c = draw_int(1, 4);
    bool batched = chance(70);
    Shape in = batched ? Shape{dim_size(0, 3), c} : Shape{c};
    Shape target = batched ? Shape{in[0]} : Shape{};
    int64_t reduction = draw_int(0, 2);
    int64_t ignore_index = c > 1 && chance(30) ? draw_int(0, c - 1) : -100;
    b.arg(b.tensor(in, in_range(-3, 0)));
    b.arg(class_targets(target, c, ignore_index, reduction));
    b.arg(chance(40) ? IValue(b.tensor({c}, in_range(0.5, 1.5), Grad::Never)) : none());
    b.arg(reduction);
    b.arg(ignore_index);
  }));
  t.emplace("cross_entropy", from_recipe([](SampleBuilder& b) {
    int64_t c = draw_int(1, 4), rank = draw_int(1, 3);
    Shape in{c};
    if (rank >= 2) in.insert(in.begin(), dim_size(0, 3));
    if (rank == 3) in.push_back(dim_size(0, 3));
    int64_t reduction = draw_int(0, 2);
    b.arg(b.tensor(in, any_values(3)));
    bool probabilities = chance(30);
    int64_t ignore_index = !probabilities && c > 1 && chance(30) ? draw_int(0, c - 1) : -100;
    if (probabilities) {
      b.arg(b.tensor(in, in_range(0, 1)));
    } else {
      Shape target = in;
      target.erase(target.begin() + (rank >= 2 ? 1 : 0));
      b.arg(class_targets(target, c, ignore_index, reduction));
    }
    b.arg(chance(40) ? IValue(b.tensor({c}, in_range(0.5, 1.5), Grad::Never)) : none());
    b.arg(reduction);
    b.arg(ignore_index);
    b.arg(pick<double>({0.0, 0.0, 0.1}));
  }));
  t.emplace("batch_norm", from_recipe([](SampleBuilder& b) {
    int64_t c = draw_int(1, 3);
    Shape s = {draw_int(1, 3), c};
    for (int64_t i = draw_int(0, 2); i > 0; --i) s.push_back(draw_int(1, 3));
    bool training = chance(60);
    if (training && shape_numel(s) / c < 2) s[0] = 2;  // batch statistics need two values per channel
    bool running = !training || chance(50);
    b.arg(b.tensor(s));
    b.arg(chance(60) ? IValue(b.tensor({c})) : none());
    b.arg(chance(60) ? IValue(b.tensor({c})) : none());
    b.arg(running ? IValue(b.tensor({c}, any_values(), Grad::Never)) : none());
    b.arg(running ? IValue(b.tensor({c}, in_range(0.5, 2), Grad::Never)) : none());
    b.arg(training);
    b.arg(0.1);
    b.arg(pick<double>({1e-5, 0.1}));
  }));
  t.emplace("conv2d", from_recipe([](SampleBuilder& b) {
    ConvGeometry g = conv_geometry(chance(80));
    b.arg(b.tensor(g.input));
    b.arg(b.tensor(g.weight));
    b.arg(chance(60) ? IValue(b.tensor({g.weight[0]})) : none());
    b.arg(g.stride);
    b.arg(g.padding);
    b.arg(g.dilation);
    b.arg(g.groups);
  }));
  t.emplace("convolution", from_recipe([](SampleBuilder& b) {
    // 1-D, 2-D or 3-D, maybe transposed (1-D and 2-D) and grouped; every output size positive.
    const int64_t dims = draw_int(1, 3), groups = draw_int(1, 2);
    const bool transposed = dims < 3 && chance(40);
    const int64_t cin = groups * draw_int(1, 2), cout = groups * draw_int(1, 2);
    Shape input{draw_int(1, 2), cin};
    Shape weight = transposed ? Shape{cin, cout / groups} : Shape{cout, cin / groups};
    IntList stride, padding, dilation, output_padding;
    for (int64_t i = 0; i < dims; ++i) {
      const int64_t k = draw_int(1, 3), s = draw_int(1, 2), d = draw_int(1, 2), span = d * (k - 1) + 1;
      const int64_t p = transposed ? (span >= 3 && chance(50) ? 1 : 0) : draw_int(0, 1);
      input.push_back(transposed ? draw_int(1, 3) : std::max<int64_t>(1, span - 2 * p) + draw_int(0, 2));
      weight.push_back(k);
      stride.push_back(s);
      padding.push_back(p);
      dilation.push_back(d);
      output_padding.push_back(transposed && chance(30) ? std::max(s, d) - 1 : 0);
    }
    b.arg(b.tensor(input));
    b.arg(b.tensor(weight));
    b.arg(chance(60) ? IValue(b.tensor({transposed ? cout : weight[0]})) : none());
    b.arg(stride);
    b.arg(padding);
    b.arg(dilation);
    b.arg(transposed);
    b.arg(output_padding);
    b.arg(groups);
  }));
  for (const char* name : {"upsample_nearest2d", "upsample_bilinear2d"}) {
    t.emplace(name, from_recipe([name](SampleBuilder& b) {
      b.arg(b.tensor({dim_size(0, 2), draw_int(1, 2), draw_int(1, 4), draw_int(1, 4)}));
      b.arg(IntList{draw_int(1, 6), draw_int(1, 6)});
      if (std::string_view(name) == "upsample_bilinear2d") b.arg(chance(50));
      const bool scales = chance(30);
      b.arg(scales ? IValue(pick<double>({0.5, 1.5, 2.0})) : none());
      b.arg(scales ? IValue(pick<double>({0.5, 1.5, 2.0})) : none());
    }));
  }
  t.emplace("max_pool2d", from_recipe([](SampleBuilder& b) {
    Shape hw = {dim_size(1, 5), dim_size(1, 5)};
    PoolGeometry g = pool_geometry(hw, true);
    Shape s = chance(70) ? Shape{dim_size(0, 2), draw_int(1, 2)} : Shape{draw_int(1, 2)};
    s.insert(s.end(), hw.begin(), hw.end());
    b.arg(b.tensor(s, distinct_values()));  // no ties inside a window
    b.arg(g.kernel);
    b.arg(g.explicit_stride ? g.stride : IntList{});
    b.arg(g.padding);
    b.arg(g.dilation);
    b.arg(g.ceil_mode);
  }));
  t.emplace("avg_pool2d", from_recipe([](SampleBuilder& b) {
    Shape hw = {dim_size(1, 5), dim_size(1, 5)};
    PoolGeometry g = pool_geometry(hw, false);
    Shape s = chance(70) ? Shape{dim_size(0, 2), draw_int(1, 2)} : Shape{draw_int(1, 2)};
    s.insert(s.end(), hw.begin(), hw.end());
    b.arg(b.tensor(s));
    b.arg(g.kernel);
    b.arg(g.explicit_stride ? g.stride : IntList{});
    b.arg(g.padding);
    b.arg(g.ceil_mode);
    b.arg(chance(50));
    b.arg(chance(70) ? none() : IValue(draw_int(1, 4)));
  }));
}

// ---------------------------------------------------------------- in-place
Recipe through_view_sometimes(Recipe recipe) {
  return [recipe](SampleBuilder& b) {
    recipe(b);
    b.sample.write_through_view = chance(50);
  };
}

void add_inplace(SampleTable& t) {
  for (const char* name : {"add_", "mul_"}) {
    bool has_alpha = std::string(name) == "add_";
    t.emplace(name, from_recipe(through_view_sometimes([has_alpha](SampleBuilder& b) {
      Shape s = b.shape();
      Shape os = b.broadcastable_to(s);
      b.arg(b.tensor(s));
      b.arg(operand(b, os, any_values()));
      if (has_alpha && chance(50)) b.kwarg("alpha", pick<double>({2.0, -0.5}));
    })));
  }
  t.emplace("copy_", from_recipe(through_view_sometimes([](SampleBuilder& b) {
    Shape s = b.shape();
    b.arg(b.tensor(s));
    b.arg(b.tensor(b.broadcastable_to(s)));
  })));
  t.emplace("fill_", from_recipe(through_view_sometimes([](SampleBuilder& b) {
    b.arg(b.tensor(b.shape()));
    b.arg(pick<IValue>({IValue(1.5), IValue(-2), IValue(0.0)}));
  })));
  t.emplace("zero_", from_recipe(through_view_sometimes(unary(any_values()))));
}

// ---------------------------------------------------------------- non-differentiable ops
// A tensor of `dtype` with small values (bool: random; floats: sometimes nan/inf when `specials`).
Tensor typed_tensor(SampleBuilder& b, const Shape& s, DType dtype, bool specials = false) {
  std::vector<double> v(size_t(shape_numel(s)));
  for (double& x : v) {
    if (specials && chance(15)) x = pick<double>({NAN, INFINITY, -INFINITY});
    else x = double(draw_int(-4, 4)) * (is_floating(dtype) ? 0.5 : 1.0);
  }
  Tensor t = b.leaf(v, s, Grad::Never);
  return dtype == DType::F64 ? t : to(t, dtype);
}
DType any_dtype() { return pick<DType>({DType::F64, DType::F32, DType::I64, DType::I32, DType::Bool}); }

void add_non_differentiable(SampleTable& t) {
  for (const char* name : {"logical_not", "isnan", "isinf"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) { b.arg(typed_tensor(b, b.shape(), any_dtype(), true)); }));
  }
  for (const char* name : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) {
      auto shapes = b.broadcast_shapes(2);
      b.arg(typed_tensor(b, shapes[0], any_dtype()));
      if (chance(25)) b.arg(pick<IValue>({IValue(1), IValue(0.5), IValue(true)}));
      else b.arg(typed_tensor(b, shapes[1], any_dtype()));
    }));
  }
  for (const char* name : {"logical_and", "logical_or", "logical_xor"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) {
      auto shapes = b.broadcast_shapes(2);
      b.arg(typed_tensor(b, shapes[0], any_dtype()));
      b.arg(typed_tensor(b, shapes[1], any_dtype()));
    }));
  }
  for (const char* name : {"bitwise_and", "bitwise_or", "bitwise_xor"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) {
      auto shapes = b.broadcast_shapes(2);
      std::vector<DType> ints = {DType::I64, DType::I32, DType::U8, DType::Bool};
      b.arg(typed_tensor(b, shapes[0], pick(ints)));
      if (chance(25)) b.arg(IValue(draw_int(0, 7)));
      else b.arg(typed_tensor(b, shapes[1], pick(ints)));
    }));
  }
  for (const char* name : {"argmax", "argmin"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) {
      Shape s = b.shape();
      bool all = chance(30);
      int64_t d = any_dim(int64_t(s.size()));
      if (all) {
        for (int64_t& x : s) x = std::max<int64_t>(x, 1);  // argmax of an empty tensor is an error
      } else if (!s.empty()) {
        s[size_t(wrap(d, int64_t(s.size())))] = std::max<int64_t>(s[size_t(wrap(d, int64_t(s.size())))], 1);
      }
      b.arg(typed_tensor(b, s, pick<DType>({DType::F64, DType::F32, DType::I64})));
      b.arg(all ? none() : IValue(d));
      b.arg(chance(50));
    }));
  }
  t.emplace("argsort", from_recipe([](SampleBuilder& b) {  // ties too: kiln's sort is stable
    Shape s = b.shape();
    b.arg(typed_tensor(b, s, any_dtype(), true));
    b.arg(any_dim(int64_t(s.size())));
    b.arg(chance(50));
  }));
  for (const char* name : {"any", "all"}) {
    t.emplace(name, from_recipe([](SampleBuilder& b) {
      Shape s = b.shape();
      b.arg(typed_tensor(b, s, any_dtype()));
      b.arg(IValue(reduction_dims(int64_t(s.size()), true, true)));
      b.arg(chance(50));
    }));
  }

  auto size_list = [](SampleBuilder& b) { return IntList(b.shape()); };
  auto maybe_dtype = [](SampleBuilder& b, std::vector<DType> options) {
    if (chance(50)) b.kwarg("dtype", pick(options));
  };
  t.emplace("full", from_recipe([=](SampleBuilder& b) {
    b.arg(size_list(b));
    b.arg(pick<IValue>({IValue(1.5), IValue(3), IValue(true)}));
    maybe_dtype(b, {DType::F32, DType::F64, DType::I64, DType::Bool});
  }));
  for (const char* name : {"zeros", "ones"}) {
    t.emplace(name, from_recipe([=](SampleBuilder& b) {
      b.arg(size_list(b));
      maybe_dtype(b, {DType::F32, DType::F64, DType::I64, DType::Bool, DType::F16});
    }));
  }
  t.emplace("arange", from_recipe([](SampleBuilder& b) {
    if (chance(50)) {
      int64_t start = draw_int(-5, 5), step = pick<int64_t>({1, 2, 3, -1, -2});
      b.arg(start);
      b.arg(start + step * draw_int(0, 6));
      b.arg(step);
    } else {
      double start = 0.5 * double(draw_int(-6, 6)), step = pick<double>({0.5, 0.3, -0.7});
      b.arg(start);
      b.arg(start + step * (double(draw_int(0, 5)) + 0.5));
      b.arg(step);
    }
    if (chance(30)) b.kwarg("dtype", pick<DType>({DType::F64, DType::I64, DType::F32}));
  }));
  t.emplace("linspace", from_recipe([](SampleBuilder& b) {
    b.arg(double(draw_int(-4, 4)));
    b.arg(double(draw_int(-4, 4)) + 0.5);
    b.arg(draw_int(0, 5));
    if (chance(30)) b.kwarg("dtype", pick<DType>({DType::F64, DType::F32}));
  }));
  t.emplace("eye", from_recipe([](SampleBuilder& b) {
    b.arg(draw_int(0, 4));
    if (chance(50)) b.arg(draw_int(0, 4));
    if (chance(30)) b.kwarg("dtype", pick<DType>({DType::F64, DType::I64, DType::Bool}));
  }));
  t.emplace("full_like", from_recipe([](SampleBuilder& b) {
    b.arg(typed_tensor(b, b.shape(), any_dtype()));
    b.arg(pick<IValue>({IValue(1.5), IValue(3), IValue(true)}));
    if (chance(30)) b.kwarg("dtype", pick<DType>({DType::F64, DType::I64}));
  }));
  for (const char* name : {"zeros_like", "ones_like", "rand_like", "randn_like"}) {
    bool random = std::string(name).starts_with("rand");
    t.emplace(name, from_recipe([random](SampleBuilder& b) {
      b.arg(typed_tensor(b, b.shape(), random ? pick<DType>({DType::F64, DType::F32}) : any_dtype()));
      if (chance(30)) b.kwarg("dtype", pick<DType>({DType::F64, DType::F32, DType::F16}));
    }));
  }
  for (const char* name : {"rand", "randn"}) {
    t.emplace(name, from_recipe([=](SampleBuilder& b) {
      b.arg(size_list(b));
      maybe_dtype(b, {DType::F64, DType::F32, DType::BF16});
    }));
  }
  t.emplace("randint", from_recipe([=](SampleBuilder& b) {
    int64_t low = draw_int(-5, 5);
    b.arg(low);
    b.arg(low + draw_int(1, 10));
    b.arg(size_list(b));
    maybe_dtype(b, {DType::I64, DType::I32, DType::F32});
  }));
  t.emplace("bernoulli", from_recipe([](SampleBuilder& b) {
    b.arg(b.tensor(b.shape(), in_range(0, 1), Grad::Never));
    if (chance(40)) b.arg(draw_real(0, 1));
  }));
  t.emplace("philox_rand", from_recipe([=](SampleBuilder& b) {
    b.arg(size_list(b));
    b.arg(typed_tensor(b, {}, DType::I64));  // seed
    b.arg(typed_tensor(b, {}, DType::I64));  // offset
    if (chance(50)) b.arg(pick<std::string>({"uniform", "normal"}));
    maybe_dtype(b, {DType::F64, DType::F32, DType::BF16});
  }));
  t.emplace("detach", from_recipe([](SampleBuilder& b) { b.arg(typed_tensor(b, b.shape(), any_dtype())); }));

  t.emplace("conv2d_backward_input", from_recipe([](SampleBuilder& b) {
    ConvGeometry g = conv_geometry(true);
    b.arg(b.tensor(g.out, any_values(), Grad::Never));
    b.arg(b.tensor(g.weight, any_values(), Grad::Never));
    b.arg(IntList(g.input));
    b.arg(g.stride);
    b.arg(g.padding);
    b.arg(g.dilation);
    b.arg(g.groups);
  }));
  t.emplace("conv2d_backward_weight", from_recipe([](SampleBuilder& b) {
    ConvGeometry g = conv_geometry(true);
    b.arg(b.tensor(g.out, any_values(), Grad::Never));
    b.arg(b.tensor(g.input, any_values(), Grad::Never));
    b.arg(IntList(g.weight));
    b.arg(g.stride);
    b.arg(g.padding);
    b.arg(g.dilation);
    b.arg(g.groups);
  }));
  t.emplace("max_pool2d_backward", from_recipe([](SampleBuilder& b) {
    Shape hw = {dim_size(1, 5), dim_size(1, 5)};
    PoolGeometry g = pool_geometry(hw, true);
    Shape s = {draw_int(1, 2), draw_int(1, 2), hw[0], hw[1]};
    b.arg(b.tensor({s[0], s[1], g.out[0], g.out[1]}, any_values(), Grad::Never));
    b.arg(b.tensor(s, distinct_values(), Grad::Never));
    b.arg(g.kernel);
    b.arg(g.stride);
    b.arg(g.padding);
    b.arg(g.dilation);
    b.arg(g.ceil_mode);
  }));
  t.emplace("avg_pool2d_backward", from_recipe([](SampleBuilder& b) {
    Shape hw = {dim_size(1, 5), dim_size(1, 5)};
    PoolGeometry g = pool_geometry(hw, false);
    Shape s = {draw_int(1, 2), draw_int(1, 2), hw[0], hw[1]};
    b.arg(b.tensor({s[0], s[1], g.out[0], g.out[1]}, any_values(), Grad::Never));
    b.arg(b.tensor(s, any_values(), Grad::Never));
    b.arg(g.kernel);
    b.arg(g.stride);
    b.arg(g.padding);
    b.arg(g.ceil_mode);
    b.arg(chance(50));
    b.arg(chance(70) ? none() : IValue(draw_int(1, 4)));
  }));
}

}  // namespace

std::map<std::string, rc::Gen<OpSample>> differentiable_op_samples() {
  SampleTable t;
  add_pointwise(t);
  add_reductions(t);
  add_linalg(t);
  add_views(t);
  add_index(t);
  add_nn(t);
  add_inplace(t);
  return t;
}

std::map<std::string, rc::Gen<OpSample>> non_differentiable_op_samples() {
  SampleTable t;
  add_non_differentiable(t);
  return t;
}

void check_property(const std::string& id, const std::function<void()>& property, int max_success) {
  rc::detail::TestMetadata metadata;
  metadata.id = id;
  metadata.description = id;
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  const char* env = std::getenv("RC_PARAMS");
  if (!env || std::string(env).find("max_success") == std::string::npos) params.maxSuccess = max_success;
  auto result = rc::detail::checkProperty(rc::detail::toProperty(property), metadata, params);
  if (!result.template is<rc::detail::SuccessResult>()) {
    std::ostringstream report;
    rc::detail::printResultMessage(result, report);
    ADD_FAILURE() << id << ":\n" << report.str();
  }
}

namespace {

Tensor cast_floating(const Tensor& t, DType dt) {
  if (!t.defined() || !is_floating(t.dtype()) || t.is_wrapped_number()) return t;
  NoGradGuard no_grad;
  return to(t, dt).detach();
}

}  // namespace

std::pair<graph::Graph, std::vector<Tensor>> one_node_graph(
    const OpInfo& op, const OpSample& sample, DType dt,
    const std::function<std::optional<Scalar>(const Tensor&)>& number_in_slot) {
  std::vector<IValue> positional = sample.args;
  std::map<std::string, IValue> kwargs = sample.kwargs;
  auto convert = [&](IValue& v) {
    if (v.is_tensor()) v = cast_floating(v.tensor(), dt);
    if (v.is_tensor_list()) {
      TensorList l = v.tensor_list();
      for (Tensor& t : l) t = cast_floating(t, dt);
      v = l;
    }
  };
  for (IValue& v : positional) convert(v);
  for (auto& [k, v] : kwargs) convert(v);
  OpCall call = bind_args(op, positional, kwargs);
  graph::Graph g;
  std::vector<Tensor> inputs;
  std::vector<graph::Arg> args;
  auto input = [&](const Tensor& t) {
    if (t.is_wrapped_number()) return g.add_constant(g.fresh_name("c"), t);
    inputs.push_back(t);
    return g.add_input(g.fresh_name("x"), t.meta());
  };
  for (size_t i = 0; i < call.args.size(); ++i) {
    const IValue& v = call.args[i];
    std::optional<Scalar> number;
    if (v.is_tensor() && v.tensor().defined() && number_in_slot && op.schema.args[i].type == ArgType::Tensor)
      number = number_in_slot(v.tensor());
    if (v.is_none()) args.emplace_back(std::monostate{});
    else if (number) args.emplace_back(*number);
    else if (v.is_tensor()) args.emplace_back(graph::TensorArg{v.tensor().defined() ? input(v.tensor()) : graph::kNoValue});
    else if (v.is_tensor_list()) {
      graph::TensorListArg l;
      for (const Tensor& t : v.tensor_list()) l.ids.push_back(t.defined() ? input(t) : graph::kNoValue);
      args.emplace_back(l);
    } else if (v.is_scalar()) args.emplace_back(v.scalar());
    else if (v.is_int_list()) args.emplace_back(v.int_list());
    else if (v.is_dtype()) args.emplace_back(v.dtype());
    else args.emplace_back(v.string());
  }
  std::vector<graph::ValueId> outs = g.add_op(op.id, args);
  g.set_outputs(outs);
  return {std::move(g), std::move(inputs)};
}

}  // namespace kiln
