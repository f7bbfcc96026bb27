// Random ops: rand, randn, randint, bernoulli, rand_like, randn_like. Element i of a call draws from
// Philox4x32-10 with key = seed and counter = (0, offset + i), where (seed, offset) is the default generator's
// state; the call then advances the offset by its element count. So a draw depends only on (seed, offset, i):
// compiled CPU and GPU code reproduce eager's numbers exactly by using the same rule (core/philox.h).
// philox_rand is the functional form: the same elements as rand / randn for a (seed, offset) given as tensors,
// without touching the generator.
#include <cmath>

#include "eager/loops.h"
#include "eager/philox.h"
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

// Reserves `n` counters from the default generator; returns (seed, first counter).
std::pair<uint64_t, uint64_t> reserve(int64_t n) {
  GeneratorState& g = default_generator();
  uint64_t first = g.offset;
  g.offset += uint64_t(n);
  return {g.seed, first};
}

// Fills a new contiguous tensor: value(i) = f(philox draw for element i), computed in T's compute type.
template <class F>
Tensor generate_at(const Shape& size, DType dt, uint64_t seed, uint64_t first, F f) {
  Tensor out = Tensor::empty(size, dt);
  KILN_DISPATCH_ALL(dt, [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(out.data_ptr());
    parallel_for(out.numel(), 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = convert_element<T>(f(philox_element(seed, first, uint64_t(i)), dt));
    });
  });
  return out;
}
// The same from the default generator, which it advances.
template <class F>
Tensor generate(const Shape& size, DType dt, F f) {
  auto [seed, first] = reserve(shape_numel(size));
  return generate_at(size, dt, seed, first, f);
}

double uniform01(const std::array<uint32_t, 4>& r, DType dt) { return philox_uniform(r, dt == DType::F64); }
double standard_normal(const std::array<uint32_t, 4>& r, DType dt) { return philox_normal(r, dt == DType::F64); }

DType float_dtype_arg(const OpCall& c, int i, std::string_view op) {
  DType dt = c.opt_dtype(i).value_or(kDefaultFloat);
  KILN_CHECK(is_floating(dt), "{}: dtype must be floating point, got {}", op, dtype_name(dt));
  return dt;
}

std::vector<TensorMeta> rand_infer(const OpCall& c) {
  for (int64_t s : c.ints(0)) KILN_CHECK(s >= 0, "{}: negative dimension {} in size {}", c.name(), s, shape_str(c.ints(0)));
  return {contiguous_meta(c.ints(0), float_dtype_arg(c, 1, c.name()))};
}
std::vector<Tensor> rand_kernel(const OpCall& c) { return {generate(c.ints(0), float_dtype_arg(c, 1, "rand"), uniform01)}; }
std::vector<Tensor> randn_kernel(const OpCall& c) {
  return {generate(c.ints(0), float_dtype_arg(c, 1, "randn"), standard_normal)};
}

std::vector<TensorMeta> like_infer(const OpCall& c) {
  DType dt = c.opt_dtype(1).value_or(c.tensor(0).dtype());
  KILN_CHECK(is_floating(dt), "{}: dtype must be floating point, got {}", c.name(), dtype_name(dt));
  return {contiguous_meta(c.tensor(0).sizes(), dt)};
}
std::vector<Tensor> rand_like_kernel(const OpCall& c) {
  return {generate(c.tensor(0).sizes(), like_infer(c)[0].dtype, uniform01)};
}
std::vector<Tensor> randn_like_kernel(const OpCall& c) {
  return {generate(c.tensor(0).sizes(), like_infer(c)[0].dtype, standard_normal)};
}

std::vector<TensorMeta> randint_infer(const OpCall& c) {
  KILN_CHECK(c.int_(0) < c.int_(1), "randint: low ({}) must be less than high ({})", c.int_(0), c.int_(1));
  for (int64_t s : c.ints(2)) KILN_CHECK(s >= 0, "randint: negative dimension {} in size {}", s, shape_str(c.ints(2)));
  return {contiguous_meta(c.ints(2), c.opt_dtype(3).value_or(DType::I64))};
}
std::vector<Tensor> randint_kernel(const OpCall& c) {
  TensorMeta m = randint_infer(c)[0];
  int64_t low = c.int_(0);
  uint64_t range = uint64_t(c.int_(1) - low);
  return {generate(m.sizes, m.dtype, [&](const std::array<uint32_t, 4>& r, DType) {
    uint64_t bits = (uint64_t(r[0]) << 32) | r[1];
    return double(low + int64_t(bits % range));
  })};
}

// bernoulli(self, p): each element is 1 with probability p (or self's value when p is None), in self's dtype.
std::vector<TensorMeta> bernoulli_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  if (auto p = c.opt_float(1)) KILN_CHECK(*p >= 0 && *p <= 1, "bernoulli: p must be in [0, 1], got {}", *p);
  return {contiguous_meta(x.sizes(), x.dtype())};
}
std::vector<Tensor> bernoulli_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  bernoulli_infer(c);
  auto [seed, first] = reserve(x.numel());
  Tensor out = Tensor::empty(x.sizes(), x.dtype());
  Tensor probs = c.opt_float(1) ? Tensor() : as_contiguous_dtype(x, DType::F64);
  const double* pp = probs.defined() ? probs.data<double>() : nullptr;
  const double fixed = c.opt_float(1).value_or(0.0);
  if (pp) {
    for (int64_t i = 0; i < x.numel(); ++i)
      KILN_CHECK(pp[i] >= 0 && pp[i] <= 1, "bernoulli: probabilities must be in [0, 1], element {} is {}", i, pp[i]);
  }
  KILN_DISPATCH_ALL(x.dtype(), [&](auto z) {
    using T = decltype(z);
    T* o = static_cast<T*>(out.data_ptr());
    parallel_for(x.numel(), 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        double u = uniform01(philox_element(seed, first, uint64_t(i)), DType::F64);
        o[i] = convert_element<T>(u < (pp ? pp[i] : fixed) ? 1 : 0);
      }
    });
  });
  return {out};
}

// philox_rand(size, seed, offset, distribution, dtype): seed and offset are one-element integer tensors (their
// 64 bits, so a uint64 generator state round-trips through int64).
uint64_t state_word(const OpCall& c, int i, std::string_view what) {
  const Tensor& t = c.tensor(i);
  KILN_CHECK(t.numel() == 1 && is_integral(t.dtype(), false),
             "philox_rand: {} must be a one-element integer tensor, got {}", what, t.str());
  return uint64_t(t.is_meta() ? 0 : as_contiguous_dtype(t, DType::I64).data<int64_t>()[0]);
}
bool normal_distribution(const OpCall& c) {
  const std::string& d = c.str(3);
  KILN_CHECK(d == "uniform" || d == "normal", "philox_rand: distribution must be \"uniform\" or \"normal\", got \"{}\"", d);
  return d == "normal";
}
std::vector<TensorMeta> philox_rand_infer(const OpCall& c) {
  state_word(c, 1, "seed");
  state_word(c, 2, "offset");
  normal_distribution(c);
  for (int64_t s : c.ints(0)) KILN_CHECK(s >= 0, "philox_rand: negative dimension {} in size {}", s, shape_str(c.ints(0)));
  return {contiguous_meta(c.ints(0), float_dtype_arg(c, 4, "philox_rand"))};
}
std::vector<Tensor> philox_rand_kernel(const OpCall& c) {
  TensorMeta m = philox_rand_infer(c)[0];
  uint64_t seed = state_word(c, 1, "seed"), offset = state_word(c, 2, "offset");
  if (normal_distribution(c)) return {generate_at(m.sizes, m.dtype, seed, offset, standard_normal)};
  return {generate_at(m.sizes, m.dtype, seed, offset, uniform01)};
}

}  // namespace

void register_random_ops() {
  def(OpId::philox_rand).infer(philox_rand_infer).kernel(philox_rand_kernel);
  def(OpId::rand).infer(rand_infer).kernel(rand_kernel);
  def(OpId::randn).infer(rand_infer).kernel(randn_kernel);
  def(OpId::randint).infer(randint_infer).kernel(randint_kernel);
  def(OpId::bernoulli).infer(bernoulli_infer).kernel(bernoulli_kernel);
  def(OpId::rand_like).infer(like_infer).kernel(rand_like_kernel);
  def(OpId::randn_like).infer(like_infer).kernel(randn_like_kernel);
}

}  // namespace kiln
